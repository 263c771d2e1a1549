// The Sentinel fixture (tools/redis_process/redis_sentinel_group.hpp) against real servers: the
// group comes up as configured, the sentinels name the master, follow a kill -9 and a SENTINEL
// FAILOVER, turn a restarted former master into a replica, and a paused replica makes WAIT come
// back short. These tests talk to the nodes directly (resp_call, redis-cli), not through
// dlock::client, so they hold whatever dlock's Sentinel support does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/sentinel_fixture.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using resp_kind = resp_value::kind;

// A kill -9 of the master is noticed after down_after (1 s), agreed on within an ask period,
// a leader is elected, a replica promoted and the other replica reconfigured: about 2 to 4 s.
// A split vote makes the sentinels try again after 2 x failover_timeout (6 s); this limit
// allows for one.
constexpr auto promotion_limit = 15s;

std::string info_field(const std::string& text, const std::string& field) {
  const std::size_t at = text.find("\n" + field + ":");
  const std::size_t begin = at == std::string::npos ? text.find(field + ":") : at + 1;
  if (begin == std::string::npos || (at == std::string::npos && begin != 0)) return {};
  const std::size_t value = begin + field.size() + 1;
  return text.substr(value, text.find_first_of("\r\n", value) - value);
}

std::string field_of(const resp_value& entry, std::string_view name) {
  const resp_value* value = entry.field(name);
  return value == nullptr ? std::string("(missing)") : value->str;
}

// The entry of `port` in a SENTINEL REPLICAS or SENTINEL SENTINELS reply, or nullptr.
const resp_value* entry_for(const resp_value& list, std::uint16_t port) {
  for (const resp_value& entry : list.elements) {
    if (field_of(entry, "port") == std::to_string(port)) return &entry;
  }
  return nullptr;
}

long long elapsed_ms(clock_type::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - since).count();
}

// SET `key` `value` then WAIT `replicas` `timeout_ms` on one connection to `master` (WAIT counts
// the replicas that have the connection's own last write): the number WAIT returns, or -1 if a
// reply is not what it should be.
long long set_and_wait(const tools::redis_sentinel_group& group, std::uint16_t master,
                       const std::string& key, const std::string& value, int replicas,
                       int timeout_ms) {
  const std::vector<resp_value> replies = group.call_all(
      master,
      {{"SET", key, value}, {"WAIT", std::to_string(replicas), std::to_string(timeout_ms)}});
  if (replies.at(0).str != "OK" || replies.at(1).type != resp_kind::integer) {
    ADD_FAILURE() << "SET: " << replies.at(0).to_string()
                  << ", WAIT: " << replies.at(1).to_string();
    return -1;
  }
  return replies.at(1).integer;
}

// `port` is a replica of `master` with its link up (its own INFO replication says so).
void expect_replica_of(const tools::redis_sentinel_group& group, std::uint16_t port,
                       std::uint16_t master) {
  const std::string info = group.cli(port, "INFO", "replication");
  EXPECT_EQ(info_field(info, "role"), "slave") << port;
  EXPECT_EQ(info_field(info, "master_port"), std::to_string(master)) << port;
  EXPECT_EQ(info_field(info, "master_link_status"), "up") << port;
}

// Shares one group (a fresh one per test under ctest); every test leaves it settled.
class SentinelFixture : public sentinel_suite<SentinelFixture> {};

TEST_F(SentinelFixture, ComesUpWithAMasterTwoReplicasAndThreeSentinels) {
  const auto& data = group().data_ports();
  const auto& sentinels = group().sentinel_ports();
  ASSERT_EQ(data.size(), 3U);
  ASSERT_EQ(sentinels.size(), 3U);
  std::set<std::uint16_t> all(data.begin(), data.end());
  all.insert(sentinels.begin(), sentinels.end());
  EXPECT_EQ(all.size(), 6U);

  const std::uint16_t master = group().master_port();
  ASSERT_NE(std::find(data.begin(), data.end(), master), data.end());
  const std::vector<std::uint16_t> replicas = group().replica_ports();
  ASSERT_EQ(replicas.size(), 2U);
  EXPECT_EQ(std::find(replicas.begin(), replicas.end(), master), replicas.end());

  const std::string master_info = group().cli(master, "INFO", "replication");
  EXPECT_EQ(info_field(master_info, "role"), "master");
  EXPECT_EQ(info_field(master_info, "connected_slaves"), "2");
  for (const std::uint16_t replica : replicas)
    expect_replica_of(group(), replica, master);

  for (const std::uint16_t sentinel : sentinels) {
    EXPECT_TRUE(group().is_sentinel(sentinel));
    EXPECT_EQ(info_field(group().cli(sentinel, "INFO", "server"), "redis_mode"), "sentinel");
    const resp_value seen = group().call(sentinel, {"SENTINEL", "MASTER", "mymaster"});
    ASSERT_EQ(seen.type, resp_kind::array) << seen.to_string();
    EXPECT_EQ(field_of(seen, "ip"), "127.0.0.1");
    EXPECT_EQ(field_of(seen, "port"), std::to_string(master));
    EXPECT_EQ(field_of(seen, "flags"), "master");
    EXPECT_EQ(field_of(seen, "quorum"), "2");
    EXPECT_EQ(field_of(seen, "num-slaves"), "2");
    EXPECT_EQ(field_of(seen, "num-other-sentinels"), "2");
    EXPECT_EQ(field_of(seen, "down-after-milliseconds"), "1000");
    EXPECT_EQ(field_of(seen, "failover-timeout"), "3000");
    EXPECT_EQ(field_of(seen, "parallel-syncs"), "1");

    const resp_value listed = group().call(sentinel, {"SENTINEL", "REPLICAS", "mymaster"});
    ASSERT_EQ(listed.elements.size(), 2U) << listed.to_string();
    for (const std::uint16_t replica : replicas) {
      const resp_value* entry = entry_for(listed, replica);
      ASSERT_NE(entry, nullptr) << replica;
      EXPECT_EQ(field_of(*entry, "flags"), "slave");
      EXPECT_EQ(field_of(*entry, "master-link-status"), "ok");
      EXPECT_EQ(field_of(*entry, "master-port"), std::to_string(master));
    }
    const resp_value others = group().call(sentinel, {"SENTINEL", "SENTINELS", "mymaster"});
    ASSERT_EQ(others.elements.size(), 2U) << others.to_string();
    for (const std::uint16_t other : sentinels) {
      if (other == sentinel) continue;
      EXPECT_NE(entry_for(others, other), nullptr) << other;
    }
    // The sentinels can reach the quorum and authorize a failover.
    EXPECT_EQ(group().cli(sentinel, "SENTINEL", "CKQUORUM", "mymaster").substr(0, 4), "OK 3");
  }

  // Writes reach both replicas.
  const std::string key = unique_key("k");
  EXPECT_EQ(set_and_wait(group(), master, key, "v", 2, 1000), 2);
  for (const std::uint16_t replica : replicas)
    EXPECT_EQ(group().call(replica, {"GET", key}).str, "v") << replica;

  std::string hosts;
  for (const std::uint16_t sentinel : sentinels)
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinel);
  EXPECT_EQ(group().sentinel_url(), "redis-sentinel://" + hosts + "#mymaster");
  EXPECT_EQ(group().sentinel_url("min_replicas=1&replica_timeout=100"),
            "redis-sentinel://" + hosts + "?min_replicas=1&replica_timeout=100#mymaster");
  EXPECT_EQ(group().node_url(master), "redis://127.0.0.1:" + std::to_string(master));
  EXPECT_EQ(group().cli(master, "PING"), "PONG");
  EXPECT_EQ(group().cli(sentinels.front(), "PING"), "PONG");
}

TEST_F(SentinelFixture, EverySentinelNamesTheMaster) {
  const std::uint16_t master = group().master_port();
  for (const std::uint16_t sentinel : group().sentinel_ports()) {
    EXPECT_EQ(group().master_port_from(sentinel), master);
    EXPECT_EQ(group().cli(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"),
              "127.0.0.1\n" + std::to_string(master));
    // An unknown name gets no address.
    EXPECT_EQ(group().call(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuch"}).type,
              resp_kind::nil);
  }
  EXPECT_THROW(group().master_port_from(master), std::out_of_range);

  const resp_value role = group().call(master, {"ROLE"});
  ASSERT_EQ(role.type, resp_kind::array) << role.to_string();
  EXPECT_EQ(role.elements.at(0).str, "master");
  for (const std::uint16_t replica : group().replica_ports()) {
    const resp_value replica_role = group().call(replica, {"ROLE"});
    ASSERT_EQ(replica_role.type, resp_kind::array) << replica_role.to_string();
    EXPECT_EQ(replica_role.elements.at(0).str, "slave");
    EXPECT_EQ(replica_role.elements.at(2).integer, master);
  }
}

TEST_F(SentinelFixture, PausedReplicasMakeWaitComeBackShortUntilResumed) {
  const std::uint16_t master = group().master_port();
  const std::vector<std::uint16_t> replicas = group().replica_ports();
  ASSERT_EQ(replicas.size(), 2U);
  const std::string key = unique_key("k");
  ASSERT_EQ(set_and_wait(group(), master, key, "1", 2, 1000), 2);

  group().pause_node(replicas[0]);
  EXPECT_TRUE(group().paused(replicas[0]));
  EXPECT_EQ(set_and_wait(group(), master, key, "2", 2, 100), 1);
  EXPECT_EQ(set_and_wait(group(), master, key, "3", 1, 100), 1);

  group().pause_node(replicas[1]);
  const auto began = clock_type::now();
  EXPECT_EQ(set_and_wait(group(), master, key, "4", 1, 100), 0);
  EXPECT_GE(elapsed_ms(began), 100) << "WAIT returns at its timeout";

  group().resume_node(replicas[1]);
  EXPECT_FALSE(group().paused(replicas[1]));
  EXPECT_EQ(set_and_wait(group(), master, key, "5", 1, 100), 1);
  group().resume_node(replicas[0]);
  EXPECT_EQ(set_and_wait(group(), master, key, "6", 2, 100), 2);
  for (const std::uint16_t replica : replicas)
    EXPECT_EQ(group().call(replica, {"GET", key}).str, "6") << replica;
  group().wait_ok();
}

TEST_F(SentinelFixture, SentinelFailoverPromotesAReplicaAndDemotesTheMaster) {
  const std::uint16_t old_master = group().master_port();
  const std::vector<std::uint16_t> replicas = group().replica_ports();
  const std::string key = unique_key("k");
  ASSERT_EQ(set_and_wait(group(), old_master, key, "before", 2, 1000), 2);

  const auto began = clock_type::now();
  const std::uint16_t new_master = group().failover();
  const long long took = elapsed_ms(began);
  std::printf("[ sentinel ] SENTINEL FAILOVER: %u -> %u, settled in %lld ms\n",
              static_cast<unsigned>(old_master), static_cast<unsigned>(new_master), took);
  RecordProperty("failover_ms", std::to_string(took));

  EXPECT_NE(new_master, old_master);
  EXPECT_NE(std::find(replicas.begin(), replicas.end(), new_master), replicas.end());
  EXPECT_EQ(group().master_port(), new_master);
  for (const std::uint16_t sentinel : group().sentinel_ports())
    EXPECT_EQ(group().master_port_from(sentinel), new_master);
  const std::string info = group().cli(new_master, "INFO", "replication");
  EXPECT_EQ(info_field(info, "role"), "master");
  EXPECT_EQ(info_field(info, "connected_slaves"), "2");
  for (const std::uint16_t port : group().replica_ports())
    expect_replica_of(group(), port, new_master);
  expect_replica_of(group(), old_master, new_master);
  EXPECT_EQ(group().call(new_master, {"GET", key}).str, "before");
  // The former master now refuses writes.
  EXPECT_TRUE(group().call(old_master, {"SET", key, "x"}).str.starts_with("READONLY"));
}

TEST_F(SentinelFixture, KillNineOfTheMasterPromotesAReplicaAndTheOldMasterReturnsAsItsReplica) {
  const std::uint16_t old_master = group().master_port();
  const std::vector<std::uint16_t> replicas = group().replica_ports();
  const std::string key = unique_key("k");
  ASSERT_EQ(set_and_wait(group(), old_master, key, "acknowledged", 2, 1000), 2);

  const auto killed_at = clock_type::now();
  group().kill_node(old_master);
  EXPECT_FALSE(group().node(old_master).running());
  const std::uint16_t new_master = group().wait_for_failover(old_master, promotion_limit);
  const long long took = elapsed_ms(killed_at);
  std::printf("[ sentinel ] kill -9 of master %u: %u promoted, settled in %lld ms\n",
              static_cast<unsigned>(old_master), static_cast<unsigned>(new_master), took);
  RecordProperty("promotion_ms", std::to_string(took));
  // Not before the sentinels can call the master down, and within the limit.
  EXPECT_GE(took, group().options().down_after.count());
  EXPECT_LT(took, std::chrono::milliseconds(promotion_limit).count());

  ASSERT_NE(std::find(replicas.begin(), replicas.end(), new_master), replicas.end());
  for (const std::uint16_t sentinel : group().sentinel_ports()) {
    EXPECT_EQ(group().master_port_from(sentinel), new_master);
    const resp_value listed = group().call(sentinel, {"SENTINEL", "REPLICAS", "mymaster"});
    EXPECT_NE(entry_for(listed, old_master), nullptr)
        << "the sentinels keep the former master as a replica";
  }
  EXPECT_EQ(info_field(group().cli(new_master, "INFO", "replication"), "role"), "master");
  for (const std::uint16_t replica : replicas) {
    if (replica == new_master) continue;
    expect_replica_of(group(), replica, new_master);
  }
  // Both replicas had acknowledged the write, so the promoted one has it.
  EXPECT_EQ(group().call(new_master, {"GET", key}).str, "acknowledged");

  // The former master comes back as a master of nothing (no persistence, its config names no
  // master); the sentinels make it a replica of the new master.
  group().restart_node(old_master);
  const auto restarted_at = clock_type::now();
  group().wait_ok();
  std::printf("[ sentinel ] restarted former master %u: a replica in %lld ms\n",
              static_cast<unsigned>(old_master), elapsed_ms(restarted_at));
  EXPECT_EQ(group().master_port(), new_master);
  expect_replica_of(group(), old_master, new_master);
  EXPECT_EQ(group().call(old_master, {"GET", key}).str, "acknowledged");
  for (const std::uint16_t sentinel : group().sentinel_ports()) {
    const resp_value listed = group().call(sentinel, {"SENTINEL", "REPLICAS", "mymaster"});
    const resp_value* former = entry_for(listed, old_master);
    ASSERT_NE(former, nullptr);
    EXPECT_EQ(field_of(*former, "flags"), "slave");
  }
}

TEST_F(SentinelFixture, CutReplicasMissTheLastWriteOfAMasterThatDies) {
  const std::uint16_t old_master = group().master_port();
  const std::vector<std::uint16_t> replicas = group().replica_ports();
  const std::string key = unique_key("k");
  ASSERT_EQ(set_and_wait(group(), old_master, key, "replicated", 2, 1000), 2);

  // Paused only, a replica would apply the write from its socket buffer once resumed, and be
  // promoted with it; cut, it never gets it.
  for (const std::uint16_t replica : replicas)
    group().cut_replica(replica);
  EXPECT_EQ(set_and_wait(group(), old_master, key, "lost", 1, 100), 0);
  group().kill_node(old_master);
  for (const std::uint16_t replica : replicas)
    group().resume_node(replica);

  const std::uint16_t new_master = group().wait_for_failover(old_master, promotion_limit);
  EXPECT_EQ(group().call(new_master, {"GET", key}).str, "replicated");
  group().restart_node(old_master);
  group().wait_ok();
  EXPECT_EQ(group().call(old_master, {"GET", key}).str, "replicated");
}

TEST_F(SentinelFixture, CutReplicaCatchesUpWhenItsMasterLives) {
  const std::uint16_t master = group().master_port();
  const std::uint16_t replica = group().replica_ports().front();
  const std::string key = unique_key("k");
  group().cut_replica(replica);
  EXPECT_TRUE(group().paused(replica));
  EXPECT_EQ(info_field(group().cli(master, "INFO", "replication"), "connected_slaves"), "1");
  EXPECT_EQ(set_and_wait(group(), master, key, "written while cut", 2, 100), 1);
  group().resume_node(replica);
  group().wait_ok();
  EXPECT_EQ(group().call(replica, {"GET", key}).str, "written while cut");
  EXPECT_THROW(group().cut_replica(master), std::invalid_argument) << "a master has no link";
}

TEST_F(SentinelFixture, KilledSentinelAndReplicaComeBackAsTheyWere) {
  const std::uint16_t master = group().master_port();
  const std::uint16_t sentinel = group().sentinel_ports().front();
  const std::string id = group().cli(sentinel, "SENTINEL", "MYID");
  ASSERT_EQ(id.size(), 40U);

  group().kill_node(sentinel);
  // The others still answer; the killed one does not.
  EXPECT_EQ(group().master_port(), master);
  EXPECT_THROW(group().master_port_from(sentinel), std::runtime_error);
  group().restart_node(sentinel);
  EXPECT_EQ(group().cli(sentinel, "SENTINEL", "MYID"), id) << "its config file kept its id";
  EXPECT_EQ(group().master_port_from(sentinel), master);

  // A replica restarts empty and syncs again from the master its config file names.
  const std::uint16_t replica = group().replica_ports().front();
  const std::string key = unique_key("k");
  ASSERT_EQ(group().call(master, {"SET", key, "v"}).str, "OK");
  group().kill_node(replica);
  group().restart_node(replica);
  group().wait_ok();
  expect_replica_of(group(), replica, master);
  EXPECT_EQ(group().call(replica, {"GET", key}).str, "v");
}

// Passwords on the data nodes and on the sentinels, and a single replica.
class SentinelAuth : public sentinel_suite<SentinelAuth> {
 public:
  static redis_sentinel_group_options sentinel_options() {
    redis_sentinel_group_options options;
    options.replicas = 1;
    options.password = "data secret:1";
    options.sentinel_password = "sentinel pass";
    return options;
  }
};

TEST_F(SentinelAuth, EveryNodeWantsItsPassword) {
  const std::uint16_t master = group().master_port();
  ASSERT_EQ(group().replica_ports().size(), 1U);
  for (const std::uint16_t port : group().data_ports()) {
    EXPECT_TRUE(tools::resp_call(port, {"PING"}).str.starts_with("NOAUTH")) << port;
    EXPECT_EQ(group().call(port, {"PING"}).str, "PONG");
    EXPECT_EQ(group().cli(port, "PING"), "PONG");
    EXPECT_EQ(group().node_url(port),
              "redis://:data%20secret%3A1@127.0.0.1:" + std::to_string(port));
  }
  std::string hosts;
  for (const std::uint16_t sentinel : group().sentinel_ports()) {
    EXPECT_TRUE(tools::resp_call(sentinel, {"PING"}).str.starts_with("NOAUTH")) << sentinel;
    EXPECT_EQ(group().call(sentinel, {"PING"}).str, "PONG");
    EXPECT_EQ(group().node_url(sentinel),
              "redis://:sentinel%20pass@127.0.0.1:" + std::to_string(sentinel));
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinel);
    const resp_value seen = group().call(sentinel, {"SENTINEL", "MASTER", "mymaster"});
    EXPECT_EQ(field_of(seen, "num-slaves"), "1");
    EXPECT_EQ(field_of(seen, "num-other-sentinels"), "2");
  }
  EXPECT_EQ(group().sentinel_url("min_replicas=1"),
            "redis-sentinel://:data%20secret%3A1@" + hosts +
                "?sentinel_password=sentinel%20pass&min_replicas=1#mymaster");
  expect_replica_of(group(), group().replica_ports().front(), master);
}

TEST_F(SentinelAuth, PausedOnlyReplicaMakesWaitReturnZeroThenOne) {
  const std::uint16_t master = group().master_port();
  const std::uint16_t replica = group().replica_ports().front();
  const std::string key = unique_key("k");
  group().pause_node(replica);
  EXPECT_EQ(set_and_wait(group(), master, key, "while paused", 1, 100), 0);
  group().resume_node(replica);
  EXPECT_EQ(set_and_wait(group(), master, key, "resumed", 1, 100), 1);
  EXPECT_EQ(group().call(replica, {"GET", key}).str, "resumed");
  group().wait_ok();
}

TEST_F(SentinelAuth, FailoverReconfiguresNodesWithThePassword) {
  const std::uint16_t old_master = group().master_port();
  const std::uint16_t new_master = group().failover();
  EXPECT_NE(new_master, old_master);
  EXPECT_EQ(info_field(group().cli(new_master, "INFO", "replication"), "role"), "master");
  expect_replica_of(group(), old_master, new_master);
}

}  // namespace
}  // namespace dlock::test
