// dlock::plain_lock through Redis Sentinel (1 master + 2 replicas + 3 sentinels): the key on the
// master the sentinels name, 2 processes x 4 threads of non-atomic updates, and a watchdog hold
// kept across a graceful failover. Suites are named Sentinel* (CTest label "sentinel").
#include <gtest/gtest.h>

#include <thread>

#include "dlock/dlock.hpp"
#include "redis_sentinel_group.hpp"
#include "support/child_process.hpp"
#include "support/redis_fixture.hpp"
#include "support/sentinel_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::child_process;

// A watchdog lease short enough that "kept for two more leases" is quick to see.
constexpr auto short_lease = 3s;

class SentinelPlainLock : public test::sentinel_suite<SentinelPlainLock> {};

TEST_F(SentinelPlainLock, TheKeyIsOnTheMasterAndTwoProcessesKeepACountExact) {
  client c{group().sentinel_url()};
  const std::string name = test::unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  ASSERT_TRUE(p.try_lock());
  EXPECT_EQ(group().cli(group().master_port(), {"GET", name}),
            p.owner_id() + ":" + std::to_string(p.fencing_token()));
  p.unlock();

  const std::string counted = test::unique_key("count"), counter = test::unique_key("counter");
  constexpr int threads = 4, iterations = 25;
  child_process a({DLOCK_TEST_LOCK_WORKER, "plain-count", group().sentinel_url(), counted, counter,
                   std::to_string(threads), std::to_string(iterations)});
  child_process b({DLOCK_TEST_LOCK_WORKER, "plain-count", group().sentinel_url(), counted, counter,
                   std::to_string(threads), std::to_string(iterations)});
  EXPECT_EQ(a.read_line(120s), "tokens_not_increasing 0");
  EXPECT_EQ(b.read_line(120s), "tokens_not_increasing 0");
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations));
}

// Failovers change the group: this test has its own.
TEST(SentinelPlainFailover, AGracefulFailoverKeepsAPlainWatchdogHold) {
  test::redis_test_sentinel_group g;
  client_options o = client_options::from_url(g.sentinel_url());
  o.locks.watchdog_timeout = short_lease;
  client c{o};
  const std::string name = test::unique_key("g");
  plain_lock p = c.get_plain_lock(name);
  p.lock();
  const std::string value = p.owner_id() + ":" + std::to_string(p.fencing_token());
  const std::uint16_t old_master = g.master_port();
  const std::uint16_t new_master = g.failover();
  EXPECT_NE(new_master, old_master);
  std::this_thread::sleep_for(short_lease * 2);  // two more leases must pass: the time is the test
  EXPECT_TRUE(p.is_held_by_current_thread());
  EXPECT_FALSE(p.stop_token().stop_requested());
  EXPECT_EQ(g.cli(new_master, {"GET", name}), value);
  EXPECT_EQ(p.unlock_checked(), std::error_code{});
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);  // the release ran before this command
}

}  // namespace
}  // namespace dlock
