// dlock::count_down_latch on a real Redis Cluster (3 masters + 3 replicas): the count on its
// slot's master, names with braces (the channel's fallback form stays in the name's slot), waking
// by SPUBLISH on the channel's node, Redisson's countDown script with "spublish" waking dlock
// waiters, and 2 processes x 4 threads counting down.
#include <gtest/gtest.h>

#include <future>

#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "redis_process.hpp"
#include "support/cluster_fixture.hpp"
#include "support/lock_name_cases.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;
using tools::redis_cluster;

// Scheduling slack for timing assertions on a loaded 2-core CI machine: a waiter returns within
// this much after the count-down that opened its latch.
constexpr auto wake_bound = 500ms;
// How long a test watches a waiter that must not return (no event marks "did not happen").
constexpr auto no_wake_window = 50ms;

class ClusterLatch : public test::cluster_suite<ClusterLatch> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
  // Waits until a sharded subscription listens on `name`'s channel, on the channel's master.
  static bool listening(const std::string& name) {
    const std::string channel = locks::latch_channel(name);
    const std::uint16_t owner = cluster().master_for_key(channel);
    return eventually([&] {
      const auto r = cluster().call(owner, {"PUBSUB", "SHARDNUMSUB", channel});
      return r.elements.size() == 2 && r.elements[1].integer >= 1;
    });
  }
};

TEST_F(ClusterLatch, NamesWithBracesOpenTheirWaitersBySpublish) {
  client setter{cluster().seed_url()};
  client waiting{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 10; ++i)
    names.push_back(test::unique_key("n" + std::to_string(i)));
  for (const std::string& name : names) {
    count_down_latch latch = setter.get_count_down_latch(name);
    ASSERT_TRUE(latch.try_set_count(2)) << name;
    // The count is where the cluster puts the name.
    EXPECT_EQ(cluster().call(cluster().master_for_key(name), {"GET", name}).str, "2") << name;
    count_down_latch remote = waiting.get_count_down_latch(name);
    auto waiter = std::async(std::launch::async, [remote] {
      const bool opened = remote.wait_for(20s);
      return std::make_pair(opened, steady_clock::now());
    });
    ASSERT_TRUE(listening(name)) << name;
    EXPECT_EQ(latch.count_down(), 1) << name;
    EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout) << name;
    EXPECT_EQ(latch.count_down(), 0) << name;
    const auto opened_at = steady_clock::now();
    ASSERT_EQ(waiter.wait_for(wake_bound * 4), std::future_status::ready) << name;
    const auto [opened, at] = waiter.get();
    EXPECT_TRUE(opened) << name;
    EXPECT_LT(at - opened_at, wake_bound) << name;
    EXPECT_EQ(remote.count(), 0) << name;
  }
}

TEST_F(ClusterLatch, RedissonsCountDownWithSpublishWakesDlockWaiters) {
  client java{cluster().seed_url()};
  client c{replica_url()};
  const std::string name = test::unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  auto waiter = std::async(std::launch::async, [latch] { return latch.wait_for(20s); });
  ASSERT_TRUE(listening(name));
  // Redisson's countDown (RedissonCountDownLatch.java:253-260 at commit 66863978), with the
  // publish command a Redisson cluster client passes when the nodes support sharded pub/sub.
  const script redisson_count_down{R"(
    local left = redis.call('decr', KEYS[1])
    if left <= 0 then redis.call('del', KEYS[1]) end
    if left == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end)"};
  java.eval(redisson_count_down, {name, "redisson_countdownlatch__channel__{" + name + "}"},
            {"0", "spublish"});
  ASSERT_EQ(waiter.wait_for(wake_bound), std::future_status::ready);
  EXPECT_TRUE(waiter.get());
  // The waiter's sharded subscription goes with it.
  EXPECT_TRUE(eventually([&] { return latch.status().subscribers == 0; }));
}

TEST_F(ClusterLatch, TwoProcessesOfFourThreadsOpenTheLatch) {
  const std::string name = test::unique_key("latch");
  client c{cluster().seed_url()};
  count_down_latch latch = c.get_count_down_latch(name);
  constexpr int threads = 4;
  ASSERT_TRUE(latch.try_set_count(2 * threads));
  auto waiter = std::async(std::launch::async, [latch] {
    const bool opened = latch.wait_for(60s);
    return std::make_pair(opened, latch.count());
  });
  ASSERT_TRUE(listening(name));
  auto run = [&](const std::string& url) {
    return tools::run_command(
        {DLOCK_TEST_LATCH_WORKER, "count-down", url, name, std::to_string(threads)}, 60s);
  };
  auto a = std::async(std::launch::async, run, cluster().seed_url());
  auto b = std::async(std::launch::async, run, replica_url());
  for (auto* r : {&a, &b}) {
    const tools::command_result result = r->get();
    EXPECT_EQ(result.exit_code, 0) << result.err;
  }
  ASSERT_EQ(waiter.wait_for(wake_bound * 4), std::future_status::ready);
  const auto [opened, count_after] = waiter.get();
  EXPECT_TRUE(opened);
  EXPECT_EQ(count_after, 0);
}

}  // namespace
}  // namespace dlock
