// dlock_bench_lock: lock/unlock performance of dlock::mutex, each figure printed beside baselines
// measured on the same server in the same run.
//
// Sides:
//   dlock     dlock::mutex (lock() with a watchdog lease; unlock() is queued without waiting
//             for its reply, so a cycle costs about one round trip)
//   naive     the seeds' lock, on the same dlock::client: SET key token NX PX 30000, on failure
//             sleep 10 ms and retry; release with a Lua compare-and-delete through client::eval
//             (waits for its reply). Isolates the lock algorithm from the client.
//   redis-py  redis-py's Lock with its defaults (bench/baselines/redis_py_lock.py, run with
//             --python; skipped when redis-py cannot be imported)
//   redlock   node-redlock v5 with ioredis (bench/baselines/redlock_lock.mjs, run with --node;
//             skipped when `npm install` has not been run in bench/baselines)
// Scenarios:
//   (a)  one thread, lock+unlock cycles/s on one key
//   (b)  --threads threads, each on its own key, cycles/s in total
//   (c2) --threads threads on ONE key, hold --hold-ms, think --think-ms (sleeps, the think time
//        outside the lock): acquisitions/s, p50/p99 wait (from calling lock to holding), client
//        commands per acquisition (INFO stats total_commands_processed delta / acquisitions) and
//        Redis CPU (INFO cpu used_cpu_sys + used_cpu_user delta per second)
//   (h)  handoff: A holds, B waits in lock(); A unlocks at t0, B's lock() returns at t1; p50/p99
//        of t1 - t0 in units of RTT, the median PING round trip through the same client
//   (c2) per type: the (c2) workload (one key, hold --hold-ms, think --think-ms) for each lock
//        type of the family, dlock only: dlock::mutex with --threads threads; a read-heavy
//        workload, --threads readers + 1 writer on a dlock::shared_mutex, and the same threads
//        all on a dlock::mutex (the ratio is what the read-write lock buys); a dlock::semaphore of
//        --permits permits with --threads threads; a dlock::fair_mutex with --threads threads.
//        Acquisitions/s (and the writer's), p50/p99 wait, the most holders seen at once, and the
//        spread of acquisitions between threads. One entry of type_scenarios() per row.
// Every scenario runs --repeat rounds, sides interleaved with alternating order; the table shows
// medians. Exits non-zero only on errors; the targets are reported, not enforced.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "redis_process.hpp"

#ifndef DLOCK_BENCH_BASELINES_DIR
#define DLOCK_BENCH_BASELINES_DIR "bench/baselines"
#endif

namespace {

using dlock::bench::cpu_model;
using dlock::bench::info_field;
using dlock::bench::print_idle;

using steady = std::chrono::steady_clock;

struct bench_options {
  std::string redis_url;       // empty: start a private redis-server
  double seconds = 2.0;        // length of one measured run of (a), (b), (c2)
  int repeat = 3;              // runs per scenario and side; the median is reported
  int threads = 8;             // threads of (b) and (c2)
  int hold_ms = 1;             // (c2) time held
  int think_ms = 1;            // (c2) time between unlock and the next lock
  int handoffs = 200;          // (h) handoffs per run
  int baseline_handoffs = 50;  // (h) handoffs per run of redis-py and redlock (they poll slowly)
  int pings = 2000;            // PINGs for the RTT
  std::string python = "/usr/bin/python3";  // empty: no redis-py baseline
  std::string node = "node";                // empty: no redlock baseline
  std::string baselines_dir = DLOCK_BENCH_BASELINES_DIR;
  std::string
      json_path;    // not empty: also write the charted medians there (bench/plot_benchmarks.py)
  int permits = 3;  // (c2) per type: the semaphore's permits
  bool types_only = false;  // run the per-type (c2) rows alone
};

// Reads the command line into `o`. Returns an exit code when the program is to stop: 0 after
// --help, 2 after a usage error (CLI11 has printed the message).
std::optional<int> parse_args(int argc, char** argv, bench_options& o) {
  using dlock::bench::decimal_whole_number;
  CLI::App app{
      "dlock_bench_lock: lock/unlock performance of dlock::mutex, each figure beside the seeds'\n"
      "naive lock, redis-py's Lock and node-redlock measured on the same server in the same run",
      "dlock_bench_lock"};
  app.footer(
      "Scenarios: (a) one thread, lock+unlock cycles/s on one key; (b) --threads threads, each\n"
      "on its own key; (c2) --threads threads on one key, holding --hold-ms and thinking\n"
      "--think-ms; (h) handoff from one thread to a waiting one, in RTTs. Then (c2) per\n"
      "lock type, dlock only: mutex, shared_mutex (--threads readers + 1 writer, beside a\n"
      "mutex for the same threads) and semaphore (--permits permits).");
  app.get_formatter()->column_width(40);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--redis", o.redis_url,
                 "Use this server instead of a private redis-server\n(redis:// only)")
      ->type_name("URL");
  app.add_option("--seconds", o.seconds, "Length of one measured run of (a), (b), (c2) (default 2)")
      ->type_name("S")
      ->check(dlock::bench::number_range(0.1, 600));
  dlock::bench::add_whole_option(app, "--repeat", o.repeat,
                                 "Runs per scenario and side; median reported (default 3)", "R", 1,
                                 100);
  dlock::bench::add_whole_option(app, "--threads", o.threads, "Threads of (b) and (c2) (default 8)",
                                 "T", 1, 1024);
  dlock::bench::add_whole_option(app, "--hold-ms", o.hold_ms, "(c2) time held (default 1)", "H", 0,
                                 10'000);
  dlock::bench::add_whole_option(app, "--think-ms", o.think_ms,
                                 "(c2) time between unlock and next lock (default 1)", "K", 0,
                                 10'000);
  dlock::bench::add_whole_option(app, "--handoffs", o.handoffs,
                                 "(h) handoffs per run of dlock and naive (default 200)", "N", 1,
                                 1'000'000);
  dlock::bench::add_whole_option(app, "--baseline-handoffs", o.baseline_handoffs,
                                 "(h) handoffs per run of redis-py and redlock (default 50)", "N",
                                 1, 1'000'000);
  dlock::bench::add_whole_option(app, "--pings", o.pings, "PINGs for the RTT (default 2000)", "N",
                                 1, 10'000'000);
  app.add_option("--python", o.python,
                 "Python with redis-py for the redis-py baseline\n"
                 "(default /usr/bin/python3; 'none' skips it)")
      ->type_name("PATH");
  app.add_option("--node", o.node,
                 "Node for the redlock baseline\n(default: node through PATH; 'none' skips it)")
      ->type_name("PATH");
  app.add_option("--baselines", o.baselines_dir,
                 "Folder of the baseline scripts (default: the source tree's)")
      ->type_name("DIR");
  app.add_option("--json", o.json_path,
                 "Also write the medians of (a), (b), (c2) and (h) as charts for\n"
                 "bench/plot_benchmarks.py to this file")
      ->type_name("PATH");
  dlock::bench::add_whole_option(app, "--permits", o.permits,
                                 "(c2) per type: the semaphore's permits (default 3)", "P", 1,
                                 1024);
  app.add_flag("--types-only", o.types_only,
               "Run only the per-type (c2) rows (mutex, shared_mutex, semaphore, fair_mutex)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.python == "none") o.python.clear();
  if (o.node == "none") o.node.clear();
  return std::nullopt;
}

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Nearest-rank percentile, p in [0, 100].
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// --- the locks ---------------------------------------------------------------------------------

// One thread's handle to one named lock.
class lock_handle {
 public:
  virtual ~lock_handle() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
};

class dlock_handle final : public lock_handle {
 public:
  dlock_handle(dlock::client& c, const std::string& key) : m_(c.get_lock(key)) {}
  void lock() override { m_.lock(); }
  void unlock() override { m_.unlock(); }

 private:
  dlock::mutex m_;
};

class fair_handle final : public lock_handle {
 public:
  fair_handle(dlock::client& c, const std::string& key) : m_(c.get_fair_lock(key)) {}
  void lock() override { m_.lock(); }
  void unlock() override { m_.unlock(); }

 private:
  dlock::fair_mutex m_;
};

const dlock::script& naive_release_script() {
  static const dlock::script s{
      "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0"};
  return s;
}

// The seeds' lock: SET NX PX 30000, sleep 10 ms on failure; compare-and-delete release.
class naive_handle final : public lock_handle {
 public:
  naive_handle(dlock::client& c, std::string key) : c_(c), key_(std::move(key)) {
    static std::atomic<std::uint64_t> next_owner{0};
    prefix_ = "naive-" + std::to_string(next_owner.fetch_add(1)) + ":";
  }
  void lock() override {
    token_ = prefix_ + std::to_string(++count_);
    for (;;) {
      const dlock::reply r = c_.command({"SET", key_, token_, "NX", "PX", "30000"});
      if (r.is_string()) return;  // +OK
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void unlock() override {
    const dlock::reply r = c_.eval(naive_release_script(), {key_}, {token_});
    if (!r.is_integer() || r.integer != 1)
      throw std::runtime_error("naive release of " + key_ + " answered " + dlock::to_string(r));
  }

 private:
  dlock::client& c_;
  std::string key_;
  std::string prefix_;
  std::string token_;
  std::uint64_t count_ = 0;
};

using handle_factory = std::function<std::unique_ptr<lock_handle>(const std::string& key)>;

// --- server counters ---------------------------------------------------------------------------

struct server_counters {
  std::int64_t commands = 0;                  // INFO stats total_commands_processed
  std::map<std::string, std::int64_t> calls;  // INFO commandstats: calls per command
  double cpu_seconds = 0;
  steady::time_point at;
};

server_counters read_server_counters(dlock::client& c) {
  server_counters s;
  const std::string stats = c.command({"INFO", "stats"}).str;
  const std::string cpu = c.command({"INFO", "cpu"}).str;
  const std::string cmds = c.command({"INFO", "commandstats"}).str;
  s.commands = std::stoll(info_field(stats, "total_commands_processed"));
  s.cpu_seconds =
      std::stod(info_field(cpu, "used_cpu_sys")) + std::stod(info_field(cpu, "used_cpu_user"));
  // Lines "cmdstat_<name>:calls=<n>,usec=...".
  std::size_t pos = 0;
  while ((pos = cmds.find("cmdstat_", pos)) != std::string::npos) {
    const std::size_t colon = cmds.find(':', pos);
    const std::size_t calls = cmds.find("calls=", colon);
    if (colon == std::string::npos || calls == std::string::npos) break;
    s.calls[cmds.substr(pos + 8, colon - pos - 8)] = std::stoll(cmds.substr(calls + 6));
    pos = colon;
  }
  s.at = steady::now();
  return s;
}

// Commands the lock scripts of each side run inside Redis (from src/locks/scripts/*.lua, the
// naive release script, redis-py's lock.py and redlock's dist/cjs/index.js). Redis 7 counts them in
// total_commands_processed and in commandstats like commands sent by clients; client commands are
// all the others. dlock never sends SET itself; the naive lock and redis-py do.
const std::vector<std::string>& script_internal(int side) {
  static const std::vector<std::string> dlock_cmds{
      "del",  "exists", "get",     "hdel",   "hexists", "hget", "hincrby",
      "hset", "incr",   "pexpire", "pttl",   "publish", "set",  "spublish",
      "time", "type",   "zadd",    "zrange", "zrem"};
  static const std::vector<std::string> other_cmds{"del", "get", "pexpire", "pttl"};
  static const std::vector<std::string> redlock_cmds{"del", "exists", "get", "set"};
  return side == 0 ? dlock_cmds : side == 3 ? redlock_cmds : other_cmds;
}

struct command_counts {
  double client = 0;                          // commands clients sent, harness excluded
  double executed = 0;                        // total_commands_processed delta, harness excluded
  std::map<std::string, std::int64_t> calls;  // commandstats deltas, harness excluded
};

// `harness_pings`: PINGs sent by the harness (or the baseline's set-up) between s0 and s1.
// The harness's INFO calls are left out: 3 from s0; those of s1 run after it read its figures.
command_counts count_commands(const server_counters& s0, const server_counters& s1, int side,
                              int harness_pings) {
  command_counts r;
  for (const auto& [name, n1] : s1.calls) {
    const auto it = s0.calls.find(name);
    std::int64_t d = n1 - (it == s0.calls.end() ? 0 : it->second);
    if (name == "info") d -= 3;
    if (name == "ping") d -= harness_pings;
    if (d <= 0) continue;
    r.calls[name] = d;
    const auto& internal = script_internal(side);
    if (std::find(internal.begin(), internal.end(), name) == internal.end())
      r.client += static_cast<double>(d);
  }
  r.executed = static_cast<double>(s1.commands - s0.commands - 3 - harness_pings);
  return r;
}

// --- one run -----------------------------------------------------------------------------------

struct run_result {
  double rate = 0;  // cycles or acquisitions per second
  double wait_p50_ms = 0;
  double wait_p99_ms = 0;
  double commands_per_acq = 0;  // client commands the server saw per acquisition
  double executed_per_acq = 0;  // every command Redis ran, script-internal ones included
  std::map<std::string, std::int64_t> calls;  // commandstats deltas (harness excluded)
  double acquisitions = 0;
  double redis_cpu_pct = 0;  // used_cpu_sys + used_cpu_user per wall second, in %
  double handoff_p50_ms = 0;
  double handoff_p99_ms = 0;
};

// `threads` threads lock/unlock for `seconds`; thread t uses key keys(t). Sleeps `hold` inside
// and `think` outside the lock when positive. Records waits when asked.
run_result run_cycles(dlock::client& c, const handle_factory& make, int side, int threads,
                      const std::function<std::string(int)>& keys, double seconds,
                      std::chrono::milliseconds hold, std::chrono::milliseconds think,
                      bool record_waits) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(threads));
  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::latch ready(threads + 1);
  std::latch start(1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::unique_ptr<lock_handle> h = make(keys(t));
      std::vector<double>& my_waits = waits[static_cast<std::size_t>(t)];
      if (record_waits) my_waits.reserve(100'000);
      ready.count_down();
      start.wait();
      std::uint64_t n = 0;
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = steady::now();
          h->lock();
          if (record_waits)
            my_waits.push_back(
                std::chrono::duration<double, std::milli>(steady::now() - t0).count());
          if (hold.count() > 0) std::this_thread::sleep_for(hold);
          h->unlock();
          ++n;
          if (think.count() > 0) std::this_thread::sleep_for(think);
        }
      } catch (...) {
        stop.store(true);
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      total.fetch_add(n);
    });
  }
  ready.arrive_and_wait();
  const server_counters s0 = read_server_counters(c);
  const auto t0 = steady::now();
  start.count_down();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : pool)
    t.join();
  const double took = seconds_since(t0);
  // A PING through the same client runs after every queued dlock release.
  c.command({"PING"});
  const server_counters s1 = read_server_counters(c);
  if (failure) std::rethrow_exception(failure);

  run_result r;
  const auto n = static_cast<double>(std::max<std::uint64_t>(total.load(), 1));
  r.rate = n / took;
  r.acquisitions = n;
  const command_counts counts = count_commands(s0, s1, side, 1);
  r.commands_per_acq = counts.client / n;
  r.executed_per_acq = counts.executed / n;
  r.calls = counts.calls;
  r.redis_cpu_pct = 100 * (s1.cpu_seconds - s0.cpu_seconds) /
                    std::chrono::duration<double>(s1.at - s0.at).count();
  if (record_waits) {
    std::vector<double> all;
    for (auto& w : waits)
      all.insert(all.end(), w.begin(), w.end());
    r.wait_p50_ms = percentile(all, 50);
    r.wait_p99_ms = percentile(all, 99);
  }
  return r;
}

// (h): A holds; B calls lock(); after `settle` A records t0 and unlocks; B records t1 when its
// lock() returns, then unlocks. `n` times.
run_result run_handoff(const handle_factory& make, const std::string& key, int n,
                       std::chrono::milliseconds settle) {
  std::vector<steady::time_point> t0s(static_cast<std::size_t>(n)),
      t1s(static_cast<std::size_t>(n));
  std::binary_semaphore b_go{0}, a_go{0};
  std::exception_ptr failure_a, failure_b;
  std::atomic<bool> failed{false};
  std::thread a([&] {
    try {
      std::unique_ptr<lock_handle> h = make(key);
      for (int i = 0; i < n; ++i) {
        h->lock();
        b_go.release();
        std::this_thread::sleep_for(settle);  // B is waiting in lock() by now
        t0s[static_cast<std::size_t>(i)] = steady::now();
        h->unlock();
        a_go.acquire();  // B has taken and released it
        if (failed) break;
      }
    } catch (...) {
      failure_a = std::current_exception();
      failed = true;
      b_go.release();
    }
  });
  std::thread b([&] {
    try {
      std::unique_ptr<lock_handle> h = make(key);
      for (int i = 0; i < n; ++i) {
        b_go.acquire();
        if (failed) break;
        h->lock();
        t1s[static_cast<std::size_t>(i)] = steady::now();
        h->unlock();
        a_go.release();
      }
    } catch (...) {
      failure_b = std::current_exception();
      failed = true;
      a_go.release();
    }
  });
  a.join();
  b.join();
  if (failure_a) std::rethrow_exception(failure_a);
  if (failure_b) std::rethrow_exception(failure_b);
  std::vector<double> d;
  for (int i = 0; i < n; ++i) {
    const auto idx = static_cast<std::size_t>(i);
    d.push_back(std::chrono::duration<double, std::milli>(t1s[idx] - t0s[idx]).count());
  }
  run_result r;
  r.handoff_p50_ms = percentile(d, 50);
  r.handoff_p99_ms = percentile(d, 99);
  return r;
}

// --- redis-py and redlock -----------------------------------------------------------------------

struct external_side {
  int side = 2;
  std::string interpreter;
  std::string script;
  std::string host;
  std::uint16_t port = 0;
  std::string password;
};

// Runs a baseline script for one scenario and parses its "name=value" output. Server counters
// are read around the whole process; the script reports its own acquisitions and run time.
run_result run_external(dlock::client& c, const external_side& py, const std::string& scenario,
                        const bench_options& o, const std::string& key) {
  std::vector<std::string> argv{py.interpreter, py.script,
                                "--host",       py.host,
                                "--port",       std::to_string(py.port),
                                "--scenario",   scenario,
                                "--seconds",    std::to_string(o.seconds),
                                "--threads",    std::to_string(o.threads),
                                "--hold-ms",    std::to_string(o.hold_ms),
                                "--think-ms",   std::to_string(o.think_ms),
                                "--handoffs",   std::to_string(o.baseline_handoffs),
                                "--key",        key};
  if (!py.password.empty()) argv.insert(argv.end(), {"--password", py.password});
  const server_counters s0 = read_server_counters(c);
  const dlock::tools::command_result res = dlock::tools::run_command(
      argv, std::chrono::milliseconds(static_cast<long>(o.seconds * 1000) + 600'000));
  const server_counters s1 = read_server_counters(c);
  if (res.timed_out || res.exit_code != 0)
    throw std::runtime_error(py.script + " (" + scenario + ") failed: " + res.err + res.out);
  std::map<std::string, double> kv;
  std::size_t pos = 0;
  while (pos < res.out.size()) {
    const std::size_t eol = std::min(res.out.find('\n', pos), res.out.size());
    const std::string line = res.out.substr(pos, eol - pos);
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = std::stod(line.substr(eq + 1));
    pos = eol + 1;
  }
  auto get = [&](const char* name) {
    const auto it = kv.find(name);
    if (it == kv.end())
      throw std::runtime_error(py.script + " printed no " + std::string(name) + ":\n" + res.out);
    return it->second;
  };
  run_result r;
  if (scenario == "h") {
    r.handoff_p50_ms = get("handoff_p50_ms");
    r.handoff_p99_ms = get("handoff_p99_ms");
    return r;
  }
  const double acquisitions = std::max(get("acquisitions"), 1.0);
  const double run_seconds = get("seconds");
  r.rate = acquisitions / run_seconds;
  if (scenario == "c2") {
    r.wait_p50_ms = get("wait_p50_ms");
    r.wait_p99_ms = get("wait_p99_ms");
  }
  // The script's one set-up PING is left out.
  const command_counts counts = count_commands(s0, s1, py.side, 1);
  r.acquisitions = acquisitions;
  r.commands_per_acq = counts.client / acquisitions;
  r.executed_per_acq = counts.executed / acquisitions;
  r.calls = counts.calls;
  // Redis spent next to nothing while python started and stopped: per second of the lock run.
  r.redis_cpu_pct = 100 * (s1.cpu_seconds - s0.cpu_seconds) / run_seconds;
  return r;
}

// --- (c2) per lock type
// ---------------------------------------------------------------------------

class reader_handle final : public lock_handle {
 public:
  reader_handle(dlock::client& c, const std::string& key) : rw_(c.get_read_write_lock(key)) {}
  void lock() override { rw_.lock_shared(); }
  void unlock() override { rw_.unlock_shared(); }

 private:
  dlock::shared_mutex rw_;
};

class writer_handle final : public lock_handle {
 public:
  writer_handle(dlock::client& c, const std::string& key) : rw_(c.get_read_write_lock(key)) {}
  void lock() override { rw_.lock(); }
  void unlock() override { rw_.unlock(); }

 private:
  dlock::shared_mutex rw_;
};

class permit_handle final : public lock_handle {
 public:
  permit_handle(dlock::client& c, const std::string& key, int permits)
      : s_(c.get_semaphore(key, permits)) {}
  void lock() override { s_.acquire(); }
  void unlock() override { s_.release(); }

 private:
  dlock::semaphore s_;
};

// One thread's part in a per-type run: its handle, and whether it counts as a writer (its
// acquisitions are also reported apart).
struct typed_handle {
  std::unique_ptr<lock_handle> handle;
  bool writer = false;
};

// A row of the per-type table: a lock type and its workload on one name. Another type (the fair
// lock) is one more entry in type_scenarios().
struct type_scenario {
  std::string id;     // part of the key; "rw" and "rw-as-mutex" also make the ratio line
  std::string label;  // the row's label
  int threads = 0;
  // Thread t's handle on `key`, made on that thread.
  std::function<typed_handle(dlock::client& c, const std::string& key, int t)> make;
};

std::vector<type_scenario> type_scenarios(const bench_options& o) {
  const std::string n = std::to_string(o.threads);
  const auto mutex_for_all = [](dlock::client& c, const std::string& key, int) {
    return typed_handle{std::make_unique<dlock_handle>(c, key), false};
  };
  return {
      {"mutex", "mutex, " + n + " threads", o.threads, mutex_for_all},
      {"rw", "shared_mutex, " + n + " readers + 1 writer", o.threads + 1,
       [](dlock::client& c, const std::string& key, int t) {
         if (t == 0) return typed_handle{std::make_unique<writer_handle>(c, key), true};
         return typed_handle{std::make_unique<reader_handle>(c, key), false};
       }},
      {"rw-as-mutex", "mutex, the same " + std::to_string(o.threads + 1) + " threads",
       o.threads + 1,
       [](dlock::client& c, const std::string& key, int t) {
         return typed_handle{std::make_unique<dlock_handle>(c, key), t == 0};
       }},
      {"semaphore", "semaphore(" + std::to_string(o.permits) + "), " + n + " threads", o.threads,
       [permits = o.permits](dlock::client& c, const std::string& key, int) {
         return typed_handle{std::make_unique<permit_handle>(c, key, permits), false};
       }},
      {"fair", "fair_mutex, " + n + " threads", o.threads,
       [](dlock::client& c, const std::string& key, int) {
         return typed_handle{std::make_unique<fair_handle>(c, key), false};
       }},
  };
}

struct typed_result {
  double rate = 0;         // acquisitions/s of all threads
  double writer_rate = 0;  // acquisitions/s of the writer threads
  double wait_p50_ms = 0;
  double wait_p99_ms = 0;
  double max_holders = 0;         // the most threads between lock() returning and unlock() at once
  double writer_max_wait_ms = 0;  // the longest wait of a writer thread
  double other_max_wait_ms = 0;   // the longest wait of the other threads
  double thread_spread = 0;       // the most acquisitions of one thread / the fewest
};

// Every thread of `ts` locks, holds `hold`, unlocks and thinks `think` on `key` for `seconds`.
typed_result run_typed(dlock::client& c, const type_scenario& ts, const std::string& key,
                       double seconds, std::chrono::milliseconds hold,
                       std::chrono::milliseconds think) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0}, by_writers{0};
  std::atomic<int> holders{0}, max_holders{0};
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(ts.threads));
  std::vector<char> writers(static_cast<std::size_t>(ts.threads), 0);
  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::latch ready(ts.threads + 1);
  std::latch start(1);
  std::vector<std::thread> pool;
  for (int t = 0; t < ts.threads; ++t) {
    pool.emplace_back([&, t] {
      typed_handle h = ts.make(c, key, t);
      writers[static_cast<std::size_t>(t)] = h.writer ? 1 : 0;
      std::vector<double>& my_waits = waits[static_cast<std::size_t>(t)];
      my_waits.reserve(100'000);
      ready.count_down();
      start.wait();
      std::uint64_t n = 0;
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = steady::now();
          h.handle->lock();
          my_waits.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
          const int now_holding = holders.fetch_add(1) + 1;
          int seen = max_holders.load();
          while (now_holding > seen && !max_holders.compare_exchange_weak(seen, now_holding)) {
          }
          if (hold.count() > 0) std::this_thread::sleep_for(hold);
          holders.fetch_sub(1);
          h.handle->unlock();
          ++n;
          if (think.count() > 0) std::this_thread::sleep_for(think);
        }
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
      total += n;
      if (h.writer) by_writers += n;
    });
  }
  ready.arrive_and_wait();
  const auto t0 = steady::now();
  start.count_down();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool)
    t.join();
  const double elapsed = seconds_since(t0);
  if (failure) std::rethrow_exception(failure);
  std::vector<double> all;
  for (const auto& w : waits)
    all.insert(all.end(), w.begin(), w.end());
  typed_result r;
  r.rate = static_cast<double>(total.load()) / elapsed;
  r.writer_rate = static_cast<double>(by_writers.load()) / elapsed;
  r.wait_p50_ms = percentile(all, 50);
  r.wait_p99_ms = percentile(all, 99);
  r.max_holders = max_holders.load();
  std::size_t fewest = SIZE_MAX, most = 0;
  for (const auto& w : waits) {
    fewest = std::min(fewest, w.size());
    most = std::max(most, w.size());
  }
  r.thread_spread = fewest > 0 ? static_cast<double>(most) / static_cast<double>(fewest) : 0;
  for (std::size_t t = 0; t < waits.size(); ++t) {
    if (waits[t].empty()) continue;
    const double longest = *std::max_element(waits[t].begin(), waits[t].end());
    double& slot = writers[t] ? r.writer_max_wait_ms : r.other_max_wait_ms;
    slot = std::max(slot, longest);
  }
  return r;
}

// Runs every type_scenarios() row --repeat times, rotating which goes first, and prints their
// medians.
void run_type_rows(dlock::client& c, const bench_options& o) {
  const std::vector<type_scenario> rows = type_scenarios(o);
  const std::chrono::milliseconds hold{o.hold_ms}, think{o.think_ms};
  auto key_of = [](const type_scenario& ts) { return "bench:lock:c2-type:" + ts.id; };
  std::printf("warming up the per-type rows\n");
  for (const type_scenario& ts : rows)
    run_typed(c, ts, key_of(ts), 0.3, hold, think);
  std::vector<std::vector<typed_result>> runs(rows.size());
  for (int round = 0; round < o.repeat; ++round) {
    std::printf("round %d/%d  (c2 per type)", round + 1, o.repeat);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(round)) % rows.size();
      runs[i].push_back(run_typed(c, rows[i], key_of(rows[i]), o.seconds, hold, think));
      std::printf("  %s %.0f/s", rows[i].id.c_str(), runs[i].back().rate);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  auto med_of = [&](std::size_t i, double typed_result::*field) {
    std::vector<double> v;
    for (const typed_result& r : runs[i])
      v.push_back(r.*field);
    return median(std::move(v));
  };
  std::printf("\n(c2) per type, hold %d ms, think %d ms, medians\n", o.hold_ms, o.think_ms);
  std::printf("%-34s  %10s  %10s  %10s  %10s  %10s  %10s  %10s  %10s\n", "", "acq/s", "writer/s",
              "wait p50", "wait p99", "max wait", "max wait", "max held", "threads");
  std::printf("%-34s  %10s  %10s  %10s  %10s  %10s  %10s  %10s  %10s\n", "", "", "", "ms", "ms",
              "writer ms", "others ms", "at once", "max/min");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool has_writer = med_of(i, &typed_result::writer_rate) > 0 || rows[i].id == "rw";
    char writer[32] = "-";
    if (has_writer)
      std::snprintf(writer, sizeof writer, "%.0f", med_of(i, &typed_result::writer_rate));
    char writer_wait[32] = "-";
    if (has_writer) {
      std::snprintf(writer_wait, sizeof writer_wait, "%.1f",
                    med_of(i, &typed_result::writer_max_wait_ms));
    }
    std::printf("%-34s  %10.0f  %10s  %10.2f  %10.2f  %10s  %10.1f  %10.0f  %10.2f\n",
                rows[i].label.c_str(), med_of(i, &typed_result::rate), writer,
                med_of(i, &typed_result::wait_p50_ms), med_of(i, &typed_result::wait_p99_ms),
                writer_wait, med_of(i, &typed_result::other_max_wait_ms),
                med_of(i, &typed_result::max_holders), med_of(i, &typed_result::thread_spread));
  }
  std::size_t rw = rows.size(), as_mutex = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].id == "rw") rw = i;
    if (rows[i].id == "rw-as-mutex") as_mutex = i;
  }
  if (rw < rows.size() && as_mutex < rows.size()) {
    std::printf("read-heavy: shared_mutex / mutex for the same threads = %.2fx acq/s\n",
                med_of(rw, &typed_result::rate) / med_of(as_mutex, &typed_result::rate));
  }
}

// --- report ------------------------------------------------------------------------------------

const char* const side_names[] = {"dlock", "naive", "redis-py", "redlock"};
constexpr int side_count = 4;

struct scenario {
  std::string id;
  std::vector<std::function<run_result()>> sides;  // empty function: side not run
  std::vector<std::vector<run_result>> runs;
};

double med(const std::vector<run_result>& runs, double run_result::*field) {
  std::vector<double> v;
  for (const run_result& r : runs)
    v.push_back(r.*field);
  return median(std::move(v));
}

int run(int argc, char** argv) {
  bench_options parsed;
  if (const std::optional<int> exit_code = parse_args(argc, argv, parsed)) return *exit_code;
  const bench_options o = std::move(parsed);

  std::optional<dlock::tools::redis_process> server;
  std::string url = o.redis_url;
  if (url.empty()) {
    server.emplace(dlock::tools::service_options());
    url = server->url();
  }
  const dlock::client_options target = dlock::client_options::from_url(url);
  if (target.tls.enabled || !target.unix_path.empty())
    throw std::runtime_error("only redis:// servers are supported (the baselines need TCP)");
  dlock::client c{target};

  const std::string info = c.command({"INFO", "server"}).str;
  std::string command_line = argv[0];
  for (int i = 1; i < argc; ++i) {
    // Never print the URL (it may hold a password), given as --redis URL or --redis=URL.
    const std::string_view arg = argv[i];
    if (std::string_view(argv[i - 1]) == "--redis") {
      command_line += " URL";
    } else if (arg.starts_with("--redis=")) {
      command_line += " --redis=URL";
    } else {
      command_line += " " + std::string(arg);
    }
  }

  // The script baselines: run when `<interpreter> <script> --version` works.
  auto probe = [&](int side, const std::string& interpreter, const std::string& script,
                   std::optional<external_side>& out) -> std::string {
    if (interpreter.empty()) return "skipped (none)";
    external_side p{side,        interpreter, o.baselines_dir + "/" + script,
                    target.host, target.port, target.password};
    try {
      const auto v = dlock::tools::run_command({p.interpreter, p.script, "--version"});
      if (v.exit_code == 0) {
        out = p;
        return v.out.substr(0, v.out.find('\n'));
      }
      return "NOT run: " + p.script + ": " + v.err.substr(0, v.err.find('\n'));
    } catch (const std::exception& e) {
      return std::string("NOT run: ") + e.what();
    }
  };
  std::optional<external_side> py, rl;
  const std::string py_status = probe(2, o.python, "redis_py_lock.py", py);
  const std::string rl_status = probe(3, o.node, "redlock_lock.mjs", rl);

  // RTT: median PING through the same client.
  for (int i = 0; i < 200; ++i)
    c.command({"PING"});
  std::vector<double> pings;
  for (int i = 0; i < o.pings; ++i) {
    const auto t0 = steady::now();
    c.command({"PING"});
    pings.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
  }
  const double rtt_ms = median(pings);
  // The ceiling of (a) for any lock that waits for one reply per cycle: back-to-back PINGs.
  // Their rate is below 1/RTT(median) on VMs where an idle vCPU's wake-up sometimes costs more.
  double ping_rate = 0;
  {
    const auto start = steady::now();
    const auto until = start + std::chrono::duration<double>(o.seconds);
    long n = 0;
    while (steady::now() < until) {
      c.command({"PING"});
      ++n;
    }
    ping_rate = n / std::chrono::duration<double>(steady::now() - start).count();
  }

  std::printf(
      "dlock_bench_lock: dlock::mutex against the seeds' naive lock, redis-py's Lock and "
      "node-redlock\n");
  std::printf("  command:      %s\n", command_line.c_str());
  std::printf("  machine:      %u hardware threads, %s\n", std::thread::hardware_concurrency(),
              cpu_model().c_str());
  std::printf("  redis-server: %s (%s)\n", info_field(info, "redis_version").c_str(),
              server ? "private, started by the benchmark" : "given with --redis");
  std::printf("  redis-py:     %s\n", py_status.c_str());
  std::printf("  redlock:      %s\n", rl_status.c_str());
  std::printf(
      "  runs:         %.1f s each ((h): %d handoffs, %d for redis-py and redlock), %d per\n"
      "                scenario and side, median reported\n",
      o.seconds, o.handoffs, o.baseline_handoffs, o.repeat);
  std::printf("  RTT:          %.1f us (median of %d PINGs through the same dlock::client)\n",
              rtt_ms * 1000, o.pings);
  std::printf(
      "  PING loop:    %.0f/s back to back for %.1f s (the ceiling of (a) for one waited\n"
      "                round trip per cycle)\n",
      ping_rate, o.seconds);
  print_idle("  machine idle: ", "before the runs");
  std::printf("\n");
  std::fflush(stdout);

  const handle_factory make_dlock = [&c](const std::string& key) {
    return std::unique_ptr<lock_handle>(new dlock_handle(c, key));
  };
  const handle_factory make_naive = [&c](const std::string& key) {
    return std::unique_ptr<lock_handle>(new naive_handle(c, key));
  };
  const handle_factory makers[] = {make_dlock, make_naive};
  const std::chrono::milliseconds hold{o.hold_ms}, think{o.think_ms};
  const std::chrono::milliseconds settle{5};

  std::vector<scenario> scenarios;
  auto key_of = [](const std::string& scen, int side) {
    return "bench:lock:" + scen + ":" + side_names[side];
  };
  {
    scenario& s = scenarios.emplace_back();
    s.id = "a";
    for (int side = 0; side < 2; ++side)
      s.sides.push_back([&, side] {
        const std::string key = key_of("a", side);
        return run_cycles(
            c, makers[side], side, 1, [key](int) { return key; }, o.seconds,
            std::chrono::milliseconds(0), std::chrono::milliseconds(0), false);
      });
  }
  {
    scenario& s = scenarios.emplace_back();
    s.id = "b";
    for (int side = 0; side < 2; ++side)
      s.sides.push_back([&, side] {
        const std::string key = key_of("b", side);
        return run_cycles(
            c, makers[side], side, o.threads,
            [key](int t) { return key + ":" + std::to_string(t); }, o.seconds,
            std::chrono::milliseconds(0), std::chrono::milliseconds(0), false);
      });
  }
  {
    scenario& s = scenarios.emplace_back();
    s.id = "c2";
    for (int side = 0; side < 2; ++side)
      s.sides.push_back([&, side] {
        const std::string key = key_of("c2", side);
        return run_cycles(
            c, makers[side], side, o.threads, [key](int) { return key; }, o.seconds, hold, think,
            true);
      });
  }
  {
    scenario& s = scenarios.emplace_back();
    s.id = "h";
    for (int side = 0; side < 2; ++side)
      s.sides.push_back(
          [&, side] { return run_handoff(makers[side], key_of("h", side), o.handoffs, settle); });
  }
  for (scenario& s : scenarios) {
    for (const std::optional<external_side>* ext : {&py, &rl}) {
      if (*ext) {
        const std::string id = s.id;
        const external_side e = **ext;
        s.sides.push_back([&, id, e] { return run_external(c, e, id, o, key_of(id, e.side)); });
      } else {
        s.sides.emplace_back();
      }
    }
    s.runs.resize(side_count);
  }

  if (o.types_only) {
    run_type_rows(c, o);
    std::printf("\n");
    print_idle("machine idle:    ", "after the runs");
    return 0;
  }

  // Warm-up: a short run of every side (scripts cached, connections made, pages touched).
  {
    std::printf("warming up\n");
    std::fflush(stdout);
    bench_options quick = o;
    quick.seconds = 0.3;
    run_cycles(
        c, make_dlock, 0, 1, [](int) { return std::string("bench:lock:warm"); }, 0.3,
        std::chrono::milliseconds(0), std::chrono::milliseconds(0), false);
    run_cycles(
        c, make_naive, 1, 1, [](int) { return std::string("bench:lock:warm"); }, 0.3,
        std::chrono::milliseconds(0), std::chrono::milliseconds(0), false);
    if (py) run_external(c, *py, "a", quick, "bench:lock:warm");
    if (rl) run_external(c, *rl, "a", quick, "bench:lock:warm");
  }

  // Interleaved: scenario by scenario within each round, rotating which side goes first.
  for (int round = 0; round < o.repeat; ++round) {
    for (scenario& s : scenarios) {
      std::printf("round %d/%d  (%s)", round + 1, o.repeat, s.id.c_str());
      for (int k = 0; k < side_count; ++k) {
        const int side = (k + round) % side_count;
        if (!s.sides[static_cast<std::size_t>(side)]) continue;
        const run_result r = s.sides[static_cast<std::size_t>(side)]();
        s.runs[static_cast<std::size_t>(side)].push_back(r);
        if (s.id == "h") {
          std::printf("  %s p50 %.3f ms", side_names[side], r.handoff_p50_ms);
        } else {
          std::printf("  %s %.0f/s", side_names[side], r.rate);
        }
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  // The table.
  auto find = [&](const std::string& id) -> scenario& {
    for (scenario& s : scenarios)
      if (s.id == id) return s;
    throw std::logic_error("no scenario " + id);
  };
  auto value = [&](const std::string& id, int side, double run_result::*field) {
    const auto& runs = find(id).runs[static_cast<std::size_t>(side)];
    return runs.empty() ? -1.0 : med(runs, field);
  };
  auto row = [&](const char* label, const std::string& id, double run_result::*field, double scale,
                 const char* format) {
    std::printf("%-34s", label);
    for (int side = 0; side < side_count; ++side) {
      const double v = value(id, side, field);
      if (v < 0) {
        std::printf("  %10s", "-");
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, format, v * scale);
        std::printf("  %10s", buf);
      }
    }
    const double d = value(id, 0, field), n = value(id, 1, field);
    if (d >= 0 && n > 0) {
      std::printf("  %9.2fx\n", d / n);
    } else {
      std::printf("  %10s\n", "-");
    }
  };
  const std::string threads = std::to_string(o.threads);
  const double per_rtt = 1 / rtt_ms;
  std::printf("\n%-34s  %10s  %10s  %10s  %10s  %10s\n", "medians", "dlock", "naive", "redis-py",
              "redlock", "dlock/naive");
  row("(a) 1 thread, cycles/s", "a", &run_result::rate, 1, "%.0f");
  row(("(b) " + threads + " threads own keys, cycles/s").c_str(), "b", &run_result::rate, 1,
      "%.0f");
  row("(a) client commands/cycle", "a", &run_result::commands_per_acq, 1, "%.2f");
  row("(b) client commands/cycle", "b", &run_result::commands_per_acq, 1, "%.2f");
  row("(b) Redis-executed commands/cycle", "b", &run_result::executed_per_acq, 1, "%.2f");
  row("(b) redis CPU, % of one core", "b", &run_result::redis_cpu_pct, 1, "%.1f");
  row(("(c2) " + threads + " threads 1 key, acq/s").c_str(), "c2", &run_result::rate, 1, "%.0f");
  row("(c2) wait p50, ms", "c2", &run_result::wait_p50_ms, 1, "%.2f");
  row("(c2) wait p99, ms", "c2", &run_result::wait_p99_ms, 1, "%.2f");
  row("(c2) client commands/acquisition", "c2", &run_result::commands_per_acq, 1, "%.2f");
  row("(c2) Redis-executed commands/acq", "c2", &run_result::executed_per_acq, 1, "%.2f");
  row("(c2) redis CPU, % of one core", "c2", &run_result::redis_cpu_pct, 1, "%.1f");
  row("(h) handoff p50, RTT", "h", &run_result::handoff_p50_ms, per_rtt, "%.1f");
  row("(h) handoff p99, RTT", "h", &run_result::handoff_p99_ms, per_rtt, "%.1f");
  row("(h) handoff p50, ms", "h", &run_result::handoff_p50_ms, 1, "%.3f");
  row("(h) handoff p99, ms", "h", &run_result::handoff_p99_ms, 1, "%.3f");
  std::printf(
      "client commands: INFO commandstats call deltas, minus the commands the side's Lua scripts\n"
      "run inside Redis and minus the harness's INFO/PING, per acquisition. Redis-executed:\n"
      "INFO stats total_commands_processed delta (script-internal commands included), the same\n"
      "harness commands removed.\n");
  std::printf("\n(c2) commandstats per acquisition, last round:\n");
  for (int side = 0; side < side_count; ++side) {
    const auto& runs = find("c2").runs[static_cast<std::size_t>(side)];
    if (runs.empty()) continue;
    std::printf("  %-9s", side_names[side]);
    for (const auto& [name, n] : runs.back().calls)
      std::printf(" %s %.2f", name.c_str(), static_cast<double>(n) / runs.back().acquisitions);
    std::printf("\n");
  }

  std::printf("\n");
  run_type_rows(c, o);

  std::printf("\n");
  print_idle("machine idle:    ", "after the runs");
  auto verdict = [](bool met) { return met ? "met" : "NOT met"; };
  const double ra = value("a", 0, &run_result::rate) / value("a", 1, &run_result::rate);
  const double rb = value("b", 0, &run_result::rate) / value("b", 1, &run_result::rate);
  const double rc = value("c2", 0, &run_result::rate) / value("c2", 1, &run_result::rate);
  const double cmds = value("c2", 0, &run_result::commands_per_acq);
  const double p99 = value("c2", 0, &run_result::wait_p99_ms);
  const double h50 = value("h", 0, &run_result::handoff_p50_ms) * per_rtt;
  std::printf("target (a)  >= 1.5x naive: %s (%.2fx)\n", verdict(ra >= 1.5), ra);
  std::printf("            (a) dlock = %.2f of the PING loop, naive = %.2f\n",
              value("a", 0, &run_result::rate) / ping_rate,
              value("a", 1, &run_result::rate) / ping_rate);
  std::printf("target (b)  >= 2x naive: %s (%.2fx)\n", verdict(rb >= 2), rb);
  std::printf(
      "target (c2) >= 1.6x naive acq/s, <= 3 commands/acq, p99 wait <= 20 ms: %s "
      "(%.2fx, %.2f, %.2f ms)\n",
      verdict(rc >= 1.6 && cmds <= 3 && p99 <= 20), rc, cmds, p99);
  std::printf("target (h)  p50 <= 2 RTT: %s (%.1f RTT)\n", verdict(h50 <= 2), h50);
  if (!o.json_path.empty()) {
    // The input of bench/plot_benchmarks.py: one chart per figure, a series per side, null for a
    // side that did not run.
    auto series = [&](const std::vector<std::pair<std::string, double run_result::*>>& groups) {
      std::string out;
      for (int side = 0; side < side_count; ++side) {
        out += std::string(side == 0 ? "" : ",\n") + "        {\"name\": \"" + side_names[side] +
               "\", \"values\": [";
        for (std::size_t g = 0; g < groups.size(); ++g) {
          const double v = value(groups[g].first, side, groups[g].second);
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.6g", v);
          out += std::string(g == 0 ? "" : ", ") + (v < 0 ? "null" : buf);
        }
        out += "]}";
      }
      return out;
    };
    auto chart = [&](const std::string& id, const std::string& title, const std::string& unit,
                     const std::string& groups, const std::string& body) {
      return "    {\n      \"id\": \"" + id + "\",\n      \"title\": \"" + title +
             "\",\n      \"source\": \"dlock_bench_lock, medians of " + std::to_string(o.repeat) +
             "\",\n      \"unit\": \"" + unit + "\",\n      \"log_scale\": true,\n" +
             "      \"groups\": [" + groups + "],\n      \"series\": [\n" + body +
             "\n      ]\n    }";
    };
    const std::string json =
        "{\n  \"charts\": [\n" +
        chart(
            "lock-throughput", "Lock/unlock cycles per second, one redis-server (log scale)",
            "cycles/s",
            "\"(a) 1 thread\", \"(b) " + threads + " threads, own keys\", \"(c2) " + threads +
                " threads, one key\"",
            series(
                {{"a", &run_result::rate}, {"b", &run_result::rate}, {"c2", &run_result::rate}})) +
        ",\n" +
        chart("lock-handoff", "Handoff: unlock to lock() returning in a waiting thread (log scale)",
              "ms", "\"p50\", \"p99\"",
              series({{"h", &run_result::handoff_p50_ms}, {"h", &run_result::handoff_p99_ms}})) +
        ",\n" +
        chart("lock-contended-wait", "Wait for a contended lock, (c2) (log scale)", "ms",
              "\"wait p50\", \"wait p99\"",
              series({{"c2", &run_result::wait_p50_ms}, {"c2", &run_result::wait_p99_ms}})) +
        "\n  ]\n}\n";
    std::FILE* f = std::fopen(o.json_path.c_str(), "w");
    bool written = f != nullptr && std::fwrite(json.data(), 1, json.size(), f) == json.size();
    if (f != nullptr && std::fclose(f) != 0) written = false;
    if (!written) {
      std::fprintf(stderr, "dlock_bench_lock: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
    std::printf("medians written to %s\n", o.json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_lock: %s\n", e.what());
    return 1;
  }
}
