// The semaphore's derived keys and permit ids, without a server: Redisson's "{N}:timeout" and
// "redisson_sc:{N}" for ordinary names, every form in the name's cluster slot, and permit ids of
// 32 hex digits that differ per owner.
#include <gtest/gtest.h>

#include <set>

#include "core/hash_slot.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"
#include "locks/types/semaphore_protocol.hpp"
#include "support/lock_name_cases.hpp"

namespace dlock::locks {
namespace {

TEST(SemaphoreNames, RedissonFormsForOrdinaryNames) {
  EXPECT_EQ(suffix_key("exports", "timeout"), "{exports}:timeout");
  EXPECT_EQ(suffix_key("{tenant7}:orders", "timeout"), "{tenant7}:orders:timeout");
  EXPECT_EQ(suffix_key("a{b}c", "timeout"), "a{b}c:timeout");
  EXPECT_EQ(semaphore_channel("exports"), "redisson_sc:{exports}");
}

TEST(SemaphoreNames, EveryKeyLandsInTheNamesSlot) {
  for (const std::string& name : test::lock_name_cases()) {
    const std::uint16_t slot = core::hash_slot(name);
    EXPECT_EQ(core::hash_slot(suffix_key(name, "timeout")), slot) << name;
    EXPECT_EQ(core::hash_slot(semaphore_channel(name)), slot) << name;
  }
  // Fallbacks where Redisson's form leaves the slot.
  EXPECT_EQ(suffix_key("a{b", "timeout"), "{a{b}:timeout");
  EXPECT_EQ(suffix_key("a}b", "timeout").rfind("{", 0), 0u);
}

TEST(SemaphoreNames, PermitIdsAreThirtyTwoHexDigitsPerOwner) {
  const std::string client = "0123456789ABCDEF0123456789abcdef";
  const std::string a = permit_id(client + ":1"), b = permit_id(client + ":2");
  EXPECT_EQ(a, "0123456789abcdef0000000000000001");
  EXPECT_EQ(b, "0123456789abcdef0000000000000002");
  EXPECT_TRUE(is_permit_id(a));
  EXPECT_EQ(permit_id(client + ":18446744073709551615"), "0123456789abcdefffffffffffffffff");
  EXPECT_FALSE(is_permit_id("0123"));
  EXPECT_FALSE(is_permit_id("0123456789abcdef000000000000000g"));
  EXPECT_THROW((void)permit_id("short:1"), error);
  EXPECT_THROW((void)permit_id(client + ":x"), error);
  EXPECT_THROW((void)permit_id(client), error);
}

TEST(SemaphoreNames, AMessageWakesAsManyWaitersAsItCounts) {
  const semaphore_protocol p(3);
  EXPECT_EQ(p.wake_ups("2"), 2u);
  EXPECT_EQ(p.wake_ups("0"), 0u);
  EXPECT_EQ(p.wake_ups("-3"), 0u);
  EXPECT_EQ(p.wake_ups("1000000"), lock_protocol::wake_everyone);
  EXPECT_EQ(p.wake_ups("x"), 1u);  // not a count: one re-check
}

}  // namespace
}  // namespace dlock::locks
