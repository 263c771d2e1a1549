// Operating dlock against a real redis-server: client::metrics_text() scraped and parsed as the
// Prometheus text format (a strict parser below), and client_options::on_log hearing a
// connection lost and recovered (the server killed and restarted), a lost hold and a slow
// acquisition.
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
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

// How long a test waits for an event that should come within a few round trips or one reconnect
// (reconnect delays start at 50 ms); generous for a loaded 2-core CI machine.
constexpr auto event_limit = 10s;
// Scheduling slack for lower bounds on measured durations.
constexpr auto timing_slack = 20ms;

// --- a strict parser of the Prometheus text exposition format (version 0.0.4) -----------------

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct family {
  std::string type;  // counter, gauge, histogram
  std::string help;
  std::vector<sample> samples;
};

using exposition = std::map<std::string, family>;

std::map<std::string, std::string> parse_labels(const std::string& text, int line) {
  std::map<std::string, std::string> labels;
  std::size_t i = 0;
  static const std::regex name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  while (i < text.size()) {
    const std::size_t eq = text.find('=', i);
    if (eq == std::string::npos) {
      ADD_FAILURE() << "line " << line << ": label without '=' in {" << text << "}";
      return labels;
    }
    const std::string name = text.substr(i, eq - i);
    EXPECT_TRUE(std::regex_match(name, name_re)) << "line " << line << ": label name " << name;
    if (eq + 1 >= text.size() || text[eq + 1] != '"') {
      ADD_FAILURE() << "line " << line << ": unquoted label value in {" << text << "}";
      return labels;
    }
    std::string value;
    std::size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        const char c = text[++j];
        value += c == 'n' ? '\n' : c;
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) {
      ADD_FAILURE() << "line " << line << ": unterminated label value in {" << text << "}";
      return labels;
    }
    EXPECT_TRUE(labels.emplace(name, value).second)
        << "line " << line << ": label " << name << " twice";
    i = j + 1;
    if (i < text.size()) {
      EXPECT_EQ(text[i], ',') << "line " << line << ": labels not separated by ','";
      ++i;
    }
  }
  return labels;
}

// The family a sample line belongs to: its own name, or a histogram's name for the _bucket,
// _sum and _count series.
std::string family_of(const std::string& name, const exposition& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      const auto it = families.find(base);
      if (it != families.end() && it->second.type == "histogram") return base;
    }
  }
  return name;
}

// Parses `text`, failing the test on every violation: a line that is neither a HELP, a TYPE nor
// `name{labels} value`; a sample before its family's TYPE or away from its family's other samples;
// a family declared twice; a name not starting with dlock_; a counter not ending in _total.
exposition parse_exposition(const std::string& text) {
  exposition families;
  static const std::regex help_re(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+))");
  static const std::regex type_re(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
  static const std::regex sample_re(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?|\+Inf|NaN)))");
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the exposition must end with a line feed";
  std::istringstream in(text);
  std::string line;
  std::string current;  // the family whose samples are being read
  std::set<std::string> finished;
  int number = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    ++number;
    if (std::regex_match(line, m, help_re)) {
      const std::string name = m[1];
      EXPECT_EQ(families.count(name), 0u) << "line " << number << ": HELP after TYPE or twice";
      if (!current.empty()) finished.insert(current);
      current.clear();
      families[name].help = m[2];
      families[name].type = "";  // TYPE must follow
      continue;
    }
    if (std::regex_match(line, m, type_re)) {
      const std::string name = m[1];
      family& f = families[name];
      EXPECT_TRUE(f.type.empty()) << "line " << number << ": TYPE twice for " << name;
      EXPECT_TRUE(f.samples.empty()) << "line " << number << ": TYPE after samples of " << name;
      f.type = m[2];
      EXPECT_EQ(name.rfind("dlock_", 0), 0u) << name << " is not prefixed dlock_";
      if (f.type == "counter") {
        EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0)
            << "counter " << name << " does not end in _total";
      }
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    if (!std::regex_match(line, m, sample_re)) {
      ADD_FAILURE() << "line " << number << " is not HELP, TYPE or a sample: '" << line << "'";
      continue;
    }
    sample s;
    s.name = m[1];
    s.labels = parse_labels(m[2], number);
    const std::string value = m[3];
    s.value = value == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
    const std::string owner = family_of(s.name, families);
    const auto it = families.find(owner);
    if (it == families.end() || it->second.type.empty()) {
      ADD_FAILURE() << "line " << number << ": sample of " << owner << " before its TYPE";
      continue;
    }
    EXPECT_EQ(owner, current) << "line " << number << ": samples of " << owner
                              << " not kept together";
    EXPECT_EQ(finished.count(owner), 0u);
    it->second.samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : families) {
    EXPECT_FALSE(f.help.empty()) << name << " has no HELP";
    EXPECT_FALSE(f.type.empty()) << name << " has no TYPE";
  }
  return families;
}

// Checks every histogram: per series (its labels but le), buckets in increasing le, cumulative
// counts that never decrease, a last bucket le="+Inf" equal to _count, and a _sum.
void check_histograms(const exposition& families) {
  for (const auto& [name, f] : families) {
    if (f.type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<const sample*>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const sample& s : f.samples) {
      if (s.name == name + "_bucket") {
        auto labels = s.labels;
        EXPECT_EQ(labels.count("le"), 1u) << name << " bucket without le";
        labels.erase("le");
        buckets[labels].push_back(&s);
      } else if (s.name == name + "_count") {
        counts[s.labels] = s.value;
      } else if (s.name == name + "_sum") {
        sums[s.labels] = s.value;
      } else {
        ADD_FAILURE() << "histogram " << name << " has a sample " << s.name;
      }
    }
    EXPECT_FALSE(buckets.empty()) << name << " has no series";
    for (const auto& [labels, series] : buckets) {
      double previous_le = -1;
      double previous_count = 0;
      for (const sample* b : series) {
        const std::string le_text = b->labels.at("le");
        const double le =
            le_text == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le_text);
        EXPECT_GT(le, previous_le) << name << " buckets out of order";
        EXPECT_GE(b->value, previous_count) << name << " buckets not cumulative";
        previous_le = le;
        previous_count = b->value;
      }
      EXPECT_EQ(series.back()->labels.at("le"), "+Inf") << name << " does not end in +Inf";
      ASSERT_EQ(counts.count(labels), 1u) << name << " series without _count";
      EXPECT_EQ(series.back()->value, counts.at(labels)) << name << ": +Inf bucket != _count";
      EXPECT_EQ(sums.count(labels), 1u) << name << " series without _sum";
    }
  }
}

// The value of the sample `name` with exactly `labels`; nullopt when there is none.
std::optional<double> value_of(const exposition& families, const std::string& name,
                               const std::map<std::string, std::string>& labels = {}) {
  for (const auto& [unused, f] : families)
    for (const sample& s : f.samples)
      if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

// The checks above can fail: each malformed text is caught.
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

struct logged {
  log_level level;
  std::string message;
  std::map<std::string, std::string> fields;
};

// Keeps every record the hook hears; a test waits for one as an event.
class log_recorder {
 public:
  log_handler handler() {
    return [this](const log_record& r) {
      logged entry{r.level, std::string(r.message), {}};
      for (const log_field& f : r.fields)
        entry.fields.emplace(std::string(f.key), f.value);
      {
        std::lock_guard lock(mutex_);
        records_.push_back(std::move(entry));
      }
      changed_.notify_all();
    };
  }

  // Every record with `message` so far, oldest first.
  std::vector<logged> all(const std::string& message) {
    std::lock_guard lock(mutex_);
    std::vector<logged> out;
    std::copy_if(records_.begin(), records_.end(), std::back_inserter(out),
                 [&](const logged& r) { return r.message == message; });
    return out;
  }

  // The first record with `message`, waiting up to `limit` for it.
  std::optional<logged> wait_for(const std::string& message, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    std::optional<logged> found;
    changed_.wait_for(lock, limit, [&] {
      const auto it = std::find_if(records_.begin(), records_.end(),
                                   [&](const logged& r) { return r.message == message; });
      if (it != records_.end()) found = *it;
      return found.has_value();
    });
    return found;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<logged> records_;
};

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
