#include "lease/lease_scheduler.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::lease {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// An injected time base: at(n) is n milliseconds after an arbitrary origin.
constexpr clock::time_point t0{};
constexpr clock::time_point at(milliseconds::rep ms) {
  return t0 + milliseconds(ms);
}

// The watchdog defaults: 30 s lease, renewed every 10 s, retried after 1 s, and with a 5 s margin
// a hold confirmed at time c is lost at c + 25 s.
constexpr milliseconds kLease = 30s;
constexpr milliseconds kMargin = 5s;

lease_key key(const std::string& name) {
  return lease_key{name, "client-1:thread-7"};
}

std::vector<lease_id> ids(const std::vector<renewal>& batch) {
  std::vector<lease_id> out;
  for (const auto& r : batch)
    out.push_back(r.id);
  return out;
}

TEST(LeaseScheduler, IntervalsFollowTheLease) {
  const lease_scheduler s(kLease, kMargin);
  EXPECT_EQ(s.renew_interval(), 10s);
  EXPECT_EQ(s.retry_interval(), 1s);  // min(lease / 10, 1 s)
  const lease_scheduler short_lease(5s, 1s);
  EXPECT_EQ(short_lease.renew_interval(), 1666ms);
  EXPECT_EQ(short_lease.retry_interval(), 500ms);
}

TEST(LeaseScheduler, FirstRenewalIsDueAtOneThirdOfTheLeaseAfterTheAcquireWasSent) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(1000));
  EXPECT_NE(id, 0u);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.guaranteed_expiry(id), at(31000));
  EXPECT_EQ(s.next_wakeup(), at(11000));

  EXPECT_TRUE(s.due(at(10999)).empty());
  const auto batch = s.due(at(11000));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].id, id);
  ASSERT_NE(batch[0].key, nullptr);
  EXPECT_EQ(batch[0].key->name, "lock:a");
  EXPECT_EQ(batch[0].key->owner_field, "client-1:thread-7");
  EXPECT_EQ(batch[0].sent_at, at(11000));
}

TEST(LeaseScheduler, ManyDueLeasesComeBackInOneCallAndOnlyOnce) {
  lease_scheduler s(kLease, kMargin);
  std::vector<lease_id> early;
  for (int i = 0; i < 500; ++i)
    early.push_back(s.add(key("lock:" + std::to_string(i)), at(0)));
  const lease_id late = s.add(key("lock:late"), at(5000));

  const auto batch = s.due(at(10000));
  EXPECT_EQ(ids(batch), early);  // all 500 in id order, the later lease not yet
  EXPECT_EQ(batch[499].key->name, "lock:499");
  EXPECT_TRUE(s.due(at(10000)).empty());  // in flight: not returned again
  EXPECT_TRUE(s.due(at(14000)).empty());

  const auto next = s.due(at(15000));
  EXPECT_EQ(ids(next), std::vector<lease_id>{late});
}

TEST(LeaseScheduler, BatchKeysStayValidAfterRemove) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:kept"), at(0));
  const auto batch = s.due(at(10000));
  ASSERT_EQ(batch.size(), 1u);
  ASSERT_TRUE(s.remove(id));
  EXPECT_EQ(batch[0].key->name, "lock:kept");  // ASan would flag a dangling key here
}

TEST(LeaseScheduler, RenewedExtendsTheExpiryFromTheSendTimeNotTheAnswerTime) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  s.on_result(id, at(10000), renewal_outcome::renewed, at(12000));

  EXPECT_EQ(s.guaranteed_expiry(id), at(40000));  // not 42000
  EXPECT_EQ(s.next_wakeup(), at(20000));
  EXPECT_TRUE(s.due(at(19999)).empty());
  EXPECT_EQ(s.due(at(20000)).size(), 1u);
  // The new loss deadline is 40 - 5 = 35 s: not lost at 34.999 s, even with a renewal in flight.
  EXPECT_TRUE(s.take_lost(at(34999)).empty());
  EXPECT_EQ(s.size(), 1u);
}

TEST(LeaseScheduler, ASlowRenewedAnswerMakesTheNextRenewalDueAtOnce) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  s.on_result(id, at(10000), renewal_outcome::renewed, at(21000));  // 11 s round trip
  EXPECT_EQ(s.next_wakeup(), at(20000));
  EXPECT_EQ(ids(s.due(at(21000))), std::vector<lease_id>{id});
}

TEST(LeaseScheduler, NotHeldLosesTheHoldAndIsReportedExactlyOnce) {
  lease_scheduler s(kLease, kMargin);
  const lease_id a = s.add(key("lock:a"), at(0));
  const lease_id b = s.add(key("lock:b"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 2u);
  s.on_result(a, at(10000), renewal_outcome::not_held, at(10100));
  s.on_result(b, at(10000), renewal_outcome::renewed, at(10100));

  EXPECT_EQ(s.next_wakeup(), at(10100));  // the loss waits to be taken
  const auto lost = s.take_lost(at(10100));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, a);
  EXPECT_EQ(lost[0].reason, lost_reason::not_held);
  EXPECT_TRUE(s.take_lost(at(10100)).empty());  // reported once
  EXPECT_FALSE(s.remove(a));                    // and forgotten
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.next_wakeup(), at(20000));  // b renews as usual
}

TEST(LeaseScheduler, NotHeldLeasesAreNotRenewedWhileWaitingToBeTaken) {
  lease_scheduler s(kLease, kMargin);
  const lease_id a = s.add(key("lock:a"), at(0));
  const lease_id b = s.add(key("lock:b"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 2u);
  s.on_result(a, at(10000), renewal_outcome::not_held, at(10100));
  s.on_result(b, at(10000), renewal_outcome::renewed, at(10100));
  // A late contrary answer does not revive a.
  s.on_result(a, at(10000), renewal_outcome::renewed, at(10200));
  EXPECT_EQ(ids(s.due(at(20000))), std::vector<lease_id>{b});
  const auto lost = s.take_lost(at(20000));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, a);
  EXPECT_EQ(lost[0].reason, lost_reason::not_held);
}

TEST(LeaseScheduler, FailedIsRetriedAfterTheRetryInterval) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  s.on_result(id, at(10000), renewal_outcome::failed, at(10500));

  EXPECT_EQ(s.guaranteed_expiry(id), at(30000));  // unchanged: nothing was confirmed
  EXPECT_EQ(s.next_wakeup(), at(11500));
  EXPECT_TRUE(s.due(at(11499)).empty());
  const auto retry = s.due(at(11500));
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].sent_at, at(11500));
  s.on_result(id, at(11500), renewal_outcome::renewed, at(11600));
  EXPECT_EQ(s.guaranteed_expiry(id), at(41500));
  EXPECT_EQ(s.next_wakeup(), at(21500));
}

TEST(LeaseScheduler, FailuresUntilTheLossDeadlineLoseTheHold) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  // Renewals fail from 10 s on, each answered 100 ms after it was sent. The loss deadline is
  // 30 - 5 = 25 s.
  int attempts = 0;
  for (auto now = at(10000); now < at(25000); now += 100ms) {
    for (const auto& r : s.due(now)) {
      ++attempts;
      s.on_result(r.id, r.sent_at, renewal_outcome::failed, now + 100ms);
    }
  }
  EXPECT_EQ(attempts, 14);  // 10.0, 11.1, 12.2, ... 24.3 s: one retry interval after each answer

  EXPECT_TRUE(s.take_lost(at(24999)).empty());  // one millisecond before: still held
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.next_wakeup(), at(25000));
  const auto lost = s.take_lost(at(25000));  // at the deadline: lost
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, id);
  EXPECT_EQ(lost[0].reason, lost_reason::expired_unconfirmed);
  EXPECT_EQ(s.size(), 0u);
}

TEST(LeaseScheduler, ALastChanceRenewalIsSentBeforeTheDeadlineButNotAtIt) {
  lease_scheduler before(kLease, kMargin);
  before.add(key("lock:a"), at(0));
  EXPECT_EQ(before.due(at(24999)).size(), 1u);

  lease_scheduler on(kLease, kMargin);
  on.add(key("lock:a"), at(0));
  EXPECT_TRUE(on.due(at(25000)).empty());
  EXPECT_EQ(on.take_lost(at(25000)).size(), 1u);
}

TEST(LeaseScheduler, AConfirmationJustBeforeTheDeadlineSavesTheHold) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  s.on_result(id, at(10000), renewal_outcome::renewed, at(24999));
  EXPECT_TRUE(s.take_lost(at(25000)).empty());
  EXPECT_EQ(s.guaranteed_expiry(id), at(40000));
}

TEST(LeaseScheduler, AConfirmationAtTheDeadlineComesTooLate) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  // Nobody called take_lost() at 25 s, but the answer carries its own time: the hold was already
  // lost when it arrived.
  s.on_result(id, at(10000), renewal_outcome::renewed, at(25000));
  const auto lost = s.take_lost(at(25000));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].reason, lost_reason::expired_unconfirmed);
}

TEST(LeaseScheduler, ARenewalThatIsNeverAnsweredStillLosesTheHoldAtTheDeadline) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  EXPECT_EQ(s.next_wakeup(), at(25000));  // in flight: only the deadline is left to wait for
  EXPECT_TRUE(s.due(at(24999)).empty());
  const auto lost = s.take_lost(at(25000));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, id);
}

TEST(LeaseScheduler, AHoldAcquiredTooSlowlyIsLostWithoutARenewal) {
  lease_scheduler s(kLease, kMargin);
  // The acquire was sent at 0 but its answer is handled only at 26 s.
  const lease_id id = s.add(key("lock:a"), at(0));
  EXPECT_TRUE(s.due(at(26000)).empty());
  const auto lost = s.take_lost(at(26000));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, id);
  EXPECT_EQ(lost[0].reason, lost_reason::expired_unconfirmed);
}

TEST(LeaseScheduler, RemoveStopsRenewalsAndIgnoresTheAnswerInFlight) {
  lease_scheduler s(kLease, kMargin);
  const lease_id a = s.add(key("lock:a"), at(0));
  const lease_id b = s.add(key("lock:b"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 2u);
  EXPECT_TRUE(s.remove(a));
  EXPECT_FALSE(s.remove(a));
  s.on_result(a, at(10000), renewal_outcome::renewed, at(10100));
  s.on_result(b, at(10000), renewal_outcome::renewed, at(10100));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.guaranteed_expiry(a), std::nullopt);
  EXPECT_EQ(ids(s.due(at(20000))), std::vector<lease_id>{b});
  EXPECT_TRUE(s.take_lost(at(20000)).empty());

  // A removed lease is never reported lost either, even after its deadline or a not_held answer.
  const lease_id c = s.add(key("lock:c"), at(20000));
  EXPECT_TRUE(s.remove(c));
  s.on_result(c, at(20000), renewal_outcome::not_held, at(20100));
  for (const auto& l : s.take_lost(at(100000)))
    EXPECT_NE(l.id, c);
}

TEST(LeaseScheduler, RemoveBeforeTheFirstRenewalMeansNoRenewal) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  EXPECT_TRUE(s.remove(id));
  EXPECT_TRUE(s.due(at(10000)).empty());
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
}

TEST(LeaseScheduler, IdsAreNeverReused) {
  lease_scheduler s(kLease, kMargin);
  const lease_id a = s.add(key("lock:a"), at(0));
  ASSERT_TRUE(s.remove(a));
  const lease_id b = s.add(key("lock:a"), at(1000));
  EXPECT_NE(a, b);
  ASSERT_EQ(s.due(at(11000)).size(), 1u);
  // A late answer for the old hold of the same lock cannot confirm or lose the new one.
  s.on_result(a, at(11000), renewal_outcome::not_held, at(11100));
  EXPECT_TRUE(s.take_lost(at(11100)).empty());
  EXPECT_EQ(s.size(), 1u);
}

TEST(LeaseScheduler, LateAnswersAfterTheLossIsReportedAreIgnored) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);
  ASSERT_EQ(s.take_lost(at(25000)).size(), 1u);

  s.on_result(id, at(10000), renewal_outcome::renewed, at(26000));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.guaranteed_expiry(id), std::nullopt);
  EXPECT_TRUE(s.due(at(36000)).empty());
  EXPECT_TRUE(s.take_lost(at(60000)).empty());
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
}

TEST(LeaseScheduler, AStaleAnswerNeverMovesTheExpiryBackwards) {
  lease_scheduler s(kLease, kMargin);
  const lease_id id = s.add(key("lock:a"), at(0));
  ASSERT_EQ(s.due(at(10000)).size(), 1u);                          // renewal A
  s.on_result(id, at(10000), renewal_outcome::failed, at(12000));  // A timed out
  ASSERT_EQ(s.due(at(13000)).size(), 1u);                          // renewal B

  // A stale failure of A while B is in flight changes nothing: B stays in flight.
  s.on_result(id, at(10000), renewal_outcome::failed, at(13500));
  EXPECT_TRUE(s.due(at(14000)).empty());
  EXPECT_EQ(s.next_wakeup(), at(25000));

  s.on_result(id, at(13000), renewal_outcome::renewed, at(14000));  // B confirmed
  EXPECT_EQ(s.guaranteed_expiry(id), at(43000));
  // A's answer arrives after all, confirming an older send time: ignored for the expiry.
  s.on_result(id, at(10000), renewal_outcome::renewed, at(15000));
  EXPECT_EQ(s.guaranteed_expiry(id), at(43000));
  EXPECT_EQ(s.next_wakeup(), at(23000));
  EXPECT_TRUE(s.take_lost(at(37999)).empty());
}

TEST(LeaseScheduler, NextWakeupInEachState) {
  lease_scheduler s(kLease, kMargin);
  EXPECT_EQ(s.next_wakeup(), std::nullopt);  // nothing held

  const lease_id a = s.add(key("lock:a"), at(0));
  const lease_id b = s.add(key("lock:b"), at(3000));
  EXPECT_EQ(s.next_wakeup(), at(10000));  // the earliest next renewal

  ASSERT_EQ(s.due(at(10000)).size(), 1u);  // a in flight: its deadline 25 s, b renews at 13 s
  EXPECT_EQ(s.next_wakeup(), at(13000));
  ASSERT_EQ(s.due(at(13000)).size(), 1u);  // both in flight: the earliest deadline
  EXPECT_EQ(s.next_wakeup(), at(25000));

  s.on_result(a, at(10000), renewal_outcome::failed, at(14000));  // a retries at 15 s
  EXPECT_EQ(s.next_wakeup(), at(15000));
  s.on_result(b, at(13000), renewal_outcome::renewed, at(14000));  // b renews at 23 s
  EXPECT_EQ(s.next_wakeup(), at(15000));

  ASSERT_EQ(s.due(at(15000)).size(), 1u);  // a in flight again, deadline 25 s; b at 23 s
  EXPECT_EQ(s.next_wakeup(), at(23000));

  s.on_result(b, at(13000), renewal_outcome::not_held, at(16000));  // b lost, not yet taken
  EXPECT_EQ(s.next_wakeup(), at(16000));
  ASSERT_EQ(s.take_lost(at(16000)).size(), 1u);
  EXPECT_EQ(s.next_wakeup(), at(25000));  // only a's deadline is left

  EXPECT_TRUE(s.remove(a));
  EXPECT_EQ(s.next_wakeup(), std::nullopt);
}

TEST(LeaseScheduler, TinyLeasesRenewEveryMillisecondAtLeast) {
  lease_scheduler s(2ms, 0ms);  // 2 / 3 = 0 ms, rounded up to 1 ms
  EXPECT_EQ(s.renew_interval(), 1ms);
  EXPECT_EQ(s.retry_interval(), 1ms);
  const lease_id id = s.add(key("lock:a"), at(0));
  EXPECT_EQ(s.next_wakeup(), at(1));
  EXPECT_TRUE(s.due(at(0)).empty());
  ASSERT_EQ(s.due(at(1)).size(), 1u);
  s.on_result(id, at(1), renewal_outcome::renewed, at(1));
  EXPECT_EQ(s.guaranteed_expiry(id), at(3));
  EXPECT_EQ(s.next_wakeup(), at(2));
  ASSERT_EQ(s.due(at(2)).size(), 1u);
  s.on_result(id, at(2), renewal_outcome::failed, at(2));
  EXPECT_EQ(s.next_wakeup(), at(3));  // retry and loss deadline coincide
  EXPECT_TRUE(s.due(at(3)).empty());
  EXPECT_EQ(s.take_lost(at(3)).size(), 1u);
}

TEST(LeaseScheduler, RejectsLeasesThatCannotWork) {
  EXPECT_THROW(lease_scheduler(0ms, 0ms), std::invalid_argument);
  EXPECT_THROW(lease_scheduler(-5ms, 0ms), std::invalid_argument);
  EXPECT_THROW(lease_scheduler(kLease, -1ms), std::invalid_argument);
  // The first renewal must come before the loss deadline: margin + lease / 3 < lease.
  EXPECT_THROW(lease_scheduler(kLease, 20s), std::invalid_argument);
  EXPECT_NO_THROW(lease_scheduler(kLease, 19999ms));
  EXPECT_THROW(lease_scheduler(1ms, 0ms), std::invalid_argument);  // 0 + 1 ms is not < 1 ms
  EXPECT_THROW(lease_scheduler(kLease, kMargin, -1ms), std::invalid_argument);
  EXPECT_THROW(lease_scheduler(kLease, kMargin, 10s), std::invalid_argument);  // a whole interval
  EXPECT_NO_THROW(lease_scheduler(kLease, kMargin, 9999ms));
}

// Leases taken at different moments join one round when the later ones are due within the
// window: renewing them early costs nothing but moves their guarantee later.
TEST(LeaseScheduler, TheBatchWindowPullsLeasesDueSoonIntoThisRound) {
  lease_scheduler s(kLease, kMargin, 3s);
  const lease_id a = s.add(key("a"), at(0));     // due at 10 s
  const lease_id b = s.add(key("b"), at(2000));  // due at 12 s: within 3 s of 10 s
  const lease_id c = s.add(key("c"), at(4000));  // due at 14 s: outside
  EXPECT_EQ(s.next_wakeup(), at(10000));
  EXPECT_TRUE(s.due(at(9999)).empty()) << "nothing is sent before a lease is actually due";
  EXPECT_EQ(ids(s.due(at(10000))), (std::vector<lease_id>{a, b}));
  s.on_result(a, at(10000), renewal_outcome::renewed, at(10001));
  s.on_result(b, at(10000), renewal_outcome::renewed, at(10001));
  EXPECT_EQ(s.guaranteed_expiry(b), at(40000)) << "b is now confirmed from the shared round";
  EXPECT_EQ(s.next_wakeup(), at(14000));
  EXPECT_EQ(ids(s.due(at(14000))), (std::vector<lease_id>{c}));
  s.on_result(c, at(14000), renewal_outcome::renewed, at(14001));
  // From now on a and b share every round: c is 4 s later, beyond the window.
  EXPECT_EQ(ids(s.due(at(20000))), (std::vector<lease_id>{a, b}));
  EXPECT_TRUE(s.due(at(20001)).empty());
}

// After a reconnect the server may have lost every hold: all of them are sent at once, those
// with a renewal in flight too, and the older renewal's failure no longer counts.
TEST(LeaseScheduler, DueAllSendsEveryLeaseNowAndSupersedesTheOneInFlight) {
  lease_scheduler s(kLease, kMargin);
  const lease_id a = s.add(key("a"), at(0));
  const lease_id b = s.add(key("b"), at(5000));
  ASSERT_EQ(ids(s.due(at(10000))), (std::vector<lease_id>{a}));  // a in flight since 10 s
  const auto all = s.due_all(at(10500));
  EXPECT_EQ(ids(all), (std::vector<lease_id>{a, b}));
  for (const auto& r : all)
    EXPECT_EQ(r.sent_at, at(10500));
  EXPECT_TRUE(s.due(at(15000)).empty()) << "nothing is due again while the round is in flight";
  s.on_result(a, at(10000), renewal_outcome::failed, at(10600));  // the dead link's answer
  s.on_result(a, at(10500), renewal_outcome::renewed, at(10600));
  s.on_result(b, at(10500), renewal_outcome::not_held, at(10600));
  EXPECT_EQ(s.guaranteed_expiry(a), at(40500));
  EXPECT_EQ(s.next_wakeup(), at(10600)) << "b's loss waits to be taken";
  const auto lost = s.take_lost(at(10600));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, b);
  EXPECT_EQ(s.next_wakeup(), at(20500));
}

// 100,000 leases: every round returns exactly the leases due, in order, and leaves the others
// alone. (The cost of a round at this size is measured in bench/dlock_bench_watchdog.)
TEST(LeaseScheduler, ManyLeasesAreScheduledByIndexNotByScan) {
  lease_scheduler s(kLease, kMargin);
  constexpr int total = 100000;
  for (int i = 0; i < total; ++i)
    (void)s.add(key("k" + std::to_string(i)), at(i / 100));  // 100 leases per millisecond
  for (int round = 0; round < 10; ++round) {
    const auto now = at(10000 + round);
    ASSERT_EQ(s.next_wakeup(), now);
    const auto batch = s.due(now);
    ASSERT_EQ(batch.size(), 100u) << "round " << round;
    for (const auto& r : batch)
      s.on_result(r.id, r.sent_at, renewal_outcome::renewed, now);
  }
  EXPECT_EQ(s.size(), static_cast<std::size_t>(total));
  EXPECT_TRUE(s.take_lost(at(10010)).empty());
}

}  // namespace
}  // namespace dlock::lease
