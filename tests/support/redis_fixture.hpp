// GoogleTest helpers around dlock::tools::redis_process, shared by the integration tests.
// Header-only; include as "support/redis_fixture.hpp".
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "redis_process.hpp"

namespace dlock::test {

using tools::redis_process_options;

// "Suite.Test" of the running test, "no-test" outside of one (e.g. in a global environment).
inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "no-test";
  return std::string(info->test_suite_name()) + "." + info->name();
}

// A Redis key unique to the running test: "dlock-test:<Suite>.<Test>:<suffix>". Tests sharing a
// server therefore never see each other's keys; the key stays readable in MONITOR output.
inline std::string unique_key(std::string_view suffix) {
  return "dlock-test:" + current_test_name() + ":" + std::string(suffix);
}

// Whether whatever is running now has failed: the current test; outside a test (suite set-up or
// tear-down) the current suite; outside any suite the whole run.
inline bool current_scope_failed() {
  const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
  if (unit->current_test_info() != nullptr) return ::testing::Test::HasFailure();
  if (const ::testing::TestSuite* suite = unit->current_test_suite(); suite != nullptr) {
    return suite->Failed() || suite->ad_hoc_test_result().Failed();
  }
  return unit->Failed();
}

// A redis_process for tests: when it is destroyed after a failure (see current_scope_failed()) or
// while an exception unwinds the test (GoogleTest records that failure only afterwards), it keeps
// its temporary directory and prints where the log is, plus the log's last lines, to stderr.
// Construction throws like redis_process; inside a test that is reported as a failure by
// GoogleTest.
class redis_server : public tools::redis_process {
 public:
  explicit redis_server(redis_process_options options = {})
      : redis_process(std::move(options)), exceptions_at_start_(std::uncaught_exceptions()) {}

  ~redis_server() override {
    const bool unwinding = std::uncaught_exceptions() > exceptions_at_start_;
    if (!unwinding && !current_scope_failed()) return;
    keep_files(true);
    std::fprintf(stderr,
                 "[ redis    ] %s failed or threw; kept the files of the server on port %u in %s\n"
                 "[ redis    ] log %s, last lines:\n%s\n",
                 current_test_name().c_str(), static_cast<unsigned>(port()), dir().c_str(),
                 log_file().c_str(), log_tail(30).c_str());
  }

  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  redis_server(redis_server&&) = delete;
  redis_server& operator=(redis_server&&) = delete;

 private:
  int exceptions_at_start_;
};

// Polls `ready` every 10 ms until it holds or `limit` passes. Only for server-side state that has
// no event to wait for (PUBSUB NUMSUB after a subscription, for example).
template <typename F>
bool eventually(F&& ready, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  for (const auto until = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < until;) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ready();
}

}  // namespace dlock::test
