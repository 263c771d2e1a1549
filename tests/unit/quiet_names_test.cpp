// quiet_names: which names' latest release reached nobody, lately (an injected clock).
#include "locks/engine/quiet_names.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dlock::locks {
namespace {

using namespace std::chrono_literals;
using clock = quiet_names::clock;

const clock::time_point t0 = clock::time_point{} + 1h;

TEST(QuietNames, ANameNeverReleasedIsNotQuiet) {
  const quiet_names q{2ms};
  EXPECT_FALSE(q.is_quiet("a", t0));
}

TEST(QuietNames, AReleaseThatReachedNobodyVouchesForItsNameForAWhile) {
  quiet_names q{2ms};
  q.record("a", false, t0);
  EXPECT_TRUE(q.is_quiet("a", t0));
  EXPECT_TRUE(q.is_quiet("a", t0 + 1999us));
  EXPECT_FALSE(q.is_quiet("a", t0 + 2ms)) << "too old to say that nobody waits now";
  EXPECT_FALSE(q.is_quiet("b", t0)) << "another name";
  q.record("a", false, t0 + 3ms);  // the next quiet release renews it
  EXPECT_TRUE(q.is_quiet("a", t0 + 4ms));
}

TEST(QuietNames, AReleaseThatReachedAListenerEndsTheQuiet) {
  quiet_names q{2ms};
  q.record("a", false, t0);
  q.record("a", true, t0 + 100us);  // a client in another process waited for it
  EXPECT_FALSE(q.is_quiet("a", t0 + 200us));
  q.record("a", false, t0 + 300us);  // it left; the holder is alone again
  EXPECT_TRUE(q.is_quiet("a", t0 + 400us));
}

TEST(QuietNames, ManyNamesAreForgottenNotKeptForever) {
  quiet_names q{1h};
  q.record("first", false, t0);
  for (std::size_t i = 0; i < quiet_names::max_names; ++i)
    q.record("name " + std::to_string(i), false, t0);
  // The record filled up: it started over, so the oldest name reads as not quiet (its next
  // release goes out at once, the safe side) and the newest as quiet.
  EXPECT_FALSE(q.is_quiet("first", t0));
  EXPECT_TRUE(q.is_quiet("name " + std::to_string(quiet_names::max_names - 1), t0));
}

}  // namespace
}  // namespace dlock::locks
