// Redis Cluster's key-to-slot function against the cluster specification's examples. The
// integration test ClusterFixture.KeyslotMatchesServer checks the same function against
// CLUSTER KEYSLOT of a real server.
#include "core/hash_slot.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dlock::core {
namespace {

TEST(HashSlot, Crc16IsXmodem) {
  // The specification's check value of CRC16 XMODEM.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
  EXPECT_EQ(crc16("a"), 0x7C87);
  // Bytes above 0x7F and NUL count as bytes, with no sign extension.
  EXPECT_EQ(crc16(std::string("\xff\x00\x80", 3)), 0x5EEB);
}

TEST(HashSlot, KnownSlots) {
  EXPECT_EQ(hash_slot("foo"), 12182);
  EXPECT_EQ(hash_slot("bar"), 5061);
  EXPECT_EQ(hash_slot("hello"), 866);
  EXPECT_EQ(hash_slot(""), 0);
  EXPECT_EQ(hash_slot("123456789"), 0x31C3 % cluster_slots);
}

TEST(HashSlot, SameTagSameSlot) {
  EXPECT_EQ(hash_tag_or_key("{user1000}.following"), "user1000");
  EXPECT_EQ(hash_slot("{user1000}.following"), hash_slot("{user1000}.followers"));
  EXPECT_EQ(hash_slot("{user1000}.following"), hash_slot("user1000"));
  EXPECT_EQ(hash_slot("{user1000}.following"), 3443);
  EXPECT_EQ(hash_slot("key:{tag}"), hash_slot("tag"));
}

TEST(HashSlot, EmptyTagHashesTheWholeKey) {
  EXPECT_EQ(hash_tag_or_key("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(hash_tag_or_key("{}x"), "{}x");
  EXPECT_EQ(hash_tag_or_key("{}"), "{}");
}

TEST(HashSlot, TagIsUpToTheFirstCloseAfterTheFirstOpen) {
  EXPECT_EQ(hash_tag_or_key("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag_or_key("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag_or_key("{a}{b}"), "a");
  EXPECT_EQ(hash_slot("{a}{b}"), hash_slot("a"));
  // A '}' before the first '{' does not count.
  EXPECT_EQ(hash_tag_or_key("}a{b}"), "b");
}

TEST(HashSlot, NoCompleteTagHashesTheWholeKey) {
  for (const char* key : {"plain", "a{b", "{", "}", "}{", "a}b", "a}b{"}) {
    EXPECT_EQ(hash_tag_or_key(key), key) << key;
  }
}

TEST(HashSlot, SlotsAreInRange) {
  for (int i = 0; i < 100000; ++i) {
    ASSERT_LT(hash_slot(std::to_string(i)), cluster_slots);
  }
}

}  // namespace
}  // namespace dlock::core
