// The fair lock's Lua scripts (src/locks/scripts/fair_*.lua) run directly against a real server:
// Redisson's RFairLock layout (lock hash, waiting list, deadlines), hand-over to the head of the
// list, stale heads dropped after the thread wait time W, give-up, refreshed deadlines, fencing
// tokens, kind checks, status, and interoperability with Redisson's RedissonFairLock scripts run
// here as a foreign client.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/embedded_scripts.hpp"
#include "dlock/fair_mutex.hpp"
#include "locks/names.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

constexpr std::int64_t lease = 30000;
constexpr std::int64_t wait_time = 10000;  // W
// Deadlines and TTLs read right after a script set them: allow for the time the test takes.
constexpr std::int64_t slack_ms = 2000;

// Redisson's RFairLock scripts as a foreign client. Written for these tests after Redisson's
// behaviour at commit 66863978 (redisson/src/main/java/org/redisson/RedissonFairLock.java),
// without the unlock latch (only Redisson's own retries read it):
//   lock     :152-229  KEYS N, queue, deadlines; ARGV lease, field, W, now (epoch ms of the
//                      caller's clock); nil acquired or re-entered, else ms to sleep; enqueues
//   unlock   :235-285  KEYS N, queue, deadlines, channel base; ARGV "0", lease, field, now;
//                      publishes "0" on "<channel base>:<head field>" when the lock is free
//   give up  :70-97    KEYS queue, deadlines; ARGV field, W
constexpr std::string_view java_drop_stale = R"(
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local t = redis.call('zscore', KEYS[3], head)
  if t ~= false and tonumber(t) <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  else break end
end
)";
constexpr std::string_view java_lock_body = R"(
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0 or
    redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), k)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl)";
constexpr std::string_view java_unlock_body = R"(
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
return 1)";
constexpr std::string_view java_give_up = R"(
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1 end
i = i + 1
while i <= #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
  i = i + 1
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1]))";

const std::string owner_a = "0123456789abcdef0123456789abcdef:1";
const std::string owner_b = "0123456789abcdef0123456789abcdef:2";
const std::string owner_c = "fedcba9876543210fedcba9876543210:3";
const std::string owner_d = "fedcba9876543210fedcba9876543210:4";
const std::string java_1 = "6f1d2c3b-4a59-4e7f-8a9b-0c1d2e3f4a5b:77";
const std::string java_2 = "6f1d2c3b-4a59-4e7f-8a9b-0c1d2e3f4a5b:78";

class FairScriptsTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
  const script lock_script{std::string(scripts::fair_lock)};
  const script unlock_script{std::string(scripts::fair_unlock)};
  const script leave_script{std::string(scripts::fair_leave)};
  const script force_script{std::string(scripts::fair_force_unlock)};
  const script status_script{std::string(scripts::fair_status)};
  const script java_lock_script{std::string(java_drop_stale) + std::string(java_lock_body)};
  const script java_unlock_script{std::string(java_drop_stale) + std::string(java_unlock_body)};
  const script java_give_up_script{std::string(java_give_up)};

  const std::string name = unique_key("fair");
  const std::string queue = locks::fair_queue_key(name);
  const std::string deadlines = locks::fair_timeout_key(name);
  const std::string fence = locks::fence_key(name);
  const std::string channel = locks::unlock_channel(name);

  std::int64_t now_ms() {
    const reply t = c.command({"TIME"});
    return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
  }
  std::pair<std::int64_t, reply> lock(const std::string& field, bool may_wait, int known = 0,
                                      std::int64_t w = wait_time, std::int64_t lease_ms = lease) {
    const reply r = c.eval(lock_script, {name, queue, deadlines, fence},
                           {std::to_string(lease_ms), field, std::to_string(known),
                            std::to_string(w), may_wait ? "1" : "0"});
    return {r.elements.at(0).integer, r.elements.at(1)};
  }
  std::int64_t unlock(const std::string& field, std::uint64_t token, int keep = 0) {
    return c
        .eval(unlock_script, {name, queue, deadlines, channel, fence},
              {"0", std::to_string(lease), field, std::to_string(keep), std::to_string(token),
               "publish"})
        .integer;
  }
  std::int64_t leave(const std::string& field, std::int64_t w = wait_time) {
    return c
        .eval(leave_script, {queue, deadlines, name, channel},
              {field, std::to_string(w), "0", "publish"})
        .integer;
  }
  reply java_lock(const std::string& field, std::int64_t w = wait_time) {
    return c.eval(java_lock_script, {name, queue, deadlines},
                  {std::to_string(lease), field, std::to_string(w), std::to_string(now_ms())});
  }
  reply java_unlock(const std::string& field) {
    return c.eval(java_unlock_script, {name, queue, deadlines, channel},
                  {"0", std::to_string(lease), field, std::to_string(now_ms())});
  }
  void java_leave(const std::string& field, std::int64_t w = wait_time) {
    (void)c.eval(java_give_up_script, {queue, deadlines}, {field, std::to_string(w)});
  }
  std::vector<std::string> line() {
    std::vector<std::string> out;
    for (const reply& e : c.command({"LRANGE", queue, "0", "-1"}).elements)
      out.push_back(e.str);
    return out;
  }
  std::int64_t deadline_of(const std::string& field) {
    const reply r = c.command({"ZSCORE", deadlines, field});
    return r.is_nil() ? -1 : std::stoll(r.str);
  }
  // The messages published on `field`'s own channel while `action` runs (a marker published
  // after it arrives after them: one channel keeps its order).
  template <typename F>
  std::vector<std::string> heard_by(const std::string& field, F&& action) {
    const std::string own = channel + ":" + field;
    std::mutex m;
    std::vector<std::string> got;
    std::promise<void> subscribed, ended;
    subscription s = c.subscribe(
        own,
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
    c.command({"PUBLISH", own, "end"});
    EXPECT_EQ(ended.get_future().wait_for(10s), std::future_status::ready);
    std::lock_guard l(m);
    return got;
  }
};

TEST_F(FairScriptsTest, AcquiresReentersAndQueuesInRedissonsLayout) {
  const auto [status, token] = lock(owner_a, true);
  ASSERT_EQ(status, 1);
  EXPECT_GT(token.integer, 0);
  EXPECT_EQ(c.command({"HGET", name, owner_a}).str, "1");
  EXPECT_GT(c.command({"PTTL", name}).integer, lease - slack_ms);
  EXPECT_EQ(lock(owner_a, true, 1).first, 2);
  EXPECT_EQ(c.command({"HGET", name, owner_a}).str, "2");

  const std::int64_t before = now_ms();
  const auto [refused, sleep] = lock(owner_b, true);
  EXPECT_EQ(refused, 0);
  EXPECT_GT(sleep.integer, lease - slack_ms);
  EXPECT_LE(sleep.integer, lease);
  EXPECT_EQ(line(), std::vector<std::string>{owner_b});
  // As Redisson: the holder's lease left plus W, in epoch ms.
  EXPECT_GE(deadline_of(owner_b), before + lease - slack_ms + wait_time);
  EXPECT_LE(deadline_of(owner_b), now_ms() + lease + wait_time);
  // The next one: its predecessor's deadline plus W.
  ASSERT_EQ(lock(owner_c, true).first, 0);
  EXPECT_EQ(deadline_of(owner_c), deadline_of(owner_b) + wait_time);
  EXPECT_EQ(line(), (std::vector<std::string>{owner_b, owner_c}));
}

TEST_F(FairScriptsTest, AnAttemptThatWillNotWaitNeverJoinsTheLine) {
  ASSERT_EQ(lock(owner_a, true).first, 1);
  EXPECT_EQ(lock(owner_b, false).first, 0);
  EXPECT_EQ(c.command({"EXISTS", queue}).integer, 0);
  EXPECT_EQ(c.command({"EXISTS", deadlines}).integer, 0);
}

TEST_F(FairScriptsTest, TheLastUnlockWakesTheHeadAloneAndKeepsTheLockForIt) {
  const auto [status, token] = lock(owner_a, true);
  ASSERT_EQ(status, 1);
  ASSERT_EQ(lock(owner_b, true).first, 0);
  ASSERT_EQ(lock(owner_c, true).first, 0);
  const std::int64_t c_deadline = deadline_of(owner_c);
  std::vector<std::string> heard_by_c;
  const std::int64_t held = token.integer;  // clang 14: no structured binding in a lambda
  const auto heard_by_b = heard_by(owner_b, [&] {
    heard_by_c = heard_by(owner_c, [&] { EXPECT_EQ(unlock(owner_a, held), 1); });
  });
  EXPECT_EQ(heard_by_b, std::vector<std::string>{"0"});
  EXPECT_TRUE(heard_by_c.empty());
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  // Free, but kept for the head: a newcomer and the second in line are refused.
  const auto [newcomer, sleep] = lock(owner_d, false);
  EXPECT_EQ(newcomer, 0);
  EXPECT_GT(sleep.integer, 0);
  EXPECT_EQ(lock(owner_c, true).first, 0);
  EXPECT_EQ(lock(owner_b, true).first, 1);
  EXPECT_EQ(line(), std::vector<std::string>{owner_c});
  EXPECT_EQ(deadline_of(owner_b), -1);
  // Everyone behind moved up one place: one W earlier (as Redisson).
  EXPECT_EQ(deadline_of(owner_c), c_deadline - wait_time);
}

TEST_F(FairScriptsTest, AHeadThatDoesNotComeWithinWIsDroppedAndDoesNotBlockTheLine) {
  constexpr std::int64_t short_wait = 300, short_lease = 200;
  const auto [status, token] = lock(owner_a, true, 0, short_wait, short_lease);
  ASSERT_EQ(status, 1);
  ASSERT_EQ(lock(owner_b, true, 0, short_wait).first, 0);  // B then dies: never comes back
  EXPECT_EQ(unlock(owner_a, token.integer), 1);
  const auto [refused, sleep] = lock(owner_c, true, 0, short_wait);
  ASSERT_EQ(refused, 0) << "the free lock is B's until its deadline";
  EXPECT_GT(sleep.integer, 0);
  EXPECT_LE(sleep.integer, short_lease + short_wait);
  EXPECT_TRUE(test::eventually([&] { return lock(owner_c, true, 0, short_wait).first == 1; },
                               std::chrono::milliseconds(short_lease + short_wait + slack_ms)));
  EXPECT_TRUE(line().empty());
  EXPECT_EQ(deadline_of(owner_b), -1);
}

TEST_F(FairScriptsTest, AWaiterThatGivesUpLeavesAndThoseBehindMoveUp) {
  const auto [status, token] = lock(owner_a, true);
  ASSERT_EQ(status, 1);
  ASSERT_EQ(lock(owner_b, true).first, 0);
  ASSERT_EQ(lock(owner_c, true).first, 0);
  ASSERT_EQ(lock(owner_d, true).first, 0);
  const std::int64_t d_deadline = deadline_of(owner_d);
  EXPECT_EQ(leave(owner_c), 1);
  EXPECT_EQ(line(), (std::vector<std::string>{owner_b, owner_d}));
  EXPECT_EQ(deadline_of(owner_c), -1);
  EXPECT_EQ(deadline_of(owner_d), d_deadline - wait_time);
  EXPECT_EQ(leave(owner_c), 0);

  // The head of a free lock gives up: the next head hears it at once.
  EXPECT_EQ(unlock(owner_a, token.integer), 1);
  const auto heard = heard_by(owner_d, [&] { EXPECT_EQ(leave(owner_b), 1); });
  EXPECT_EQ(heard, std::vector<std::string>{"0"});
  EXPECT_EQ(lock(owner_d, true).first, 1);
}

TEST_F(FairScriptsTest, AQueuedWaitersAttemptKeepsItsDeadlineAheadOfTheLine) {
  ASSERT_EQ(lock(owner_a, true).first, 1);
  ASSERT_EQ(lock(owner_b, true).first, 0);
  ASSERT_EQ(lock(owner_c, true).first, 0);
  // As if C had waited longer than its deadline allowed (a holder keeping the lock beyond W).
  c.command({"ZADD", deadlines, std::to_string(now_ms() + 50), owner_c});
  const std::int64_t before = now_ms();
  ASSERT_EQ(lock(owner_c, true).first, 0);
  // Second in line: the lease left plus two W at least.
  EXPECT_GE(deadline_of(owner_c), before + lease - slack_ms + 2 * wait_time);
  EXPECT_EQ(line(), (std::vector<std::string>{owner_b, owner_c}));
}

TEST_F(FairScriptsTest, TokensIncreaseAndAStaleUnlockChangesNothing) {
  const auto [s1, t1] = lock(owner_a, true);
  ASSERT_EQ(s1, 1);
  EXPECT_EQ(unlock(owner_a, t1.integer), 1);
  const auto [s2, t2] = lock(owner_a, true);
  ASSERT_EQ(s2, 1);
  EXPECT_GT(t2.integer, t1.integer);
  EXPECT_EQ(unlock(owner_a, t1.integer), -1) << "a retry of the first release";
  EXPECT_EQ(c.command({"HGET", name, owner_a}).str, "1");
  EXPECT_EQ(unlock(owner_b, 0), -1) << "not the holder";
  EXPECT_EQ(unlock(owner_a, t2.integer, 1), 0);
  EXPECT_EQ(unlock(owner_a, t2.integer), 1);
}

TEST_F(FairScriptsTest, OtherKindsAreRefusedNamingWhatTheyAre) {
  c.command({"SET", name, "3"});
  const auto [status, what] = lock(owner_a, true);
  EXPECT_EQ(status, -1);
  EXPECT_EQ(what.str, "a semaphore or a latch (a string count)");
  c.command({"DEL", name});
  c.command({"HSET", name, "mode", "read", owner_b, "1"});
  const auto [rw_status, rw_what] = lock(owner_a, true);
  EXPECT_EQ(rw_status, -1);
  EXPECT_NE(rw_what.str.find("read-write lock"), std::string::npos) << rw_what.str;
  const reply forced = c.eval(force_script, {name, queue, deadlines, channel}, {"0", "publish"});
  EXPECT_EQ(forced.elements.at(0).integer, -1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 1);
  EXPECT_EQ(c.command({"EXISTS", queue}).integer, 0) << "nobody joined a line";
}

TEST_F(FairScriptsTest, ForceUnlockWakesTheHeadAndKeepsTheLine) {
  ASSERT_EQ(lock(owner_a, true).first, 1);
  ASSERT_EQ(lock(owner_b, true).first, 0);
  const auto heard = heard_by(owner_b, [&] {
    const reply r = c.eval(force_script, {name, queue, deadlines, channel}, {"0", "publish"});
    EXPECT_EQ(r.elements.at(0).integer, 1);
  });
  EXPECT_EQ(heard, std::vector<std::string>{"0"});
  EXPECT_EQ(line(), std::vector<std::string>{owner_b});
  EXPECT_EQ(lock(owner_b, true).first, 1);
}

TEST_F(FairScriptsTest, StatusShowsTheHolderAndTheLineWithDeadlines) {
  ASSERT_EQ(lock(owner_a, true).first, 1);
  ASSERT_EQ(lock(owner_b, true).first, 0);
  ASSERT_EQ(lock(owner_c, true).first, 0);
  const reply r = c.eval(status_script, {name, fence, queue, deadlines}, {});
  ASSERT_EQ(r.elements.size(), 6u);
  EXPECT_EQ(r.elements[0].str, "hash");
  ASSERT_EQ(r.elements[3].elements.size(), 2u);
  EXPECT_EQ(r.elements[3].elements[0].str, owner_a);
  ASSERT_EQ(r.elements[4].elements.size(), 4u);
  EXPECT_EQ(r.elements[4].elements[0].str, owner_b);
  EXPECT_EQ(r.elements[4].elements[2].str, owner_c);
  const std::int64_t left_b = std::stoll(r.elements[4].elements[1].str);
  EXPECT_GT(left_b, lease + wait_time - slack_ms);
  EXPECT_EQ(std::stoll(r.elements[4].elements[3].str) - left_b, wait_time);
  EXPECT_EQ(r.elements[5].integer, 2);
}

// --- Redisson's scripts as a foreign client ---------------------------------------------------

TEST_F(FairScriptsTest, JavaAndDlockWaitersAreServedInListOrder) {
  ASSERT_TRUE(java_lock(java_1).is_nil());
  ASSERT_TRUE(java_lock(java_2).is_integer());  // queued
  ASSERT_EQ(lock(owner_a, true).first, 0);      // behind the Java waiter
  EXPECT_EQ(line(), (std::vector<std::string>{java_2, owner_a}));
  const std::int64_t a_deadline = deadline_of(owner_a);
  EXPECT_EQ(a_deadline, deadline_of(java_2) + wait_time);
  // Redisson's unlock wakes the Java head alone; the dlock waiter is refused meanwhile.
  const auto heard = heard_by(owner_a, [&] { EXPECT_EQ(java_unlock(java_1).integer, 1); });
  EXPECT_TRUE(heard.empty());
  EXPECT_EQ(lock(owner_a, true).first, 0);
  ASSERT_TRUE(java_lock(java_2).is_nil());
  // The dlock waiter's attempt kept it at least one W ahead; Redisson's acquisition took one W.
  EXPECT_GE(deadline_of(owner_a), a_deadline - wait_time);
  // Redisson's unlock publishes "0" on the dlock waiter's own channel; dlock takes it.
  const auto woken = heard_by(owner_a, [&] { EXPECT_EQ(java_unlock(java_2).integer, 1); });
  EXPECT_EQ(woken, std::vector<std::string>{"0"});
  const auto [status, token] = lock(owner_a, true);
  EXPECT_EQ(status, 1);
  EXPECT_TRUE(line().empty());
  // And a Java waiter behind a dlock holder hears dlock's unlock on its own channel.
  ASSERT_TRUE(java_lock(java_1).is_integer());
  const std::int64_t held = token.integer;  // clang 14: no structured binding in a lambda
  const auto java_heard = heard_by(java_1, [&] { EXPECT_EQ(unlock(owner_a, held), 1); });
  EXPECT_EQ(java_heard, std::vector<std::string>{"0"});
  EXPECT_TRUE(java_lock(java_1).is_nil());
  EXPECT_EQ(c.command({"HGET", name, java_1}).str, "1") << "one hold: nobody wrote the field";
}

TEST_F(FairScriptsTest, GivingUpMovesTheOtherClientsWaitersUp) {
  ASSERT_TRUE(java_lock(java_1).is_nil());
  ASSERT_EQ(lock(owner_a, true).first, 0);
  ASSERT_TRUE(java_lock(java_2).is_integer());
  ASSERT_EQ(lock(owner_b, true).first, 0);
  EXPECT_EQ(line(), (std::vector<std::string>{owner_a, java_2, owner_b}));
  const std::int64_t java_deadline = deadline_of(java_2), b_deadline = deadline_of(owner_b);
  EXPECT_EQ(leave(owner_a), 1);  // dlock gives up: the Java waiter behind moves up
  EXPECT_EQ(deadline_of(java_2), java_deadline - wait_time);
  EXPECT_EQ(deadline_of(owner_b), b_deadline - wait_time);
  java_leave(java_2);  // Redisson gives up: the dlock waiter behind moves up
  EXPECT_EQ(deadline_of(owner_b), b_deadline - 2 * wait_time);
  EXPECT_EQ(line(), std::vector<std::string>{owner_b});
}

TEST_F(FairScriptsTest, AJavaHeadThatNeverComesIsDroppedForTheDlockWaiterBehind) {
  constexpr std::int64_t short_wait = 300;
  const auto [status, token] = lock(owner_a, true, 0, short_wait, 200);
  ASSERT_EQ(status, 1);
  ASSERT_TRUE(java_lock(java_1, short_wait).is_integer());  // then the JVM dies
  ASSERT_EQ(lock(owner_b, true, 0, short_wait).first, 0);
  EXPECT_EQ(unlock(owner_a, token.integer), 1);
  EXPECT_TRUE(test::eventually([&] { return lock(owner_b, true, 0, short_wait).first == 1; },
                               std::chrono::milliseconds(200 + 2 * short_wait + slack_ms)));
  EXPECT_EQ(deadline_of(java_1), -1);
}

// A Redisson holder's unlock wakes a waiting fair_mutex at once: the waiter listens on its own
// channel, not only at its lease or refresh timer.
TEST_F(FairScriptsTest, ARedissonUnlockWakesAWaitingFairMutex) {
  ASSERT_TRUE(java_lock(java_1).is_nil());
  fair_mutex f = c.get_fair_lock(name);
  std::promise<std::string> queued_as;
  auto waiter = std::async(std::launch::async, [&] {
    queued_as.set_value(f.owner_id());
    f.lock();
    const std::string field = f.owner_id();
    f.unlock();
    return field;
  });
  const std::string field = queued_as.get_future().get();
  ASSERT_TRUE(test::eventually([&] { return line() == std::vector<std::string>{field}; }));
  // Subscribed when its wait began (the subscription's confirmation makes it re-check).
  ASSERT_TRUE(test::eventually([&] {
    return c.command({"PUBSUB", "NUMSUB", channel + ":" + field}).elements.at(1).integer == 1;
  }));
  const auto unlocked = std::chrono::steady_clock::now();
  EXPECT_EQ(java_unlock(java_1).integer, 1);
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), field);
  // Far below the Java holder's lease (30 s) and the waiter's refresh (W/3 = 100 s).
  EXPECT_LT(std::chrono::steady_clock::now() - unlocked, 5s);
}

}  // namespace
}  // namespace dlock
