// locks::line_uses: the client leaves a lock's line once, when its last acquisition of the lock
// ends, and only if one that gave up may have left a mark there.
#include "locks/engine/line_uses.hpp"

#include <gtest/gtest.h>

namespace dlock::locks {
namespace {

int reentrant_type = 0, writer_type = 0;  // their addresses tell the types apart
const line_uses::line_key a{&reentrant_type, "a"}, b{&reentrant_type, "b"};

TEST(LineUses, TheOnlyAcquisitionLeavesWhenItGivesUpWithAMark) {
  line_uses uses;
  uses.begin(a);
  EXPECT_TRUE(uses.end(a, /*held=*/false, /*marked=*/true));
  EXPECT_EQ(uses.lines(), 0u);
}

TEST(LineUses, NothingToLeaveWithoutAMarkOrWithTheLock) {
  line_uses uses;
  uses.begin(a);
  EXPECT_FALSE(uses.end(a, false, false));  // never attempted to wait
  uses.begin(a);
  EXPECT_FALSE(uses.end(a, true, true));  // took the lock: its attempt left the line itself
  EXPECT_EQ(uses.lines(), 0u);
}

// The race a hostile try found: X gives up while Y's first attempt is out (or Y waits); leaving
// then would take Y's place (or intent) with X's.
TEST(LineUses, AGiveUpWhileASiblingIsUnderWayWaitsForTheLastToEnd) {
  line_uses uses;
  uses.begin(a);  // X
  uses.begin(a);  // Y
  EXPECT_FALSE(uses.end(a, false, true)) << "X left the line under Y";
  EXPECT_EQ(uses.lines(), 1u);
  EXPECT_TRUE(uses.end(a, false, false)) << "X's mark was left behind";
}

TEST(LineUses, AMarkLeftByAGiveUpIsUndoneEvenWhenTheLastOneGetsTheLock) {
  line_uses uses;
  uses.begin(a);
  uses.begin(a);
  EXPECT_FALSE(uses.end(a, false, true));
  EXPECT_TRUE(uses.end(a, true, true));
  // A new round starts clean: nothing is owed any more.
  uses.begin(a);
  EXPECT_FALSE(uses.end(a, true, true));
}

TEST(LineUses, LinesAreApart) {
  line_uses uses;
  uses.begin(a);
  uses.begin(b);
  EXPECT_TRUE(uses.end(b, false, true));
  EXPECT_EQ(uses.lines(), 1u);
  EXPECT_FALSE(uses.end(a, true, false));
  EXPECT_EQ(uses.lines(), 0u);
}

// A read-write lock's reader and writer share the name, not the line: a writer that gives up
// leaves at once even while a reader of the same client and name is under way.
TEST(LineUses, TypesSharingANameAreApart) {
  line_uses uses;
  const line_uses::line_key read{&reentrant_type, "rw"}, write{&writer_type, "rw"};
  uses.begin(read);
  uses.begin(write);
  EXPECT_TRUE(uses.end(write, false, true));
  EXPECT_FALSE(uses.end(read, false, false));
}

// The departure runs once, at the last end.
TEST(LineUses, TheDepartureRunsOnceAtTheLastEnd) {
  line_uses uses;
  int left = 0;
  const auto leave = [&] { ++left; };
  uses.begin(a);
  uses.begin(a);
  EXPECT_FALSE(uses.end(a, false, true, leave));
  EXPECT_EQ(left, 0);
  EXPECT_TRUE(uses.end(a, false, true, leave));
  EXPECT_EQ(left, 1);
}

}  // namespace
}  // namespace dlock::locks
