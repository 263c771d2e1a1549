// dlock::shared_mutex on a real Redis Cluster (3 masters + 3 replicas): every key of a name (the
// hash, the per-hold lease keys, the fencing counter, the writer intents) in its slot, names with
// braces, waking by SPUBLISH, and 2 processes x 4 threads of readers and writers.
#include <gtest/gtest.h>

#include <future>

#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "support/child_process.hpp"
#include "support/cluster_fixture.hpp"
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

class ClusterReadWriteLock : public test::cluster_suite<ClusterReadWriteLock> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
};

TEST_F(ClusterReadWriteLock, ReadAndWriteHoldsInManySlotsAndNamesWithBraces) {
  client c{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 30; ++i)
    names.push_back(test::unique_key("n" + std::to_string(i)));
  for (const std::string& name : names) {
    shared_mutex rw = c.get_read_write_lock(name);
    const std::uint16_t node = cluster().master_for_key(name);
    ASSERT_TRUE(rw.try_lock_shared()) << name;
    ASSERT_TRUE(rw.try_lock_shared()) << name;
    const std::string prefix = locks::rwlock_timeout_prefix(name, rw.owner_id());
    EXPECT_EQ(cluster().master_for_key(prefix + ":2"), node) << name;
    EXPECT_EQ(cluster().call(node, {"EXISTS", prefix + ":1", prefix + ":2"}).integer, 2) << name;
    rw.unlock_shared();
    rw.unlock_shared();
    EXPECT_FALSE(rw.is_locked()) << name;
    ASSERT_TRUE(rw.try_lock()) << name;
    EXPECT_GT(rw.fencing_token(), 0u) << name;
    ASSERT_TRUE(rw.try_lock_shared()) << name;  // downgrade
    rw.unlock();  // sent without waiting: read from another connection once it has landed
    EXPECT_TRUE(eventually([&] {
      return cluster().call(node, {"HGET", name, "mode"}).str == "read";
    })) << name
        << ": the downgrade did not leave a read hold";
    rw.unlock_shared();
    EXPECT_FALSE(rw.is_locked()) << name;
  }
}

TEST_F(ClusterReadWriteLock, AWaitingWriterIsWokenBySpublishFromTheLastReader) {
  client reader_client{cluster().seed_url()}, writer_client{replica_url()};
  const std::string name = test::unique_key("rw");
  shared_mutex reader = reader_client.get_read_write_lock(name);
  shared_mutex writer = writer_client.get_read_write_lock(name);
  reader.lock_shared();
  auto got = std::async(std::launch::async, [&] {
    const bool ok = writer.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) writer.unlock();
    return std::make_pair(ok, at);
  });
  const std::string channel = locks::rwlock_channel(name);
  const std::uint16_t owner = cluster().master_for_key(channel);
  ASSERT_TRUE(eventually([&] {
    const auto r = cluster().call(owner, {"PUBSUB", "SHARDNUMSUB", channel});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  })) << "no sharded subscription on the channel's master";
  const auto released = steady_clock::now();
  reader.unlock_shared();
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  EXPECT_LT(at - released, timing_slack);  // the message, not the 30 s lease
}

TEST_F(ClusterReadWriteLock, TwoProcessesOfFourThreadsExcludeWritersAndShareReaders) {
  const std::string name = test::unique_key("rw"), counter = test::unique_key("counter");
  constexpr int threads = 4, iterations = 21;
  child_process a({DLOCK_TEST_LOCK_WORKER, "rw-count", cluster().seed_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  child_process b({DLOCK_TEST_LOCK_WORKER, "rw-count", replica_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  for (child_process* p : {&a, &b}) {
    const std::string line = p->read_line(120s);
    int violations = -1, max_readers = -1, not_increasing = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "violations %d max_readers %d tokens_not_increasing %d",
                          &violations, &max_readers, &not_increasing),
              3)
        << line;
    EXPECT_EQ(violations, 0);
    EXPECT_EQ(not_increasing, 0);
  }
  client c{cluster().seed_url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations / 3));
}

}  // namespace
}  // namespace dlock
