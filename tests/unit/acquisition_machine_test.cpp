// The decisions of one waiting acquisition (src/locks/engine/acquisition_machine.hpp), driven
// through every row of the table in that header with an injected time and no I/O. The tests play
// the driver: they call attempt_sent() after every `attempt` action, as acquisition.cpp does.
#include "locks/engine/acquisition_machine.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>

namespace dlock::locks {
namespace {

using machine = acquisition_machine;
using action = machine::action;
using kind = action::kind;
using verdict = machine::verdict;
using clock = machine::clock;
using std::chrono::milliseconds;

// An injected time base: at(n) is n milliseconds after an arbitrary origin.
constexpr clock::time_point t0{};
constexpr clock::time_point at(milliseconds::rep ms) {
  return t0 + milliseconds(ms);
}
constexpr clock::time_point never = clock::time_point::max();

void expect_none(const action& a) {
  EXPECT_EQ(a.what, kind::none);
}

void expect_attempt(const action& a) {
  EXPECT_EQ(a.what, kind::attempt);
}

void expect_finish(const action& a, verdict v, bool pass_wake_up = false) {
  EXPECT_EQ(a.what, kind::finish);
  EXPECT_EQ(a.result, v);
  EXPECT_EQ(a.pass_wake_up, pass_wake_up);
}

// A machine that made its first attempt (no earlier waiters) and sent it.
machine attempting(clock::time_point deadline, clock::time_point now = at(0)) {
  machine m(deadline);
  const action a = m.start(now, std::nullopt);
  EXPECT_EQ(a.what, kind::attempt);
  m.attempt_sent(false);
  return m;
}

// A machine whose first attempt found the lock held with `ttl_ms` left at `now`: it waits.
machine waiting(clock::time_point deadline, clock::time_point now = at(0),
                std::int64_t ttl_ms = 500) {
  machine m = attempting(deadline, now);
  const action a = m.on_held(now, ttl_ms, false, false);
  EXPECT_EQ(a.what, kind::wait);
  return m;
}

// --- idle: start ---------------------------------------------------------------------------------

TEST(AcquisitionMachine, StartWithoutEarlierWaitersMakesItsOwnAttempt) {
  machine m(at(10000));
  EXPECT_FALSE(m.attempting());
  const action a = m.start(at(0), std::nullopt);
  expect_attempt(a);
  EXPECT_FALSE(a.join_queue);
  EXPECT_EQ(a.holder_ttl_ms, std::nullopt);  // nothing was seen yet
  EXPECT_TRUE(m.attempting());
  EXPECT_FALSE(m.done());
}

TEST(AcquisitionMachine, StartBehindEarlierWaitersQueuesWithoutAnAttemptUntilTheirHolderTtl) {
  machine m(at(10000));
  const action a = m.start(at(100), 500);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_TRUE(a.join_queue);
  // It saw no holder itself: the queue keeps what the earlier waiters saw.
  EXPECT_EQ(a.holder_ttl_ms, std::nullopt);
  EXPECT_EQ(a.wake_at, at(601));  // the holder's lease end, +1 ms because PTTL rounds down
  EXPECT_FALSE(m.attempting());
}

TEST(AcquisitionMachine, StartBehindWaitersThatSawNoTtlSleepsUntilTheDeadline) {
  machine m(at(10000));
  const action a = m.start(at(100), -1);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_TRUE(a.join_queue);
  EXPECT_EQ(a.wake_at, at(10000));
}

TEST(AcquisitionMachine, StartIsAcceptedOnlyOnce) {
  machine m(at(10000));
  expect_attempt(m.start(at(0), std::nullopt));
  expect_none(m.start(at(1), std::nullopt));
  expect_none(m.start_waiting(at(1), 500, true));
  EXPECT_TRUE(m.attempting());
}

// --- idle: start_waiting (a blocking caller made the first attempt itself)
// ------------------------

TEST(AcquisitionMachine, StartWaitingAfterTheCallersAttemptJoinsTheQueueWithTheTtlItSaw) {
  machine m(at(10000));
  const action a = m.start_waiting(at(100), 500, true);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_TRUE(a.join_queue);
  EXPECT_EQ(a.holder_ttl_ms, 500);
  EXPECT_EQ(a.wake_at, at(601));
}

TEST(AcquisitionMachine, StartWaitingBehindEarlierWaitersRecordsNoTtlOfItsOwn) {
  machine m(at(10000));
  const action a = m.start_waiting(at(100), 500, false);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_TRUE(a.join_queue);
  EXPECT_EQ(a.holder_ttl_ms, std::nullopt);
  EXPECT_EQ(a.wake_at, at(601));
}

TEST(AcquisitionMachine, StartWaitingAfterTheDeadlineTimesOutWhenTheCallerAlreadyAttempted) {
  machine m(at(1000));
  expect_finish(m.start_waiting(at(1000), 500, true), verdict::timed_out);
  EXPECT_TRUE(m.done());
}

TEST(AcquisitionMachine, StartWaitingAfterTheDeadlineWithoutAnAttemptStillMakesOne) {
  // A past deadline means one attempt: a caller that queued without attempting gets it.
  machine m(at(1000));
  const action a = m.start_waiting(at(2000), 500, false);
  ASSERT_EQ(a.what, kind::wait);
  EXPECT_LE(a.wake_at, at(2000));  // the timer fires at once
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  expect_finish(m.on_held(at(2001), 400, false, false), verdict::timed_out);
}

// --- attempting: the reply
// ------------------------------------------------------------------------

TEST(AcquisitionMachine, AcquiredReplyFinishesAcquired) {
  machine m = attempting(at(10000));
  expect_finish(m.on_acquired(false), verdict::acquired);
  EXPECT_TRUE(m.done());
  EXPECT_FALSE(m.attempting());
}

TEST(AcquisitionMachine, AcquiredReplyWithTheCancelTokenStoppedFinishesCancelled) {
  machine m = attempting(at(10000));
  expect_finish(m.on_acquired(true), verdict::cancelled);
}

TEST(AcquisitionMachine, HeldReplyJoinsTheQueueAndSleepsUntilTheHolderLeaseEnds) {
  machine m = attempting(at(10000));
  const action a = m.on_held(at(100), 500, false, false);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_TRUE(a.join_queue);
  EXPECT_EQ(a.holder_ttl_ms, 500);
  EXPECT_EQ(a.wake_at, at(601));
  EXPECT_FALSE(m.attempting());
  EXPECT_FALSE(m.done());
}

TEST(AcquisitionMachine, OnlyTheFirstWaitJoinsTheQueueLaterOnesReportTheTtlAgain) {
  machine m = attempting(at(10000));
  ASSERT_TRUE(m.on_held(at(100), 500, false, false).join_queue);
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  const action again = m.on_held(at(700), 300, false, false);
  EXPECT_EQ(again.what, kind::wait);
  EXPECT_FALSE(again.join_queue);
  EXPECT_EQ(again.holder_ttl_ms, 300);
  EXPECT_EQ(again.wake_at, at(1001));
}

TEST(AcquisitionMachine, HeldReplyCapsTheSleepAtTheDeadline) {
  machine m = attempting(at(1000));
  const action a = m.on_held(at(100), 5000, false, false);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_EQ(a.wake_at, at(1000));  // min(deadline, now + ttl + 1)
  EXPECT_EQ(a.holder_ttl_ms, 5000);
}

TEST(AcquisitionMachine, HeldReplyWhoseLeaseEndsExactlyAtTheDeadlineWakesAtTheDeadline) {
  machine m = attempting(at(1000));
  EXPECT_EQ(m.on_held(at(100), 899, false, false).wake_at, at(1000));
  machine n = attempting(at(1000));
  EXPECT_EQ(n.on_held(at(100), 897, false, false).wake_at, at(998));
}

TEST(AcquisitionMachine, HeldReplyWithoutATtlSleepsUntilTheDeadline) {
  machine m = attempting(at(1000));
  const action a = m.on_held(at(100), -1, false, false);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_EQ(a.wake_at, at(1000));
  EXPECT_EQ(a.holder_ttl_ms, -1);
}

TEST(AcquisitionMachine, HeldReplyAtOrAfterTheDeadlineTimesOut) {
  machine on = attempting(at(1000));
  expect_finish(on.on_held(at(1000), 500, false, false), verdict::timed_out);
  EXPECT_TRUE(on.done());
  machine after = attempting(at(1000));
  expect_finish(after.on_held(at(1500), 500, false, false), verdict::timed_out);
  machine before = attempting(at(1000));
  EXPECT_EQ(before.on_held(at(999), 500, false, false).what, kind::wait);
}

TEST(AcquisitionMachine, HeldReplyWithAWakeUpPendingAttemptsAgainAtOnce) {
  // The unlock that woke this waiter came while its attempt was out: sleeping now would lose it.
  machine m = waiting(at(10000));
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  const action a = m.on_held(at(200), 300, true, false);
  expect_attempt(a);
  EXPECT_EQ(a.holder_ttl_ms, 300);  // the queue still learns what this attempt saw
  EXPECT_TRUE(m.attempting());
}

TEST(AcquisitionMachine, HeldReplyAfterTheDeadlineTimesOutEvenWithAWakeUpPending) {
  machine m = waiting(at(1000));
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  expect_finish(m.on_held(at(1000), 300, true, false), verdict::timed_out);
}

TEST(AcquisitionMachine, HeldReplyWithTheCancelTokenStoppedFinishesCancelled) {
  machine m = attempting(at(10000));
  expect_finish(m.on_held(at(100), 500, false, true), verdict::cancelled);
}

TEST(AcquisitionMachine, FailedReplyFinishesFailed) {
  machine m = attempting(at(10000));
  expect_finish(m.on_failed(), verdict::failed, false);
  EXPECT_TRUE(m.done());
}

// --- attempting: events while the attempt is out
// ---------------------------------------------------

TEST(AcquisitionMachine, WakeUpTimerAndCancelWhileAttemptingWaitForTheReply) {
  machine m = attempting(at(10000));
  expect_none(m.on_wake_up());
  expect_none(m.on_timer());
  expect_none(m.on_cancel());
  EXPECT_TRUE(m.attempting());
  EXPECT_FALSE(m.done());
}

TEST(AcquisitionMachine, ACancelWhileAttemptingTurnsAnAcquiredReplyIntoCancelled) {
  machine m = attempting(at(10000));
  expect_none(m.on_cancel());
  // The token itself may not read as stopped by then: the machine kept the cancel.
  expect_finish(m.on_acquired(false), verdict::cancelled);
}

TEST(AcquisitionMachine, ACancelWhileAttemptingEndsAHeldReplyInsteadOfWaiting) {
  machine m = attempting(at(10000));
  expect_none(m.on_cancel());
  expect_finish(m.on_held(at(100), 500, false, false), verdict::cancelled);
}

TEST(AcquisitionMachine, ACancelWhileAttemptingLeavesAFailedReplyFailed) {
  machine m = attempting(at(10000));
  expect_none(m.on_cancel());
  expect_finish(m.on_failed(), verdict::failed);
}

// --- waiting
// ------------------------------------------------------------------------------------------

TEST(AcquisitionMachine, AWakeUpWhileWaitingMakesAnAttempt) {
  machine m = waiting(at(10000));
  const action a = m.on_wake_up();
  expect_attempt(a);
  EXPECT_FALSE(a.join_queue);
  EXPECT_TRUE(m.attempting());
}

TEST(AcquisitionMachine, TheTimerWhileWaitingMakesAnAttempt) {
  machine m = waiting(at(10000));
  expect_attempt(m.on_timer());
  EXPECT_TRUE(m.attempting());
}

TEST(AcquisitionMachine, AtTheDeadlineTheTimerMakesOneLastAttemptWhoseAcquiredReplyWins) {
  machine m = waiting(at(1000), at(0), 5000);
  expect_attempt(m.on_timer());  // fired at the deadline
  m.attempt_sent(false);
  expect_finish(m.on_acquired(false), verdict::acquired);
}

TEST(AcquisitionMachine, AtTheDeadlineTheLastAttemptsHeldReplyTimesOut) {
  machine m = waiting(at(1000), at(0), 5000);
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  expect_finish(m.on_held(at(1002), 4000, false, false), verdict::timed_out);
}

TEST(AcquisitionMachine, ACancelWhileWaitingFinishesCancelledAtOnce) {
  machine m = waiting(at(10000));
  expect_finish(m.on_cancel(), verdict::cancelled);
  EXPECT_TRUE(m.done());
}

TEST(AcquisitionMachine, ACancelBeforeStartFinishesCancelledAndStartIsIgnored) {
  machine m(at(10000));
  expect_finish(m.on_cancel(), verdict::cancelled);
  expect_none(m.start(at(0), std::nullopt));
}

TEST(AcquisitionMachine, RepliesWhileWaitingAreIgnored) {
  // No attempt is out: a stray reply must not finish or restart anything.
  machine m = waiting(at(10000));
  expect_none(m.on_acquired(false));
  expect_none(m.on_held(at(100), 500, true, false));
  expect_none(m.on_failed());
  EXPECT_FALSE(m.done());
  EXPECT_FALSE(m.attempting());
  expect_attempt(m.on_timer());  // still waiting
}

// --- done
// ---------------------------------------------------------------------------------------------

TEST(AcquisitionMachine, DoneIgnoresEveryEvent) {
  machine m = attempting(at(10000));
  expect_finish(m.on_acquired(false), verdict::acquired);
  expect_none(m.start(at(1), std::nullopt));
  expect_none(m.start_waiting(at(1), 500, true));
  expect_none(m.on_acquired(false));
  expect_none(m.on_held(at(1), 500, true, false));
  expect_none(m.on_failed());
  expect_none(m.on_wake_up());
  expect_none(m.on_timer());
  expect_none(m.on_cancel());
  EXPECT_TRUE(m.done());
  EXPECT_FALSE(m.attempting());
}

// --- wake-ups handed back
// -------------------------------------------------------------------------

TEST(AcquisitionMachine, AFailedAttemptThatUsedAWakeUpHandsItBack) {
  machine m = waiting(at(10000));
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  expect_finish(m.on_failed(), verdict::failed, true);
}

TEST(AcquisitionMachine, AFailedAttemptThatUsedNoWakeUpHandsNothingBack) {
  machine m = waiting(at(10000));
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  expect_finish(m.on_failed(), verdict::failed, false);
}

TEST(AcquisitionMachine, AWakeUpSpentOnAHeldReplyIsNotHandedBackByALaterFailure) {
  // The unlock it stood for was won by someone else: passing it on would wake a waiter for
  // nothing.
  machine m = waiting(at(10000));
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  ASSERT_EQ(m.on_held(at(100), 500, false, false).what, kind::wait);
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  expect_finish(m.on_failed(), verdict::failed, false);
}

// --- deadlines
// ------------------------------------------------------------------------------------------

TEST(AcquisitionMachine, APastDeadlineAllowsExactlyOneAttempt) {
  machine m = attempting(at(1000), at(2000));
  expect_finish(m.on_held(at(2001), 500, false, false), verdict::timed_out);
}

TEST(AcquisitionMachine, APastDeadlineMakesTheAttemptEvenBehindEarlierWaiters) {
  // Queueing would only wait for the deadline that has passed: try_lock semantics instead.
  machine m(at(1000));
  expect_attempt(m.start(at(1000), 500));
  m.attempt_sent(false);
  expect_finish(m.on_held(at(1001), 500, false, false), verdict::timed_out);

  machine lucky(at(1000));
  expect_attempt(lucky.start(at(2000), 500));
  lucky.attempt_sent(false);
  expect_finish(lucky.on_acquired(false), verdict::acquired);
}

TEST(AcquisitionMachine, AMaxDeadlineNeverTimesOut) {
  machine m = attempting(never);
  // Holders without a TTL: sleep until a wake-up, however late it is.
  const action no_ttl = m.on_held(at(100), -1, false, false);
  ASSERT_EQ(no_ttl.what, kind::wait);
  EXPECT_EQ(no_ttl.wake_at, never);

  constexpr auto year_ms = std::int64_t{365} * 24 * 3600 * 1000;
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  const action ttl = m.on_held(at(100 * year_ms), 500, false, false);
  ASSERT_EQ(ttl.what, kind::wait);
  EXPECT_EQ(ttl.wake_at, at(100 * year_ms + 501));  // no overflow next to time_point::max()

  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  expect_finish(m.on_acquired(false), verdict::acquired);
}

// BUG (src/locks/engine/acquisition_machine.cpp, wait()): `milliseconds(ttl_ms + 1)` is compared
// with and added to nanosecond durations, so a holder TTL over ~292 years (2^63 ns; Redis accepts
// PEXPIRE 10000000000000 and PTTL then reports it) overflows int64: undefined behaviour (UBSan:
// "signed integer overflow: 10000000000001 * 1000000"). In practice wake_at wraps to a time far in
// the past, the timer fires at once and the waiter re-attempts in a hot loop until its deadline,
// forever with time_point::max(). Expected: such a TTL caps at the deadline like any long one.
TEST(AcquisitionMachine, AHolderTtlBeyondTheClocksRangeSleepsUntilTheDeadline) {
  constexpr std::int64_t ttl_317_years = 10'000'000'000'000;
  machine m = attempting(at(10000));
  const action a = m.on_held(at(100), ttl_317_years, false, false);
  ASSERT_EQ(a.what, kind::wait);
  EXPECT_EQ(a.wake_at, at(10000));

  machine forever = attempting(never);
  const action b = forever.on_held(at(100), ttl_317_years, false, false);
  ASSERT_EQ(b.what, kind::wait);
  EXPECT_GT(b.wake_at, at(100));  // not in the past: no attempt loop

  machine queued(at(10000));  // the same arithmetic when queueing behind earlier waiters
  EXPECT_EQ(queued.start(at(100), ttl_317_years).wake_at, at(10000));
}

TEST(AcquisitionMachine, AMaxDeadlineStartsBehindEarlierWaiters) {
  machine m(never);
  const action a = m.start(at(100), 500);
  EXPECT_EQ(a.what, kind::wait);
  EXPECT_EQ(a.wake_at, at(601));
}

// A holder that does not publish its release (a foreign client on a plain lock): each wait ends
// after a re-check delay of 10 ms doubling to 100 ms, never past the holder's lease end or the
// deadline; a holder that publishes again resets it.
TEST(AcquisitionMachine, AForeignHolderIsRecheckedWithABoundedBackoff) {
  machine m = attempting(never);
  const std::int64_t expected[] = {10, 20, 40, 80, 100, 100, 100};
  clock::time_point now = at(0);
  for (const std::int64_t delay : expected) {
    const action a = m.on_held(now, 30000, false, false, false);
    ASSERT_EQ(a.what, kind::wait);
    EXPECT_EQ(a.wake_at, now + milliseconds(delay));
    ASSERT_TRUE(a.holder_ttl_ms.has_value());
    EXPECT_FALSE(a.holder_publishes);
    now = a.wake_at;
    expect_attempt(m.on_timer());
    m.attempt_sent(false);
  }
  // A dlock holder now: sleep until its lease end (or a message), and back to 10 ms after.
  const action publishes = m.on_held(now, 5000, false, false, true);
  EXPECT_EQ(publishes.wake_at, now + milliseconds(5001));
  EXPECT_TRUE(publishes.holder_publishes);
  expect_attempt(m.on_wake_up());
  m.attempt_sent(true);
  EXPECT_EQ(m.on_held(now, 30000, false, false, false).wake_at, now + milliseconds(10));
}

TEST(AcquisitionMachine, AForeignRecheckNeverPassesTheLeaseEndOrTheDeadline) {
  machine m = attempting(at(1000));
  // The lease ends in 3 ms: wake then (+1), not after the 10 ms re-check.
  EXPECT_EQ(m.on_held(at(0), 3, false, false, false).wake_at, at(4));
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  // No TTL (-1): the re-check delay alone.
  EXPECT_EQ(m.on_held(at(4), -1, false, false, false).wake_at, at(24));
  expect_attempt(m.on_timer());
  m.attempt_sent(false);
  // Close to the deadline: the deadline.
  EXPECT_EQ(m.on_held(at(990), -1, false, false, false).wake_at, at(1000));
  // A blocking caller's first attempt saw a foreign holder: the first wait is a re-check too.
  machine blocking(never);
  const action first = blocking.start_waiting(at(0), 30000, true, false);
  ASSERT_EQ(first.what, kind::wait);
  EXPECT_TRUE(first.join_queue);
  EXPECT_EQ(first.wake_at, at(10));
  EXPECT_FALSE(first.holder_publishes);
}

}  // namespace
}  // namespace dlock::locks
