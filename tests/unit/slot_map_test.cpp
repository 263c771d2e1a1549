// The slot map read from CLUSTER SHARDS / CLUSTER SLOTS replies, and redirection parsing.
#include "topology/slot_map.hpp"

#include <gtest/gtest.h>

#include "dlock/error.hpp"

namespace dlock::topology {
namespace {

reply bulk(std::string s) {
  return reply::make_bulk(std::move(s));
}
reply integer(std::int64_t i) {
  return reply::make_integer(i);
}
reply array(std::vector<reply> e) {
  return reply::make_array(std::move(e));
}

// One node of a CLUSTER SHARDS reply, as Redis 7.0 sends it (RESP2: flat name/value pairs).
reply shard_node(std::string endpoint, std::int64_t port, std::string role,
                 std::int64_t tls_port = 0) {
  std::vector<reply> fields{bulk("id"),
                            bulk("0123abcd"),
                            bulk("port"),
                            integer(port),
                            bulk("ip"),
                            bulk("127.0.0.1"),
                            bulk("endpoint"),
                            bulk(std::move(endpoint)),
                            bulk("role"),
                            bulk(std::move(role)),
                            bulk("replication-offset"),
                            integer(42),
                            bulk("health"),
                            bulk("online")};
  if (tls_port != 0) {
    fields.push_back(bulk("tls-port"));
    fields.push_back(integer(tls_port));
  }
  return array(std::move(fields));
}

reply shard(std::vector<std::int64_t> ranges, std::vector<reply> nodes) {
  std::vector<reply> slots;
  for (const std::int64_t r : ranges)
    slots.push_back(integer(r));
  return array({bulk("slots"), array(std::move(slots)), bulk("nodes"), array(std::move(nodes))});
}

const server_address asked{"10.0.0.9", 7000};

TEST(SlotMap, ReadsShardsWithTheirMastersAndRanges) {
  const reply r = array({
      shard({0, 5460},
            {shard_node("127.0.0.1", 30001, "master"), shard_node("127.0.0.1", 30004, "replica")}),
      shard({5461, 10922},
            {shard_node("127.0.0.1", 30005, "replica"), shard_node("127.0.0.1", 30002, "master")}),
      shard({10923, 12000, 12001, 16383}, {shard_node("127.0.0.1", 30003, "master")}),
  });
  const slot_map map = slot_map::from_shards(r, asked, false);
  ASSERT_EQ(map.masters().size(), 3u);
  EXPECT_EQ(map.covered_slots(), 16384u);
  EXPECT_EQ(map.masters()[static_cast<std::size_t>(map.owner_of(0))],
            (server_address{"127.0.0.1", 30001}));
  EXPECT_EQ(map.masters()[static_cast<std::size_t>(map.owner_of(5461))],
            (server_address{"127.0.0.1", 30002}));
  EXPECT_EQ(map.masters()[static_cast<std::size_t>(map.owner_of(12001))],
            (server_address{"127.0.0.1", 30003}));
  EXPECT_EQ(map.owner_of(16383), map.owner_of(10923));
}

TEST(SlotMap, UsesTheTlsPortOverTlsAndTheAskedHostForAnUnknownEndpoint) {
  const reply r = array({shard({0, 16383}, {shard_node("?", 30001, "master", 31001)})});
  const slot_map plain = slot_map::from_shards(r, asked, false);
  EXPECT_EQ(plain.masters().at(0), (server_address{"10.0.0.9", 30001}));
  const slot_map tls = slot_map::from_shards(r, asked, true);
  EXPECT_EQ(tls.masters().at(0), (server_address{"10.0.0.9", 31001}));
}

TEST(SlotMap, LeavesSlotsOfAShardWithoutMasterUnowned) {
  const reply r = array({shard({0, 99}, {shard_node("127.0.0.1", 30004, "replica")}),
                         shard({100, 16383}, {shard_node("127.0.0.1", 30002, "master")}),
                         shard({}, {shard_node("127.0.0.1", 30009, "master")})});
  const slot_map map = slot_map::from_shards(r, asked, false);
  EXPECT_EQ(map.owner_of(0), slot_map::no_owner);
  EXPECT_EQ(map.covered_slots(), 16384u - 100u);
  EXPECT_EQ(map.masters().size(), 1u) << "a master without slots is not a target";
}

TEST(SlotMap, RefusesWhatIsNotAShardList) {
  EXPECT_THROW(slot_map::from_shards(bulk("OK"), asked, false), error);
  EXPECT_THROW(slot_map::from_shards(array({array({bulk("slots")})}), asked, false), error);
  EXPECT_THROW(slot_map::from_shards(array({shard({0, 16384}, {shard_node("h", 1, "master")})}),
                                     asked, false),
               error)
      << "slot 16384 does not exist";
  EXPECT_THROW(
      slot_map::from_shards(array({shard({0}, {shard_node("h", 1, "master")})}), asked, false),
      error);
  EXPECT_THROW(slot_map::from_shards(array({shard({0, 10}, {shard_node("h", 70000, "master")})}),
                                     asked, false),
               error);
}

TEST(SlotMap, ReadsClusterSlots) {
  const reply r = array({
      array({integer(0), integer(8000), array({bulk("127.0.0.1"), integer(30001), bulk("id1")}),
             array({bulk("127.0.0.1"), integer(30004), bulk("id4")})}),
      array({integer(8001), integer(16383), array({bulk(""), integer(30002), bulk("id2")})}),
  });
  const slot_map map = slot_map::from_slots(r, asked);
  EXPECT_EQ(map.covered_slots(), 16384u);
  EXPECT_EQ(map.masters().at(0), (server_address{"127.0.0.1", 30001}));
  EXPECT_EQ(map.masters().at(1), (server_address{"10.0.0.9", 30002}))
      << "an empty endpoint is the node that answered";
  EXPECT_THROW(slot_map::from_slots(array({array({integer(0), integer(1)})}), asked), error);
}

TEST(SlotMap, AssignMovesOneSlotAndAddsANewMaster) {
  slot_map map = slot_map::from_slots(
      array({array({integer(0), integer(16383), array({bulk("127.0.0.1"), integer(30001)})})}),
      asked);
  map.assign(77, {"127.0.0.1", 30002});
  ASSERT_EQ(map.masters().size(), 2u);
  EXPECT_EQ(map.owner_of(77), 1);
  EXPECT_EQ(map.owner_of(76), 0);
  EXPECT_EQ(map.owner_of(78), 0);
}

TEST(Redirection, ParsesMovedAndAsk) {
  const auto moved = parse_redirection("MOVED 3999 127.0.0.1:6381", asked);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->type, redirection::kind::moved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->target, (server_address{"127.0.0.1", 6381}));

  const auto ask = parse_redirection("ASK 16383 [::1]:7001", asked);
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->type, redirection::kind::ask);
  EXPECT_EQ(ask->target, (server_address{"::1", 7001}));

  const auto no_host = parse_redirection("MOVED 1 :7002", asked);
  ASSERT_TRUE(no_host);
  EXPECT_EQ(no_host->target, (server_address{"10.0.0.9", 7002}));
}

TEST(Redirection, IgnoresOtherErrorsAndMalformedOnes) {
  for (const char* text : {"ERR unknown command", "MOVED", "MOVED 3999", "MOVED x 1.2.3.4:5",
                           "MOVED 16384 h:1", "ASK 1 host", "ASK 1 host:0", "ASK 1 host:99999",
                           "MOVEDX 1 h:1", "TRYAGAIN Multiple keys request during rehashing"}) {
    EXPECT_FALSE(parse_redirection(text, asked)) << text;
  }
}

}  // namespace
}  // namespace dlock::topology
