// Operating dlock against a real redis-server: client::metrics_text() scraped and parsed as the
// Prometheus text format (the strict parser of support/prometheus_text.hpp), and
// client_options::on_log hearing a connection lost and recovered (the server killed and restarted),
// a lost hold and a slow acquisition.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/prometheus_text.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::check_histograms;
using test::exposition;
using test::log_recorder;
using test::logged;
using test::parse_exposition;
using test::redis_server;
using test::sample;
using test::unique_key;
using test::value_of;

// How long a test waits for an event that should come within a few round trips or one reconnect
// (reconnect delays start at 50 ms); generous for a loaded 2-core CI machine.
constexpr auto event_limit = 10s;
// Scheduling slack for lower bounds on measured durations.
constexpr auto timing_slack = 20ms;

// The parser's checks can fail: each malformed text is caught.
TEST(PrometheusParser, RejectsMalformedExpositions) {
  EXPECT_NONFATAL_FAILURE(parse_exposition("dlock_x_total 1\n"), "before its TYPE");
  EXPECT_NONFATAL_FAILURE(parse_exposition("# HELP dlock_x x\n# TYPE dlock_x counter\ndlock_x 1\n"),
                          "does not end in _total");
  EXPECT_NONFATAL_FAILURE(parse_exposition("# HELP dlock_x_total x\n# TYPE dlock_x_total counter\n"
                                           "dlock_x_total{type=reentrant} 1\n"),
                          "unquoted label value");
  EXPECT_NONFATAL_FAILURE(parse_exposition("# HELP dlock_x_total x\n# TYPE dlock_x_total counter\n"
                                           "dlock_x_total one\n"),
                          "is not HELP, TYPE or a sample");
  EXPECT_NONFATAL_FAILURE(check_histograms(parse_exposition(
                              "# HELP dlock_h x\n# TYPE dlock_h histogram\n"
                              "dlock_h_bucket{le=\"1\"} 2\ndlock_h_bucket{le=\"+Inf\"} 1\n"
                              "dlock_h_sum 1\ndlock_h_count 1\n")),
                          "not cumulative");
  EXPECT_NONFATAL_FAILURE(check_histograms(parse_exposition(
                              "# HELP dlock_h x\n# TYPE dlock_h histogram\n"
                              "dlock_h_bucket{le=\"1\"} 1\ndlock_h_bucket{le=\"+Inf\"} 2\n"
                              "dlock_h_sum 1\ndlock_h_count 3\n")),
                          "+Inf bucket != _count");
}

TEST(MetricsText, IsStrictPrometheusTextWithCountsPerLockType) {
  redis_server server;
  client c{server.url()};
  client other{server.url()};
  const std::string name = unique_key("m");

  // Before any lock: every family is there, with zeros, for the reentrant type.
  const exposition empty = parse_exposition(c.metrics_text());
  check_histograms(empty);
  EXPECT_EQ(value_of(empty, "dlock_lock_acquisitions_total", {{"type", "reentrant"}}), 0.0);

  mutex m = c.get_lock(name);
  m.lock();
  m.lock();  // a re-entry
  m.unlock();
  m.unlock();

  // A wait that runs out: the other client holds the lock.
  mutex held = other.get_lock(name);
  held.lock();
  EXPECT_FALSE(m.try_lock_for(50ms));
  held.unlock();
  // unlock() only queues the release; this PING follows it on the same connection, so the lock
  // is free once it is answered (else the next lock() could count a second wait).
  other.command({"PING"});

  // A lost hold: the lock vanishes under us, and the next lock() finds it free.
  m.lock();
  ASSERT_TRUE(other.get_lock(name).force_unlock());
  m.lock();
  m.unlock();

  const std::string text = c.metrics_text();
  const exposition families = parse_exposition(text);
  check_histograms(families);
  EXPECT_EQ(text.find(name), std::string::npos) << "a lock name leaked into the labels";

  const std::map<std::string, std::string> reentrant{{"type", "reentrant"}};
  EXPECT_EQ(value_of(families, "dlock_lock_acquisitions_total", reentrant), 3.0);
  EXPECT_EQ(value_of(families, "dlock_lock_reentries_total", reentrant), 1.0);
  EXPECT_EQ(value_of(families, "dlock_lock_waits_total", reentrant), 1.0);
  EXPECT_EQ(value_of(families, "dlock_lock_wait_timeouts_total", reentrant), 1.0);
  EXPECT_EQ(value_of(families, "dlock_lock_releases_total", reentrant), 2.0);
  EXPECT_EQ(value_of(families, "dlock_lock_losses_total",
                     {{"type", "reentrant"}, {"reason", "not_held"}}),
            1.0);
  EXPECT_EQ(value_of(families, "dlock_lock_losses_total",
                     {{"type", "reentrant"}, {"reason", "thread_exited"}}),
            0.0);
  // Four calls got the lock (three first holds and the re-entry); two holds were released.
  EXPECT_EQ(value_of(families, "dlock_lock_wait_seconds_count", reentrant), 4.0);
  EXPECT_EQ(value_of(families, "dlock_lock_hold_seconds_count", reentrant), 2.0);
  EXPECT_EQ(value_of(families, "dlock_connections_up"), 1.0);
  EXPECT_EQ(value_of(families, "dlock_connection_losses_total"), 0.0);
  EXPECT_EQ(value_of(families, "dlock_deployment", {{"kind", "single"}}), 1.0);
  EXPECT_EQ(value_of(families, "dlock_deployment", {{"kind", "cluster"}}), 0.0);
  EXPECT_EQ(families.at("dlock_lock_wait_seconds").type, "histogram");
  EXPECT_EQ(families.at("dlock_connections_up").type, "gauge");

  // Bounded cardinality: only these label names exist, whatever locks were used.
  for (const auto& [unused, f] : families)
    for (const sample& s : f.samples)
      for (const auto& [label, value] : s.labels)
        EXPECT_TRUE(label == "type" || label == "reason" || label == "le" || label == "kind")
            << s.name << " has a label " << label;
}

// --- the log hook -------------------------------------------------------------------------------

TEST(LogHook, HearsConnectionLossAndRecovery) {
  redis_server server;
  log_recorder log;
  client_options o = client_options::from_url(server.url());
  o.on_log = log.handler();
  client c{o};
  c.command({"PING"});
  ASSERT_TRUE(log.wait_for("connected", event_limit)) << "the first connection was not logged";

  server.kill(SIGKILL);
  const auto lost = log.wait_for("connection lost", event_limit);
  ASSERT_TRUE(lost) << "the killed server was not logged";
  EXPECT_EQ(lost->level, log_level::warning);
  EXPECT_EQ(lost->fields.at("links_up"), "0");

  server.start();
  const auto recovered = log.wait_for("connection recovered", event_limit);
  ASSERT_TRUE(recovered) << "the restarted server was not logged";
  EXPECT_EQ(recovered->level, log_level::info);
  EXPECT_EQ(recovered->fields.at("links_up"), "1");
  EXPECT_EQ(c.command({"PING"}).str, "PONG");

  const exposition families = parse_exposition(c.metrics_text());
  EXPECT_EQ(value_of(families, "dlock_connection_losses_total"), 1.0);
  EXPECT_EQ(value_of(families, "dlock_reconnects_total"), 1.0);
  EXPECT_EQ(value_of(families, "dlock_connections_up"), 1.0);
}

TEST(LogHook, HearsALostHoldAndASlowAcquisition) {
  redis_server server;
  log_recorder log;
  client_options o = client_options::from_url(server.url());
  o.on_log = log.handler();
  o.slow_acquisition = 100ms;
  client c{o};
  client other{server.url()};
  const std::string name = unique_key("m");
  mutex m = c.get_lock(name);

  using std::chrono::steady_clock;
  const auto quick_started = steady_clock::now();
  m.lock();  // uncontended: not slow, unless this machine is very busy (checked below)
  const auto quick = steady_clock::now() - quick_started;
  m.unlock();
  // Held elsewhere for 300 ms (an explicit lease, not released): our lock() waits for its end.
  mutex held = other.get_lock(name);
  held.lock(lease_time(300ms));
  const auto started = steady_clock::now();
  m.lock();
  const auto waited = steady_clock::now() - started;
  ASSERT_GE(waited, 100ms - timing_slack);
  // A blocking lock() records before it returns: the records are complete now.
  const std::vector<logged> slow = log.all("slow acquisition");
  ASSERT_FALSE(slow.empty())
      << "a " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
      << " ms acquisition was not logged as slow";
  EXPECT_EQ(slow.back().level, log_level::warning);
  EXPECT_EQ(slow.back().fields.at("name"), name);
  EXPECT_EQ(slow.back().fields.at("type"), "reentrant");
  EXPECT_GE(std::stoll(slow.back().fields.at("wait_ms")), 100);
  // The client measures inside the test's window: a quick lock() by the test's clock was quick.
  if (quick < 100ms) {
    EXPECT_EQ(slow.size(), 1u) << "the quick acquisition was logged as slow";
  }

  // The lock vanishes under us; the next lock() finds it free and reports the old hold lost.
  ASSERT_TRUE(other.get_lock(name).force_unlock());
  m.lock();
  const auto lost = log.wait_for("lock lost", event_limit);
  ASSERT_TRUE(lost) << "the lost hold was not logged";
  EXPECT_EQ(lost->level, log_level::error);
  EXPECT_EQ(lost->fields.at("name"), name);
  EXPECT_EQ(lost->fields.at("owner"), m.owner_id());
  EXPECT_EQ(lost->fields.at("reason"), "not_held");
  m.unlock();
  held.unlock();  // its lease ran out long ago: nothing to release
}

TEST(LogHook, RefusesANegativeSlowAcquisitionThreshold) {
  client_options o = client_options::from_url("redis://127.0.0.1:1");
  o.slow_acquisition = -1ms;
  try {
    client c{o};
    ADD_FAILURE() << "a negative threshold was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

#ifdef DLOCK_CLI
// `dlock metrics` prints the format once after connecting; -vv logs the connection to stderr.
TEST(CliMetrics, PrintsParsableMetricsAndLogsWithVerbose) {
  redis_server server;
  const tools::command_result r =
      tools::run_command({DLOCK_CLI, "--redis", server.url(), "metrics"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const exposition families = parse_exposition(r.out);
  check_histograms(families);
  EXPECT_EQ(value_of(families, "dlock_connections_up"), 1.0);
  EXPECT_EQ(value_of(families, "dlock_lock_acquisitions_total", {{"type", "reentrant"}}), 0.0);
  EXPECT_EQ(r.err, "") << "silent without -v";

  const tools::command_result v =
      tools::run_command({DLOCK_CLI, "-vv", "--redis", server.url(), "ping"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.err.find("dlock: debug: connected links_up=1\n"), std::string::npos) << v.err;

  const tools::command_result down =
      tools::run_command({DLOCK_CLI, "--redis", "redis://127.0.0.1:1", "metrics"});
  EXPECT_EQ(down.exit_code, 69) << "an unreachable server is exit 69: " << down.err;
}
#endif

}  // namespace
}  // namespace dlock
