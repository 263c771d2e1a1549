// The plain lock's Lua scripts (src/locks/scripts/plain_*.lua), run directly against a real
// server: the value format, fencing tokens, foreign holders (a value set by SET NX PX as redis-py,
// redsync and node-redlock do), take-over of an unknown own hold, compare-and-delete release with
// its announcement, batched renewal and checks, status and forced release.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "dlock/client.hpp"
#include "dlock/embedded_scripts.hpp"
#include "locks/names.hpp"
#include "locks/types/wait_line.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

constexpr std::string_view lease_ms = "30000";
// PTTL right after setting a 30 s lease: allow for the time the test itself takes.
constexpr std::int64_t ttl_slack_ms = 2000;
// A dlock owner: "<client id>:<owner key>".
const std::string owner_a = std::string(32, 'a') + ":1";
const std::string owner_b = std::string(32, 'b') + ":7";

class PlainScriptsTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
  // As the protocol and Redlock send them: wait_line.lua's functions in front. These tests call
  // them as Redlock does (no wait line) unless they say otherwise.
  const script lock_script{locks::with_wait_line(scripts::plain_lock)};
  const script unlock_script{locks::with_wait_line(scripts::plain_unlock)};
  const script renew_script{std::string(scripts::plain_renew)};
  const script status_script{std::string(scripts::plain_status)};
  const script force_script{locks::with_wait_line(scripts::plain_force_unlock)};

  const std::string name = unique_key("lock");
  const std::string fence = locks::fence_key(name);
  const std::string channel = locks::plain_unlock_channel(name);

  reply lock(const std::string& owner, bool known = false, std::string_view lease = lease_ms) {
    return c.eval(lock_script, {name, fence}, {lease, owner, "", known ? "1" : "0"});
  }
  std::string value() { return c.command({"GET", name}).str; }
  reply force_unlock() {
    return c.eval(force_script,
                  {name, channel, locks::wait_line_key(name), locks::wait_line_deadlines_key(name),
                   locks::reservation_key(name)},
                  {"publish", "5000", locks::call_channel_prefix(name)});
  }
};

TEST_F(PlainScriptsTest, AcquireSetsOwnerAndTokenAsValueWithLease) {
  const reply r = lock(owner_a);
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 1);
  const std::int64_t token = r.elements[1].integer;
  EXPECT_GT(token, 0);
  EXPECT_EQ(value(), owner_a + ":" + std::to_string(token));
  EXPECT_EQ(c.command({"GET", fence}).str, std::to_string(token));
  const std::int64_t ttl = c.command({"PTTL", name}).integer;
  EXPECT_GT(ttl, 30000 - ttl_slack_ms);
  EXPECT_LE(ttl, 30000);
}

TEST_F(PlainScriptsTest, HeldByDlockHolderSaysItPublishes) {
  ASSERT_EQ(lock(owner_a).elements[0].integer, 1);
  const reply r = lock(owner_b);
  ASSERT_EQ(r.elements.size(), 3u);
  EXPECT_EQ(r.elements[0].integer, 0);
  EXPECT_GT(r.elements[1].integer, 30000 - ttl_slack_ms);
  EXPECT_EQ(r.elements[2].integer, 1);
}

TEST_F(PlainScriptsTest, ForeignHolderExcludesAndIsMarkedForeign) {
  // redis-py: a uuid's 32 hex digits; node-redlock: random hex; redsync: base64.
  for (const std::string foreign : {"0f1e2d3c4b5a69788796a5b4c3d2e1f0", "q2x+Yz/9AbCdEfGhIjKlMn==",
                                    "deadbeefdeadbeefdeadbeefdeadbeef:notanumber:x"}) {
    c.command({"DEL", name});
    ASSERT_EQ(c.command({"SET", name, foreign, "NX", "PX", "5000"}).str, "OK");
    const reply r = lock(owner_a);
    ASSERT_EQ(r.elements.size(), 3u) << foreign;
    EXPECT_EQ(r.elements[0].integer, 0) << foreign;
    EXPECT_GT(r.elements[1].integer, 0) << foreign;
    EXPECT_EQ(r.elements[2].integer, 0) << foreign;  // a foreign holder: poll for its release
    EXPECT_EQ(value(), foreign);
  }
  // No TTL (redis-py with timeout=None): pttl -1.
  c.command({"SET", name, "foreign-forever"});
  const reply r = lock(owner_a);
  EXPECT_EQ(r.elements[1].integer, -1);
  EXPECT_EQ(r.elements[2].integer, 0);
}

TEST_F(PlainScriptsTest, KnownOwnHoldIsNotReentered) {
  ASSERT_EQ(lock(owner_a).elements[0].integer, 1);
  const std::string held = value();
  const reply r = lock(owner_a, true);
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0].integer, 2);
  EXPECT_EQ(value(), held);  // unchanged
}

TEST_F(PlainScriptsTest, UnknownOwnHoldIsTakenOverWithANewToken) {
  // An acquisition whose reply was lost: the same owner asks again without knowing of it.
  const std::int64_t first = lock(owner_a).elements[1].integer;
  const reply r = lock(owner_a, false);
  ASSERT_EQ(r.elements[0].integer, 1);
  EXPECT_GT(r.elements[1].integer, first);
  EXPECT_EQ(value(), owner_a + ":" + std::to_string(r.elements[1].integer));
}

TEST_F(PlainScriptsTest, TokensStrictlyIncreaseAcrossHolders) {
  std::int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const reply r = lock(i % 2 == 0 ? owner_a : owner_b);
    ASSERT_EQ(r.elements[0].integer, 1);
    EXPECT_GT(r.elements[1].integer, last);
    last = r.elements[1].integer;
    ASSERT_EQ(c.eval(unlock_script, {name, channel}, {value(), "publish"}).integer, 1);
  }
}

TEST_F(PlainScriptsTest, ReleaseDeletesOnlyItsOwnValueAndPublishes) {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::string> messages;
  const subscription sub = c.subscribe(
      channel,
      [&](std::string_view msg) {
        std::lock_guard g(m);
        messages.emplace_back(msg);
        cv.notify_all();
      },
      [&] {
        std::lock_guard g(m);
        messages.emplace_back("subscribed");
        cv.notify_all();
      });
  {
    std::unique_lock g(m);
    ASSERT_TRUE(cv.wait_for(g, 5s, [&] { return !messages.empty(); }));
  }
  const std::int64_t token = lock(owner_a).elements[1].integer;
  const std::string mine = owner_a + ":" + std::to_string(token);
  // A stale value (an older hold of the same owner) and someone else's do nothing.
  EXPECT_EQ(c.eval(unlock_script, {name, channel}, {owner_a + ":1", "publish"}).integer, 0);
  EXPECT_EQ(
      c.eval(unlock_script, {name, channel}, {owner_b + ":" + std::to_string(token), "publish"})
          .integer,
      0);
  EXPECT_EQ(value(), mine);
  // 2: the message reached a listener (this test's subscription).
  EXPECT_EQ(c.eval(unlock_script, {name, channel}, {mine, "publish"}).integer, 2);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  // Repeating it (a retry) changes nothing.
  EXPECT_EQ(c.eval(unlock_script, {name, channel}, {mine, "publish"}).integer, 0);
  std::unique_lock g(m);
  ASSERT_TRUE(cv.wait_for(g, 5s, [&] { return messages.size() >= 2; }));
  EXPECT_EQ(messages[1], "0");
}

// dlock::plain_lock passes the wait line (as the reentrant lock does, lock_scripts_test.cpp): the
// release reserves the key for the first client in line and calls it by its id before the "0".
TEST_F(PlainScriptsTest, WithAWaitLineTheReleaseReservesTheLockForTheFirstClientInLine) {
  const std::string line = locks::wait_line_key(name);
  const std::string deadlines = locks::wait_line_deadlines_key(name);
  const std::string reserved = locks::reservation_key(name);
  const auto lock_in_line = [&](const std::string& owner, std::string_view id) {
    return c.eval(lock_script, {name, fence, line, deadlines, reserved},
                  {lease_ms, owner, "", "0", id, "1", "l", "3000"});
  };
  const reply held = lock_in_line(owner_a, "1001");
  ASSERT_EQ(held.elements.at(0).integer, 1);
  const reply behind = lock_in_line(owner_b, "1002");
  ASSERT_EQ(behind.elements.size(), 4U);
  EXPECT_EQ(behind.elements[0].integer, 0);
  EXPECT_EQ(behind.elements[3].integer, 1) << "a plain_lock holder's release calls the line";
  EXPECT_EQ(c.command({"ZRANGE", line, "0", "-1"}).elements.at(0).str, "1002");
  EXPECT_EQ(c.eval(unlock_script, {name, channel, line, deadlines, reserved},
                   {owner_a + ":" + std::to_string(held.elements.at(1).integer), "publish", "5000",
                    locks::call_channel_prefix(name)})
                .integer,
            1);
  EXPECT_EQ(c.command({"GET", reserved}).str, "1002");
  const reply refused = lock(std::string(32, 'c') + ":1");  // outside the line (as Redlock)
  EXPECT_EQ(refused.elements.at(0).integer, 1) << "Redlock's form ignores the line";
  c.command({"DEL", name});
  const reply other = lock_in_line(std::string(32, 'd') + ":1", "1003");
  EXPECT_EQ(other.elements.at(0).integer, 0);
  EXPECT_EQ(other.elements.at(2).integer, 1) << "a reservation is a dlock holder's: it publishes";
  EXPECT_EQ(other.elements.at(3).integer, 1) << "and the next holder's release calls";
  EXPECT_EQ(lock_in_line(owner_b, "1002").elements.at(0).integer, 1);
  EXPECT_EQ(c.command({"EXISTS", reserved}).integer, 0);
  // Redlock's value (a random hex nonce) publishes but calls nobody: its masters keep no line.
  c.command({"SET", name, owner_a + ":" + std::string(32, 'f'), "PX", "5000"});
  const reply redlock = lock_in_line(owner_b, "1002");
  ASSERT_EQ(redlock.elements.size(), 4U);
  EXPECT_EQ(redlock.elements[2].integer, 1);
  EXPECT_EQ(redlock.elements[3].integer, 0);
}

TEST_F(PlainScriptsTest, RenewExtendsOnlyMatchingValuesAndChecksWithZero) {
  const std::string other = unique_key("other");
  ASSERT_EQ(lock(owner_a, false, "1000").elements[0].integer, 1);
  const std::string mine = value();
  ASSERT_EQ(c.command({"SET", other, "foreign", "PX", "1000"}).str, "OK");
  const reply r = c.eval(renew_script, {name, other}, {"60000", mine, mine});
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 0);
  EXPECT_GT(c.command({"PTTL", name}).integer, 60000 - ttl_slack_ms);
  EXPECT_LE(c.command({"PTTL", other}).integer, 1000);
  // "0" checks without extending.
  c.command({"PEXPIRE", name, "5000"});
  const reply check = c.eval(renew_script, {name}, {"0", mine});
  EXPECT_EQ(check.elements.at(0).integer, 1);
  EXPECT_LE(c.command({"PTTL", name}).integer, 5000);
}

TEST_F(PlainScriptsTest, StatusReadsValueTtlAndCounter) {
  reply r = c.eval(status_script, {name, fence}, {});
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_EQ(r.elements[0].str, "none");
  EXPECT_EQ(r.elements[1].integer, -2);
  EXPECT_EQ(r.elements[2].str, "0");
  const std::int64_t token = lock(owner_a).elements[1].integer;
  r = c.eval(status_script, {name, fence}, {});
  EXPECT_EQ(r.elements[0].str, "string");
  EXPECT_GT(r.elements[1].integer, 0);
  EXPECT_EQ(r.elements[2].str, std::to_string(token));
  EXPECT_EQ(r.elements[3].str, owner_a + ":" + std::to_string(token));
}

TEST_F(PlainScriptsTest, ForceUnlockDeletesPlainLocksOnly) {
  reply r = force_unlock();
  EXPECT_EQ(r.elements.at(0).integer, 0);
  c.command({"SET", name, "foreign-holder", "PX", "5000"});
  r = force_unlock();
  EXPECT_EQ(r.elements.at(0).integer, 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  // A string without a TTL is data, unless it holds a dlock value.
  c.command({"SET", name, "data"});
  r = force_unlock();
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, -1);
  EXPECT_EQ(c.command({"GET", name}).str, "data");
  c.command({"SET", name, owner_a + ":12"});
  EXPECT_EQ(force_unlock().elements.at(0).integer, 1);
  c.command({"HSET", name, "field", "1"});
  r = force_unlock();
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, -1);
  EXPECT_EQ(r.elements[1].str, "a hash");
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 1);  // nothing deleted
}

}  // namespace
}  // namespace dlock
