// dlock through Redis Sentinel over TLS (rediss-sentinel://): the master, the replicas and the
// sentinels serve TLS and talk TLS to each other (tools/redis_process/redis_sentinel_group.hpp,
// option tls), and the client is given only the sentinels' TLS ports. The suite's tests share one
// group; the failover comes last. Named Sentinel* (CTest label "sentinel").
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "dlock/dlock.hpp"
#include "support/client_list.hpp"
#include "support/redis_fixture.hpp"
#include "support/sentinel_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using tools::resp_value;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;
// A watchdog lease short enough that "kept for two more leases" is quick to see.
constexpr auto short_lease = 3s;

class SentinelTls : public test::sentinel_suite<SentinelTls> {
 public:
  static tools::redis_sentinel_group_options sentinel_options() {
    tools::redis_sentinel_group_options o;
    o.tls = true;
    return o;
  }

 protected:
  // TLS to the sentinels and the data nodes, verified with the group's CA.
  static client_options tls_options(milliseconds lease = 30s) {
    client_options o = client_options::from_url(group().sentinel_url());
    o.tls.ca_file = group().ca_file();
    o.locks.watchdog_timeout = lease;
    return o;
  }
  // The ids of the connections to `port`'s TLS port, from CLIENT LIST on its plain port.
  static std::set<std::string> tls_clients_of(std::uint16_t port) {
    return test::client_ids_on_port(group().call(port, {"CLIENT", "LIST"}).str,
                                    group().tls_port(port));
  }
};

TEST_F(SentinelTls, TheMasterIsResolvedAndLockedOverTls) {
  const std::string url = group().sentinel_url();
  ASSERT_EQ(url.rfind("rediss-sentinel://", 0), 0u) << url;
  ASSERT_NE(url.find(std::to_string(group().tls_port(group().sentinel_ports().front()))),
            std::string::npos)
      << url;
  const std::uint16_t master = group().master_port();
  const std::set<std::string> before = tls_clients_of(master);
  client c{tls_options()};
  const std::string name = test::unique_key("m");
  mutex m = c.get_lock(name);
  ASSERT_TRUE(m.try_lock());
  EXPECT_GT(m.fencing_token(), 0u);
  EXPECT_EQ(group().call(master, {"EXISTS", name}).integer, 1);
  // The client reached the master on its TLS port: the sentinels named that port.
  EXPECT_TRUE(test::has_new_id(before, tls_clients_of(master)));
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  // The sentinels announce their TLS ports to each other (tls-replication in their config).
  const std::uint16_t first = group().sentinel_ports().front();
  const resp_value others = group().call(first, {"SENTINEL", "SENTINELS", group().master_name()});
  ASSERT_EQ(others.elements.size(), group().sentinel_ports().size() - 1) << others.to_string();
  for (const resp_value& other : others.elements) {
    const resp_value* port = other.field("port");
    ASSERT_NE(port, nullptr);
    bool is_a_tls_port = false;
    for (const std::uint16_t sentinel : group().sentinel_ports())
      is_a_tls_port = is_a_tls_port || port->str == std::to_string(group().tls_port(sentinel));
    EXPECT_TRUE(is_a_tls_port) << "sentinel " << first << " knows another by port " << port->str;
  }
}

TEST_F(SentinelTls, AnotherCaFailsWithTlsFailed) {
  tools::redis_process_options other;
  other.tls = true;
  test::redis_server stranger{other};  // its CA signed none of the group's certificates
  client_options o = tls_options();
  o.tls.ca_file = stranger.ca_file();
  o.connect_timeout = 1s;
  client c{o};
  try {
    c.command({"PING"});
    ADD_FAILURE() << "served over TLS without a trusted certificate";
  } catch (const error& e) {
    // No sentinel could be asked, each for the same reason: the code a single server gives.
    EXPECT_EQ(e.code(), errc::tls_failed) << e.what();
    EXPECT_NE(std::string(e.what()).find("certificate verify failed"), std::string::npos)
        << e.what();
  }
}

// Sentinel's graceful failover over TLS: the watchdog keeps the hold on the promoted master, and
// a waiter of another client is woken by the unlock published there.
TEST_F(SentinelTls, AGracefulFailoverKeepsAWatchdogHoldAndWakesAWaiter) {
  client holder{tls_options(short_lease)};
  client waiter{tls_options()};
  const std::string name = test::unique_key("g");
  mutex m = holder.get_lock(name);
  m.lock();
  const std::uint64_t token = m.fencing_token();
  mutex wanted = waiter.get_lock(name);
  steady_clock::time_point released{};
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(60s);
    const auto at = steady_clock::now();
    const std::uint64_t t = ok ? wanted.fencing_token() : 0;
    if (ok) wanted.unlock();
    return std::make_tuple(ok, at, t);
  });
  ASSERT_TRUE(test::eventually([&] { return m.status().subscribers == 1; }))
      << "the waiter did not subscribe";
  const std::uint16_t old_master = group().master_port();
  const std::uint16_t new_master = group().failover();
  EXPECT_NE(new_master, old_master);
  std::this_thread::sleep_for(2 * short_lease);  // two more leases must pass: the time is the test
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_FALSE(m.stop_token().stop_requested());
  EXPECT_EQ(group().call(new_master, {"EXISTS", name}).integer, 1);
  EXPECT_FALSE(tls_clients_of(new_master).empty());
  EXPECT_EQ(got.wait_for(0s), std::future_status::timeout) << "the waiter got a held lock";
  released = steady_clock::now();
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  const auto [ok, at, waiter_token] = got.get();
  ASSERT_TRUE(ok) << "the waiter never got the lock on the new master";
  EXPECT_LT(at - released, timing_slack) << "not woken by the unlock message";
  EXPECT_GT(waiter_token, token);
  EXPECT_GT(holder.routing_metrics().map_refreshes, 0u) << "no +switch-master was heard";
}

}  // namespace
}  // namespace dlock
