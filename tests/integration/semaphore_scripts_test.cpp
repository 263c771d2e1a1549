// The semaphore's Lua scripts (src/locks/scripts/semaphore_*.lua), run directly against a real
// server: Redisson's RPermitExpirableSemaphore layout, return values, reclaim of expired permits
// and its message, idempotent release, renewal, count operations, kind checks; and interop both
// ways with Redisson's acquire and release as a foreign client.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/embedded_scripts.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

constexpr std::int64_t lease_ms = 30000;
// Between reading the server's clock and a script reading it: the time the test itself takes.
constexpr std::int64_t clock_slack_ms = 2000;
// How long a published message may take to reach a subscriber.
constexpr auto message_limit = 5s;
// Redisson's score for a permit without expiry (RedissonPermitExpirableSemaphore.java:50).
constexpr std::string_view never_score = "922337203685477";

// The foreign client: Redisson's RPermitExpirableSemaphore at commit 66863978
// (redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java), re-expressed from
// its semantics. tryAcquireAsync(ids, timeoutDate), lines 365-421: KEYS count, "{N}:timeout",
// "redisson_sc:{N}"; ARGV n, deadline (epoch ms, or the never score), now (the JVM's clock),
// never score, publish command, then the raw 16-byte ids. Reclaims up to n expired permits and
// publishes the new count; takes n permits if available ('OK'); else ':<earliest score>' unless
// that is the never score, else nil.
constexpr std::string_view redisson_acquire = R"(
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local count = redis.call('incrby', KEYS[1], #expired)
  if tonumber(count) > 0 then redis.call(ARGV[5], KEYS[3], count) end
end
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[1] ~= nil and head[2] ~= ARGV[4] then return ':' .. tostring(head[2]) end
return nil
)";
// tryReleaseAsync(permitId), lines 611-632: KEYS count, channel, "{N}:timeout"; ARGV raw id, 1,
// now, publish command. Removes the id; if it was there adds 1 and publishes the new count;
// answers 1, or 0 when not held or already expired.
constexpr std::string_view redisson_release = R"(
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
if tonumber(redis.call('zrem', KEYS[3], ARGV[1])) ~= 1 then return 0 end
local count = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], count)
if tonumber(expiry) <= tonumber(ARGV[3]) then return 0 end
return 1
)";

std::string hex_to_raw(std::string_view hex) {
  std::string raw;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    raw += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return raw;
}

std::string raw_to_hex(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  for (const char ch : raw) {
    hex += digits[(static_cast<unsigned char>(ch) >> 4) & 0xf];
    hex += digits[static_cast<unsigned char>(ch) & 0xf];
  }
  return hex;
}

// Collects the messages published on one channel.
class channel_listener {
 public:
  channel_listener(client& c, const std::string& channel) {
    std::promise<void> subscribed;
    auto ready = subscribed.get_future();
    bool first = true;
    sub_ = c.subscribe(
        channel,
        [this](std::string_view payload) {
          std::lock_guard guard(mutex_);
          messages_.emplace_back(payload);
          if (waiting_ && messages_.size() >= wanted_) {
            waiting_ = false;
            arrived_.set_value();
          }
        },
        [&subscribed, first]() mutable {
          if (first) subscribed.set_value();
          first = false;
        });
    if (ready.wait_for(message_limit) != std::future_status::ready) {
      throw std::runtime_error("not subscribed in time");
    }
  }
  // The first `n` messages, once they arrived (fewer if they did not within message_limit).
  std::vector<std::string> wait_for(std::size_t n) {
    std::future<void> done;
    {
      std::lock_guard guard(mutex_);
      if (messages_.size() < n) {
        wanted_ = n;
        waiting_ = true;
        arrived_ = std::promise<void>();
        done = arrived_.get_future();
      }
    }
    if (done.valid()) (void)done.wait_for(message_limit);
    std::lock_guard guard(mutex_);
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
  std::size_t wanted_ = 0;
  bool waiting_ = false;
  std::promise<void> arrived_;
  subscription sub_;
};

class SemaphoreScriptsTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
  const script acquire_script{std::string(scripts::semaphore_acquire)};
  const script release_script{std::string(scripts::semaphore_release)};
  const script renew_script{std::string(scripts::semaphore_renew)};
  const script permits_script{std::string(scripts::semaphore_permits)};
  const script status_script{std::string(scripts::semaphore_status)};
  const script force_script{std::string(scripts::semaphore_force_release)};
  const script foreign_acquire{std::string(redisson_acquire)};
  const script foreign_release{std::string(redisson_release)};

  const std::string name = unique_key("sem");
  const std::string holders = "{" + name + "}:timeout";
  const std::string channel = "redisson_sc:{" + name + "}";
  const std::string id_a = "0123456789abcdef0000000000000001";
  const std::string id_b = "0123456789abcdef0000000000000002";
  const std::string id_c = "0123456789abcdef0000000000000003";

  // {status, wait} of semaphore_acquire.lua.
  reply acquire(const std::string& id, std::int64_t initial = 3, std::int64_t lease = lease_ms) {
    return c.eval(acquire_script, {name, holders, channel},
                  {id, std::to_string(lease), std::to_string(initial), "publish"});
  }
  std::int64_t release(const std::string& id) {
    return c.eval(release_script, {name, holders, channel}, {id, "publish"}).integer;
  }
  reply permits(std::string_view op, std::int64_t n, std::int64_t initial = 3) {
    return c.eval(permits_script, {name, holders, channel},
                  {op, std::to_string(initial), std::to_string(n), "publish"});
  }
  std::string count() { return c.command({"GET", name}).str; }
  std::int64_t server_ms() {
    const reply t = c.command({"TIME"});
    return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
  }
  std::optional<std::int64_t> expiry(const std::string& hex_id) {
    const reply r = c.command({"ZSCORE", holders, hex_to_raw(hex_id)});
    if (r.is_nil()) return std::nullopt;
    return std::stoll(r.str);
  }
  // Makes a permit's lease end now, as if time had passed.
  void expire(const std::string& hex_id) {
    (void)c.command({"ZADD", holders, "XX", std::to_string(server_ms() - 1), hex_to_raw(hex_id)});
  }
  // The foreign client's acquire of one permit `raw_id` with `deadline` (or the never score).
  reply redisson_take(const std::string& raw_id, const std::string& deadline) {
    return c.eval(foreign_acquire, {name, holders, channel},
                  {"1", deadline, std::to_string(server_ms()), never_score, "publish", raw_id});
  }
  std::int64_t redisson_give_back(const std::string& raw_id) {
    return c
        .eval(foreign_release, {name, channel, holders},
              {raw_id, "1", std::to_string(server_ms()), "publish"})
        .integer;
  }
};

TEST_F(SemaphoreScriptsTest, AcquireCreatesTheCountAndStoresARawIdWithAServerTimeDeadline) {
  const std::int64_t before = server_ms();
  const reply r = acquire(id_a);
  ASSERT_TRUE(r.is_array());
  EXPECT_EQ(r.elements.at(0).integer, 1);
  EXPECT_EQ(count(), "2");                           // created with 3, one taken
  EXPECT_EQ(c.command({"PTTL", name}).integer, -1);  // Redisson's count has no TTL
  EXPECT_EQ(c.command({"TYPE", holders}).str, "zset");
  EXPECT_EQ(c.command({"ZCARD", holders}).integer, 1);
  // The member is the id's 16 raw bytes, as Redisson stores it.
  const auto score = expiry(id_a);
  ASSERT_TRUE(score.has_value());
  EXPECT_GE(*score, before + lease_ms);
  EXPECT_LE(*score, server_ms() + lease_ms);
}

TEST_F(SemaphoreScriptsTest, AnExistingCountIsKeptAndARetriedAttemptIsNotCountedTwice) {
  ASSERT_EQ(acquire(id_a, 3).elements.at(0).integer, 1);
  ASSERT_EQ(acquire(id_b, 5).elements.at(0).integer, 1);  // another initial count: ignored
  EXPECT_EQ(count(), "1");
  // The same id again (an attempt whose reply was lost): renewed, not a second permit.
  ASSERT_EQ(acquire(id_b, 3).elements.at(0).integer, 1);
  EXPECT_EQ(count(), "1");
  EXPECT_EQ(c.command({"ZCARD", holders}).integer, 2);
}

TEST_F(SemaphoreScriptsTest, RefusedWhenNoneLeftWithTheEarliestLeaseEnd) {
  ASSERT_EQ(acquire(id_a, 1).elements.at(0).integer, 1);
  const reply r = acquire(id_b, 1);
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, 0);
  EXPECT_GT(r.elements[1].integer, lease_ms - clock_slack_ms);
  EXPECT_LE(r.elements[1].integer, lease_ms);
  EXPECT_EQ(count(), "0");
  // A semaphore with no permits and no holders: nothing will end; wait for a message.
  (void)c.command({"DEL", name, holders});
  const reply none = acquire(id_c, 0);
  EXPECT_EQ(none.elements.at(0).integer, 0);
  EXPECT_EQ(none.elements.at(1).integer, -1);
}

TEST_F(SemaphoreScriptsTest, ExpiredPermitsAreReclaimedAndTheCountPublished) {
  ASSERT_EQ(acquire(id_a, 1).elements.at(0).integer, 1);
  channel_listener listener(c, channel);
  expire(id_a);
  // The next attempt gives the expired permit back (publishing the count 1), then takes it.
  EXPECT_EQ(acquire(id_b, 1).elements.at(0).integer, 1);
  EXPECT_EQ(listener.wait_for(1), std::vector<std::string>{"1"});
  EXPECT_FALSE(expiry(id_a).has_value());
  EXPECT_TRUE(expiry(id_b).has_value());
  EXPECT_EQ(count(), "0");
}

TEST_F(SemaphoreScriptsTest, ReleaseGivesThePermitBackOnceAndPublishesTheCount) {
  ASSERT_EQ(acquire(id_a, 2).elements.at(0).integer, 1);
  ASSERT_EQ(acquire(id_b, 2).elements.at(0).integer, 1);
  channel_listener listener(c, channel);
  EXPECT_EQ(release(id_a), 1);
  EXPECT_EQ(count(), "1");
  EXPECT_EQ(release(id_a), 0);  // a retry finds nothing and changes nothing
  EXPECT_EQ(count(), "1");
  expire(id_b);
  EXPECT_EQ(release(id_b), 2);  // released, but its lease had run out
  EXPECT_EQ(count(), "2");
  EXPECT_EQ(listener.wait_for(2), (std::vector<std::string>{"1", "2"}));
}

TEST_F(SemaphoreScriptsTest, RenewalExtendsLivePermitsAndReportsGoneOrExpiredOnes) {
  ASSERT_EQ(acquire(id_a, 3, 1000).elements.at(0).integer, 1);
  ASSERT_EQ(acquire(id_b, 3, 1000).elements.at(0).integer, 1);
  ASSERT_EQ(release(id_b), 1);
  ASSERT_EQ(acquire(id_c, 3, 1000).elements.at(0).integer, 1);
  expire(id_c);
  const reply r = c.eval(renew_script, {holders, holders, holders}, {"60000", id_a, id_b, id_c});
  ASSERT_EQ(r.elements.size(), 3u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 0);  // released
  EXPECT_EQ(r.elements[2].integer, 0);  // expired
  EXPECT_GT(*expiry(id_a), server_ms() + 60000 - clock_slack_ms);
  EXPECT_FALSE(expiry(id_b).has_value());  // renewal never re-adds a permit
  // "0" only checks.
  const std::int64_t before = *expiry(id_a);
  const reply check = c.eval(renew_script, {holders}, {"0", id_a});
  EXPECT_EQ(check.elements.at(0).integer, 1);
  EXPECT_EQ(*expiry(id_a), before);
}

TEST_F(SemaphoreScriptsTest, CountOperationsFollowRedisson) {
  channel_listener listener(c, channel);
  // try_set: only when the semaphore does not exist; publishes the count.
  EXPECT_EQ(permits("try_set", 5).elements.at(0).integer, 1);
  EXPECT_EQ(count(), "5");
  const reply again = permits("try_set", 7);
  EXPECT_EQ(again.elements.at(0).integer, 0);
  EXPECT_EQ(again.elements.at(1).integer, 5);
  // add: may be negative; publishes only a positive change.
  EXPECT_EQ(permits("add", -6).elements.at(1).integer, -1);
  EXPECT_EQ(permits("add", 2).elements.at(1).integer, 1);
  EXPECT_EQ(permits("available", 0).elements.at(1).integer, 1);
  EXPECT_EQ(listener.wait_for(2), (std::vector<std::string>{"5", "2"}));
  // available creates a missing semaphore with the handle's count.
  (void)c.command({"DEL", name});
  EXPECT_EQ(permits("available", 0, 4).elements.at(1).integer, 4);
  EXPECT_EQ(count(), "4");
}

TEST_F(SemaphoreScriptsTest, KeysOfAnotherKindAreRefusedAndNamed) {
  (void)c.command({"HSET", name, "someone:1", "1"});  // a reentrant lock
  const reply r = acquire(id_a);
  EXPECT_EQ(r.elements.at(0).integer, -1);
  EXPECT_EQ(r.elements.at(1).str, "a hash");
  EXPECT_EQ(permits("available", 0).elements.at(1).str, "a hash");
  (void)c.command({"SET", name, "not a number"});
  EXPECT_EQ(acquire(id_a).elements.at(1).str, "a string that is not a count");
  EXPECT_EQ(c.command({"GET", name}).str, "not a number");  // untouched
}

TEST_F(SemaphoreScriptsTest, StatusShowsHexIdsLeasesAndTheNeverScore) {
  ASSERT_EQ(acquire(id_a, 3).elements.at(0).integer, 1);
  const std::string java_id = hex_to_raw("ffeeddccbbaa99887766554433221100");
  ASSERT_EQ(redisson_take(java_id, std::string(never_score)).str, "OK");
  const reply s = c.eval(status_script, {name, holders}, {});
  ASSERT_EQ(s.elements.size(), 4u);
  EXPECT_EQ(s.elements[0].str, "string");
  EXPECT_EQ(s.elements[1].str, "1");
  const auto& list = s.elements[3].elements;
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].str, id_a);  // soonest end first
  EXPECT_GT(list[1].integer, lease_ms - clock_slack_ms);
  EXPECT_EQ(list[2].str, "ffeeddccbbaa99887766554433221100");
  EXPECT_EQ(list[3].integer, -1);  // never expires
}

TEST_F(SemaphoreScriptsTest, ForceReleaseGivesEveryPermitBack) {
  ASSERT_EQ(acquire(id_a, 2).elements.at(0).integer, 1);
  ASSERT_EQ(redisson_take(hex_to_raw(id_b), std::to_string(server_ms() + lease_ms)).str, "OK");
  EXPECT_EQ(count(), "0");
  const reply r = c.eval(force_script, {name, holders, channel}, {"publish"});
  EXPECT_EQ(r.elements.at(0).integer, 2);
  EXPECT_EQ(count(), "2");
  EXPECT_EQ(c.command({"EXISTS", holders}).integer, 0);
}

// --- interop with Redisson's scripts
// --------------------------------------------------------------

TEST_F(SemaphoreScriptsTest, RedissonPermitsCountAgainstDlockAndTheReverse) {
  ASSERT_EQ(acquire(id_a, 2).elements.at(0).integer, 1);
  // Redisson takes the last permit; dlock is then refused, Redisson too.
  const std::string java_id = hex_to_raw("00112233445566778899aabbccddeeff");
  const std::int64_t java_deadline = server_ms() + lease_ms;
  ASSERT_EQ(redisson_take(java_id, std::to_string(java_deadline)).str, "OK");
  EXPECT_EQ(acquire(id_b).elements.at(0).integer, 0);
  const reply java_refused = redisson_take(hex_to_raw(id_c), std::to_string(java_deadline));
  ASSERT_TRUE(java_refused.is_string());
  EXPECT_TRUE(java_refused.str.starts_with(":")) << java_refused.str;  // the earliest deadline
  // Redisson releases dlock's permit by its id; dlock's renewal then finds it gone.
  EXPECT_EQ(redisson_give_back(hex_to_raw(id_a)), 1);
  EXPECT_EQ(c.eval(renew_script, {holders}, {"30000", id_a}).elements.at(0).integer, 0);
  // dlock releases Redisson's permit by its hex id.
  EXPECT_EQ(release("00112233445566778899aabbccddeeff"), 1);
  EXPECT_EQ(count(), "2");
}

TEST_F(SemaphoreScriptsTest, RedissonReclaimsAnExpiredDlockPermitAndPublishes) {
  ASSERT_EQ(acquire(id_a, 1).elements.at(0).integer, 1);
  channel_listener listener(c, channel);
  expire(id_a);
  const std::string java_id = hex_to_raw(id_b);
  EXPECT_EQ(redisson_take(java_id, std::to_string(server_ms() + lease_ms)).str, "OK");
  EXPECT_EQ(listener.wait_for(1), std::vector<std::string>{"1"});
  EXPECT_EQ(raw_to_hex(c.command({"ZRANGE", holders, "0", "-1"}).elements.at(0).str), id_b);
}

// A Redisson permit without expiry gives a dlock waiter no lease end to wake at: only Redisson's
// release message can wake it, so a quick acquisition proves the wake-up by message.
TEST_F(SemaphoreScriptsTest, ARedissonReleaseWakesAWaitingDlockHandle) {
  const std::string java_id = hex_to_raw("00112233445566778899aabbccddeeff");
  ASSERT_EQ(permits("try_set", 1).elements.at(0).integer, 1);
  ASSERT_EQ(redisson_take(java_id, std::string(never_score)).str, "OK");
  semaphore s = c.get_semaphore(name, 1);
  std::promise<std::chrono::steady_clock::time_point> got;
  std::jthread waiter([&] {
    client other{server.url()};
    semaphore mine = other.get_semaphore(name, 1);
    const bool ok = mine.try_acquire_for(20s);
    got.set_value(ok ? std::chrono::steady_clock::now()
                     : std::chrono::steady_clock::time_point::min());
    if (ok) mine.release();
  });
  ASSERT_TRUE(test::eventually([&] { return s.status().subscribers == 1; }));
  const auto released_at = std::chrono::steady_clock::now();
  EXPECT_EQ(redisson_give_back(java_id), 1);
  const auto acquired_at = got.get_future().get();
  ASSERT_NE(acquired_at, std::chrono::steady_clock::time_point::min()) << "never woken";
  EXPECT_LT(acquired_at - released_at, message_limit);
}

}  // namespace
}  // namespace dlock
