#include "net/backoff.hpp"

#include <gtest/gtest.h>

namespace dlock::net {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, FirstRetryIsImmediateThenDoublesToTheCap) {
  backoff b(milliseconds(50), milliseconds(400));
  // unit_random = 0.999... gives the top of each [d/2, d] range.
  EXPECT_EQ(b.next(0.9999).count(), 0);
  EXPECT_EQ(b.next(0.9999).count(), 49);  // [25, 50]
  EXPECT_EQ(b.next(0.9999).count(), 99);
  EXPECT_EQ(b.next(0.9999).count(), 199);
  EXPECT_EQ(b.next(0.9999).count(), 399);
  EXPECT_EQ(b.next(0.9999).count(), 399);  // capped
}

TEST(Backoff, JitterStaysInTheUpperHalf) {
  backoff b(milliseconds(100), milliseconds(100));
  (void)b.next(0.0);
  EXPECT_EQ(b.next(0.0).count(), 50);
  EXPECT_EQ(b.next(0.5).count(), 75);
  EXPECT_EQ(b.next(1.5).count(), 100);  // out-of-range randomness is clamped
}

TEST(Backoff, ResetMakesTheNextRetryImmediate) {
  backoff b(milliseconds(10), milliseconds(1000));
  for (int i = 0; i < 5; ++i)
    (void)b.next(0.5);
  EXPECT_EQ(b.attempts(), 5u);
  b.reset();
  EXPECT_EQ(b.next(0.5).count(), 0);
}

TEST(Backoff, ManyAttemptsNeitherOverflowNorExceedTheCap) {
  backoff b(milliseconds(1), milliseconds(2000));
  milliseconds last{};
  for (int i = 0; i < 1000; ++i)
    last = b.next(0.9999);
  EXPECT_LE(last.count(), 2000);
  EXPECT_GE(last.count(), 1000);
}

TEST(Backoff, ZeroOrInvertedBoundsAreRepaired) {
  backoff b(milliseconds(0), milliseconds(0));
  (void)b.next(0.5);
  EXPECT_GE(b.next(0.9999).count(), 0);
  EXPECT_LE(b.next(0.9999).count(), 1);
}

}  // namespace
}  // namespace dlock::net
