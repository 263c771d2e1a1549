// The reentrant lock's Lua scripts (src/locks/scripts), run directly against a real server: their
// data layout, return values, fencing tokens, idempotent release, batched renewal, and
// interoperability with Redisson's own scripts as quoted in the source documents (seeds 000/001).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "dlock/client.hpp"
#include "dlock/embedded_scripts.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

constexpr std::string_view lease_ms = "30000";
// PTTL right after setting a 30 s lease: allow for the time the test itself takes.
constexpr std::int64_t ttl_slack_ms = 2000;
constexpr std::string_view reservation_grace_ms = "5000";

// Redisson's RLock scripts, verbatim from the seeds (the "foreign client" of the interop tests).
constexpr std::string_view redisson_lock =
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);";
constexpr std::string_view redisson_unlock =
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; "
    "end;"
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; "
    "end; "
    "return nil;";
constexpr std::string_view redisson_renew =
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], "
    "ARGV[1]); return 1; end; return 0;";

class LockScriptsTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
  // The scripts as the protocol sends them: wait_line.lua's functions in front.
  const script lock_script{std::string(scripts::wait_line) + "\n" +
                           std::string(scripts::reentrant_lock)};
  const script unlock_script{std::string(scripts::wait_line) + "\n" +
                             std::string(scripts::reentrant_unlock)};
  const script leave_script{std::string(scripts::wait_line) + "\n" +
                            std::string(scripts::leave_wait_line)};
  const script renew_script{std::string(scripts::renew_leases)};
  const script force_script{std::string(scripts::wait_line) + "\n" +
                            std::string(scripts::force_unlock)};

  const std::string name = unique_key("lock");
  const std::string fence = unique_key("fence");
  const std::string channel = "redisson_lock__channel:{" + name + "}";
  const std::string line = unique_key("line");
  const std::string line_deadlines = unique_key("line_deadlines");
  const std::string reserved = unique_key("reserved");
  // Where a release calls the client with wake id I: call_prefix + I (locks::call_channel).
  const std::string call_prefix = "dlock:call:{" + name + "}:";

  // `known`: how many holds the client believes `owner` has.
  std::pair<std::int64_t, std::int64_t> lock(const std::string& owner, int known = 0) {
    const std::string known_arg = std::to_string(known);
    return lock_in_line(owner, "", known);
  }
  // An attempt by a client with wake id `id` ("": outside the line); `may_wait`: it waits if
  // refused; `after`: "r" back to the tail after taking it, "l" leave the line, "" neither.
  std::pair<std::int64_t, std::int64_t> lock_in_line(const std::string& owner,
                                                     const std::string& id, int known = 0,
                                                     bool may_wait = true,
                                                     std::string_view after = "l",
                                                     std::string_view lifetime_ms = "3000") {
    const std::string known_arg = std::to_string(known);
    const reply r = c.eval(lock_script, {name, fence, line, line_deadlines, reserved},
                           {lease_ms, owner, known_arg, id, may_wait ? "1" : "0",
                            id.empty() ? "" : after, lifetime_ms});
    return {r.elements.at(0).integer, r.elements.at(1).integer};
  }
  std::vector<std::string> line_members() {
    std::vector<std::string> out;
    for (const reply& e : c.command({"ZRANGE", line, "0", "-1"}).elements)
      out.push_back(e.str);
    return out;
  }
  // `remaining`: the holds the client counts for `owner` after this release. `retry_of`: "0" for
  // a first try, else the fencing token of the hold a retry releases.
  std::int64_t unlock(const std::string& owner, std::string_view remaining = "0",
                      std::string_view retry_of = "0") {
    return c
        .eval(unlock_script, {name, channel, fence, line, line_deadlines, reserved},
              {"0", lease_ms, owner, remaining, retry_of, "publish", reservation_grace_ms,
               call_prefix})
        .integer;
  }
  // The third element of a refused attempt's reply: 1 when the holder's release calls the line.
  std::int64_t refusal_calls(const std::string& owner, const std::string& id) {
    const reply r = c.eval(lock_script, {name, fence, line, line_deadlines, reserved},
                           {lease_ms, owner, "0", id, "1", "", "3000"});
    EXPECT_EQ(r.elements.size(), 3U) << to_string(r);
    EXPECT_EQ(r.elements.at(0).integer, 0) << to_string(r);
    return r.elements.size() == 3 ? r.elements[2].integer : -1;
  }
  reply force_unlock() {
    return c.eval(force_script, {name, channel, line, line_deadlines, reserved},
                  {"0", "publish", reservation_grace_ms, call_prefix});
  }
  std::int64_t pttl() { return c.command({"PTTL", name}).integer; }
};

// The server's clock in microseconds (TIME).
std::int64_t server_micros(client& c) {
  const reply t = c.command({"TIME"});
  return std::stoll(t.elements.at(0).str) * 1000000 + std::stoll(t.elements.at(1).str);
}

TEST_F(LockScriptsTest, FirstAcquisitionStoresTheRedissonLayoutAndTakesAToken) {
  const std::int64_t before = server_micros(c);
  const auto [status, token] = lock("client-a:1");
  EXPECT_EQ(status, 1);
  // A token is at least the server's clock in microseconds (see reentrant_lock.lua).
  EXPECT_GT(token, before);
  EXPECT_LE(token, server_micros(c) + 1);
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "1");
  EXPECT_EQ(c.command({"HLEN", name}).integer, 1);  // nothing else in the hash
  EXPECT_GT(pttl(), 30000 - ttl_slack_ms);
  EXPECT_EQ(c.command({"GET", fence}).str, std::to_string(token));
  // The counter expires a day after the last acquisition instead of living forever.
  const std::int64_t counter_ttl = c.command({"PTTL", fence}).integer;
  EXPECT_GT(counter_ttl, 86400000 - ttl_slack_ms);
  EXPECT_LE(counter_ttl, 86400000);
}

// A server that lost its data (restart without persistence, a failover that lost the last
// writes, an expired counter) must not hand out a token an earlier holder already has: the
// fenced-write idiom would then accept two writers.
TEST_F(LockScriptsTest, TokensKeepIncreasingWhenTheServerLosesTheCounter) {
  const std::int64_t first = lock("client-a:1").second;
  ASSERT_EQ(unlock("client-a:1"), 1);
  (void)c.command({"FLUSHALL"});  // everything lost, as after SHUTDOWN NOSAVE and a restart
  const std::int64_t after_loss = lock("client-b:1").second;
  EXPECT_GT(after_loss, first);
  ASSERT_EQ(unlock("client-b:1"), 1);
  // A counter that is behind (a promoted replica that missed the last acquisitions, or one left
  // by milestone 1, which started at 1) is overtaken by the clock: no token is handed out twice.
  (void)c.command({"SET", fence, std::to_string(first - 1000)});
  const std::int64_t after_failover = lock("client-a:1").second;
  EXPECT_GT(after_failover, after_loss);
  ASSERT_EQ(unlock("client-a:1"), 1);
  // A counter ahead of the clock (a server whose clock went back) goes on from where it is.
  const std::int64_t ahead = server_micros(c) + 3'600'000'000LL;
  (void)c.command({"SET", fence, std::to_string(ahead)});
  EXPECT_EQ(lock("client-b:1").second, ahead + 1);
}

TEST_F(LockScriptsTest, ReentryCountsHoldsAndRenewsTheLeaseWithoutANewToken) {
  const std::int64_t token = lock("client-a:1").second;
  c.command({"PEXPIRE", name, "1000"});
  EXPECT_EQ(lock("client-a:1", 1), std::make_pair(std::int64_t{2}, std::int64_t{2}));
  EXPECT_EQ(lock("client-a:1", 2), std::make_pair(std::int64_t{2}, std::int64_t{3}));
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "3");
  EXPECT_GT(pttl(), 30000 - ttl_slack_ms);
  EXPECT_EQ(c.command({"GET", fence}).str, std::to_string(token));
}

// An acquisition whose reply was lost leaves a hold the client does not know of; the client's
// next acquisition takes it over as a fresh hold, so one unlock frees the lock again.
TEST_F(LockScriptsTest, AnOrphanedHoldOfTheSameOwnerIsTakenOverNotCounted) {
  const std::int64_t lost = lock("client-a:1").second;  // its reply "was lost": the client
                                                        // still knows 0 holds
  const auto [status, token] = lock("client-a:1", 0);
  EXPECT_EQ(status, 1) << "taken over as a first hold";
  EXPECT_GT(token, lost) << "a fresh hold takes a new token";
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "1");
  EXPECT_EQ(unlock("client-a:1"), 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

TEST_F(LockScriptsTest, ReentrySetsTheCountTheClientKnowsPlusOne) {
  lock("client-a:1");
  lock("client-a:1", 1);  // count 2
  EXPECT_EQ(lock("client-a:1", 1), std::make_pair(std::int64_t{2}, std::int64_t{2}));
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "2");
}

TEST_F(LockScriptsTest, ALostHoldIsReleasedWithAllItsCounts) {
  lock("client-a:1");
  lock("client-a:1", 1);
  lock("client-a:1", 2);
  EXPECT_EQ(unlock("client-a:1", "0"), 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

// A re-entry whose reply was lost left the server one count above the client; the release sets
// the client's count, so the last unlock still frees the lock.
TEST_F(LockScriptsTest, TheReleaseSetsTheClientsCountSoAnOrphanedReentryCannotKeepTheLock) {
  lock("client-a:1");
  lock("client-a:1", 1);  // its reply "was lost": the client still counts 1
  EXPECT_EQ(unlock("client-a:1", "0"), 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

TEST_F(LockScriptsTest, OtherHolderIsRefusedWithTheRemainingTtl) {
  lock("client-a:1");
  const auto [status, ttl] = lock("client-b:1");
  EXPECT_EQ(status, 0);
  EXPECT_GT(ttl, 30000 - ttl_slack_ms);
  EXPECT_LE(ttl, 30000);
  EXPECT_EQ(c.command({"HEXISTS", name, "client-b:1"}).integer, 0);
}

TEST_F(LockScriptsTest, TokensStrictlyIncreaseAcrossHolders) {
  std::int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string owner = "client-" + std::to_string(i % 3) + ":7";
    const auto [status, token] = lock(owner);
    ASSERT_EQ(status, 1);
    EXPECT_GT(token, last);
    last = token;
    ASSERT_EQ(unlock(owner), 1);
  }
}

TEST_F(LockScriptsTest, UnlockByANonHolderChangesNothing) {
  lock("client-a:1");
  const reply before = c.command({"HGETALL", name});
  EXPECT_EQ(unlock("client-b:1"), -1);
  EXPECT_EQ(c.command({"HGETALL", name}), before);
  EXPECT_GT(pttl(), 0);
}

TEST_F(LockScriptsTest, UnlockReleasesOneHoldAtATimeAndTheLastWakesWaiters) {
  std::mutex m;
  std::condition_variable cv;
  bool subscribed = false;
  std::vector<std::string> messages;
  auto sub = c.subscribe(
      channel,
      [&](std::string_view payload) {
        std::lock_guard lock(m);
        messages.emplace_back(payload);
        cv.notify_all();
      },
      [&] {
        std::lock_guard lock(m);
        subscribed = true;
        cv.notify_all();
      });
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return subscribed; }));
  }
  lock("client-a:1");
  lock("client-a:1", 1);
  EXPECT_EQ(unlock("client-a:1", "1"), 0);
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "1");
  EXPECT_EQ(unlock("client-a:1"), 2) << "released, and a subscriber heard it";
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  std::unique_lock l(m);
  ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return !messages.empty(); }));
  EXPECT_EQ(messages, std::vector<std::string>{"0"});
}

// What is published on a channel, in order (the wait line's tests read the wake ids).
class channel_log {
 public:
  channel_log(client& c, const std::string& channel)
      : sub_(c.subscribe(
            channel,
            [this](std::string_view payload) {
              std::lock_guard lock(m_);
              messages_.emplace_back(payload);
              cv_.notify_all();
            },
            [this] {
              std::lock_guard lock(m_);
              subscribed_ = true;
              cv_.notify_all();
            })) {
    std::unique_lock l(m_);
    if (!cv_.wait_for(l, 5s, [&] { return subscribed_; })) ADD_FAILURE() << "never subscribed";
  }
  // Waits (up to 5 s) until `n` messages have come; returns all of them.
  std::vector<std::string> first(std::size_t n) {
    std::unique_lock l(m_);
    cv_.wait_for(l, 5s, [&] { return messages_.size() >= n; });
    return messages_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool subscribed_ = false;
  std::vector<std::string> messages_;
  subscription sub_;
};

// docs/design/contention.md: a client that will wait stands in the line; the release reserves the
// lock for the first client in line and calls it, alone, on its own channel, then publishes
// Redisson's "0" on the shared one.
TEST_F(LockScriptsTest, AReleaseReservesTheLockForTheFirstClientInLineAndCallsItById) {
  channel_log log(c, channel);
  channel_log called(c, call_prefix + "1001");
  channel_log next(c, call_prefix + "1002");
  ASSERT_EQ(lock("client-a:1").first, 1);
  EXPECT_EQ(lock_in_line("client-b:1", "1001").first, 0);
  EXPECT_EQ(lock_in_line("client-c:1", "1002").first, 0);
  EXPECT_EQ(lock_in_line("client-d:1", "1003", 0, /*may_wait=*/false).first, 0);  // try_lock
  EXPECT_EQ(line_members(), (std::vector<std::string>{"1001", "1002"}));

  EXPECT_EQ(unlock("client-a:1"), 2);  // the channel logs heard it
  EXPECT_EQ(called.first(1), std::vector<std::string>{"1001"});
  EXPECT_EQ(log.first(1), std::vector<std::string>{"0"});
  EXPECT_EQ(c.command({"GET", reserved}).str, "1001");
  EXPECT_EQ(line_members(), std::vector<std::string>{"1002"});

  // Free, but held back for client b: others are refused with the reservation's time left.
  const auto [refused, ttl] = lock_in_line("client-c:1", "1002");
  EXPECT_EQ(refused, 0);
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, std::stoll(std::string(reservation_grace_ms)));
  EXPECT_EQ(lock("client-x:1").first, 0);  // outside the line: refused too
  EXPECT_EQ(lock_in_line("client-b:1", "1001").first, 1);
  EXPECT_EQ(c.command({"EXISTS", reserved}).integer, 0);
  EXPECT_EQ(line_members(), std::vector<std::string>{"1002"});
  // Nothing reached the client that was not called, and nothing more the shared channel.
  EXPECT_EQ(unlock("client-b:1"), 2);
  EXPECT_EQ(next.first(1), std::vector<std::string>{"1002"});
  EXPECT_EQ(called.first(1), std::vector<std::string>{"1001"});
  EXPECT_EQ(log.first(2), (std::vector<std::string>{"0", "0"}));
}

// A refused attempt says whether the holder's release will call the waiting client on its own
// channel: a dlock holder's does (and a reserved lock's next holder is a dlock client), a
// Redisson holder's only publishes on the shared channel, where a dlock waiter must listen then.
TEST_F(LockScriptsTest, ARefusalSaysWhetherTheHoldersReleaseCallsTheLine) {
  const std::string dlock_field = std::string(32, 'a') + ":7";
  const std::string redisson_field = "8743c9c0-0795-4907-87fd-6c719a6b4586:1";
  ASSERT_EQ(lock(dlock_field).first, 1);
  EXPECT_EQ(refusal_calls("client-b:1", "1001"), 1);
  EXPECT_EQ(unlock(dlock_field), 1);
  EXPECT_EQ(refusal_calls("client-c:1", "1002"), 1) << "reserved for client b";
  ASSERT_EQ(lock_in_line("client-b:1", "1001").first, 1);
  EXPECT_EQ(unlock("client-b:1"), 1);
  ASSERT_EQ(force_unlock().elements.at(0).integer, 0);
  (void)c.command({"DEL", reserved});
  (void)c.command({"HSET", name, redisson_field, "1"});  // as Redisson's lock script writes it
  EXPECT_EQ(refusal_calls("client-c:1", "1002"), 0);
}

TEST_F(LockScriptsTest, AClientThatTakesTheLockWithMoreWaitersGoesBackToTheTail) {
  ASSERT_EQ(lock("client-a:1").first, 1);
  lock_in_line("client-b:1", "1001");
  lock_in_line("client-c:1", "1002");
  EXPECT_EQ(unlock("client-a:1"), 1);
  EXPECT_EQ(lock_in_line("client-b:1", "1001", 0, true, "r").first, 1);
  EXPECT_EQ(line_members(), (std::vector<std::string>{"1002", "1001"}));
  // A refused attempt keeps a client's place.
  lock_in_line("client-c:2", "1002");
  EXPECT_EQ(line_members(), (std::vector<std::string>{"1002", "1001"}));
}

TEST_F(LockScriptsTest, AClientPastItsLineDeadlineIsSkipped) {
  channel_log log(c, channel);
  channel_log skipped(c, call_prefix + "1001");
  channel_log called(c, call_prefix + "1002");
  ASSERT_EQ(lock("client-a:1").first, 1);
  lock_in_line("client-b:1", "1001");
  lock_in_line("client-c:1", "1002");
  // b stopped attempting (it died): its deadline, server time in ms, lies in the past.
  c.command({"HSET", line_deadlines, "1001", "1"});
  EXPECT_EQ(unlock("client-a:1"), 2);  // the channel logs heard it
  EXPECT_EQ(called.first(1), std::vector<std::string>{"1002"});
  EXPECT_EQ(log.first(1), std::vector<std::string>{"0"});
  EXPECT_TRUE(skipped.first(0).empty());
  EXPECT_EQ(c.command({"GET", reserved}).str, "1002");
  EXPECT_TRUE(line_members().empty());
  EXPECT_EQ(c.command({"HLEN", line_deadlines}).integer, 0);
}

TEST_F(LockScriptsTest, AClientThatLeavesTheLinePassesItsReservationOn) {
  channel_log log(c, channel);
  channel_log b(c, call_prefix + "1001");
  channel_log cc(c, call_prefix + "1002");
  ASSERT_EQ(lock("client-a:1").first, 1);
  lock_in_line("client-b:1", "1001");
  lock_in_line("client-c:1", "1002");
  lock_in_line("client-d:1", "1003");
  const auto leave = [&](std::string_view id) {
    return c
        .eval(leave_script, {name, channel, line, line_deadlines, reserved},
              {id, "publish", reservation_grace_ms, "0", call_prefix})
        .integer;
  };
  EXPECT_EQ(leave("1003"), 0);  // not reserved for it: it only leaves
  EXPECT_EQ(line_members(), (std::vector<std::string>{"1001", "1002"}));
  EXPECT_EQ(unlock("client-a:1"), 2);  // the channel logs heard it
  EXPECT_EQ(leave("1001"), 1);         // b gave up after it was called: c is called instead
  EXPECT_EQ(b.first(1), std::vector<std::string>{"1001"});
  EXPECT_EQ(cc.first(1), std::vector<std::string>{"1002"});
  EXPECT_EQ(log.first(2), (std::vector<std::string>{"0", "0"}));
  EXPECT_EQ(c.command({"GET", reserved}).str, "1002");
  EXPECT_EQ(lock_in_line("client-c:1", "1002").first, 1);
}

// A release may be retried without knowing whether the first try ran (connection lost, or timed
// out while later requests went on). Repeating it sets the same count; a retry that arrives after
// the owner's hold ended and a new one began must leave the new hold alone.
TEST_F(LockScriptsTest, ARetriedReleaseRepeatsItsOutcomeAndNeverReleasesALaterHold) {
  const std::int64_t token = lock("client-a:1").second;
  const std::string token_arg = std::to_string(token);
  lock("client-a:1", 1);
  EXPECT_EQ(unlock("client-a:1", "1"), 0);
  EXPECT_EQ(unlock("client-a:1", "1", token_arg), 0);  // the retry: still one hold left
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "1");

  EXPECT_EQ(unlock("client-a:1", "0"), 1);  // the last release ran (its reply was lost)...
  const std::int64_t newer = lock("client-a:1").second;  // ...and the same owner locked again
  ASSERT_GT(newer, token);
  EXPECT_EQ(unlock("client-a:1", "0", token_arg), -1) << "a late retry released the newer hold";
  EXPECT_EQ(c.command({"HGET", name, "client-a:1"}).str, "1");

  EXPECT_EQ(unlock("client-a:1", "0"), 1);
  lock("client-b:1");  // someone else takes it meanwhile
  EXPECT_EQ(unlock("client-a:1", "0", std::to_string(newer)), -1);
  EXPECT_EQ(c.command({"HGET", name, "client-b:1"}).str, "1");  // b's hold is left alone
}

TEST_F(LockScriptsTest, OneScriptRenewsManyLeasesAndReportsTheLostOnes) {
  const std::string mine1 = unique_key("mine1"), mine2 = unique_key("mine2");
  const std::string gone = unique_key("gone"), theirs = unique_key("theirs");
  for (const auto& key : {mine1, mine2})
    c.command({"HSET", key, "client-a:1", "1"});
  c.command({"HSET", theirs, "client-b:1", "1"});
  for (const auto& key : {mine1, mine2, theirs})
    c.command({"PEXPIRE", key, "1000"});

  const reply r = c.eval(renew_script, {mine1, gone, mine2, theirs},
                         {lease_ms, "client-a:1", "client-a:1", "client-a:1", "client-a:1"});
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 0);
  EXPECT_EQ(r.elements[2].integer, 1);
  EXPECT_EQ(r.elements[3].integer, 0);
  EXPECT_GT(c.command({"PTTL", mine1}).integer, 30000 - ttl_slack_ms);
  EXPECT_GT(c.command({"PTTL", mine2}).integer, 30000 - ttl_slack_ms);
  EXPECT_LE(c.command({"PTTL", theirs}).integer, 1000);  // not extended
  EXPECT_EQ(c.command({"EXISTS", gone}).integer, 0);     // not created
}

TEST_F(LockScriptsTest, ForceUnlockDeletesWhoeverHoldsIt) {
  lock("client-a:1");
  EXPECT_EQ(force_unlock().elements.at(0).integer, 1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_EQ(force_unlock().elements.at(0).integer, 0);
}

// A forced unlock wakes as a release does: the first client in line is called and the lock
// reserved for it (dlock's waiters behind a dlock holder listen on their call channels only).
TEST_F(LockScriptsTest, ForceUnlockCallsTheFirstClientInLine) {
  channel_log called(c, call_prefix + "1001");
  lock("client-a:1");
  EXPECT_EQ(lock_in_line("client-b:1", "1001").first, 0);
  EXPECT_EQ(force_unlock().elements.at(0).integer, 1);
  EXPECT_EQ(called.first(1), std::vector<std::string>{"1001"});
  EXPECT_EQ(c.command({"GET", reserved}).str, "1001");
}

// An operator's typo must not delete data: a key that is not a reentrant lock is refused and kept.
TEST_F(LockScriptsTest, ForceUnlockRefusesKeysThatAreNotLocks) {
  const auto refused = [&](const std::string& what) {
    const reply r = force_unlock();
    EXPECT_EQ(r.elements.at(0).integer, -1) << what;
    EXPECT_EQ(c.command({"EXISTS", name}).integer, 1) << what << " was deleted";
    (void)c.command({"DEL", name});
    return r.elements.size() == 2 ? r.elements[1].str : std::string();
  };
  (void)c.command({"SET", name, "user data"});
  EXPECT_EQ(refused("a string"), "a string");
  (void)c.command({"RPUSH", name, "x"});
  EXPECT_EQ(refused("a list"), "a list");
  (void)c.command({"HSET", name, "email", "a@example.com"});
  EXPECT_NE(refused("a user's hash").find("not a lock"), std::string::npos);
  (void)c.command({"HSET", name, "client-a:1", "not a count"});
  EXPECT_NE(refused("a hash with a bad count").find("not a lock"), std::string::npos);
}

// Interop, both directions, with Redisson's scripts as a second client.
TEST_F(LockScriptsTest, RedissonHolderBlocksDlockAndItsUnlockMessageArrivesOnTheSameChannel) {
  const script foreign_lock{std::string(redisson_lock)};
  const script foreign_unlock{std::string(redisson_unlock)};
  EXPECT_TRUE(c.eval(foreign_lock, {name}, {lease_ms, "java-uuid:42"}).is_nil());  // acquired
  EXPECT_EQ(lock("client-a:1").first, 0);

  std::mutex m;
  std::condition_variable cv;
  bool subscribed = false, woken = false;
  auto sub = c.subscribe(
      channel,
      [&](std::string_view payload) {
        std::lock_guard l(m);
        woken = payload == "0";
        cv.notify_all();
      },
      [&] {
        std::lock_guard l(m);
        subscribed = true;
        cv.notify_all();
      });
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return subscribed; }));
  }
  EXPECT_EQ(c.eval(foreign_unlock, {name, channel}, {"0", lease_ms, "java-uuid:42"}).integer, 1);
  {
    std::unique_lock l(m);
    EXPECT_TRUE(cv.wait_for(l, 5s, [&] { return woken; }));
  }
  EXPECT_EQ(lock("client-a:1").first, 1);
}

TEST_F(LockScriptsTest, DlockHolderBlocksRedissonAndRedissonScriptsUnderstandIt) {
  const script foreign_lock{std::string(redisson_lock)};
  const script foreign_renew{std::string(redisson_renew)};
  const script foreign_unlock{std::string(redisson_unlock)};
  lock("client-a:1");
  const reply refused = c.eval(foreign_lock, {name}, {lease_ms, "java-uuid:42"});
  ASSERT_TRUE(refused.is_integer());
  EXPECT_GT(refused.integer, 0);  // Redisson sees a TTL: it would wait
  // Redisson's renew and unlock treat dlock's field exactly as one of their own.
  c.command({"PEXPIRE", name, "1000"});
  EXPECT_EQ(c.eval(foreign_renew, {name}, {lease_ms, "client-a:1"}).integer, 1);
  EXPECT_GT(pttl(), 30000 - ttl_slack_ms);
  EXPECT_EQ(c.eval(foreign_unlock, {name, channel}, {"0", lease_ms, "java-uuid:42"}).is_nil(),
            true);
  EXPECT_EQ(unlock("client-a:1"), 1);
  EXPECT_TRUE(c.eval(foreign_lock, {name}, {lease_ms, "java-uuid:42"}).is_nil());
}

}  // namespace
}  // namespace dlock
