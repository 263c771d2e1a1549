// The Redis Cluster fixture (tools/redis_process/redis_cluster.hpp) against real servers, and the
// pure functions a cluster client relies on (core::hash_slot, the lock names' derived keys)
// against the servers' own CLUSTER KEYSLOT. These tests talk to the nodes directly (resp_call,
// redis-cli), not through dlock::client, so they hold whatever dlock's routing does.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/hash_slot.hpp"
#include "locks/names.hpp"
#include "support/cluster_fixture.hpp"
#include "support/lock_name_cases.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using resp_kind = resp_value::kind;

// A key in `slot`, unique to the running test.
std::string key_in_slot(std::uint16_t slot, std::string_view suffix) {
  return "{" + std::string(locks::slot_tag(slot)) + "}:" + unique_key(suffix);
}

std::string info_field(const std::string& text, const std::string& field) {
  const std::size_t at = text.find("\n" + field + ":");
  const std::size_t begin = at == std::string::npos ? text.find(field + ":") : at + 1;
  if (begin == std::string::npos || (at == std::string::npos && begin != 0)) return {};
  const std::size_t value = begin + field.size() + 1;
  return text.substr(value, text.find_first_of("\r\n", value) - value);
}

// Shares one cluster; every test leaves it ok.
class ClusterFixture : public cluster_suite<ClusterFixture> {};

TEST_F(ClusterFixture, ComesUpWithThreeMastersAndThreeReplicasCoveringEverySlot) {
  const std::vector<std::uint16_t> ports = cluster().ports();
  ASSERT_EQ(ports.size(), 6U);
  EXPECT_EQ(std::set<std::uint16_t>(ports.begin(), ports.end()).size(), 6U);
  for (const std::uint16_t port : ports) {
    EXPECT_LT(port, 55536) << "its cluster bus needs port + 10000";
    const std::string info = cluster().cli(port, "CLUSTER", "INFO");
    EXPECT_EQ(info_field(info, "cluster_state"), "ok") << port;
    EXPECT_EQ(info_field(info, "cluster_slots_assigned"), "16384") << port;
    EXPECT_EQ(info_field(info, "cluster_slots_ok"), "16384") << port;
    EXPECT_EQ(info_field(info, "cluster_known_nodes"), "6") << port;
    EXPECT_EQ(info_field(info, "cluster_size"), "3") << port;
    EXPECT_EQ(cluster().node_id(port).size(), 40U);
  }
  EXPECT_EQ(cluster().seed_url(), "redis://127.0.0.1:" + std::to_string(ports.front()));

  const std::vector<std::uint16_t> masters = cluster().masters();
  ASSERT_EQ(masters.size(), 3U);
  std::set<std::uint16_t> seen(masters.begin(), masters.end());
  for (const std::uint16_t master : masters) {
    const std::vector<std::uint16_t> replicas = cluster().replicas_of(master);
    ASSERT_EQ(replicas.size(), 1U) << master;
    seen.insert(replicas.front());
    EXPECT_EQ(info_field(cluster().cli(replicas.front(), "INFO", "replication"), "master_port"),
              std::to_string(master));
  }
  EXPECT_EQ(seen.size(), 6U) << "every node is a master or the replica of one";

  // CLUSTER SHARDS of every node: the masters' ranges add up to all 16384 slots, no overlap.
  for (const std::uint16_t port : ports) {
    const resp_value shards = cluster().call(port, {"CLUSTER", "SHARDS"});
    ASSERT_EQ(shards.type, resp_kind::array) << shards.to_string();
    std::vector<int> owners(core::cluster_slots, 0);
    for (const resp_value& shard : shards.elements) {
      const resp_value* slots = shard.field("slots");
      ASSERT_NE(slots, nullptr);
      for (std::size_t i = 0; i + 1 < slots->elements.size(); i += 2) {
        for (long long slot = slots->elements[i].integer; slot <= slots->elements[i + 1].integer;
             ++slot) {
          ++owners[static_cast<std::size_t>(slot)];
        }
      }
    }
    EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), core::cluster_slots) << port;
  }
  // Every master answers for its own slots and redirects the others.
  for (const std::uint16_t slot : {0, 5000, 5461, 12182, 16383}) {
    const std::uint16_t owner = cluster().master_for_slot(slot);
    const std::string key = key_in_slot(slot, "owner");
    EXPECT_EQ(cluster().call(owner, {"SET", key, "v"}).str, "OK");
    for (const std::uint16_t master : masters) {
      if (master == owner) continue;
      EXPECT_EQ(cluster().call(master, {"GET", key}).str,
                "MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(owner));
    }
    cluster().call(owner, {"DEL", key});
  }
}

// Keys for the CLUSTER KEYSLOT comparisons: the specification's examples, every brace shape,
// and random bytes (NUL, braces and bytes above 0x7F included).
std::vector<std::string> keyslot_cases() {
  std::vector<std::string> keys = {"123456789",
                                   "foo",
                                   "bar",
                                   "hello",
                                   "{user1000}.following",
                                   "{user1000}.followers",
                                   "foo{}{bar}",
                                   "foo{{bar}}zap",
                                   "foo{bar}{zap}",
                                   "{}",
                                   "{",
                                   "}",
                                   "}{",
                                   "a{b",
                                   "a}b",
                                   "{a}{b}",
                                   "}a{b}",
                                   std::string("\0", 1),
                                   std::string("{\0}", 3),
                                   "\xff\xfe{\x80}"};
  for (const std::string& name : lock_name_cases())
    keys.push_back(name);
  std::mt19937 random(7);
  std::uniform_int_distribution<int> length(1, 40);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> brace(0, 5);
  for (int i = 0; i < 300; ++i) {
    std::string key(static_cast<std::size_t>(length(random)), '\0');
    for (char& c : key) {
      const int b = brace(random);
      c = b == 0 ? '{' : b == 1 ? '}' : static_cast<char>(byte(random));
    }
    keys.push_back(key);
  }
  return keys;
}

TEST_F(ClusterFixture, KeyslotOfTheServerEqualsHashSlot) {
  const std::vector<std::string> keys = keyslot_cases();
  std::vector<std::vector<std::string>> commands;
  for (const std::string& key : keys)
    commands.push_back({"CLUSTER", "KEYSLOT", key});
  // Ask a master and a replica: every node hashes the same way.
  for (const std::uint16_t port :
       {cluster().masters().front(), cluster().replicas_of(cluster().masters().front()).front()}) {
    const std::vector<resp_value> slots = tools::resp_call_all(port, commands);
    ASSERT_EQ(slots.size(), keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(slots[i].type, resp_kind::integer) << slots[i].to_string();
      EXPECT_EQ(slots[i].integer, core::hash_slot(keys[i]))
          << "key #" << i << " '" << keys[i] << "'";
    }
  }
  EXPECT_EQ(cluster().key_slot("foo"), 12182);
  EXPECT_EQ(cluster().key_slot("bar"), 5061);
  EXPECT_EQ(cluster().key_slot("123456789"), 0x31C3 % core::cluster_slots);
}

TEST_F(ClusterFixture, LockNamesAndTheirDerivedKeysShareASlot) {
  std::vector<std::string> names = lock_name_cases();
  std::mt19937 random(11);
  const std::string alphabet = "{}{}{}ab:";
  std::uniform_int_distribution<std::size_t> length(1, 12);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  for (int i = 0; i < 200; ++i) {
    std::string name(length(random), ' ');
    for (char& c : name)
      c = alphabet[pick(random)];
    names.push_back(name);
  }
  const std::uint16_t port = cluster().masters().front();
  for (const std::string& name : names) {
    const std::vector<resp_value> slots =
        tools::resp_call_all(port, {{"CLUSTER", "KEYSLOT", name},
                                    {"CLUSTER", "KEYSLOT", locks::unlock_channel(name)},
                                    {"CLUSTER", "KEYSLOT", locks::fence_key(name)}});
    EXPECT_EQ(slots[1].integer, slots[0].integer) << name << " -> " << locks::unlock_channel(name);
    EXPECT_EQ(slots[2].integer, slots[0].integer) << name << " -> " << locks::fence_key(name);
  }

  // What the slots are for: one script on the owner touches the lock and its fencing counter
  // (no CROSSSLOT), and the owner accepts a sharded publish on the unlock channel (no MOVED).
  for (const std::string& name : lock_name_cases()) {
    const std::string lock = unique_key(name);
    const std::uint16_t owner = cluster().master_for_key(lock);
    const resp_value token = cluster().call(owner, {"EVAL",
                                                    "redis.call('hset', KEYS[1], 'owner', 1) "
                                                    "return redis.call('incr', KEYS[2])",
                                                    "2", lock, locks::fence_key(lock)});
    EXPECT_EQ(token.type, resp_kind::integer) << lock << ": " << token.to_string();
    const resp_value published =
        cluster().call(owner, {"SPUBLISH", locks::unlock_channel(lock), "0"});
    EXPECT_EQ(published.type, resp_kind::integer) << lock << ": " << published.to_string();
    cluster().call(owner, {"DEL", lock, locks::fence_key(lock)});
  }
}

TEST_F(ClusterFixture, CliRunsACommandOnANode) {
  const std::string key = unique_key("cli");
  const std::uint16_t owner = cluster().master_for_key(key);
  EXPECT_EQ(cluster().cli(owner, "SET", key, "hello"), "OK");
  EXPECT_EQ(cluster().cli(owner, {"GET", key}), "hello");
  EXPECT_THROW(cluster().cli(owner, "NOSUCHCOMMAND"), std::runtime_error);
  cluster().cli(owner, "DEL", key);
}

TEST_F(ClusterFixture, GracefulFailoverKeepsTheData) {
  const std::string key = unique_key("failover");
  const std::uint16_t old_master = cluster().master_for_key(key);
  ASSERT_EQ(cluster().call(old_master, {"SET", key, "before"}).str, "OK");
  const std::uint16_t replica = cluster().replicas_of(old_master).front();

  cluster().failover(replica);

  EXPECT_EQ(cluster().master_for_key(key), replica);
  EXPECT_EQ(cluster().call(replica, {"GET", key}).str, "before");
  EXPECT_EQ(info_field(cluster().cli(old_master, "INFO", "replication"), "role"), "slave");
  EXPECT_EQ(cluster().replicas_of(replica), std::vector<std::uint16_t>{old_master});
  EXPECT_EQ(cluster().masters().size(), 3U);

  // And back, so that failing over twice in a row works (the masters must know the new roles).
  cluster().failover(old_master);
  EXPECT_EQ(cluster().master_for_key(key), old_master);
  EXPECT_EQ(cluster().call(old_master, {"GET", key}).str, "before");
  cluster().call(old_master, {"DEL", key});
}

TEST_F(ClusterFixture, MigrateSlotMovesTheKeysAndTheOwnership) {
  const std::uint16_t slot = 7000;
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t master : cluster().masters())
    if (master != from) to = master;
  std::vector<std::string> keys;
  for (int i = 0; i < 250; ++i) {  // more than one MIGRATE batch
    keys.push_back(key_in_slot(slot, "migrate:" + std::to_string(i)));
    ASSERT_EQ(cluster().call(from, {"SET", keys.back(), std::to_string(i)}).str, "OK");
  }

  cluster().migrate_slot(slot, from, to);

  EXPECT_EQ(cluster().master_for_slot(slot), to);
  for (const std::uint16_t port : cluster().ports()) {
    const resp_value slots = cluster().call(port, {"CLUSTER", "SLOTS"});
    bool found = false;
    for (const resp_value& range : slots.elements) {
      if (range.elements[0].integer <= slot && slot <= range.elements[1].integer) {
        found = true;
        EXPECT_EQ(range.elements[2].elements[1].integer, to) << "in the map of " << port;
      }
    }
    EXPECT_TRUE(found) << port;
  }
  for (std::size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(cluster().call(to, {"GET", keys[i]}).str, std::to_string(i));
  EXPECT_EQ(cluster().call(from, {"GET", keys[0]}).str,
            "MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(to));
  // The replicas follow: the new owner's replica serves the slot read-only.
  const std::uint16_t replica = cluster().replicas_of(to).front();
  EXPECT_TRUE(eventually([&] {
    const std::vector<resp_value> read =
        tools::resp_call_all(replica, {{"READONLY"}, {"GET", keys[0]}});
    return read[1].str == "0";
  }));

  // And back.
  cluster().migrate_slot(slot, to, from);
  EXPECT_EQ(cluster().master_for_slot(slot), from);
  EXPECT_EQ(cluster().call(from, {"GET", keys[1]}).str, "1");
  for (const std::string& key : keys)
    cluster().call(from, {"DEL", key});
}

TEST_F(ClusterFixture, HalfMigratedSlotAnswersAsk) {
  const std::uint16_t slot = 12182;  // "foo"
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t master : cluster().masters())
    if (master != from) to = master;
  const std::string kept = key_in_slot(slot, "kept");
  const std::string added = key_in_slot(slot, "added");
  ASSERT_EQ(cluster().call(from, {"SET", kept, "old"}).str, "OK");

  cluster().begin_slot_migration(slot, from, to);

  // The source still serves what it has, and sends what it lacks to the target with -ASK.
  EXPECT_EQ(cluster().call(from, {"GET", kept}).str, "old");
  const std::string ask = "ASK " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(to);
  EXPECT_EQ(cluster().call(from, {"GET", added}).str, ask);
  // The target takes the command only after ASKING; without, it redirects back with -MOVED.
  EXPECT_EQ(cluster().call(to, {"SET", added, "new"}).str,
            "MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(from));
  const std::vector<resp_value> asked =
      tools::resp_call_all(to, {{"ASKING"}, {"SET", added, "new"}});
  EXPECT_EQ(asked[0].str, "OK");
  EXPECT_EQ(asked[1].str, "OK");
  // Nothing moved yet in anyone's map.
  EXPECT_EQ(cluster().master_for_slot(slot), from);
  EXPECT_NE(cluster().cli(from, "CLUSTER", "NODES").find("[" + std::to_string(slot) + "->-"),
            std::string::npos);

  cluster().finish_slot_migration(slot, from, to);

  EXPECT_EQ(cluster().master_for_slot(slot), to);
  EXPECT_EQ(cluster().call(to, {"GET", kept}).str, "old");
  EXPECT_EQ(cluster().call(to, {"GET", added}).str, "new");
  EXPECT_EQ(cluster().cli(to, "CLUSTER", "NODES").find("[" + std::to_string(slot)),
            std::string::npos)
      << "no slot left importing or migrating";

  cluster().migrate_slot(slot, to, from);
  EXPECT_EQ(cluster().call(from, {"GET", added}).str, "new");
  cluster().call(from, {"DEL", kept, added});
}

TEST_F(ClusterFixture, KilledReplicaRestartsWithItsIdAndResyncs) {
  const std::string written = unique_key("while-down");
  const std::uint16_t master = cluster().master_for_key(written);
  const std::uint16_t replica = cluster().replicas_of(master).front();
  const std::string id = cluster().node_id(replica);

  cluster().kill_node(replica);
  EXPECT_FALSE(cluster().node(replica).running());
  EXPECT_EQ(cluster().node(replica).pid(), -1);
  // Written while the replica is down: the restarted replica must get it by resync.
  ASSERT_EQ(cluster().call(master, {"SET", written, "x"}).str, "OK");

  cluster().restart_node(replica);
  cluster().wait_ok();

  EXPECT_EQ(cluster().call(replica, {"CLUSTER", "MYID"}).str, id);
  EXPECT_EQ(cluster().replicas_of(master), std::vector<std::uint16_t>{replica});
  EXPECT_TRUE(eventually([&] {
    return tools::resp_call_all(replica, {{"READONLY"}, {"GET", written}})[1].str == "x";
  }));
  cluster().call(master, {"DEL", written});
}

// Faults that take the cluster through a hard failover get their own cluster.
class ClusterFaults : public cluster_suite<ClusterFaults> {};

TEST_F(ClusterFaults, KilledMasterIsReplacedByItsReplicaAndRejoinsAsReplica) {
  const std::string key = unique_key("hard-failover");
  const std::uint16_t master = cluster().master_for_key(key);
  const std::uint16_t replica = cluster().replicas_of(master).front();
  // WAIT on the connection that wrote: the write reached the replica, so the promotion keeps it.
  const std::vector<resp_value> written =
      tools::resp_call_all(master, {{"SET", key, "replicated"}, {"WAIT", "1", "5000"}});
  ASSERT_EQ(written[0].str, "OK");
  ASSERT_EQ(written[1].integer, 1);

  const auto killed = std::chrono::steady_clock::now();
  cluster().kill_node(master);
  cluster().wait_ok();
  const auto promoted = std::chrono::steady_clock::now();
  RecordProperty(
      "failover_ms",
      std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(promoted - killed).count()));

  EXPECT_EQ(cluster().master_for_key(key), replica);
  EXPECT_EQ(cluster().call(replica, {"GET", key}).str, "replicated");

  cluster().restart_node(master);
  cluster().wait_ok();
  EXPECT_EQ(cluster().master_for_key(key), replica);
  EXPECT_EQ(info_field(cluster().cli(master, "INFO", "replication"), "role"), "slave");
  EXPECT_EQ(cluster().replicas_of(replica), std::vector<std::uint16_t>{master});

  // A forced failover puts the old master back in charge.
  cluster().failover(master, failover_mode::force);
  EXPECT_EQ(cluster().master_for_key(key), master);
  EXPECT_EQ(cluster().call(master, {"GET", key}).str, "replicated");
}

TEST(ClusterLifetime, StartsQuicklyAndStopsEveryNodeByPid) {
  std::vector<pid_t> pids;
  std::vector<std::string> dirs;
  const auto began = std::chrono::steady_clock::now();
  {
    redis_test_cluster cluster;
    const auto started = std::chrono::steady_clock::now() - began;
    RecordProperty(
        "start_ms",
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(started).count()));
    // Generous for a loaded CI machine; about 2 s when idle.
    EXPECT_LT(started, 10s);
    for (const std::uint16_t port : cluster.ports()) {
      pids.push_back(cluster.node(port).pid());
      dirs.push_back(cluster.node(port).dir());
      EXPECT_TRUE(std::filesystem::exists(cluster.node(port).dir() + "/nodes.conf"));
    }
  }
  for (const pid_t pid : pids) {
    EXPECT_GT(pid, 0);
    EXPECT_NE(::kill(pid, 0), 0) << "node " << pid << " still runs";
  }
  for (const std::string& dir : dirs)
    EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ClusterLifetime, RejectsFewerThanThreeMasters) {
  redis_cluster_options options;
  options.masters = 2;
  EXPECT_THROW(redis_test_cluster{options}, std::invalid_argument);
}

TEST(ClusterLifetime, OptionsShapeTheCluster) {
  redis_cluster_options options;
  options.replicas_per_master = 0;
  options.node_timeout = 1500ms;
  redis_test_cluster cluster(options);
  EXPECT_EQ(cluster.ports().size(), 3U);
  EXPECT_EQ(cluster.masters().size(), 3U);
  EXPECT_TRUE(cluster.replicas_of(cluster.masters().front()).empty());
  EXPECT_EQ(cluster.cli(cluster.ports().front(), "CONFIG", "GET", "cluster-node-timeout"),
            "cluster-node-timeout\n1500");
}

}  // namespace
}  // namespace dlock::test
