// dlock on a Redis Cluster whose nodes serve TLS and talk TLS to each other (tls-cluster,
// tls-replication; tools/redis_process/redis_cluster.hpp): one rediss:// seed reaches every master
// over TLS, locks in many slots, a sharded wake-up across clients, a MOVED followed to a TLS
// port, a wrong CA. The suite's tests share one cluster. Named Cluster* so that
// `--gtest_filter=Cluster*` (and the CTest label "cluster") select it.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/client_list.hpp"
#include "support/cluster_fixture.hpp"
#include "support/line_listeners.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;

class ClusterTls : public test::cluster_suite<ClusterTls> {
 public:
  static tools::redis_cluster_options cluster_options() {
    tools::redis_cluster_options o;
    o.tls = true;
    return o;
  }

 protected:
  // A client whose only seed is `port`'s TLS port, verifying the nodes with the cluster's CA.
  static client_options tls_options(std::uint16_t port) {
    client_options o = client_options::from_url(cluster().tls_url(port));
    o.tls.ca_file = cluster().ca_file();
    return o;
  }
  // A replica: a seed that serves no slot, so that every request is routed elsewhere.
  static std::uint16_t a_replica() {
    return cluster().replicas_of(cluster().masters().front()).front();
  }
  // The ids of the connections to `port`'s TLS port, from CLIENT LIST on its plain port.
  static std::set<std::string> tls_clients_of(std::uint16_t port) {
    return test::client_ids_on_port(cluster().call(port, {"CLIENT", "LIST"}).str,
                                    cluster().tls_port(port));
  }
};

TEST_F(ClusterTls, OneRedissSeedReachesEveryMasterOverTls) {
  ASSERT_TRUE(client_options::from_url(cluster().tls_url(a_replica())).tls.enabled);
  // Read before the client exists: it connects to every master as soon as it has the map.
  std::vector<std::set<std::string>> before;
  for (const std::uint16_t master : cluster().masters())
    before.push_back(tls_clients_of(master));
  client c{tls_options(a_replica())};
  for (int i = 0; i < 100; ++i) {
    const std::string key = test::unique_key("k" + std::to_string(i));
    c.command({"SET", key, std::to_string(i)});
    EXPECT_EQ(cluster().call(cluster().master_for_key(key), {"GET", key}).str, std::to_string(i));
  }
  EXPECT_EQ(c.routing_metrics().deployment, deployment_kind::cluster);
  // The map named each master's TLS port (the seed connection is the only one that could have
  // taken a plain port, and it is TLS too): no request met a MOVED.
  EXPECT_EQ(c.routing_metrics().moved, 0u);
  // Every master has a new connection on its TLS port: this client's.
  const auto masters = cluster().masters();
  for (std::size_t i = 0; i < masters.size(); ++i) {
    EXPECT_TRUE(test::has_new_id(before[i], tls_clients_of(masters[i]))) << "master " << masters[i];
  }
  // CLUSTER SLOTS, the map of servers before Redis 7 (parsed without a TLS flag), names the TLS
  // ports to a TLS client too.
  const reply slots = c.command({"CLUSTER", "SLOTS"});
  ASSERT_FALSE(slots.elements.empty());
  for (const reply& range : slots.elements) {
    ASSERT_GE(range.elements.size(), 3u);
    const auto port = static_cast<std::uint16_t>(range.elements[2].elements.at(1).integer);
    EXPECT_NE(std::find_if(masters.begin(), masters.end(),
                           [&](std::uint16_t m) { return cluster().tls_port(m) == port; }),
              masters.end())
        << "CLUSTER SLOTS over TLS names port " << port;
  }
}

TEST_F(ClusterTls, LocksInManySlotsAreTakenAndReleased) {
  client c{tls_options(cluster().ports().front())};
  for (int i = 0; i < 60; ++i) {
    const std::string name = test::unique_key("n" + std::to_string(i));
    mutex m = c.get_lock(name);
    ASSERT_TRUE(m.try_lock()) << name;
    const std::uint64_t token = m.fencing_token();
    EXPECT_GT(token, 0u) << name;
    EXPECT_EQ(cluster().call(cluster().master_for_key(name), {"EXISTS", name}).integer, 1) << name;
    EXPECT_EQ(m.unlock_checked(), std::error_code{}) << name;
    EXPECT_FALSE(m.is_locked()) << name;
  }
}

TEST_F(ClusterTls, AWaiterIsWokenBySpublishAcrossClients) {
  const std::string name = test::unique_key("wake");
  client_options holder_options = tls_options(cluster().ports().front());
  client_options waiter_options = tls_options(a_replica());
  holder_options.locks.watchdog_timeout = waiter_options.locks.watchdog_timeout = 30s;
  client holder{holder_options};
  client waiter{waiter_options};
  mutex held = holder.get_lock(name);
  held.lock();
  mutex wanted = waiter.get_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) wanted.unlock();
    return std::make_pair(ok, at);
  });
  // The waiter's SSUBSCRIBE of its call channel reached the slot's master (over TLS: the client
  // has no other way).
  const std::uint16_t owner = cluster().master_for_key(name);
  ASSERT_TRUE(eventually([&] {
    return test::line_listeners([&](const auto& args) { return cluster().call(owner, args); }, name,
                                true) == 1;
  })) << "no sharded subscription on the slot's master";
  const auto released = steady_clock::now();
  held.unlock();
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  // Woken by the message, not by the 30 s lease running out.
  EXPECT_LT(at - released, timing_slack);
}

// A redirection to a TLS client names the new owner's TLS port.
TEST_F(ClusterTls, AMovedSlotIsFollowedToTheNewOwnersTlsPort) {
  client c{tls_options(cluster().ports().front())};
  const std::string name = test::unique_key("moving");
  mutex m = c.get_lock(name);
  m.lock();
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t master : cluster().masters())
    if (master != from) to = master;
  cluster().migrate_slot(slot, from, to);  // MIGRATE over TLS, to the TLS port
  const std::uint64_t moved_before = c.routing_metrics().moved;
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 1);  // the lock moved with its slot
  EXPECT_GT(c.routing_metrics().moved, moved_before) << "no MOVED was followed";
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  EXPECT_TRUE(eventually([&] { return cluster().call(to, {"EXISTS", name}).integer == 0; }));
  cluster().migrate_slot(slot, to, from);  // back, for the other tests
}

TEST_F(ClusterTls, AnotherCaFailsWithTlsFailed) {
  // A server with a CA of its own: its CA does not sign the cluster's certificates.
  tools::redis_process_options other;
  other.tls = true;
  test::redis_server stranger{other};
  for (const std::string& ca : {stranger.ca_file(), std::string()}) {  // "": system CAs only
    client_options o = tls_options(cluster().ports().front());
    o.tls.ca_file = ca;
    try {
      client c{o};
      c.command({"PING"});
      ADD_FAILURE() << "served over TLS without a trusted certificate (ca " << ca << ")";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::tls_failed) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlock
