// The fair lock's protocol without a server: Redisson's RFairLock key and channel names, every key
// and channel in the name's cluster slot, the script calls' keys and arguments, and the decoding
// of attempt and status replies.
#include <gtest/gtest.h>

#include "core/hash_slot.hpp"
#include "dlock/error.hpp"
#include "dlock/options.hpp"
#include "locks/names.hpp"
#include "locks/types/fair_protocol.hpp"
#include "support/lock_name_cases.hpp"

namespace dlock::locks {
namespace {

using namespace std::chrono_literals;

reply array(std::vector<reply> e) {
  return reply::make_array(std::move(e));
}
reply integer(std::int64_t i) {
  return reply::make_integer(i);
}
reply bulk(std::string s) {
  return reply::make_bulk(std::move(s));
}

TEST(FairProtocol, RedissonNamesForOrdinaryNames) {
  EXPECT_EQ(fair_queue_key("payouts"), "redisson_lock_queue:{payouts}");
  EXPECT_EQ(fair_timeout_key("payouts"), "redisson_lock_timeout:{payouts}");
  EXPECT_EQ(fair_queue_key("{tenant7}:payouts"), "redisson_lock_queue:{tenant7}:payouts");
  const fair_protocol p(300s);
  EXPECT_EQ(p.owner_wake_channel("payouts", "abc:7"), "redisson_lock__channel:{payouts}:abc:7");
  EXPECT_EQ(p.kind(), "fair");
  EXPECT_TRUE(p.waits_by_owner());
  EXPECT_EQ(p.wait_refresh(), 100s);
}

TEST(FairProtocol, EveryKeyAndChannelLandsInTheNamesSlot) {
  const fair_protocol p(300s);
  for (const std::string& name : test::lock_name_cases()) {
    const std::uint16_t slot = core::hash_slot(name);
    EXPECT_EQ(core::hash_slot(fair_queue_key(name)), slot) << name;
    EXPECT_EQ(core::hash_slot(fair_timeout_key(name)), slot) << name;
    EXPECT_EQ(core::hash_slot(p.owner_wake_channel(name, "0123:4")), slot) << name;
  }
}

TEST(FairProtocol, ScriptCallsCarryTheLinesKeysAndW) {
  const fair_protocol p(2500ms);
  attempt_request r{"n", "id:1", 30000ms, 0};
  r.may_wait = true;
  script_call a = p.attempt(r);
  EXPECT_EQ(a.keys, (std::vector<std::string>{"n", fair_queue_key("n"), fair_timeout_key("n"),
                                              fence_key("n")}));
  EXPECT_EQ(a.args, (std::vector<std::string>{"30000", "id:1", "0", "2500", "1"}));
  r.may_wait = false;
  EXPECT_EQ(p.attempt(r).args.back(), "0");
  const auto leave = p.leave_line("n", "id:1");
  ASSERT_TRUE(leave.has_value());
  EXPECT_EQ(leave->keys.front(), fair_queue_key("n"));
  EXPECT_EQ(leave->args.at(0), "id:1");
  EXPECT_EQ(leave->args.at(1), "2500");
  EXPECT_EQ(leave->args.at(leave->publish_command_arg), "publish");
  const script_call rel = p.release({"n", "id:1", 30000ms, 0, 42});
  EXPECT_EQ(rel.args.at(rel.publish_command_arg), "publish");
  EXPECT_EQ(rel.keys.at(3), unlock_channel("n"));
}

TEST(FairProtocol, AttemptRepliesDecode) {
  const fair_protocol p(300s);
  const attempt_outcome acquired = p.read_attempt(array({integer(1), integer(77)}));
  EXPECT_EQ(acquired.status, attempt_outcome::kind::acquired);
  EXPECT_EQ(acquired.token, 77u);
  const attempt_outcome again = p.read_attempt(array({integer(2), integer(3)}));
  EXPECT_EQ(again.status, attempt_outcome::kind::reentered);
  EXPECT_EQ(again.count, 3u);
  const attempt_outcome refused = p.read_attempt(array({integer(0), integer(1234)}));
  EXPECT_EQ(refused.status, attempt_outcome::kind::held_by_other);
  EXPECT_EQ(refused.holder_ttl_ms, 1234);
  EXPECT_EQ(p.read_attempt(array({integer(0), integer(-1)})).holder_ttl_ms, -1);
  try {
    (void)p.read_attempt(array({integer(-1),
                                bulk("a read-write lock (dlock::shared_mutex, Redisson "
                                     "RReadWriteLock)"),
                                bulk("n")}));
    FAIL() << "a read-write lock was taken for a fair lock";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("read-write lock"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fair lock"), std::string::npos);
  }
  try {
    (void)p.read_attempt(array({integer(-1), bulk("a plain lock or data (a string)"), bulk("n")}));
    FAIL() << "a string was taken for a fair lock";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
  EXPECT_THROW((void)p.read_attempt(integer(1)), error);
  EXPECT_THROW((void)p.read_attempt(array({integer(1), integer(0)})), error);
}

TEST(FairProtocol, StatusRepliesDecodeWithTheLine) {
  const fair_protocol p(300s);
  const lock_status s = p.read_status(
      "n", array({bulk("hash"), integer(25000), bulk("99"), array({bulk("a:1"), bulk("2")}),
                  array({bulk("b:2"), bulk("325000"), bulk("c:3"), bulk("")}), integer(2)}));
  EXPECT_TRUE(s.locked);
  EXPECT_EQ(s.remaining_ttl, 25000ms);
  EXPECT_EQ(s.last_fencing_token, 99u);
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, "a:1");
  EXPECT_EQ(s.holders[0].count, 2u);
  ASSERT_EQ(s.queue.size(), 2u);
  EXPECT_EQ(s.queue[0].owner, "b:2");
  EXPECT_TRUE(s.queue[0].has_deadline);
  EXPECT_EQ(s.queue[0].deadline_left, 325000ms);
  EXPECT_FALSE(s.queue[1].has_deadline);
  EXPECT_EQ(s.queue_length, 2u);
  EXPECT_THROW((void)p.read_status("n", array({bulk("string"), integer(-1), bulk("0"), array({}),
                                               array({}), integer(0)})),
               error);
  EXPECT_THROW(
      (void)p.read_status("n", array({bulk("hash"), integer(-1), bulk("0"),
                                      array({bulk("mode"), bulk("read")}), array({}), integer(0)})),
      error);
}

TEST(FairProtocol, TheThreadWaitTimeComesFromTheOptionsOrTheUrl) {
  EXPECT_EQ(lock_options{}.fair_wait_timeout, 300s);  // Redisson's fairLockWaitTimeout
  EXPECT_EQ(client_options::from_url("redis://h:1?fair_wait_timeout=2000").locks.fair_wait_timeout,
            2000ms);
  EXPECT_THROW((void)client_options::from_url("redis://h:1?fair_wait_timeout=0"), error);
  EXPECT_EQ(fair_protocol(0ms).thread_wait(), 1ms);
}

}  // namespace
}  // namespace dlock::locks
