// This client's holds (src/locks/engine/hold_registry.hpp), sans I/O: what an attempt's reply
// records, which lease an attempt asks for, what a release sends, and when and why a hold is lost.
// Time is injected; the registry never calls the lock protocol, which only tells two lock types
// apart here.
#include "locks/engine/hold_registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "dlock/error.hpp"
#include "locks/types/reentrant_protocol.hpp"

namespace dlock::locks {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;
using outcome_kind = attempt_outcome::kind;

// An injected time base: at(n) is n milliseconds after an arbitrary origin.
constexpr clock::time_point t0{};
constexpr clock::time_point at(milliseconds::rep ms) {
  return t0 + milliseconds(ms);
}

// The default watchdog: 30 s leases; a hold counts as lost 3 s (a tenth) before its lease ends.
constexpr milliseconds kWatchdog = 30s;
const std::string kClient = "client-1";

// Two lock types, as a read-write lock's two sides would be.
const reentrant_protocol& protocol_a() {
  static const reentrant_protocol p;
  return p;
}
const reentrant_protocol& protocol_b() {
  static const reentrant_protocol p;
  return p;
}

hold_key key(const std::string& name, std::uint64_t owner = 7,
             const lock_protocol& protocol = protocol_a()) {
  return hold_key{lock_ref{&protocol, name}, owner};
}

// Whether `out` carries the stop_source behind `token`. The registry only collects it: the engine
// stops it after releasing its mutex, since stop callbacks are user code.
bool carries(const losses& out, const std::stop_token& token) {
  return std::any_of(out.stops.begin(), out.stops.end(),
                     [&](const auto& s) { return s->get_token() == token; });
}

attempt_outcome acquired(std::uint64_t token, std::uint64_t count = 1) {
  return {outcome_kind::acquired, token, count, -1};
}
attempt_outcome reentered(std::uint64_t count) {
  return {outcome_kind::reentered, 0, count, -1};
}
attempt_outcome held_by_other(std::int64_t ttl_ms = 1000) {
  return {outcome_kind::held_by_other, 0, 0, ttl_ms};
}

class HoldRegistry : public ::testing::Test {
 protected:
  // Takes a hold of `k` as an attempt sent at `sent_at` (explicit lease `lease`, or the watchdog).
  std::optional<clock::time_point> take(const hold_key& k, const attempt_outcome& outcome,
                                        clock::time_point sent_at,
                                        const milliseconds* lease = nullptr) {
    const attempt_plan p = registry.plan(k, lease);
    return registry.record_attempt(k, p, outcome, sent_at, false, std::nullopt, lost);
  }

  lock_counters counters;
  hold_registry registry{kWatchdog, kClient, counters};
  losses lost;
};

TEST(HoldRegistrySafetyMargin, IsATenthOfTheLeaseAndAtLeastOneMillisecond) {
  EXPECT_EQ(safety_margin(30s), 3s);
  EXPECT_EQ(safety_margin(10s), 1s);
  EXPECT_EQ(safety_margin(5ms), 1ms);
  EXPECT_EQ(safety_margin(1ms), 1ms);
}

TEST(HoldRegistryConstruction, RefusesAWatchdogLeaseOverTheLimitAsAnInvalidArgument) {
  lock_counters counters;
  try {
    hold_registry r(max_lock_lease + 1ms, kClient, counters);
    FAIL() << "a watchdog lease over max_lock_lease was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_NO_THROW(hold_registry(max_lock_lease, kClient, counters));
}

TEST(HoldRegistryConstruction, RefusesAWatchdogLeaseTooShortToRenewAsAnInvalidArgument) {
  // 1 ms: the 1 ms margin plus the 1 ms renewal interval leave nothing of the lease.
  lock_counters counters;
  try {
    hold_registry r(1ms, kClient, counters);
    FAIL() << "a 1 ms watchdog lease was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);  // not the scheduler's std::invalid_argument
  }
}

TEST_F(HoldRegistry, TheOwnerFieldIsTheClientIdAndTheOwnerKey) {
  EXPECT_EQ(registry.owner_field(42), "client-1:42");
  EXPECT_EQ(registry.watchdog_lease(), kWatchdog);
}

// --- plan ---------------------------------------------------------------------------------------

TEST_F(HoldRegistry, AFirstHoldIsPlannedWithTheWatchdogLeaseUnlessOneIsGiven) {
  const attempt_plan watchdog = registry.plan(key("a"), nullptr);
  EXPECT_EQ(watchdog.owner, "client-1:7");
  EXPECT_EQ(watchdog.lease, kWatchdog);
  EXPECT_TRUE(watchdog.watchdog);
  EXPECT_EQ(watchdog.known_holds, 0u);

  const milliseconds lease = 10s;
  const attempt_plan explicit_lease = registry.plan(key("a"), &lease);
  EXPECT_EQ(explicit_lease.lease, 10s);
  EXPECT_FALSE(explicit_lease.watchdog);
  EXPECT_EQ(explicit_lease.known_holds, 0u);
}

TEST_F(HoldRegistry, AReEntryOfAnExplicitLeaseHoldKeepsThatLease) {
  const milliseconds lease = 10s;
  take(key("a"), acquired(5), at(0), &lease);
  const attempt_plan p = registry.plan(key("a"), nullptr);
  EXPECT_EQ(p.lease, 10s);
  EXPECT_FALSE(p.watchdog);
  EXPECT_EQ(p.known_holds, 1u);
}

TEST_F(HoldRegistry, AReEntryOfAWatchdogHoldKeepsTheWatchdog) {
  take(key("a"), acquired(5, 2), at(0));
  const milliseconds lease = 10s;
  const attempt_plan p = registry.plan(key("a"), &lease);
  EXPECT_EQ(p.lease, kWatchdog);
  EXPECT_TRUE(p.watchdog);
  EXPECT_EQ(p.known_holds, 2u);
}

TEST_F(HoldRegistry, ALostHoldIsPlannedAsAFirstHold) {
  const milliseconds lease = 10s;
  take(key("a"), acquired(5), at(0), &lease);
  registry.lose_all(lock_loss_reason::client_stopped, lost);
  const attempt_plan p = registry.plan(key("a"), nullptr);
  EXPECT_EQ(p.known_holds, 0u);
  EXPECT_TRUE(p.watchdog);
  EXPECT_EQ(p.lease, kWatchdog);
}

// --- record_attempt
// -------------------------------------------------------------------------------

TEST_F(HoldRegistry, AnAcquiredReplyRecordsTheHoldItsTokenAndCount) {
  take(key("a"), acquired(17), at(0));
  EXPECT_EQ(registry.count(key("a")), 1u);
  EXPECT_EQ(registry.token(key("a")), 17u);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(counters.acquired.load(), 1u);
  EXPECT_TRUE(lost.empty());
  const std::stop_token stop = registry.stop_token(key("a"));
  EXPECT_TRUE(stop.stop_possible());
  EXPECT_FALSE(stop.stop_requested());
  // Another owner, and the same name under another lock type, hold nothing.
  EXPECT_EQ(registry.count(key("a", 8)), 0u);
  EXPECT_EQ(registry.count(key("a", 7, protocol_b())), 0u);
  EXPECT_EQ(registry.token(key("b")), 0u);
  EXPECT_FALSE(registry.stop_token(key("b")).stop_possible());
}

TEST_F(HoldRegistry, AReenteredReplyCountsAnotherHoldOfTheSameToken) {
  take(key("a"), acquired(17), at(0));
  take(key("a"), reentered(2), at(100));
  EXPECT_EQ(registry.count(key("a")), 2u);
  EXPECT_EQ(registry.token(key("a")), 17u);
  EXPECT_EQ(counters.acquired.load(), 1u);
  EXPECT_EQ(counters.reentered.load(), 1u);
  EXPECT_TRUE(lost.empty());
}

TEST_F(HoldRegistry, AHeldByOtherReplyForAnOwnerWithoutAHoldRecordsNothing) {
  EXPECT_EQ(take(key("a"), held_by_other(), at(0)), std::nullopt);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_TRUE(lost.empty());
  EXPECT_EQ(counters.acquired.load(), 0u);
}

TEST_F(HoldRegistry, AHeldByOtherReplyForAKnownHoldLosesIt) {
  // The owner re-enters, but the server says someone else has the lock: the hold is gone.
  take(key("a"), acquired(17, 1), at(0));
  const std::stop_token stop = registry.stop_token(key("a"));
  take(key("a"), held_by_other(), at(100));
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_TRUE(carries(lost, stop));
  EXPECT_FALSE(stop.stop_requested());  // not under the engine's mutex
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.stops.size(), 1u);
  EXPECT_EQ(lost.events[0].name, "a");
  EXPECT_EQ(lost.events[0].owner, "client-1:7");
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::not_held);
  EXPECT_EQ(counters.lost.load(), 1u);
}

TEST_F(HoldRegistry, AnAcquiredReplyForAKnownHoldLosesTheOldHoldAndStartsANewOne) {
  // Our hold expired on the server and this attempt took the lock afresh: the holder of the old
  // hold must hear that it was lost, and the new hold gets its own token and stop token.
  take(key("a"), acquired(17, 1), at(0));
  const std::stop_token old_stop = registry.stop_token(key("a"));
  take(key("a"), acquired(18, 1), at(100));
  EXPECT_TRUE(carries(lost, old_stop));
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::not_held);
  EXPECT_EQ(registry.count(key("a")), 1u);
  EXPECT_EQ(registry.token(key("a")), 18u);
  EXPECT_FALSE(registry.stop_token(key("a")) == old_stop);
  EXPECT_FALSE(carries(lost, registry.stop_token(key("a"))));
  EXPECT_EQ(counters.acquired.load(), 2u);
}

TEST_F(HoldRegistry, AReenteredReplyTheClientDidNotKnowOfBecomesATrackedHold) {
  // An earlier attempt took the lock but its reply was lost: the server now counts a re-entry.
  take(key("a"), reentered(2), at(0));
  EXPECT_EQ(registry.count(key("a")), 2u);
  EXPECT_EQ(counters.acquired.load(), 1u);
  EXPECT_EQ(counters.reentered.load(), 0u);
  ASSERT_TRUE(registry.next_wakeup().has_value());  // and the watchdog renews it
}

TEST_F(HoldRegistry, AReenteredReplyAfterALossTracksTheServersHoldWithItsToken) {
  // Counted lost a margin before its lease ends, the hold is still on the server: the owner's
  // next attempt re-enters it, and the fencing token is still the one it was given.
  const milliseconds lease = 1s;
  take(key("a"), acquired(17), at(0), &lease);
  registry.take_expired(at(900), lost);
  ASSERT_EQ(registry.count(key("a")), 0u);
  take(key("a"), reentered(2), at(950));
  EXPECT_EQ(registry.count(key("a")), 2u);
  EXPECT_EQ(registry.token(key("a")), 17u);
  EXPECT_FALSE(registry.stop_token(key("a")).stop_requested());
  EXPECT_EQ(lost.events.size(), 1u);  // the earlier loss only
}

TEST_F(HoldRegistry, AReplyAppliedAfterTheClientStoppedLosesTheNewHoldAtOnce) {
  const attempt_plan p = registry.plan(key("a"), nullptr);
  registry.record_attempt(key("a"), p, acquired(17), at(0), true, std::nullopt, lost);
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_TRUE(carries(lost, registry.stop_token(key("a"))));
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::client_stopped);
  EXPECT_EQ(registry.due_renewals(at(60000)).size(), 0u);  // nobody renews it
}

TEST_F(HoldRegistry, RecordAttemptAsksForTheWatchdogTimerOnlyWhenItIsNeededSooner) {
  const milliseconds lease = 10s;
  // An explicit lease sent at 1 s counts as lost at 1 + 10 - 1 = 10 s.
  const attempt_plan p = registry.plan(key("a"), &lease);
  EXPECT_EQ(registry.record_attempt(key("a"), p, acquired(1), at(1000), false, std::nullopt, lost),
            at(10000));
  const attempt_plan q = registry.plan(key("b"), &lease);
  EXPECT_EQ(registry.record_attempt(key("b"), q, acquired(2), at(1000), false, at(20000), lost),
            at(10000));  // the timer is set later
  const attempt_plan r = registry.plan(key("c"), &lease);
  EXPECT_EQ(registry.record_attempt(key("c"), r, acquired(3), at(1000), false, at(5000), lost),
            std::nullopt);  // the timer comes sooner anyway
  const attempt_plan s = registry.plan(key("d"), &lease);
  EXPECT_EQ(registry.record_attempt(key("d"), s, acquired(4), at(1000), false, at(10000), lost),
            std::nullopt);  // exactly then

  // A watchdog hold needs the watchdog at its first renewal, before its loss deadline.
  lock_counters c2;
  hold_registry w(kWatchdog, kClient, c2);
  const attempt_plan wp = w.plan(key("a"), nullptr);
  const auto due = w.record_attempt(key("a"), wp, acquired(1), at(0), false, std::nullopt, lost);
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due, w.next_wakeup());
  EXPECT_GT(*due, at(0));
  EXPECT_LT(*due, at(27000));
}

// --- explicit leases
// ------------------------------------------------------------------------------

TEST_F(HoldRegistry, AnExplicitLeaseIsLostAtItsEndLessTheMarginAndReportedOnce) {
  const milliseconds lease = 10s;
  take(key("a"), acquired(17), at(1000), &lease);
  EXPECT_EQ(registry.next_wakeup(), at(10000));          // 1 s + 10 s - 1 s
  EXPECT_TRUE(registry.due_renewals(at(9000)).empty());  // never renewed

  registry.take_expired(at(9999), lost);
  EXPECT_TRUE(lost.empty());
  EXPECT_EQ(registry.count(key("a")), 1u);

  const std::stop_token stop = registry.stop_token(key("a"));
  registry.take_expired(at(10000), lost);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].name, "a");
  EXPECT_EQ(lost.events[0].owner, "client-1:7");
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::lease_expired);
  EXPECT_TRUE(carries(lost, stop));
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_EQ(counters.lost.load(), 1u);
  EXPECT_EQ(registry.next_wakeup(), std::nullopt);

  losses again;
  registry.take_expired(at(20000), again);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(registry.size(), 1u);  // kept until its owner releases it
}

TEST_F(HoldRegistry, AReEntryRestartsAnExplicitLeaseFromItsRequest) {
  const milliseconds lease = 10s;
  take(key("a"), acquired(17), at(0), &lease);                      // lost at 9 s
  EXPECT_EQ(take(key("a"), reentered(2), at(5000)), std::nullopt);  // an armed timer is early
  EXPECT_EQ(registry.next_wakeup(), at(14000));
  registry.take_expired(at(13999), lost);
  EXPECT_TRUE(lost.empty());
  registry.take_expired(at(14000), lost);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::lease_expired);
}

TEST_F(HoldRegistry, ExplicitLeasesExpireInDeadlineOrder) {
  const milliseconds short_lease = 2s, long_lease = 20s;
  take(key("long"), acquired(1), at(0), &long_lease);
  take(key("short"), acquired(2), at(0), &short_lease);
  EXPECT_EQ(registry.next_wakeup(), at(1800));  // 2 s less a 0.2 s margin
  registry.take_expired(at(17999), lost);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].name, "short");
  EXPECT_EQ(registry.next_wakeup(), at(18000));
}

TEST_F(HoldRegistry, TheNextWakeupIsTheEarlierOfTheWatchdogsAndTheExplicitDeadlines) {
  take(key("renewed"), acquired(1), at(0));
  const auto watchdog = registry.next_wakeup();
  ASSERT_TRUE(watchdog.has_value());
  ASSERT_GT(*watchdog, at(1800));
  const milliseconds lease = 2s;
  take(key("explicit"), acquired(2), at(0), &lease);
  EXPECT_EQ(registry.next_wakeup(), at(1800));
  registry.take_expired(at(1800), lost);
  EXPECT_EQ(registry.next_wakeup(), watchdog);
}

// --- watchdog leases
// ------------------------------------------------------------------------------

TEST_F(HoldRegistry, AWatchdogHoldIsRenewedAndKeptWhileRenewalsSucceed) {
  take(key("a"), acquired(17), at(0));
  const auto first = registry.next_wakeup();
  ASSERT_TRUE(first.has_value());
  const auto batch = registry.due_renewals(*first);
  ASSERT_EQ(batch.size(), 1u);
  ASSERT_NE(batch[0].key, nullptr);
  EXPECT_EQ(batch[0].key->name, "a");
  EXPECT_EQ(batch[0].key->owner_field, "client-1:7");
  const hold_key* holder = registry.holder_of(batch[0].id);
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(*holder, key("a"));

  registry.on_renewal(batch[0], lease::renewal_outcome::renewed, *first + 5ms);
  EXPECT_EQ(counters.leases_renewed.load(), 1u);
  // Without the renewal the hold would count as lost at 27 s; now it lasts until sent_at + 27 s.
  registry.take_expired(at(27000), lost);
  EXPECT_TRUE(lost.empty());
  EXPECT_EQ(registry.count(key("a")), 1u);
  registry.take_expired(batch[0].sent_at + 27s, lost);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::unconfirmed);
}

TEST_F(HoldRegistry, AWatchdogHoldWithoutAnyConfirmedRenewalIsLostAsUnconfirmed) {
  take(key("a"), acquired(17), at(0));
  const std::stop_token stop = registry.stop_token(key("a"));
  registry.take_expired(at(26999), lost);
  EXPECT_TRUE(lost.empty());
  registry.take_expired(at(27000), lost);  // 30 s lease - 3 s margin
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::unconfirmed);
  EXPECT_EQ(lost.events[0].owner, "client-1:7");
  EXPECT_TRUE(carries(lost, stop));
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_EQ(registry.next_wakeup(), std::nullopt);
}

TEST_F(HoldRegistry, ARenewalThatFindsTheLockGoneLosesTheHoldAsNotHeld) {
  take(key("a"), acquired(17), at(0));
  const auto batch = registry.due_renewals(*registry.next_wakeup());
  ASSERT_EQ(batch.size(), 1u);
  registry.on_renewal(batch[0], lease::renewal_outcome::not_held, batch[0].sent_at + 5ms);
  EXPECT_EQ(counters.leases_renewed.load(), 0u);
  registry.take_expired(batch[0].sent_at + 5ms, lost);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, lock_loss_reason::not_held);
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_EQ(registry.holder_of(batch[0].id), nullptr);
}

TEST_F(HoldRegistry, AReleasedWatchdogHoldIsNeverRenewedNorReportedLost) {
  take(key("a"), acquired(17), at(0));
  const auto batch = registry.due_renewals(*registry.next_wakeup());
  ASSERT_EQ(batch.size(), 1u);
  std::error_code result;
  ASSERT_TRUE(registry.release(key("a"), result).has_value());
  EXPECT_EQ(registry.holder_of(batch[0].id), nullptr);
  registry.on_renewal(batch[0], lease::renewal_outcome::renewed, batch[0].sent_at + 5ms);
  EXPECT_TRUE(registry.due_renewals(at(120000)).empty());
  registry.take_expired(at(120000), lost);
  EXPECT_TRUE(lost.empty());
  EXPECT_EQ(registry.next_wakeup(), std::nullopt);
}

// --- release
// --------------------------------------------------------------------------------------

TEST_F(HoldRegistry, ReleasingOneOfTwoHoldsKeepsTheLockAndItsLease) {
  const milliseconds lease = 10s;
  take(key("a"), acquired(17, 1), at(0), &lease);
  take(key("a"), reentered(2), at(100));
  std::error_code result = make_error_code(errc::timeout);
  const auto request = registry.release(key("a"), result);
  ASSERT_TRUE(request.has_value());
  EXPECT_FALSE(result);
  EXPECT_EQ(request->name, "a");
  EXPECT_EQ(request->owner, "client-1:7");
  EXPECT_EQ(request->lease, 10s);  // re-set while a hold remains
  EXPECT_EQ(request->remaining, 1u);
  EXPECT_EQ(request->token, 17u);
  EXPECT_EQ(registry.count(key("a")), 1u);
  EXPECT_EQ(counters.released.load(), 0u);
  EXPECT_TRUE(registry.next_wakeup().has_value());  // still tracked
}

TEST_F(HoldRegistry, ReleasingTheLastHoldFreesTheLockAndForgetsIt) {
  take(key("a"), acquired(17), at(0));
  std::error_code result;
  const auto request = registry.release(key("a"), result);
  ASSERT_TRUE(request.has_value());
  EXPECT_FALSE(result);
  EXPECT_EQ(request->remaining, 0u);
  EXPECT_EQ(request->token, 17u);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_EQ(registry.token(key("a")), 0u);
  EXPECT_EQ(counters.released.load(), 1u);
  EXPECT_EQ(registry.next_wakeup(), std::nullopt);
}

TEST_F(HoldRegistry, ReleasingWithoutAHoldIsNotOwnerAndSendsNothing) {
  std::error_code result;
  EXPECT_EQ(registry.release(key("a"), result), std::nullopt);
  EXPECT_EQ(result, errc::not_owner);

  take(key("a"), acquired(17), at(0));
  result = {};
  EXPECT_EQ(registry.release(key("a", 8), result), std::nullopt);  // another owner's lock
  EXPECT_EQ(result, errc::not_owner);
  EXPECT_EQ(registry.count(key("a")), 1u);
}

TEST_F(HoldRegistry, ReleasingALostHoldReportsLockLostButStillSendsAFullRelease) {
  take(key("a"), acquired(17, 1), at(0));
  take(key("a"), reentered(2), at(100));
  EXPECT_EQ(registry.stop_if_lost(key("a")), nullptr);  // held
  registry.lose_all(lock_loss_reason::client_stopped, lost);
  const std::shared_ptr<std::stop_source> lost_before_release = registry.stop_if_lost(key("a"));
  EXPECT_NE(lost_before_release, nullptr);
  std::error_code result;
  std::shared_ptr<std::stop_source> lost_stop;
  const std::stop_token token = registry.stop_token(key("a"));
  const auto request = registry.release(key("a"), result, &lost_stop);
  EXPECT_EQ(result, errc::lock_lost);
  // The hold's own stop_source, for the releasing thread to request if the thread that marked
  // it lost has not yet.
  ASSERT_NE(lost_stop, nullptr);
  EXPECT_EQ(lost_stop, lost_before_release);
  EXPECT_FALSE(token.stop_requested());  // lose_all leaves the requests to its caller
  lost_stop->request_stop();
  EXPECT_TRUE(token.stop_requested());
  ASSERT_TRUE(request.has_value());   // frees the lock sooner if the field is still there
  EXPECT_EQ(request->remaining, 0u);  // forgotten whole, not one hold at a time
  EXPECT_EQ(request->token, 17u);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(counters.released.load(), 0u);  // a loss is not a release

  result = {};
  EXPECT_EQ(registry.release(key("a"), result), std::nullopt);
  EXPECT_EQ(result, errc::not_owner);
}

// --- orphan_release
// -------------------------------------------------------------------------------

TEST_F(HoldRegistry, AnOrphanReleaseFreesAnUnknownHoldWithoutATokenCheck) {
  const auto request = registry.orphan_release(key("a"));
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->name, "a");
  EXPECT_EQ(request->owner, "client-1:7");
  EXPECT_EQ(request->remaining, 0u);
  EXPECT_EQ(request->token, 0u);
}

TEST_F(HoldRegistry, NoOrphanReleaseForAHoldTheClientKnows) {
  take(key("a"), acquired(17), at(0));
  EXPECT_EQ(registry.orphan_release(key("a")), std::nullopt);
  registry.lose_all(lock_loss_reason::client_stopped, lost);
  EXPECT_EQ(registry.orphan_release(key("a")), std::nullopt);  // its owner releases it
  EXPECT_TRUE(registry.orphan_release(key("a", 8)).has_value());
}

// --- losing holds in bulk
// -------------------------------------------------------------------------

TEST_F(HoldRegistry, DropOwnerLosesAndForgetsEveryHoldOfThatOwnerOnly) {
  take(key("a", 7), acquired(1), at(0));
  take(key("b", 7, protocol_b()), acquired(2), at(0));
  take(key("a", 8), acquired(3), at(0));
  registry.drop_owner(7, lock_loss_reason::thread_exited, lost);
  ASSERT_EQ(lost.events.size(), 2u);
  EXPECT_EQ(lost.stops.size(), 2u);
  for (const lock_loss& l : lost.events) {
    EXPECT_EQ(l.owner, "client-1:7");
    EXPECT_EQ(l.reason, lock_loss_reason::thread_exited);
  }
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_EQ(registry.count(key("a", 8)), 1u);
  EXPECT_EQ(counters.lost.load(), 2u);
  std::error_code result;
  EXPECT_EQ(registry.release(key("a", 7), result), std::nullopt);  // forgotten
  EXPECT_EQ(result, errc::not_owner);
}

TEST_F(HoldRegistry, DropOwnerDoesNotReportAHoldLostBefore) {
  const milliseconds lease = 1s;
  take(key("a"), acquired(1), at(0), &lease);
  registry.take_expired(at(1000), lost);
  ASSERT_EQ(lost.events.size(), 1u);
  losses dropped;
  registry.drop_owner(7, lock_loss_reason::thread_exited, dropped);
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(counters.lost.load(), 1u);
}

TEST_F(HoldRegistry, LoseAllLosesEveryHoldOnceAndKeepsThemUntilReleased) {
  take(key("a", 7), acquired(1), at(0));
  const milliseconds lease = 10s;
  take(key("b", 8), acquired(2), at(0), &lease);
  registry.lose_all(lock_loss_reason::client_stopped, lost);
  ASSERT_EQ(lost.events.size(), 2u);
  for (const lock_loss& l : lost.events)
    EXPECT_EQ(l.reason, lock_loss_reason::client_stopped);
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.count(key("a", 7)), 0u);
  EXPECT_TRUE(carries(lost, registry.stop_token(key("a", 7))));
  EXPECT_EQ(registry.next_wakeup(), std::nullopt);  // nothing left to renew or expire

  losses again;
  registry.lose_all(lock_loss_reason::client_stopped, again);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(counters.lost.load(), 2u);
}

TEST_F(HoldRegistry, ALostHoldKeepsItsTokenForTheHandleThatHadIt) {
  // lock_engine::make_lease hands out a lease for a hold lost before its handler ran: the
  // token of that hold and the stop_token the loss stops must still be there.
  take(key("a"), acquired(17), at(0));
  const std::stop_token stop = registry.stop_token(key("a"));
  registry.lose_all(lock_loss_reason::client_stopped, lost);
  EXPECT_EQ(registry.count(key("a")), 0u);
  EXPECT_EQ(registry.token(key("a")), 17u);
  EXPECT_TRUE(registry.stop_token(key("a")) == stop);
  for (const auto& s : lost.stops)
    s->request_stop();  // what the engine does once its mutex is released
  EXPECT_TRUE(registry.stop_token(key("a")).stop_requested());
}

TEST_F(HoldRegistry, AHoldTakenAgainAfterALossStartsFresh) {
  const milliseconds lease = 1s;
  take(key("a"), acquired(17), at(0), &lease);
  registry.take_expired(at(1000), lost);
  ASSERT_EQ(lost.events.size(), 1u);
  take(key("a"), acquired(18), at(2000));
  EXPECT_EQ(lost.events.size(), 1u);  // the lost hold is not reported twice
  EXPECT_EQ(registry.count(key("a")), 1u);
  EXPECT_EQ(registry.token(key("a")), 18u);
  EXPECT_FALSE(registry.stop_token(key("a")).stop_requested());
  const milliseconds other = 5s;
  EXPECT_TRUE(registry.plan(key("a"), &other).watchdog);  // a re-entry keeps the new hold's kind
}

}  // namespace
}  // namespace dlock::locks
