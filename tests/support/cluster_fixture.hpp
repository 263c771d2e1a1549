// GoogleTest helpers around dlock::tools::redis_cluster, shared by the cluster integration tests.
// Header-only; include as "support/cluster_fixture.hpp".
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "redis_cluster.hpp"
#include "support/redis_fixture.hpp"

namespace dlock::test {

using tools::failover_mode;
using tools::redis_cluster_options;
using tools::resp_value;

// A redis_cluster for tests: when it is destroyed after a failure (see current_scope_failed()) or
// while an exception unwinds, it keeps every node's directory and prints each node's log file and
// last lines to stderr. Construction throws like redis_cluster.
class redis_test_cluster : public tools::redis_cluster {
 public:
  explicit redis_test_cluster(redis_cluster_options options = {})
      : redis_cluster(std::move(options)), exceptions_at_start_(std::uncaught_exceptions()) {}

  ~redis_test_cluster() override {
    const bool unwinding = std::uncaught_exceptions() > exceptions_at_start_;
    if (!unwinding && !current_scope_failed()) return;
    keep_files(true);
    std::fprintf(stderr,
                 "[ cluster  ] %s failed or threw; kept the files of the cluster's nodes:\n%s\n",
                 current_test_name().c_str(), log_tails(30).c_str());
  }

  redis_test_cluster(const redis_test_cluster&) = delete;
  redis_test_cluster& operator=(const redis_test_cluster&) = delete;
  redis_test_cluster(redis_test_cluster&&) = delete;
  redis_test_cluster& operator=(redis_test_cluster&&) = delete;

 private:
  int exceptions_at_start_;
};

// Base of a test suite whose tests share one cluster (3 masters + 3 replicas, started in about
// two seconds): SetUpTestSuite() starts it, TearDownTestSuite() stops it. `Suite` is the derived
// class itself (each suite gets its own cluster):
//
//   class ClusterLocks : public dlock::test::cluster_suite<ClusterLocks> {};
//   TEST_F(ClusterLocks, Something) { cluster().master_for_key("k"); ... }
//
// Tests that change the cluster (failover, migration, killed nodes) leave it ok (wait_ok()) for
// the next test, and ask where a key lives instead of remembering it. If the cluster cannot
// start, every test of the suite fails with the reason.
template <typename Suite>
class cluster_suite : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    try {
      cluster_ = std::make_unique<redis_test_cluster>(Suite::cluster_options());
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    cluster_.reset();
    start_error_.clear();
  }

  // What the suite's cluster is made with; a suite may hide this to change it.
  static redis_cluster_options cluster_options() { return {}; }

 protected:
  void SetUp() override {
    if (cluster_ == nullptr) GTEST_FAIL() << "the suite's cluster did not start: " << start_error_;
  }

  static redis_test_cluster& cluster() { return *cluster_; }

 private:
  inline static std::unique_ptr<redis_test_cluster> cluster_;
  inline static std::string start_error_;
};

}  // namespace dlock::test
