// Which arguments of a command are keys: the router refuses, on a cluster, commands whose keys
// lie in different slots, and routes every command by its first key.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "route/router.hpp"

namespace dlock::route {
namespace {

std::vector<std::string_view> keys(std::initializer_list<std::string_view> args) {
  return keys_of(std::span<const std::string_view>(args.begin(), args.size()));
}

using list = std::vector<std::string_view>;

TEST(RouterKeys, SingleKeyCommandsUseTheirFirstArgument) {
  EXPECT_EQ(keys({"GET", "a"}), list{"a"});
  EXPECT_EQ(keys({"set", "a", "1", "PX", "100"}), list{"a"});
  EXPECT_EQ(keys({"PING"}), list{});
}

TEST(RouterKeys, MultiKeyCommands) {
  EXPECT_EQ(keys({"DEL", "a", "b", "c"}), (list{"a", "b", "c"}));
  EXPECT_EQ(keys({"mget", "a", "b"}), (list{"a", "b"}));
  EXPECT_EQ(keys({"MSET", "a", "1", "b", "2"}), (list{"a", "b"}));
  EXPECT_EQ(keys({"RENAME", "a", "b"}), (list{"a", "b"}));
  EXPECT_EQ(keys({"LMOVE", "a", "b", "LEFT", "RIGHT"}), (list{"a", "b"}));
}

TEST(RouterKeys, ScriptsDeclareTheirKeys) {
  EXPECT_EQ(keys({"EVAL", "return 1", "2", "k1", "k2", "arg"}), (list{"k1", "k2"}));
  EXPECT_EQ(keys({"evalsha", "abc", "0", "arg"}), list{});
  EXPECT_EQ(keys({"FCALL", "f", "1", "k"}), list{"k"});
  EXPECT_EQ(keys({"EVAL", "return 1", "9", "k1"}), list{"k1"}) << "more keys declared than given";
  EXPECT_EQ(keys({"EVAL", "return 1", "x", "k1"}), list{}) << "a bad count: the server refuses";
}

}  // namespace
}  // namespace dlock::route
