#include "locks/names.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/hash_slot.hpp"
#include "dlock/error.hpp"
#include "support/lock_name_cases.hpp"

namespace dlock::locks {
namespace {

using core::hash_slot;

// Redisson's RedissonObject.prefixName: what every ordinary name must still derive.
std::string redisson_form(std::string_view prefix, std::string_view name) {
  const std::string n(name);
  if (n.find('{') != std::string::npos) return std::string(prefix) + ":" + n;
  return std::string(prefix) + ":{" + n + "}";
}

errc rejection(std::string_view name) {
  try {
    validate_lock_name(name);
  } catch (const error& e) {
    return static_cast<errc>(e.code().value());
  }
  return errc{};
}

TEST(LockNames, AcceptsOrdinaryAndUtf8Names) {
  EXPECT_NO_THROW(validate_lock_name("orders:42"));
  EXPECT_NO_THROW(validate_lock_name("库存:{sku-1}"));
  EXPECT_NO_THROW(validate_lock_name(std::string(max_lock_name_bytes, 'x')));
}

TEST(LockNames, RejectsEmptyHugeAndControlBytes) {
  EXPECT_EQ(rejection(""), errc::invalid_argument);
  EXPECT_EQ(rejection(std::string(max_lock_name_bytes + 1, 'x')), errc::invalid_argument);
  EXPECT_EQ(rejection(std::string("a\0b", 3)), errc::invalid_argument);
  EXPECT_EQ(rejection("line\nbreak"), errc::invalid_argument);
  EXPECT_EQ(rejection("del\x7f"), errc::invalid_argument);
}

TEST(LockNames, RedissonChannelName) {
  EXPECT_EQ(unlock_channel("anyLock"), "redisson_lock__channel:{anyLock}");
  // A name with its own hash tag is kept as it is, as Redisson does.
  EXPECT_EQ(unlock_channel("orders:{42}"), "redisson_lock__channel:orders:{42}");
}

TEST(LockNames, FenceKeyTagsBraceFreeNamesAndTheSlotOfOthers) {
  EXPECT_EQ(fence_key("anyLock"), "dlock:fence:{anyLock}");
  EXPECT_EQ(hash_slot("orders:{42}"), hash_slot("42"));
  EXPECT_EQ(fence_key("orders:{42}"),
            "dlock:fence:{" + std::string(slot_tag(hash_slot("42"))) + "}:orders:{42}");
}

// Releases check their token against the fence counter: names sharing Redisson's channel ("q"
// and "{q}") must not share it.
TEST(LockNames, FenceKeysAreOneToOne) {
  std::vector<std::string> names = test::lock_name_cases();
  for (const std::string extra : {"q", "{q}", "a{b", "{a{b}", "{{{", "{{{{}"})
    names.emplace_back(extra);
  std::map<std::string, std::string> seen;
  for (const std::string& name : names) {
    const auto [at, inserted] = seen.emplace(fence_key(name), name);
    EXPECT_TRUE(inserted || at->second == name)
        << name << " and " << at->second << " -> " << at->first;
  }
  EXPECT_EQ(unlock_channel("q"), unlock_channel("{q}"));
  EXPECT_NE(fence_key("q"), fence_key("{q}"));
}

TEST(LockNames, OrdinaryNamesKeepRedissonsForm) {
  EXPECT_EQ(unlock_channel("orders:42"), "redisson_lock__channel:{orders:42}");
  EXPECT_EQ(fence_key("orders:42"), "dlock:fence:{orders:42}");
  EXPECT_EQ(unlock_channel("{tenant7}:orders"), "redisson_lock__channel:{tenant7}:orders");
  EXPECT_EQ(fence_key("{tenant7}:orders"),
            "dlock:fence:{" + std::string(slot_tag(hash_slot("tenant7"))) + "}:{tenant7}:orders");
  EXPECT_EQ(unlock_channel("a{b}c"), "redisson_lock__channel:a{b}c");
}

TEST(LockNames, OpenBraceWithoutCloseIsTaggedWhole) {
  // Redisson's "prefix:a{b" would hash the whole longer key.
  EXPECT_EQ(unlock_channel("a{b"), "redisson_lock__channel:{a{b}");
  EXPECT_EQ(unlock_channel("{"), "redisson_lock__channel:{{}");
}

TEST(LockNames, NamesWithACloseBraceRedissonGetsWrongCarryTheSlotsTag) {
  for (const std::string name : {"{}x", "foo{}{bar}", "a}b", "}{", "}", "{}", "}}}", "x{}{}{}"}) {
    const std::string tag(slot_tag(hash_slot(name)));
    EXPECT_EQ(unlock_channel(name), "redisson_lock__channel:{" + tag + "}:" + name) << name;
    EXPECT_EQ(fence_key(name), "dlock:fence:{" + tag + "}:" + name) << name;
  }
  // Spelled out once, so that a change of the rule (a wire format) cannot pass unnoticed.
  EXPECT_EQ(hash_slot("{}x"), 10595);
  EXPECT_EQ(slot_tag(10595), "19354");
  EXPECT_EQ(unlock_channel("{}x"), "redisson_lock__channel:{19354}:{}x");
}

TEST(LockNames, EveryCaseSharesTheNamesSlot) {
  for (const std::string& name : test::lock_name_cases()) {
    const std::uint16_t slot = hash_slot(name);
    EXPECT_EQ(hash_slot(unlock_channel(name)), slot) << name << " -> " << unlock_channel(name);
    EXPECT_EQ(hash_slot(fence_key(name)), slot) << name << " -> " << fence_key(name);
    EXPECT_EQ(hash_slot(derived_key("p", name, "suffix")), slot) << name;
    for (const std::string& key :
         {wait_line_key(name), wait_line_deadlines_key(name), reservation_key(name)})
      EXPECT_EQ(hash_slot(key), slot) << name << " -> " << key;
  }
}

// The wait line and the reservation are one name's own: "q" and "{q}" must not share a line.
TEST(LockNames, WaitLineKeysAreOneToOne) {
  EXPECT_EQ(wait_line_key("anyLock"), "dlock:line:{anyLock}");
  EXPECT_NE(wait_line_key("q"), wait_line_key("{q}"));
  EXPECT_NE(reservation_key("q"), reservation_key("{q}"));
  EXPECT_NE(wait_line_key("q"), wait_line_deadlines_key("q"));
}

TEST(LockNames, WakeIdsAreNumbersRedissonIgnores) {
  const std::string id = wake_id("0123456789abcdef0123456789abcdef:7");
  EXPECT_EQ(id, std::to_string(0x0123456789abcULL + 2));
  EXPECT_TRUE(is_wake_id(id));
  EXPECT_EQ(wake_id("0000000000000000ffffffffffffffff:1"), "2");  // never 0 or 1
  EXPECT_EQ(wake_id("fffffffffffff000ffffffffffffffff:1"), std::to_string((1ULL << 52) + 1));
  EXPECT_FALSE(is_wake_id("0"));
  EXPECT_FALSE(is_wake_id("1"));
  EXPECT_FALSE(is_wake_id(""));
  EXPECT_FALSE(is_wake_id("-5"));
  EXPECT_TRUE(is_wake_id("2"));
}

TEST(LockNames, SuffixFollowsTheKey) {
  EXPECT_EQ(derived_key("p", "orders:42", "s"), "p:{orders:42}:s");
  EXPECT_EQ(derived_key("p", "a{b}c", "s"), "p:a{b}c:s");
  EXPECT_EQ(derived_key("p", "a{b", "s"), "p:{a{b}:s");
  EXPECT_EQ(derived_key("p", "a}b", "s"),
            "p:{" + std::string(slot_tag(hash_slot("a}b"))) + "}:a}b:s");
}

TEST(LockNames, ReadWriteLockKeysKeepRedissonsFormsAndTheNamesSlot) {
  EXPECT_EQ(rwlock_channel("catalog"), "redisson_rwlock:{catalog}");
  EXPECT_EQ(rwlock_timeout_prefix("catalog", "id:7"), "{catalog}:id:7:rwlock_timeout");
  EXPECT_EQ(rwlock_timeout_prefix("{t}:x", "id:7"), "{t}:x:id:7:rwlock_timeout");  // N:S
  EXPECT_EQ(suffix_base("a{b"), "{a{b}");
  EXPECT_EQ(suffix_base("a}b"), "{" + std::string(slot_tag(hash_slot("a}b"))) + "}:a}b");
  for (const std::string& name : test::lock_name_cases()) {
    const std::uint16_t slot = hash_slot(name);
    EXPECT_EQ(hash_slot(rwlock_channel(name)), slot) << name;
    EXPECT_EQ(hash_slot(rwlock_writers_key(name)), slot) << name;
    EXPECT_EQ(hash_slot(rwlock_timeout_prefix(name, "id:7") + ":1"), slot) << name;
  }
}

TEST(LockNames, EverySlotHasTheSmallestNumberAsTag) {
  std::vector<std::string> smallest(core::cluster_slots);
  std::size_t filled = 0;
  for (unsigned number = 0; filled < smallest.size(); ++number) {
    const std::string text = std::to_string(number);
    std::string& entry = smallest[hash_slot(text)];
    if (entry.empty()) {
      entry = text;
      ++filled;
    }
  }
  for (std::uint16_t slot = 0; slot < core::cluster_slots; ++slot) {
    const std::string_view tag = slot_tag(slot);
    ASSERT_EQ(tag, smallest[slot]) << slot;
    ASSERT_EQ(hash_slot(tag), slot);
    ASSERT_LE(tag.size(), 6U);
    ASSERT_EQ(tag.find_first_of("{}"), std::string_view::npos);
  }
  EXPECT_THROW(slot_tag(core::cluster_slots), std::out_of_range);
}

// Random names over an alphabet heavy in braces: the derived keys always share the name's slot,
// and whenever Redisson's form is right (always for names without braces or with their own tag)
// it is the form used.
TEST(LockNames, PropertyDerivedKeysShareTheSlotAndKeepRedissonsFormWhenRight) {
  std::mt19937 random(20240611);
  const std::string alphabet = "{{{}}}ab:x-\xe5\xba\x93";
  std::uniform_int_distribution<std::size_t> length(1, 24);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  int redisson = 0;
  int other = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string name(length(random), ' ');
    for (char& c : name)
      c = alphabet[pick(random)];
    const std::uint16_t slot = hash_slot(name);
    for (const std::string_view prefix : {"redisson_lock__channel", "dlock:fence"}) {
      const std::string key = derived_key(prefix, name);
      ASSERT_EQ(hash_slot(key), slot) << name << " -> " << key;
      const std::string compatible = redisson_form(prefix, name);
      const bool ordinary = name.find_first_of("{}") == std::string::npos ||
                            core::hash_tag_or_key(name) != std::string_view(name);
      if (ordinary || hash_slot(compatible) == slot) {
        ASSERT_EQ(key, compatible) << name;
        ++redisson;
      } else {
        ASSERT_NE(key, compatible) << name;
        ++other;
      }
    }
  }
  // Both branches ran many times, so the property says something about each.
  EXPECT_GT(redisson, 10000);
  EXPECT_GT(other, 10000);
}

}  // namespace
}  // namespace dlock::locks
