// dlock::semaphore on a real Redis Cluster (3 masters + 3 replicas): the count and the holders'
// zset on the name's master for names with braces, waking by SPUBLISH on the channel's node, and
// the watchdog renewing permits in many slots.
#include <gtest/gtest.h>

#include <future>
#include <thread>

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
// route::retry_delay_cap (src/route/router.hpp, which brings Asio with it): the router's longest
// delay between its own tries of a refused request.
constexpr auto router_retry_cap = 200ms;
// A watchdog lease short enough that "kept for three more leases" is quick to see.
constexpr auto short_lease = 900ms;

class ClusterSemaphore : public test::cluster_suite<ClusterSemaphore> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
};

TEST_F(ClusterSemaphore, PermitsInManySlotsAndNamesWithBraces) {
  client c{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 20; ++i)
    names.push_back(test::unique_key("s" + std::to_string(i)));
  for (const std::string& name : names) {
    semaphore s = c.get_semaphore(name, 2);
    permit p = s.acquire_permit();
    ASSERT_TRUE(p) << name;
    const std::uint16_t master = cluster().master_for_key(name);
    EXPECT_EQ(cluster().call(master, {"GET", name}).str, "1") << name;
    EXPECT_EQ(cluster().call(master, {"ZCARD", locks::suffix_key(name, "timeout")}).integer, 1)
        << name;
    EXPECT_EQ(p.release(), std::error_code{}) << name;
    EXPECT_EQ(s.available_permits(), 2) << name;
  }
}

TEST_F(ClusterSemaphore, AWaiterIsWokenBySpublishAndTheWatchdogRenewsInManySlots) {
  client holder{[] {
    client_options o = client_options::from_url(cluster().seed_url());
    o.locks.watchdog_timeout = short_lease;
    return o;
  }()};
  client waiter{replica_url()};
  std::vector<permit> held;
  for (int i = 0; i < 20; ++i) {
    held.push_back(
        holder.get_semaphore(test::unique_key("h" + std::to_string(i)), 1).acquire_permit());
  }
  const std::string name = held.front().name();
  semaphore wanted = waiter.get_semaphore(name, 1);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_acquire_for(20s);
    const auto at = steady_clock::now();
    if (ok) wanted.release();
    return std::make_pair(ok, at);
  });
  const std::string channel = locks::semaphore_channel(name);
  const std::uint16_t owner = cluster().master_for_key(channel);
  ASSERT_TRUE(eventually([&] {
    const auto r = cluster().call(owner, {"PUBSUB", "SHARDNUMSUB", channel});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  })) << "no sharded subscription on the channel's master";
  // Three leases later every permit is still held (renewed), and the waiter still waits.
  ASSERT_EQ(got.wait_for(short_lease * 3), std::future_status::timeout);
  for (permit& p : held)
    EXPECT_FALSE(p.lost()) << p.name();
  EXPECT_GE(holder.lock_metrics().leases_renewed, 40u);
  const auto released = steady_clock::now();
  EXPECT_EQ(held.front().release(), std::error_code{});
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  // Woken by the message, not by the lease running out.
  EXPECT_LT(at - released, timing_slack);
}

// A release refused while its slot migrates (ASK, then TRYAGAIN) is sent again by the router on
// its own timer, every 200 ms at most. Once the migration ends, the thread's next attempt may go
// out before that re-send. A semaphore permit's release carries no token (the thread's permit id
// is the same for each of its acquisitions), so the re-send must not follow that attempt: it
// would take away the permit the thread holds, with nobody told until the next renewal.
TEST_F(ClusterSemaphore, TheRoutersReSendOfAReleaseDoesNotFollowTheThreadsNextAttempt) {
  const std::string name = test::unique_key("resend");
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t m : cluster().masters())
    if (m != from) to = m;
  client_options patient = client_options::from_url(cluster().seed_url());
  patient.request_timeout = 10s;  // the release's router tries outlast the test
  client c{patient};
  semaphore s = c.get_semaphore(name, 1);
  ASSERT_TRUE(s.try_acquire());
  const auto retries = [&] { return c.routing_metrics().retries; };
  const std::uint64_t before = retries();
  cluster().begin_slot_migration(slot, from, to);
  s.release();
  // From the fifth retry on the router waits its longest delay: seen just after one, the next
  // re-send is most of that delay away.
  ASSERT_TRUE(eventually([&] { return retries() >= before + 5; })) << "the release was not retried";
  const std::uint64_t seen = retries();
  ASSERT_TRUE(eventually([&] { return retries() > seen; }));
  for (const std::uint16_t port : {to, from})  // the slot stays on `from`
    (void)cluster().call(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"});
  ASSERT_TRUE(s.try_acquire()) << "the thread's next attempt did not get the permit";
  // Had the release been sent again, it would have run by now.
  std::this_thread::sleep_for(router_retry_cap + timing_slack);
  const std::uint16_t master = cluster().master_for_key(name);
  EXPECT_EQ(cluster().call(master, {"ZCARD", locks::suffix_key(name, "timeout")}).integer, 1)
      << "the router sent the release again after the thread's next attempt: its permit is gone";
  EXPECT_EQ(s.available_permits(), 0);
  EXPECT_TRUE(s.is_held_by_current_thread());
  s.release();
  EXPECT_TRUE(eventually([&] { return s.available_permits() == 1; }));
}

}  // namespace
}  // namespace dlock
