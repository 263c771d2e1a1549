// dlock::count_down_latch through Redis Sentinel (1 master + 2 replicas + 3 sentinels): the count
// on the master the sentinels name, and a waiter that keeps waiting across a graceful failover
// and wakes on the new master's zero (its subscription follows the master and re-reads). Suites
// are named Sentinel* (CTest label "sentinel").
#include <gtest/gtest.h>

#include <future>

#include "dlock/dlock.hpp"
#include "redis_sentinel_group.hpp"
#include "support/redis_fixture.hpp"
#include "support/sentinel_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

// Scheduling slack for timing assertions on a loaded 2-core CI machine: a waiter returns within
// this much after the count-down that opened its latch.
constexpr auto wake_bound = 500ms;

// Failovers change the group: this test has its own.
TEST(SentinelLatch, AWaiterKeepsWaitingAcrossAFailoverAndWakesOnTheNewMastersZero) {
  test::redis_test_sentinel_group g;
  client c{g.sentinel_url()};
  const std::string name = test::unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(2));
  EXPECT_EQ(g.cli(g.master_port(), {"GET", name}), "2");
  auto waiter = std::async(std::launch::async, [latch] {
    const bool opened = latch.wait_for(60s);
    return std::make_tuple(opened, steady_clock::now(), latch.count());
  });
  ASSERT_TRUE(test::eventually([&] { return latch.status().subscribers == 1; }));
  latch.count_down();

  const std::uint16_t old_master = g.master_port();
  const std::uint16_t new_master = g.failover();
  EXPECT_NE(new_master, old_master);
  // The count survived on the new master, and the waiter still waits.
  EXPECT_EQ(latch.count(), 1);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout);
  // Once its subscription is on the new master, the zero published there wakes it.
  ASSERT_TRUE(test::eventually([&] { return latch.status().subscribers == 1; }, 20s));
  EXPECT_EQ(latch.count_down(), 0);
  const auto opened_at = steady_clock::now();
  ASSERT_EQ(waiter.wait_for(wake_bound * 4), std::future_status::ready);
  const auto [opened, at, count_after] = waiter.get();
  EXPECT_TRUE(opened);
  EXPECT_EQ(count_after, 0);
  EXPECT_LT(at - opened_at, wake_bound);
}

}  // namespace
}  // namespace dlock
