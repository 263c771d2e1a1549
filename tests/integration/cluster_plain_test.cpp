// dlock::plain_lock on a real Redis Cluster (3 masters + 3 replicas): the key in its slot's
// master, names with braces, waking by SPUBLISH on the channel's node, the watchdog renewing
// plain leases in many slots, and 2 processes x 4 threads of non-atomic updates.
#include <gtest/gtest.h>

#include <future>

#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "support/child_process.hpp"
#include "support/cluster_fixture.hpp"
#include "support/line_listeners.hpp"
#include "support/lock_name_cases.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::child_process;
using test::eventually;
using tools::redis_cluster;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;
// A watchdog lease short enough that "kept for three more leases" is quick to see.
constexpr auto short_lease = 900ms;

class ClusterPlainLock : public test::cluster_suite<ClusterPlainLock> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
};

TEST_F(ClusterPlainLock, LocksInManySlotsAndNamesWithBraces) {
  client c{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 50; ++i)
    names.push_back(test::unique_key("n" + std::to_string(i)));
  for (const std::string& name : names) {
    plain_lock p = c.get_plain_lock(name);
    ASSERT_TRUE(p.try_lock()) << name;
    const std::uint64_t token = p.fencing_token();
    EXPECT_GT(token, 0u) << name;
    // The string is where the cluster puts the name, holding dlock's value.
    EXPECT_EQ(cluster().call(cluster().master_for_key(name), {"GET", name}).str,
              p.owner_id() + ":" + std::to_string(token))
        << name;
    p.unlock();
    EXPECT_FALSE(p.is_locked()) << name;
    ASSERT_TRUE(p.try_lock()) << name;
    EXPECT_GT(p.fencing_token(), token) << name;
    p.unlock();
  }
}

TEST_F(ClusterPlainLock, AWaiterIsWokenBySpublishAndTheWatchdogRenewsInManySlots) {
  client holder{[] {
    client_options o = client_options::from_url(cluster().seed_url());
    o.locks.watchdog_timeout = short_lease;
    return o;
  }()};
  client waiter{replica_url()};
  // Holds in many slots, renewed in per-shard batches.
  std::vector<plain_lock> held;
  for (int i = 0; i < 30; ++i) {
    held.push_back(holder.get_plain_lock(test::unique_key("h" + std::to_string(i))));
    held.back().lock();
  }
  const std::string name = held.front().name();
  plain_lock wanted = waiter.get_plain_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) wanted.unlock();
    return std::make_pair(ok, at);
  });
  // The waiter listens on its own call channel, in the name's slot.
  const std::uint16_t owner = cluster().master_for_key(name);
  ASSERT_TRUE(eventually([&] {
    return test::line_listeners([&](const auto& args) { return cluster().call(owner, args); }, name,
                                true) == 1;
  })) << "no sharded subscription on the slot's master";
  // Three leases later every hold is still there (renewed), and the waiter still waits.
  ASSERT_EQ(got.wait_for(short_lease * 3), std::future_status::timeout);
  for (plain_lock& p : held) {
    EXPECT_FALSE(p.stop_token().stop_requested()) << p.name();
    EXPECT_EQ(cluster().call(cluster().master_for_key(p.name()), {"GET", p.name()}).str,
              p.owner_id() + ":" + std::to_string(p.fencing_token()))
        << p.name();
  }
  EXPECT_GE(holder.lock_metrics().leases_renewed, 60u);
  const auto released = steady_clock::now();
  held.front().unlock();
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  // Woken by the message, not by the lease running out or a re-check.
  EXPECT_LT(at - released, timing_slack);
  for (plain_lock& p : held)
    p.unlock();
}

TEST_F(ClusterPlainLock, TwoProcessesOfFourThreadsKeepANonAtomicCountExact) {
  const std::string name = test::unique_key("count"), counter = test::unique_key("counter");
  constexpr int threads = 4, iterations = 25;
  child_process a({DLOCK_TEST_LOCK_WORKER, "plain-count", cluster().seed_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  child_process b({DLOCK_TEST_LOCK_WORKER, "plain-count", replica_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  EXPECT_EQ(a.read_line(120s), "tokens_not_increasing 0");
  EXPECT_EQ(b.read_line(120s), "tokens_not_increasing 0");
  client c{cluster().seed_url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations));
}

}  // namespace
}  // namespace dlock
