// The read-write lock's Lua scripts (src/locks/scripts/rw_*.lua) run directly against a real
// server: Redisson's layout (mode, fields, one lease key per read hold), fencing tokens for
// writers, hold ids for readers, writer intents, kind checks, and interoperability with
// Redisson's RedissonReadLock / RedissonWriteLock scripts, run here as a foreign client.
#include <gtest/gtest.h>

#include <future>

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
constexpr std::string_view intent_ms = "10000", refresh_ms = "3000";

// Redisson's scripts as a foreign client. Written for these tests after Redisson's behaviour at
// commit 66863978 (redisson/src/main/java/org/redisson/...), without the unlock latch (only
// Redisson's own retries read it):
//   read lock    RedissonReadLock.java:56-79   KEYS N, timeout prefix; ARGV lease, field,
//                                              writer field; nil acquired, else PTTL
//   read unlock  RedissonReadLock.java:82-140  KEYS N, channel, timeout prefix, key prefix;
//                                              ARGV field; publishes "0" when it frees N
//   write lock   RedissonWriteLock.java:54-74  KEYS N; ARGV lease, writer field
//   write unlock RedissonWriteLock.java:77-117 KEYS N, channel; ARGV lease, writer field;
//                                              publishes "1" when it frees N, nothing on a
//                                              downgrade
constexpr std::string_view java_read_lock = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
local admitted = not mode or mode == 'read' or
  (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1)
if not admitted then return redis.call('pttl', KEYS[1]) end
if not mode then redis.call('hset', KEYS[1], 'mode', 'read') end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
return nil)";
constexpr std::string_view java_read_unlock = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then redis.call('publish', KEYS[2], '0') return nil end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n == 0 then redis.call('hdel', KEYS[1], ARGV[1]) end
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    local c = tonumber(redis.call('hget', KEYS[1], f))
    if c then
      for i = 1, c do
        longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if longest > 0 then redis.call('pexpire', KEYS[1], longest) return 0 end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1)";
constexpr std::string_view java_write_lock = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1]))";
constexpr std::string_view java_write_unlock = R"(
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then redis.call('publish', KEYS[2], '1') return nil end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], '1')
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1)";

// Owner fields of the shape both clients use: "<id>:<thread>".
const std::string reader_a = "0123456789abcdef0123456789abcdef:1";
const std::string reader_b = "0123456789abcdef0123456789abcdef:2";
const std::string java_thread = "6f1d2c3b-4a59-4e7f-8a9b-0c1d2e3f4a5b:77";

class RwScriptsTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
  const script read_lock_script{std::string(scripts::rw_read_lock)};
  const script read_unlock_script{std::string(scripts::rw_read_unlock)};
  const script read_renew_script{std::string(scripts::rw_read_renew)};
  const script write_lock_script{std::string(scripts::rw_write_lock)};
  const script write_unlock_script{std::string(scripts::rw_write_unlock)};
  const script force_script{std::string(scripts::rw_force_unlock)};
  const script status_script{std::string(scripts::rw_status)};
  // As reentrant_protocol sends it (wait_line.lua in front), called by a client outside the line.
  const script reentrant_lock_script{locks::with_wait_line(scripts::reentrant_lock)};
  reply reentrant_lock(const std::string& owner) {
    return c.eval(reentrant_lock_script,
                  {name, fence, locks::wait_line_key(name), locks::wait_line_deadlines_key(name),
                   locks::reservation_key(name)},
                  {lease_ms, owner, "0", "", "0", "", "3000"});
  }
  const script java_read_lock_script{std::string(java_read_lock)};
  const script java_read_unlock_script{std::string(java_read_unlock)};
  const script java_write_lock_script{std::string(java_write_lock)};
  const script java_write_unlock_script{std::string(java_write_unlock)};

  const std::string name = unique_key("rw");
  const std::string fence = locks::fence_key(name);
  const std::string writers = locks::rwlock_writers_key(name);
  const std::string channel = locks::rwlock_channel(name);
  const std::string base = locks::suffix_base(name);

  std::string prefix(const std::string& field) const {
    return locks::rwlock_timeout_prefix(name, field);
  }
  std::pair<std::int64_t, reply> read_lock(const std::string& field, int known = 0) {
    const reply r = c.eval(read_lock_script, {name, prefix(field), writers},
                           {lease_ms, field, field + ":write", std::to_string(known)});
    return {r.elements.at(0).integer, r.elements.size() > 1 ? r.elements[1] : reply{}};
  }
  std::int64_t read_unlock(const std::string& field, std::uint64_t id, int keep = 0) {
    return c
        .eval(read_unlock_script, {name, channel, prefix(field), base},
              {lease_ms, field, std::to_string(keep), std::to_string(id), "publish"})
        .integer;
  }
  std::pair<std::int64_t, reply> write_lock(const std::string& field, bool may_wait,
                                            int known = 0) {
    const reply r = c.eval(write_lock_script, {name, fence, writers, base, channel},
                           {lease_ms, field + ":write", field, std::to_string(known),
                            may_wait ? "1" : "0", intent_ms, refresh_ms, "publish"});
    return {r.elements.at(0).integer, r.elements.size() > 1 ? r.elements[1] : reply{}};
  }
  std::int64_t write_unlock(const std::string& field, std::uint64_t token, int keep = 0) {
    return c
        .eval(write_unlock_script, {name, channel, fence},
              {lease_ms, field + ":write", std::to_string(keep), std::to_string(token), "publish"})
        .integer;
  }
  std::string hget(const std::string& field) {
    const reply r = c.command({"HGET", name, field});
    return r.is_nil() ? "" : r.str;
  }
  std::int64_t pttl(const std::string& key) { return c.command({"PTTL", key}).integer; }
  // The messages published on the lock's channel while `action` runs: a marker published after
  // it arrives after them (one channel keeps its order).
  template <typename F>
  std::vector<std::string> published(F&& action) {
    std::mutex m;
    std::vector<std::string> got;
    std::promise<void> subscribed, ended;
    subscription s = c.subscribe(
        channel,
        [&](std::string_view payload) {
          std::lock_guard l(m);
          if (payload == "end") {
            ended.set_value();
          } else {
            got.emplace_back(payload);
          }
        },
        [&] { subscribed.set_value(); });
    subscribed.get_future().wait();
    action();
    c.command({"PUBLISH", channel, "end"});
    EXPECT_EQ(ended.get_future().wait_for(10s), std::future_status::ready);
    std::lock_guard l(m);
    return got;
  }
};

TEST_F(RwScriptsTest, ReadHoldsKeepRedissonsLayoutOneLeaseKeyPerHold) {
  const auto [status, id] = read_lock(reader_a);
  ASSERT_EQ(status, 1);
  EXPECT_GT(id.integer, 0);
  EXPECT_EQ(read_lock(reader_a, 1).first, 2);
  EXPECT_EQ(hget("mode"), "read");
  EXPECT_EQ(hget(reader_a), "2");
  EXPECT_EQ(prefix(reader_a), "{" + name + "}:" + reader_a + ":rwlock_timeout");
  EXPECT_EQ(c.command({"GET", prefix(reader_a) + ":1"}).str, std::to_string(id.integer));
  EXPECT_EQ(c.command({"GET", prefix(reader_a) + ":2"}).str, "1");
  for (const std::string& key : {prefix(reader_a) + ":1", prefix(reader_a) + ":2", name}) {
    EXPECT_GT(pttl(key), 30000 - ttl_slack_ms) << key;
  }
  // One hold fewer: its key goes; the last: the hash goes and "0" wakes a waiter.
  EXPECT_EQ(read_unlock(reader_a, static_cast<std::uint64_t>(id.integer), 1), 0);
  EXPECT_EQ(c.command({"EXISTS", prefix(reader_a) + ":2"}).integer, 0);
  const auto hold_id = static_cast<std::uint64_t>(id.integer);  // a lambda cannot capture a binding
  const auto messages = published([&] { EXPECT_EQ(read_unlock(reader_a, hold_id), 1); });
  EXPECT_EQ(messages, std::vector<std::string>{"0"});
  EXPECT_EQ(c.command({"EXISTS", name, prefix(reader_a) + ":1"}).integer, 0);
}

TEST_F(RwScriptsTest, AReadReleaseWithAnotherHoldsIdChangesNothing) {
  const auto first = read_lock(reader_a).second.integer;
  ASSERT_EQ(read_unlock(reader_a, static_cast<std::uint64_t>(first)), 1);
  const auto second = read_lock(reader_a).second.integer;
  ASSERT_NE(first, second);
  // A retry of the first release arrives late: the newer hold stays.
  EXPECT_EQ(read_unlock(reader_a, static_cast<std::uint64_t>(first)), -1);
  EXPECT_EQ(hget(reader_a), "1");
}

TEST_F(RwScriptsTest, ReadersShareAndAWriterWaitsWithAnIntentThatHoldsNewReadersBack) {
  ASSERT_EQ(read_lock(reader_a).first, 1);
  const auto [refused, sleep] = write_lock("w:9", true);
  EXPECT_EQ(refused, 0);
  EXPECT_GT(sleep.integer, 0);
  EXPECT_LE(sleep.integer, 3000);  // re-attempts within the refresh interval
  EXPECT_EQ(c.command({"ZSCORE", writers, "w:9:write"}).is_nil(), false);
  // A new reader waits for the writer; the reader already in may re-enter.
  const auto [held_back, wait] = read_lock(reader_b);
  EXPECT_EQ(held_back, 0);
  EXPECT_GT(wait.integer, 0);
  EXPECT_LE(wait.integer, 10000);
  EXPECT_EQ(read_lock(reader_a, 1).first, 2);
  // The writer gives up (an attempt that will not wait): its intent goes, readers hear "1".
  const auto messages = published([&] { EXPECT_EQ(write_lock("w:9", false).first, 0); });
  EXPECT_EQ(messages, std::vector<std::string>{"1"});
  EXPECT_EQ(c.command({"EXISTS", writers}).integer, 0);
  EXPECT_EQ(read_lock(reader_b).first, 1);
}

TEST_F(RwScriptsTest, AnIntentThatIsNotRenewedExpires) {
  // A writer that crashed while waiting: its intent holds new readers back only until its score.
  ASSERT_EQ(read_lock(reader_a).first, 1);
  const reply r = c.eval(write_lock_script, {name, fence, writers, base, channel},
                         {lease_ms, "w:9:write", "w:9", "0", "1", "300", refresh_ms, "publish"});
  ASSERT_EQ(r.elements.at(0).integer, 0);
  const auto [held_back, wait] = read_lock(reader_b);
  EXPECT_EQ(held_back, 0);
  EXPECT_LE(wait.integer, 300);  // told to retry when the intent runs out
  // No event announces an expiry: poll the reader's attempt.
  EXPECT_TRUE(test::eventually([&] { return read_lock(reader_b).first == 1; }, 300ms + 2s));
}

TEST_F(RwScriptsTest, WriteHoldsTakeFencingTokensAndExcludeEveryone) {
  const auto [status, token] = write_lock("w:1", true);
  ASSERT_EQ(status, 1);
  EXPECT_EQ(c.command({"GET", fence}).str, std::to_string(token.integer));
  EXPECT_EQ(hget("mode"), "write");
  EXPECT_EQ(hget("w:1:write"), "1");
  EXPECT_EQ(write_lock("w:1", true, 1).first, 2);
  EXPECT_EQ(read_lock(reader_a).first, 0);
  EXPECT_EQ(write_lock("w:2", false).first, 0);
  EXPECT_EQ(write_unlock("w:1", static_cast<std::uint64_t>(token.integer), 1), 0);
  const auto token_value = static_cast<std::uint64_t>(token.integer);  // not a captured binding
  const auto messages = published([&] { EXPECT_EQ(write_unlock("w:1", token_value), 1); });
  EXPECT_EQ(messages, std::vector<std::string>{"1"});
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  // A late retry of that release after a newer write hold began changes nothing.
  const auto newer = write_lock("w:1", true).second.integer;
  EXPECT_GT(newer, token.integer);
  EXPECT_EQ(write_unlock("w:1", static_cast<std::uint64_t>(token.integer)), -1);
  EXPECT_EQ(hget("w:1:write"), "1");
}

TEST_F(RwScriptsTest, AWriterDowngradesAndAReaderCannotUpgrade) {
  const auto token = write_lock("w:1", true).second.integer;
  // The writer's own read hold is admitted; its write unlock leaves the lock in read mode.
  EXPECT_EQ(read_lock("w:1").first, 1);
  EXPECT_EQ(write_unlock("w:1", static_cast<std::uint64_t>(token)), 1);
  EXPECT_EQ(hget("mode"), "read");
  EXPECT_EQ(hget("w:1"), "1");
  EXPECT_EQ(read_lock(reader_b).first, 1);
  // A reader asking for the write lock would wait for itself.
  EXPECT_EQ(write_lock(reader_b, true).first, -2);
}

TEST_F(RwScriptsTest, AWriterDropsReadersWhoseLeaseKeysAllLapsed) {
  ASSERT_EQ(read_lock(reader_a).first, 1);
  ASSERT_EQ(read_lock(reader_a, 1).first, 2);
  // The reader crashed: its lease keys lapse (the hash would live on until its own TTL).
  c.command({"DEL", prefix(reader_a) + ":1", prefix(reader_a) + ":2"});
  EXPECT_EQ(write_lock("w:1", true).first, 1);
  EXPECT_EQ(hget(reader_a), "");
}

TEST_F(RwScriptsTest, ReadRenewalExtendsEveryLeaseKeyAndReportsLostHolds) {
  const auto id = read_lock(reader_a).second.integer;
  ASSERT_EQ(read_lock(reader_a, 1).first, 2);
  c.command({"PEXPIRE", prefix(reader_a) + ":2", "1000"});
  const reply r = c.eval(read_renew_script, {name, prefix(reader_a), name, prefix(reader_b)},
                         {"60000", reader_a, std::to_string(id), reader_b, "0"});
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 0);  // never held
  EXPECT_GT(pttl(prefix(reader_a) + ":2"), 60000 - ttl_slack_ms);
  EXPECT_GT(pttl(name), 60000 - ttl_slack_ms);
  c.command({"DEL", prefix(reader_a) + ":1"});  // the first hold's key lapsed: lost
  EXPECT_EQ(c.eval(read_renew_script, {name, prefix(reader_a)}, {"0", reader_a, std::to_string(id)})
                .elements.at(0)
                .integer,
            0);
}

TEST_F(RwScriptsTest, KindsAreNotMixed) {
  // A reentrant lock (dlock::mutex, Redisson RLock) at the name: both sides refuse it.
  ASSERT_EQ(reentrant_lock(reader_a).elements.at(0).integer, 1);
  const auto [r_status, r_what] = read_lock(reader_b);
  EXPECT_EQ(r_status, -1);
  EXPECT_NE(r_what.str.find("reentrant lock"), std::string::npos) << r_what.str;
  EXPECT_EQ(write_lock(reader_b, true).first, -1);
  // A read-write lock at the name: the reentrant lock refuses it.
  c.command({"DEL", name});
  ASSERT_EQ(read_lock(reader_a).first, 1);
  const reply r = reentrant_lock(reader_b);
  EXPECT_EQ(r.elements.at(0).integer, -1);
  // Some other data: not touched.
  c.command({"DEL", name});
  c.command({"SET", name, "data"});
  EXPECT_EQ(read_lock(reader_a).second.str, "a plain lock or data (a string)");
  EXPECT_EQ(write_lock(reader_a, true).second.str, "a plain lock or data (a string)");
  EXPECT_EQ(c.eval(force_script, {name, channel}, {"publish"}).elements.at(0).integer, -1);
  EXPECT_EQ(c.command({"GET", name}).str, "data");
}

TEST_F(RwScriptsTest, StatusReadsModeHoldersAndWaitingWriters) {
  ASSERT_EQ(read_lock(reader_a).first, 1);
  ASSERT_EQ(write_lock("w:1", true).first, 0);
  const reply r = c.eval(status_script, {name, fence, writers}, {});
  ASSERT_EQ(r.elements.size(), 5u);
  EXPECT_EQ(r.elements[0].str, "hash");
  EXPECT_EQ(r.elements[3].elements.size(), 4u);  // mode and one reader
  EXPECT_EQ(r.elements[4].integer, 1);
  EXPECT_EQ(c.eval(force_script, {name, channel}, {"publish"}).elements.at(0).integer, 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

// --- Redisson as a foreign client --------------------------------------------------------------

TEST_F(RwScriptsTest, RedissonAndDlockReadersShareAndRedissonsUnlockKeepsALiveDlockReader) {
  ASSERT_TRUE(c.eval(java_read_lock_script, {name, prefix(java_thread)},
                     {lease_ms, java_thread, java_thread + ":write"})
                  .is_nil());
  const auto id = read_lock(reader_a).second.integer;
  ASSERT_GT(id, 0);
  EXPECT_EQ(hget(java_thread), "1");
  // Redisson's unlock computes the hash's TTL from every reader's lease keys, dlock's included:
  // the hash stays while the dlock reader lives.
  EXPECT_EQ(
      c.eval(java_read_unlock_script, {name, channel, prefix(java_thread), base}, {java_thread})
          .integer,
      0);
  EXPECT_EQ(hget("mode"), "read");
  EXPECT_GT(pttl(name), 30000 - ttl_slack_ms);
  // Redisson's writer is refused while the dlock reader holds; dlock's last read unlock frees it.
  EXPECT_GT(c.eval(java_write_lock_script, {name}, {lease_ms, java_thread + ":write"}).integer, 0);
  EXPECT_EQ(read_unlock(reader_a, static_cast<std::uint64_t>(id)), 1);
  EXPECT_TRUE(c.eval(java_write_lock_script, {name}, {lease_ms, java_thread + ":write"}).is_nil());
}

TEST_F(RwScriptsTest, RedissonsWriterExcludesDlockAndDlocksWriterExcludesRedisson) {
  ASSERT_TRUE(c.eval(java_write_lock_script, {name}, {lease_ms, java_thread + ":write"}).is_nil());
  EXPECT_EQ(read_lock(reader_a).first, 0);
  EXPECT_EQ(write_lock(reader_a, false).first, 0);
  const auto messages = published([&] {
    EXPECT_EQ(c.eval(java_write_unlock_script, {name, channel}, {lease_ms, java_thread + ":write"})
                  .integer,
              1);
  });
  EXPECT_EQ(messages, std::vector<std::string>{"1"});  // wakes every dlock waiter
  const auto token = write_lock(reader_a, true).second.integer;
  ASSERT_GT(token, 0);
  EXPECT_GT(c.eval(java_read_lock_script, {name, prefix(java_thread)},
                   {lease_ms, java_thread, java_thread + ":write"})
                .integer,
            0);
  EXPECT_GT(c.eval(java_write_lock_script, {name}, {lease_ms, java_thread + ":write"}).integer, 0);
  // dlock's downgrade: its write unlock leaves mode read and publishes "1"; Redisson's reader
  // is then admitted beside dlock's.
  ASSERT_EQ(read_lock(reader_a).first, 1);
  EXPECT_EQ(write_unlock(reader_a, static_cast<std::uint64_t>(token)), 1);
  EXPECT_TRUE(c.eval(java_read_lock_script, {name, prefix(java_thread)},
                     {lease_ms, java_thread, java_thread + ":write"})
                  .is_nil());
  EXPECT_EQ(hget("mode"), "read");
}

TEST_F(RwScriptsTest, RedissonsReaderIgnoresIntentsButDlocksDoesNot) {
  // Documented limit of writer preference: only dlock readers honour it.
  ASSERT_EQ(read_lock(reader_a).first, 1);
  ASSERT_EQ(write_lock("w:1", true).first, 0);
  EXPECT_EQ(read_lock(reader_b).first, 0);
  EXPECT_TRUE(c.eval(java_read_lock_script, {name, prefix(java_thread)},
                     {lease_ms, java_thread, java_thread + ":write"})
                  .is_nil());
}

}  // namespace
}  // namespace dlock
