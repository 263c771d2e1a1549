#include <gtest/gtest.h>
#include <set>

#include "dlock/error.hpp"

namespace dlock {
namespace {

TEST(Errors, EveryCodeHasItsOwnMessageInTheDlockCategory) {
  std::set<std::string> messages;
  for (int v = static_cast<int>(errc::invalid_argument); v <= static_cast<int>(errc::forked); ++v) {
    const std::error_code ec = static_cast<errc>(v);
    EXPECT_STREQ(ec.category().name(), "dlock");
    EXPECT_EQ(ec.message().find("unknown"), std::string::npos) << v;
    messages.insert(ec.message());
  }
  EXPECT_EQ(messages.size(), static_cast<std::size_t>(errc::forked));
}

TEST(Errors, ErrorCarriesCodeAndReadableDetail) {
  const error e(errc::auth_failed, "WRONGPASS invalid username-password pair");
  EXPECT_EQ(e.code(), errc::auth_failed);
  EXPECT_STREQ(e.what(), "authentication failed: WRONGPASS invalid username-password pair");
  const error copy = e;  // copies share the message and never throw
  EXPECT_STREQ(copy.what(), e.what());
  EXPECT_STREQ(e.detail(), "WRONGPASS invalid username-password pair");
  EXPECT_STREQ(copy.detail(), e.detail());
}

TEST(Errors, DetailIsEmptyWhenThereIsNone) {
  const error e(errc::timeout);
  EXPECT_EQ(std::string(e.what()), e.code().message());
  EXPECT_STREQ(e.detail(), "");
}

TEST(Errors, ComparesWithTheEnumDirectly) {
  const std::error_code ec = make_error_code(errc::timeout);
  EXPECT_TRUE(ec == errc::timeout);
  EXPECT_FALSE(ec == errc::connection_lost);
  EXPECT_FALSE(ec == std::errc::timed_out);  // no accidental equivalence with generic codes
}

}  // namespace
}  // namespace dlock
