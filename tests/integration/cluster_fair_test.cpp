// dlock::fair_mutex on a real Redis Cluster (3 masters + 3 replicas): every key of a name (the
// hash, the waiting list, the deadlines, the fencing counter, each waiter's channel) in its slot,
// names with braces, the head woken by SPUBLISH on its own channel, and order across clients.
#include <gtest/gtest.h>

#include <future>

#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "support/cluster_fixture.hpp"
#include "support/lock_name_cases.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;
using tools::redis_cluster;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;

class ClusterFairLock : public test::cluster_suite<ClusterFairLock> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
};

TEST_F(ClusterFairLock, HoldsAndLinesInManySlotsAndNamesWithBraces) {
  client c{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 20; ++i)
    names.push_back(test::unique_key("n" + std::to_string(i)));
  for (const std::string& name : names) {
    fair_mutex f = c.get_fair_lock(name);
    const std::uint16_t node = cluster().master_for_key(name);
    ASSERT_TRUE(f.try_lock()) << name;
    EXPECT_GT(f.fencing_token(), 0u) << name;
    // A waiter that gives up: it joined the line (in the name's slot) and left it.
    EXPECT_FALSE(std::async(std::launch::async, [&] { return f.try_lock_for(50ms); }).get())
        << name;
    EXPECT_EQ(cluster().master_for_key(locks::fair_queue_key(name)), node) << name;
    EXPECT_EQ(cluster().master_for_key(locks::fair_timeout_key(name)), node) << name;
    f.unlock();
    EXPECT_FALSE(f.is_locked()) << name;
    EXPECT_TRUE(eventually([&] {
      return cluster().call(node, {"EXISTS", locks::fair_queue_key(name)}).integer == 0;
    })) << name;
  }
}

TEST_F(ClusterFairLock, TheHeadIsWokenBySpublishOnItsOwnChannel) {
  client holder_client{cluster().seed_url()}, waiter_client{replica_url()};
  for (const std::string& name : {test::unique_key("f"), "{" + test::unique_key("t") + "}:x"}) {
    fair_mutex holder = holder_client.get_fair_lock(name);
    fair_mutex waiter = waiter_client.get_fair_lock(name);
    holder.lock();
    std::promise<std::string> field;
    auto got = std::async(std::launch::async, [&] {
      field.set_value(waiter.owner_id());
      const bool ok = waiter.try_lock_for(20s);
      const auto at = steady_clock::now();
      if (ok) waiter.unlock();
      return std::make_pair(ok, at);
    });
    const std::string channel = locks::unlock_channel(name) + ":" + field.get_future().get();
    const std::uint16_t owner = cluster().master_for_key(channel);
    EXPECT_EQ(owner, cluster().master_for_key(name));
    ASSERT_TRUE(eventually([&] {
      const auto r = cluster().call(owner, {"PUBSUB", "SHARDNUMSUB", channel});
      return r.elements.size() == 2 && r.elements[1].integer == 1;
    })) << "no sharded subscription on the waiter's channel";
    const auto released = steady_clock::now();
    holder.unlock();
    const auto [ok, at] = got.get();
    ASSERT_TRUE(ok) << name;
    EXPECT_LT(at - released, timing_slack) << name;  // the message, not the 30 s lease
  }
}

TEST_F(ClusterFairLock, WaitersOfTwoClientsAreServedInArrivalOrder) {
  client a{cluster().seed_url()}, b{replica_url()};
  const std::string name = test::unique_key("f");
  fair_mutex holder = a.get_fair_lock(name);
  holder.lock();
  std::vector<std::future<lock_lease>> leases;
  for (int i = 0; i < 6; ++i) {
    leases.push_back((i % 2 == 0 ? a : b).get_fair_lock(name).async_lock());
    ASSERT_TRUE(eventually([&] { return holder.status().queue_length == std::size_t(i) + 1; }));
  }
  const lock_status s = holder.status();
  holder.unlock();
  for (std::size_t i = 0; i < leases.size(); ++i) {
    lock_lease l = leases[i].get();
    ASSERT_TRUE(l);
    EXPECT_EQ(l.owner_id(), s.queue.at(i).owner);
    EXPECT_FALSE(l.release());
  }
}

}  // namespace
}  // namespace dlock
