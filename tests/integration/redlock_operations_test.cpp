// Operating a Redlock against 5 real redis-servers: redlock::metrics_text() parsed with the strict
// Prometheus parser after acquisitions, a wait, a timeout and a loss (3 of 5 masters killed while
// held); redlock_options::on_log hearing a killed and restarted master, a lost hold, a slow
// acquisition and repeated attempts without a majority; `dlock metrics` and `-vv exec` with
// several --redis.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <stop_token>
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

// How long a test waits for an event that should come within a few round trips, a reconnect or a
// short lease; generous for a loaded 2-core CI machine.
constexpr auto event_limit = 10s;
// Scheduling slack for lower bounds on measured durations.
constexpr auto timing_slack = 20ms;
// A short watchdog lease and request timeout, so that a lost majority is noticed quickly.
constexpr auto short_lease = 1500ms;
constexpr auto short_request = 200ms;

const std::map<std::string, std::string> redlock_type{{"type", "redlock"}};

class RedlockOperationsTest : public ::testing::Test {
 protected:
  static constexpr std::size_t masters = 5;

  void SetUp() override {
    for (std::size_t i = 0; i < masters; ++i)
      servers_.push_back(std::make_unique<redis_server>());
  }

  std::vector<std::string> urls() const {
    std::vector<std::string> out;
    for (const auto& s : servers_)
      out.push_back(s->url());
    return out;
  }

  // Whether no master holds `key`: an unlock does not wait for its releases, and the next
  // acquisition must not find them still in flight (it would count a wait).
  bool free_everywhere(const std::string& key) const {
    return test::eventually([&] {
      for (const auto& s : servers_)
        if (s->running() && s->cli({"EXISTS", key}) != "0") return false;
      return true;
    });
  }

  std::vector<std::unique_ptr<redis_server>> servers_;
};

std::map<std::string, std::string> master_label(std::size_t i) {
  return {{"master", std::to_string(i)}};
}

double counter(const exposition& families, const std::string& name,
               const std::map<std::string, std::string>& labels = redlock_type) {
  const auto v = value_of(families, name, labels);
  EXPECT_TRUE(v.has_value()) << name << " has no sample with those labels";
  return v.value_or(-1);
}

TEST_F(RedlockOperationsTest, MetricsCountAcquisitionsWaitsTimeoutsAndLossesByReason) {
  log_recorder log;
  redlock rl{urls(),
             {.watchdog_timeout = short_lease,
              .request_timeout = short_request,
              .on_log = log.handler(),
              .on_lock_lost = {}}};
  redlock other{urls()};
  const std::string name = unique_key("lock");
  redlock_mutex m = rl.get_lock(name);

  // Before any lock: the families are there with zeros; the series that do not apply to Redlock
  // (re-entries, release retries, replicas) are not.
  const exposition empty = parse_exposition(rl.metrics_text());
  check_histograms(empty);
  EXPECT_EQ(counter(empty, "dlock_lock_acquisitions_total"), 0.0);
  EXPECT_EQ(counter(empty, "dlock_redlock_masters", {}), 5.0);
  EXPECT_EQ(counter(empty, "dlock_redlock_quorum", {}), 3.0);
  EXPECT_EQ(empty.count("dlock_lock_reentries_total"), 0U);
  EXPECT_EQ(empty.count("dlock_lock_unconfirmed_total"), 0U);
  EXPECT_EQ(empty.at("dlock_redlock_validity_seconds").type, "histogram");

  // Every master's connection comes up (the redlock connects in the background).
  for (std::size_t i = 0; i < masters; ++i) {
    ASSERT_TRUE(log.wait_for(
        "connected", event_limit,
        [i](const logged& r) { return r.fields.at("redlock_master") == std::to_string(i); }))
        << "master " << i;
  }

  // One uncontended hold.
  m.lock();
  EXPECT_GT(m.validity(), short_lease / 2);
  m.unlock();
  ASSERT_TRUE(free_everywhere(name));

  // A wait: `other` holds it; our try_lock_for waits until the unlock.
  redlock_mutex held = other.get_lock(name);
  ASSERT_TRUE(held.try_lock());
  std::future<bool> waiter = std::async(std::launch::async, [&m] {
    const bool got = m.try_lock_for(event_limit);
    if (got) m.unlock();
    return got;
  });
  // The waiter has been refused by a majority once before the holder lets go.
  ASSERT_TRUE(test::eventually([&] {
    return value_of(parse_exposition(rl.metrics_text()), "dlock_redlock_attempt_results_total",
                    {{"result", "held_elsewhere"}})
               .value_or(0) >= 1;
  }));
  held.unlock();
  ASSERT_TRUE(waiter.get());
  ASSERT_TRUE(free_everywhere(name));

  // A wait that runs out. Long enough for its first attempt to come back refused before the
  // deadline on a loaded machine (with 50 ms, under ASan with 4 tests at once, the attempt's
  // reply came after it: a timeout without a wait).
  ASSERT_TRUE(held.try_lock());
  EXPECT_FALSE(m.try_lock_for(300ms));
  held.unlock();
  ASSERT_TRUE(free_everywhere(name));

  // A loss: 3 of the 5 masters die while we hold it; the renewal finds no majority.
  m.lock();
  for (std::size_t i : {1, 2, 3})
    servers_[i]->kill();
  ASSERT_TRUE(log.wait_for("lock lost", short_lease + event_limit));
  ASSERT_TRUE(test::eventually(
      [&] {
        const exposition f = parse_exposition(rl.metrics_text());
        return value_of(f, "dlock_redlock_master_up", master_label(2)) == 0.0;
      },
      event_limit));
  EXPECT_EQ(m.unlock_checked(), errc::lock_lost);

  const std::string text = rl.metrics_text();
  EXPECT_EQ(text.find(name), std::string::npos) << "a lock name leaked into the labels";
  const exposition f = parse_exposition(text);
  check_histograms(f);
  EXPECT_EQ(counter(f, "dlock_lock_acquisitions_total"), 3.0);
  EXPECT_EQ(counter(f, "dlock_lock_waits_total"), 2.0);
  EXPECT_EQ(counter(f, "dlock_lock_wait_timeouts_total"), 1.0);
  EXPECT_EQ(counter(f, "dlock_lock_releases_total"), 2.0);
  EXPECT_EQ(counter(f, "dlock_lock_losses_total", {{"type", "redlock"}, {"reason", "unconfirmed"}}),
            1.0);
  EXPECT_EQ(counter(f, "dlock_lock_losses_total", {{"type", "redlock"}, {"reason", "not_held"}}),
            0.0);
  EXPECT_GE(counter(f, "dlock_lock_renewal_failures_total"), 1.0);
  EXPECT_GE(counter(f, "dlock_lock_attempts_total"), 5.0);  // 3 held, 1 refused, 1 timed out
  EXPECT_EQ(counter(f, "dlock_lock_wait_seconds_count"), 3.0);
  EXPECT_EQ(counter(f, "dlock_lock_hold_seconds_count"), 2.0);
  EXPECT_EQ(counter(f, "dlock_redlock_validity_seconds_count", {}), 3.0);
  EXPECT_EQ(counter(f, "dlock_redlock_attempt_results_total", {{"result", "majority"}}), 3.0);
  EXPECT_GE(counter(f, "dlock_redlock_attempt_results_total", {{"result", "held_elsewhere"}}), 2.0);
  for (std::size_t i = 0; i < masters; ++i) {
    const bool killed = i >= 1 && i <= 3;
    EXPECT_EQ(counter(f, "dlock_redlock_master_up", master_label(i)), killed ? 0.0 : 1.0) << i;
  }
  EXPECT_EQ(counter(f, "dlock_redlock_master_connection_losses_total", master_label(0)), 0.0);

  const lock_metrics totals = rl.lock_metrics();
  EXPECT_EQ(totals.acquired, 3U);
  EXPECT_EQ(totals.waited, 2U);
  EXPECT_EQ(totals.timed_out, 1U);
  EXPECT_EQ(totals.released, 2U);
  EXPECT_EQ(totals.lost, 1U);
  EXPECT_EQ(static_cast<double>(totals.attempts), counter(f, "dlock_lock_attempts_total"));

  // Bounded cardinality: only these label names exist.
  for (const auto& [unused, family] : f)
    for (const sample& s : family.samples)
      for (const auto& [label, value] : s.labels)
        EXPECT_TRUE(label == "type" || label == "reason" || label == "le" || label == "master" ||
                    label == "result")
            << s.name << " has a label " << label;
}

TEST_F(RedlockOperationsTest, LogHookHearsAKilledMasterALostHoldASlowAcquisitionAndNoMajority) {
  log_recorder log;
  redlock rl{urls(),
             {.watchdog_timeout = short_lease,
              .request_timeout = short_request,
              .on_log = log.handler(),
              .slow_acquisition = 100ms,
              .on_lock_lost = {}}};
  redlock other{urls()};
  const std::string name = unique_key("lock");
  redlock_mutex m = rl.get_lock(name);

  // A slow acquisition: held elsewhere for 300 ms (an explicit lease, not released).
  redlock_mutex held = other.get_lock(name);
  held.lock(lease_time(300ms));
  const auto started = std::chrono::steady_clock::now();
  m.lock();
  ASSERT_GE(std::chrono::steady_clock::now() - started, 100ms - timing_slack);
  const std::vector<logged> slow = log.all("slow acquisition");  // recorded before lock() returned
  ASSERT_FALSE(slow.empty());
  EXPECT_EQ(slow.back().level, log_level::warning);
  EXPECT_EQ(slow.back().fields.at("name"), name);
  EXPECT_EQ(slow.back().fields.at("type"), "redlock");
  EXPECT_GE(std::stoll(slow.back().fields.at("wait_ms")), 100);

  // One master dies: its client's record comes with the master's index and address.
  servers_[2]->kill();
  const auto lost_master = log.wait_for("connection lost", event_limit);
  ASSERT_TRUE(lost_master) << "the killed master was not logged";
  EXPECT_EQ(lost_master->level, log_level::warning);
  EXPECT_EQ(lost_master->fields.at("redlock_master"), "2");
  EXPECT_EQ(lost_master->fields.at("endpoint"), "127.0.0.1:" + std::to_string(servers_[2]->port()));
  EXPECT_EQ(lost_master->fields.at("links_up"), "0");
  EXPECT_TRUE(m.is_held_by_current_thread()) << "4 of 5 still hold it";

  // Two more die: the hold is lost and logged before on_lock_lost would run.
  servers_[0]->kill();
  servers_[4]->kill();
  const auto lost_hold = log.wait_for("lock lost", short_lease + event_limit);
  ASSERT_TRUE(lost_hold) << "the lost hold was not logged";
  EXPECT_EQ(lost_hold->level, log_level::error);
  EXPECT_EQ(lost_hold->fields.at("name"), name);
  EXPECT_EQ(lost_hold->fields.at("owner"), m.owner_id());
  EXPECT_EQ(lost_hold->fields.at("reason"), "unconfirmed");
  EXPECT_EQ(m.unlock_checked(), errc::lock_lost);

  // With 2 of 5 left, attempts keep finding no majority: logged once, until cancelled here.
  std::stop_source cancel;
  auto waiting = m.async_acquire({.wait = event_limit, .cancel = cancel.get_token()});
  const auto no_majority = log.wait_for("no majority", event_limit);
  cancel.request_stop();
  ASSERT_TRUE(no_majority) << "repeated attempts without a majority were not logged";
  EXPECT_EQ(no_majority->level, log_level::warning);
  EXPECT_EQ(no_majority->fields.at("name"), name);
  EXPECT_GE(std::stoi(no_majority->fields.at("attempts")), 3);
  EXPECT_LE(std::stoi(no_majority->fields.at("granted")), 2);
  // The 3 dead masters' failed requests are no answers.
  EXPECT_LE(std::stoi(no_majority->fields.at("answered")), 2);
  EXPECT_EQ(no_majority->fields.at("quorum"), "3");
  try {
    (void)waiting.get();
    ADD_FAILURE() << "an acquisition without a majority succeeded";
  } catch (const error& e) {
    EXPECT_TRUE(e.code() == errc::cancelled) << e.what();
  }
  EXPECT_EQ(log.all("no majority").size(), 1U) << "not rate-limited";

  // The master comes back: its client's record says so.
  servers_[2]->start();
  const auto recovered = log.wait_for("connection recovered", event_limit, [](const logged& r) {
    return r.fields.at("redlock_master") == "2";
  });
  ASSERT_TRUE(recovered) << "the restarted master was not logged";
  EXPECT_EQ(recovered->level, log_level::info);
  const exposition f = parse_exposition(rl.metrics_text());
  EXPECT_EQ(value_of(f, "dlock_redlock_master_connection_losses_total", master_label(2)), 1.0);
  EXPECT_EQ(value_of(f, "dlock_redlock_master_up", master_label(2)), 1.0);
}

TEST(RedlockOperations, RefusesANegativeSlowAcquisitionThreshold) {
  try {
    redlock rl{{"redis://127.0.0.1:1"}, {.slow_acquisition = -1ms, .on_lock_lost = {}}};
    ADD_FAILURE() << "a negative threshold was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

#ifdef DLOCK_CLI
// `dlock metrics` with several --redis prints the redlock's metrics once every master is up;
// `-vv exec` with several --redis logs each master's connection with its index.
TEST_F(RedlockOperationsTest, CliMetricsAndVerboseExecWithSeveralMasters) {
  std::vector<std::string> args{DLOCK_CLI};
  for (std::size_t i = 0; i < 3; ++i) {
    args.emplace_back("--redis");
    args.push_back(servers_[i]->url());
  }
  std::vector<std::string> metrics = args;
  metrics.emplace_back("metrics");
  // The command waits for the masters' connections only as long as their connect_timeout (1 s);
  // on a loaded machine one may come later, and that run reports it down (as it should), so the
  // command is run again a few times before every master must have been seen up.
  constexpr int metrics_runs = 5;
  tools::command_result r;
  exposition families;
  const auto all_up = [&] {
    for (std::size_t i = 0; i < 3; ++i)
      if (value_of(families, "dlock_redlock_master_up", master_label(i)) != 1.0) return false;
    return true;
  };
  for (int run = 0; run < metrics_runs; ++run) {
    r = tools::run_command(metrics);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    families = parse_exposition(r.out);
    if (all_up()) break;
  }
  check_histograms(families);
  EXPECT_EQ(value_of(families, "dlock_redlock_masters"), 3.0);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_EQ(value_of(families, "dlock_redlock_master_up", master_label(i)), 1.0) << i << r.out;
  EXPECT_EQ(value_of(families, "dlock_lock_acquisitions_total", redlock_type), 0.0);
  EXPECT_EQ(r.err, "") << "silent without -v";

  // Two of three masters down: no majority to report on.
  servers_[0]->kill();
  servers_[1]->kill();
  const tools::command_result down = tools::run_command(metrics);
  EXPECT_EQ(down.exit_code, 69) << down.err << down.out;

  std::vector<std::string> exec{DLOCK_CLI, "-vv"};
  for (std::size_t i = 2; i < 5; ++i) {
    exec.emplace_back("--redis");
    exec.push_back(servers_[i]->url());
  }
  for (const char* a : {"exec", "job", "--", "true"})
    exec.emplace_back(a);
  const tools::command_result v = tools::run_command(exec);
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.err.find("dlock: debug: connected links_up=1 redlock_master=0 endpoint=127.0.0.1:" +
                       std::to_string(servers_[2]->port())),
            std::string::npos)
      << v.err;
}
#endif

}  // namespace
}  // namespace dlock
