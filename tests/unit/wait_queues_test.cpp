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

TEST_F(WaitQueues, AnotherClientsWakeIdIsNotAMissedRelease) {
  counted_waiter earlier;
  queues.join(mutex, mutex_channel, &earlier.w, 1000);
  queues.leave(mutex, &earlier.w, false);
  const auto attempt_sent = steady::now();
  queues.on_message(mutex_channel, "5678");  // the line called another client
  counted_waiter late;
  queues.join(mutex, mutex_channel, &late.w, 1000, true, attempt_sent);
  EXPECT_EQ(late.woken, 0);
  queues.leave(mutex, &late.w, false);

  // This client's own id, heard in the same gap, is one.
  const auto second_attempt = steady::now();
  queues.on_message(mutex_channel, "1234");
  counted_waiter called;
  queues.join(mutex, mutex_channel, &called.w, 1000, true, second_attempt);
  EXPECT_EQ(called.woken, 1);
  queues.leave(mutex, &called.w, false);
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
