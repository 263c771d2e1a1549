#include "locks/names.hpp"

#include <gtest/gtest.h>

#include "dlock/error.hpp"

namespace dlock::locks {
namespace {

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

TEST(LockNames, DerivedKeysShareTheLocksHashTag) {
  EXPECT_EQ(fence_key("anyLock"), "dlock:fence:{anyLock}");
  EXPECT_EQ(fence_key("orders:{42}"), "dlock:fence:orders:{42}");
}

}  // namespace
}  // namespace dlock::locks
