// quorum::fan_out (src/quorum/fan_out.hpp) without a server: a Redlock attempt's wait for a
// majority, fed by completions on other threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "quorum/fan_out.hpp"

namespace dlock::quorum {
namespace {

using namespace std::chrono_literals;

// Generous: a wait that must end through a completion ends long before it.
constexpr auto wait_limit = 10s;
// A wait that must not end through the completions given passes this deadline instead.
constexpr auto short_deadline = 50ms;

reply yes() {
  return reply::make_integer(1);
}
reply no() {
  return reply::make_integer(0);
}

// True once two masters said yes.
bool majority_of_three(const fan_out::answers& a) {
  int granted = 0;
  for (const auto& r : a)
    granted += r && r->is_integer() && r->integer == 1 ? 1 : 0;
  return granted >= 2;
}

TEST(FanOut, AConditionThatHoldsAlreadyReturnsAtOnce) {
  auto calls = std::make_shared<fan_out>(3);
  calls->handler(0)({}, yes());
  calls->handler(2)({}, yes());
  const auto before = fan_out::clock::now();
  const auto answers = calls->wait(before + wait_limit, majority_of_three);
  EXPECT_LT(fan_out::clock::now() - before, short_deadline);
  ASSERT_EQ(answers.size(), 3U);
  EXPECT_TRUE(answers[0].has_value());
  EXPECT_FALSE(answers[1].has_value());
  EXPECT_TRUE(answers[2].has_value());
}

TEST(FanOut, AnswersThatDoNotSatisfyTheConditionLeaveTheWaitToItsDeadline) {
  auto calls = std::make_shared<fan_out>(3);
  std::thread completer([&] {
    calls->handler(0)({}, yes());
    calls->handler(1)({}, no());
  });
  const auto start = fan_out::clock::now();
  const auto answers = calls->wait(start + short_deadline, majority_of_three);
  const auto took = fan_out::clock::now() - start;
  completer.join();
  EXPECT_GE(took, short_deadline);
  EXPECT_LT(took, wait_limit);
  EXPECT_FALSE(majority_of_three(answers));
  // A failed request is an answer, stored as an error reply.
  calls->handler(2)(make_error_code(errc::connection_lost), reply{});
  EXPECT_TRUE(calls->holds([](const fan_out::answers& a) {
    return a[2].has_value() && a[2]->is_error() && !a[2]->str.empty();
  }));
}

// The waiter is woken when its condition holds, not by every reply: it asks the condition once
// before it sleeps and once when woken (the completing threads ask it meanwhile).
TEST(FanOut, TheWaiterIsWokenOnceWhenTheConditionHoldsNotByEveryReply) {
  auto calls = std::make_shared<fan_out>(3);
  std::atomic<int> asked_by_waiter{0};
  std::thread::id waiter_id;
  fan_out::answers answers;
  std::thread waiter([&] {
    waiter_id = std::this_thread::get_id();
    answers = calls->wait(fan_out::clock::now() + wait_limit, [&](const fan_out::answers& a) {
      if (std::this_thread::get_id() == waiter_id) ++asked_by_waiter;
      return majority_of_three(a);
    });
  });
  // Once the waiter asked, it holds the fan-out's mutex until it sleeps: completions come after.
  while (asked_by_waiter.load() == 0)
    std::this_thread::yield();
  calls->handler(1)({}, no());
  calls->handler(0)({}, yes());
  calls->handler(2)({}, yes());
  waiter.join();
  EXPECT_TRUE(majority_of_three(answers));
  EXPECT_EQ(asked_by_waiter.load(), 2);
}

}  // namespace
}  // namespace dlock::quorum
