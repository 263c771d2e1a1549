// route::resend_gate: a sender's withdrawal of the router's own re-sends of its request.
#include "route/resend_gate.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

namespace dlock::route {
namespace {

using namespace std::chrono_literals;

// How long a withdraw() that must wait is watched not returning.
constexpr auto still_waiting = 50ms;

// Until withdraw() has begun on another thread (it marks the gate before it waits).
void wait_until_withdrawing(resend_gate& gate) {
  while (!gate.withdrawn())
    std::this_thread::yield();
}

TEST(ResendGate, AnOpenGateLetsReSendsThroughAndAWithdrawnOneNone) {
  resend_gate gate;
  {
    const resend_turn turn(&gate);
    EXPECT_TRUE(turn.allowed());
  }
  gate.withdraw();  // no re-send in progress: returns at once
  EXPECT_TRUE(gate.withdrawn());
  const resend_turn turn(&gate);
  EXPECT_FALSE(turn.allowed());
  EXPECT_FALSE(gate.begin_resend());
}

TEST(ResendGate, NoGateMeansEveryReSendIsAllowed) {
  const resend_turn turn(nullptr);
  EXPECT_TRUE(turn.allowed());
}

// A re-send being queued when the sender withdraws goes first: withdraw() returns only once it
// is queued, so that whatever the sender queues next follows it.
TEST(ResendGate, WithdrawWaitsForAReSendBeingQueued) {
  resend_gate gate;
  auto turn = std::make_unique<resend_turn>(&gate);
  ASSERT_TRUE(turn->allowed());
  auto withdrawn = std::async(std::launch::async, [&] { gate.withdraw(); });
  wait_until_withdrawing(gate);
  EXPECT_EQ(withdrawn.wait_for(still_waiting), std::future_status::timeout);
  turn.reset();
  withdrawn.get();
  EXPECT_FALSE(gate.begin_resend());
}

// A completion run inside a re-send may start another one on the same gate (a release retried
// from its router try's completion): the gate stays held until the outer one ends.
TEST(ResendGate, ANestedReSendKeepsTheGateHeldUntilTheOuterOneEnds) {
  resend_gate gate;
  auto outer = std::make_unique<resend_turn>(&gate);
  { const resend_turn inner(&gate); }
  auto withdrawn = std::async(std::launch::async, [&] { gate.withdraw(); });
  wait_until_withdrawing(gate);
  EXPECT_EQ(withdrawn.wait_for(still_waiting), std::future_status::timeout);
  outer.reset();
  withdrawn.get();
}

}  // namespace
}  // namespace dlock::route
