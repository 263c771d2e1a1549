// core::one_shot_event: a waiter returns once the event is set, whichever comes first, and sees
// what the setter wrote before setting it.
#include "core/one_shot_event.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace dlock::core {
namespace {

TEST(OneShotEvent, ASetEventIsNotWaitedFor) {
  one_shot_event e;
  EXPECT_FALSE(e.is_set());
  e.set();
  EXPECT_TRUE(e.is_set());
  e.wait();  // returns at once
  e.wait();
}

// Setter and waiter race in every order (set before the wait, during its announcement, while
// it sleeps); each round's waiter must return and read the setter's value. A lost wake-up hangs
// the test (ctest's timeout); a missing release/acquire shows under TSan.
TEST(OneShotEvent, EveryRoundsWaiterWakesAndSeesTheSettersWrite) {
  constexpr int rounds = 5000;
  for (int i = 0; i < rounds; ++i) {
    struct shared {
      one_shot_event done;
      int value = 0;
    };
    auto s = std::make_shared<shared>();
    std::thread setter([s, i] {
      s->value = i + 1;
      s->done.set();
    });
    s->done.wait();
    EXPECT_EQ(s->value, i + 1);
    setter.join();
  }
}

}  // namespace
}  // namespace dlock::core
