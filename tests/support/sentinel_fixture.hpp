// GoogleTest helpers around dlock::tools::redis_sentinel_group, shared by the Sentinel
// integration tests. Header-only; include as "support/sentinel_fixture.hpp".
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "redis_sentinel_group.hpp"
#include "support/redis_fixture.hpp"

namespace dlock::test {

using tools::redis_sentinel_group_options;
using tools::resp_value;

// A redis_sentinel_group for tests: when it is destroyed after a failure (see
// current_scope_failed()) or while an exception unwinds, it keeps every node's directory and
// prints each node's log file and last lines to stderr. Construction throws like
// redis_sentinel_group.
class redis_test_sentinel_group : public tools::redis_sentinel_group {
 public:
  explicit redis_test_sentinel_group(redis_sentinel_group_options options = {})
      : redis_sentinel_group(std::move(options)),
        exceptions_at_start_(std::uncaught_exceptions()) {}

  ~redis_test_sentinel_group() override {
    const bool unwinding = std::uncaught_exceptions() > exceptions_at_start_;
    if (!unwinding && !current_scope_failed()) return;
    keep_files(true);
    std::fprintf(stderr,
                 "[ sentinel ] %s failed or threw; kept the files of the group's nodes:\n%s\n",
                 current_test_name().c_str(), log_tails(30).c_str());
  }

  redis_test_sentinel_group(const redis_test_sentinel_group&) = delete;
  redis_test_sentinel_group& operator=(const redis_test_sentinel_group&) = delete;
  redis_test_sentinel_group(redis_test_sentinel_group&&) = delete;
  redis_test_sentinel_group& operator=(redis_test_sentinel_group&&) = delete;

 private:
  int exceptions_at_start_;
};

// Base of a test suite whose tests share one group (1 master + 2 replicas + 3 sentinels by
// default, started in about a second): SetUpTestSuite() starts it, TearDownTestSuite() stops it.
// `Suite` is the derived class itself (each suite gets its own group):
//
//   class SentinelLocks : public dlock::test::sentinel_suite<SentinelLocks> {};
//   TEST_F(SentinelLocks, Something) { group().master_port(); group().sentinel_url(); ... }
//
// Tests that change the group (failovers, killed or paused nodes) leave it settled (wait_ok())
// for the next test, and ask which node is the master instead of remembering it. If the group
// cannot start, every test of the suite fails with the reason.
template <typename Suite>
class sentinel_suite : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    try {
      group_ = std::make_unique<redis_test_sentinel_group>(Suite::sentinel_options());
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    group_.reset();
    start_error_.clear();
  }

  // What the suite's group is made with; a suite may hide this to change it.
  static redis_sentinel_group_options sentinel_options() { return {}; }

 protected:
  void SetUp() override {
    if (group_ == nullptr)
      GTEST_FAIL() << "the suite's Sentinel group did not start: " << start_error_;
  }

  static redis_test_sentinel_group& group() { return *group_; }

 private:
  inline static std::unique_ptr<redis_test_sentinel_group> group_;
  inline static std::string start_error_;
};

}  // namespace dlock::test
