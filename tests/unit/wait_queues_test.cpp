// The wake-up rules of wait_queues (src/locks/engine/wait_queues.hpp) without a server: which
// waiter a message wakes, and that a release heard while a waiter was still between its refused
// attempt and its queue is not lost.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "locks/engine/wait_queues.hpp"
#include "locks/types/reentrant_protocol.hpp"
#include "locks/types/rw_protocol.hpp"

namespace dlock::locks {
namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A waiter that counts its wake-ups (the real one posts to the I/O thread).
struct counted_waiter {
  wait_queues::waiter w;
  int woken = 0;
  counted_waiter() {
    w.wake = [this] { ++woken; };
  }
};

class WaitQueues : public ::testing::Test {
 protected:
  // Subscriptions are counted; a non-empty one stands for a live listener.
  wait_queues queues{[this](const std::string& channel) {
                       subscribed.push_back(channel);
                       return subscription(std::make_shared<int>(0));
                     },
                     "1234"};
  std::vector<std::string> subscribed;
  const rw_write_protocol writer{};
  const reentrant_protocol reentrant{};
  const lock_ref rw{&writer, "catalog"};
  const lock_ref mutex{&reentrant, "orders"};
  const std::string rw_channel = writer.wake_channel("catalog");
  const std::string mutex_channel = reentrant.wake_channel("orders");
  const std::string mutex_call = reentrant.call_channel("orders", "1234");
};

TEST_F(WaitQueues, OneUnlockMessageWakesOneWaiterInOrder) {
  counted_waiter a;
  counted_waiter b;
  queues.join(rw, rw_channel, &a.w, 1000);
  queues.join(rw, rw_channel, &b.w, 1000);
  EXPECT_EQ(subscribed.size(), 1U);  // one subscription per channel
  queues.on_message(rw_channel, "0");
  EXPECT_EQ(a.woken, 1);
  EXPECT_EQ(b.woken, 0);
  // The next message goes to the next waiter without one pending.
  queues.on_message(rw_channel, "0");
  EXPECT_EQ(a.woken, 1);
  EXPECT_EQ(b.woken, 1);
  queues.leave(rw, &a.w, false);
  queues.leave(rw, &b.w, false);
}

// The read-write lock's 3 s stalls (docs/benchmarks.md, (c2) per type): a writer refused by
// readers joined its queue after the last reader's unlock message had arrived on the channel,
// which was still subscribed from an earlier wait, and slept until its re-check timer.
TEST_F(WaitQueues, AReleaseHeardBeforeTheRefusedWaiterJoinedWakesIt) {
  counted_waiter earlier;
  queues.join(rw, rw_channel, &earlier.w, 1000);
  queues.leave(rw, &earlier.w, false);  // the channel stays subscribed, idle
  ASSERT_EQ(subscribed.size(), 1U);

  const auto attempt_sent = steady::now();
  queues.on_message(rw_channel, "0");  // the release, between the refusal and the join
  counted_waiter late;
  queues.join(rw, rw_channel, &late.w, 1000, true, attempt_sent);
  EXPECT_EQ(late.woken, 1) << "the release heard meanwhile must wake the waiter";
  EXPECT_TRUE(queues.take_wake_up(&late.w));
  EXPECT_EQ(subscribed.size(), 1U) << "no new SUBSCRIBE: the idle channel was reused";
  queues.leave(rw, &late.w, false);
}

TEST_F(WaitQueues, AMessageHeardBeforeTheAttemptWasSentWakesNobody) {
  counted_waiter earlier;
  queues.join(rw, rw_channel, &earlier.w, 1000);
  queues.leave(rw, &earlier.w, false);
  queues.on_message(rw_channel, "0");  // an old release: the attempt saw what came after it
  const auto attempt_sent = steady::now() + 1ms;
  counted_waiter late;
  queues.join(rw, rw_channel, &late.w, 1000, true, attempt_sent);
  EXPECT_EQ(late.woken, 0);
  EXPECT_FALSE(queues.has_wake_up(&late.w));
  queues.leave(rw, &late.w, false);
}

// A mutex waiter behind a dlock holder listens on its client's call channel alone: the release
// that calls another client, and its "0" on the shared channel, reach this process not at all.
TEST_F(WaitQueues, BehindAHolderThatCallsOnlyTheCallChannelIsSubscribed) {
  counted_waiter a;
  counted_waiter b;
  queues.join(mutex, mutex_channel, &a.w, 1000, true, std::nullopt, /*holder_calls=*/true);
  queues.join(mutex, mutex_channel, &b.w, std::nullopt);  // queued behind a, without looking
  EXPECT_EQ(subscribed, std::vector<std::string>{mutex_call});
  queues.on_message(mutex_call, "1234");  // called: one waiter
  EXPECT_EQ(a.woken, 1);
  EXPECT_EQ(b.woken, 0);
  queues.leave(mutex, &a.w, false);
  queues.leave(mutex, &b.w, false);
}

// Behind a Redisson holder (its release only publishes "0" on the shared channel) the waiter
// listens there too, and stops when a later attempt sees a holder that calls.
TEST_F(WaitQueues, BehindAHolderThatDoesNotCallTheSharedChannelIsSubscribedToo) {
  counted_waiter a;
  queues.join(mutex, mutex_channel, &a.w, 1000, true, std::nullopt, /*holder_calls=*/false);
  EXPECT_EQ(subscribed, (std::vector<std::string>{mutex_call, mutex_channel}));
  queues.on_message(mutex_channel, "0");
  EXPECT_EQ(a.woken, 1);
  EXPECT_TRUE(queues.take_wake_up(&a.w));

  EXPECT_TRUE(queues.saw_holder(mutex, 1000, true, /*holder_calls=*/true)) << "one went idle";
  EXPECT_EQ(queues.take_idle(steady::time_point::max()).size(), 1U) << "the shared one, idle";
  queues.on_message(mutex_channel, "0");
  EXPECT_EQ(a.woken, 1) << "no longer listening there";
  EXPECT_FALSE(queues.saw_holder(mutex, 1000, true, /*holder_calls=*/false));  // Redisson's again
  EXPECT_EQ(subscribed.size(), 3U) << "subscribed again";
  queues.on_subscribed(mutex_channel);
  EXPECT_EQ(a.woken, 2) << "a new subscription wakes every waiter";
  queues.leave(mutex, &a.w, false);
}

// The waiter's attempt finds a Redisson holder, whose release arrives on the shared channel (still
// subscribed from an earlier wait) before the attempt's reply: that release must wake it.
TEST_F(WaitQueues, AReleaseOnTheSharedChannelBeforeTheReplyThatSawARedissonHolderWakesTheWaiter) {
  counted_waiter earlier;
  queues.join(mutex, mutex_channel, &earlier.w, 1000, true, std::nullopt, false);
  queues.leave(mutex, &earlier.w, false);  // both channels idle, still subscribed
  counted_waiter a;
  queues.join(mutex, mutex_channel, &a.w, 1000, true, std::nullopt, true);  // a dlock holder
  const auto attempt_sent = steady::now();
  queues.on_message(mutex_channel, "0");  // Redisson's release, before the reply below
  EXPECT_EQ(a.woken, 0) << "not listening there yet";
  queues.saw_holder(mutex, 1000, true, /*holder_calls=*/false, &a.w, attempt_sent);
  EXPECT_EQ(a.woken, 1) << "the release heard meanwhile must wake the waiter";
  EXPECT_EQ(subscribed.size(), 2U) << "no new SUBSCRIBE";
  queues.leave(mutex, &a.w, false);
}

// A blocking caller's observation reaches the queues after another waiter's newer one: an older
// "the holder calls" must not take the lock off the shared channel a Redisson holder needs.
TEST_F(WaitQueues, AnOlderObservationDoesNotLeaveTheSharedChannel) {
  counted_waiter newer;
  counted_waiter older;
  queues.join(mutex, mutex_channel, &newer.w, 1000, true, std::nullopt, /*holder_calls=*/false);
  queues.join(mutex, mutex_channel, &older.w, 1000, true, std::nullopt, /*holder_calls=*/true);
  queues.on_message(mutex_channel, "0");
  EXPECT_EQ(newer.woken, 1) << "still listening on the shared channel";
  queues.leave(mutex, &newer.w, false);
  queues.leave(mutex, &older.w, false);
}

TEST_F(WaitQueues, ACallHeardBeforeTheRefusedWaiterJoinedWakesIt) {
  counted_waiter earlier;
  queues.join(mutex, mutex_channel, &earlier.w, 1000, true, std::nullopt, true);
  queues.leave(mutex, &earlier.w, false);  // the call channel stays subscribed, idle
  const auto attempt_sent = steady::now();
  queues.on_message(mutex_call, "1234");
  counted_waiter late;
  queues.join(mutex, mutex_channel, &late.w, 1000, true, attempt_sent, true);
  EXPECT_EQ(late.woken, 1);
  EXPECT_EQ(subscribed.size(), 1U) << "no new SUBSCRIBE: the idle channel was reused";
  queues.leave(mutex, &late.w, false);
}

TEST_F(WaitQueues, ANewSubscriptionWakesEveryWaiterInstead) {
  const auto attempt_sent = steady::now();
  counted_waiter a;
  queues.join(rw, rw_channel, &a.w, 1000, true, attempt_sent);
  EXPECT_EQ(a.woken, 0) << "nothing was heard on a channel not subscribed yet";
  queues.on_subscribed(rw_channel);  // the SUBSCRIBE's confirmation
  EXPECT_EQ(a.woken, 1);
  queues.leave(rw, &a.w, false);
}

}  // namespace
}  // namespace dlock::locks
