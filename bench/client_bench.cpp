// dlock_bench_client: commands per second through one dlock::client, each figure printed beside
// redis-benchmark on the same server in the same run.
//
// One command, INCR on one fixed key: byte for byte what `redis-benchmark -t incr` sends without
// -r (the key "counter:__rand_int__" is used literally). Three cases:
//   sync, 1 thread               client::command from one thread      vs  -c 1 -P 1
//   sync, 8 threads              client::command from 8 threads that  vs  -c 8 -P 1
//                                share one client (auto-pipelining)
//   async, window 128            client::async_command from one       vs  -c 8 -P 16
//                                thread, 128 requests in flight
// Every run is preceded by a warm-up that also sizes it to about --seconds, and the two sides run
// interleaved, --repeat times each; the table shows medians, since on a small machine the client,
// its I/O thread, redis-server and redis-benchmark all compete for the same cores.
//
// A second table explains the rates: commands per read() at the server (the pipeline depth it
// saw, from INFO stats), and the client process's CPU time and context switches per request
// (getrusage; for redis-benchmark, RUSAGE_CHILDREN around its run).
//
// Exits non-zero only on errors (a failed command, redis-benchmark failing, a lost INCR); the
// target (8 sync threads >= 1.0x redis-benchmark -c 8 -P 1) is reported, not enforced.

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "redis_process.hpp"

namespace {

using dlock::bench::cpu_model;
using dlock::bench::info_field;
using dlock::bench::print_idle;

using steady = std::chrono::steady_clock;

struct bench_options {
  std::string redis_url;       // empty: start a private redis-server
  std::uint64_t requests = 0;  // per run; 0: size each run to `seconds`
  double seconds = 2.5;        // target length of one run when sizing automatically
  int repeat = 3;              // runs per case and side; the median is reported
  int threads = 8;             // caller threads of the multi-threaded sync case
  int window = 128;            // requests in flight in the async case
  std::string key = "counter:__rand_int__";
  std::string redis_benchmark = "redis-benchmark";
  std::string only;  // run one case only: sync-1, sync-n or async (for profiling)
  std::string cpus;  // CPU list to pin everything to, such as "0" or "0-1"; empty: not pinned
};

// Reads the command line into `o`. Returns an exit code when the program is to stop: 0 after
// --help, 2 after a usage error (CLI11 has printed the message).
std::optional<int> parse_args(int argc, char** argv, bench_options& o) {
  using dlock::bench::decimal_whole_number;
  CLI::App app{
      "dlock_bench_client: INCR commands per second through one dlock::client, each figure\n"
      "beside redis-benchmark on the same server in the same run. Cases: sync-1 (one thread),\n"
      "sync-n (--threads threads sharing the client), async (--window requests in flight)",
      "dlock_bench_client"};
  app.get_formatter()->column_width(40);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--redis", o.redis_url,
                 "Use this server instead of a private redis-server\n"
                 "(redis:// or unix://; redis-benchmark is pointed at it too)")
      ->type_name("URL");
  dlock::bench::add_whole_option(app, "--requests", o.requests,
                                 "Requests per measured run, both sides\n"
                                 "(default: sized to --seconds by the warm-up)",
                                 "N", std::uint64_t{1000}, std::uint64_t{1'000'000'000});
  app.add_option("--seconds", o.seconds, "Target length of one measured run (default 2.5)")
      ->type_name("S")
      ->check(dlock::bench::number_range(0.1, 600));
  dlock::bench::add_whole_option(app, "--repeat", o.repeat,
                                 "Measured runs per case and side; median reported (default 3)",
                                 "R", 1, 100);
  dlock::bench::add_whole_option(app, "--threads", o.threads,
                                 "Threads of the multi-threaded sync case (default 8)", "T", 1,
                                 1024);
  dlock::bench::add_whole_option(app, "--window", o.window,
                                 "Requests in flight in the async case (default 128)", "W", 1,
                                 1'000'000);
  app.add_option("--key", o.key, "Key to INCR\n(default counter:__rand_int__, as redis-benchmark)")
      ->type_name("K")
      ->check([](const std::string& key) {
        return key.empty() ? std::string("wants a non-empty key") : std::string();
      });
  app.add_option("--redis-benchmark", o.redis_benchmark,
                 "redis-benchmark binary (default: found through PATH)")
      ->type_name("PATH");
  app.add_option("--only", o.only, "Run one case: sync-1, sync-n or async")
      ->type_name("CASE")
      ->check(CLI::IsMember({"sync-1", "sync-n", "async"}));
  app.add_option("--cpus", o.cpus,
                 "Pin the client, the private server and redis-benchmark to\n"
                 "these CPUs, such as 0 or 0-1 or 0,1 (default: not pinned)")
      ->type_name("LIST");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// Pins the calling thread, and so every thread and child process made after it, to `list`
// ("0", "0-1", "0,1"). Throws std::runtime_error for a malformed list or when the kernel refuses.
void pin_to_cpus(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    int first = -1, last = -1;
    const char* end = item.data() + item.size();
    bool ok = false;
    if (dash == std::string::npos) {
      ok = std::from_chars(item.data(), end, first).ptr == end;
      last = first;
    } else {
      ok = std::from_chars(item.data(), item.data() + dash, first).ptr == item.data() + dash &&
           std::from_chars(item.data() + dash + 1, end, last).ptr == end;
    }
    if (!ok || first < 0 || last < first || last >= CPU_SETSIZE)
      throw std::runtime_error("--cpus: cannot read '" + list + "'");
    for (int cpu = first; cpu <= last; ++cpu)
      CPU_SET(cpu, &set);
    pos = comma + 1;
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error("--cpus " + list + ": " + std::strerror(errno));
}

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// --- the dlock side ----------------------------------------------------------------------------

std::int64_t read_counter(dlock::client& c, const std::string& key) {
  const dlock::reply r = c.command({"GET", key});
  if (r.is_nil()) return 0;
  return std::stoll(r.str);
}

// Sync: `threads` threads call client::command until `n` requests have been claimed between them.
// A shared claim counter keeps every thread busy to the end, so the tail of a run is not
// measured with fewer requests in flight. Returns the seconds taken.
double run_sync(dlock::client& c, const std::string& key, int threads, std::uint64_t n) {
  const std::string_view args[] = {"INCR", key};
  std::atomic<std::uint64_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::latch start(1);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      start.wait();
      try {
        while (next.fetch_add(1, std::memory_order_relaxed) < n) {
          const dlock::reply r = c.command(std::span<const std::string_view>(args));
          if (!r.is_integer()) throw std::runtime_error("INCR answered " + dlock::to_string(r));
        }
      } catch (...) {
        next.store(n, std::memory_order_relaxed);  // stop the other threads too
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  const auto t0 = steady::now();
  start.count_down();
  for (auto& t : pool)
    t.join();
  const double took = seconds_since(t0);
  if (failure) std::rethrow_exception(failure);
  return took;
}

// Async: one thread keeps `window` requests in flight with async_command; each completion (on
// the client's I/O thread) frees one slot. Returns the seconds taken.
double run_async(dlock::client& c, const std::string& key, int window, std::uint64_t n) {
  // The issuer sleeps only while the window is full, and completions wake it only then: a wake-up
  // (futex syscall) per reply would cost the harness more than the client under test. seq_cst on
  // `completed` and `sleeping` (Dekker): a completion either sees `sleeping` or is seen by the
  // issuer's re-check under the mutex.
  struct shared_state {
    std::atomic<std::uint64_t> completed{0};
    std::atomic<bool> sleeping{false};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::condition_variable wake;
    std::string error;  // guarded by mutex
  } state;
  // One pointer of capture: fits std::function's inline storage, so copies do not allocate.
  const dlock::reply_handler on_reply = [s = &state](std::error_code ec, dlock::reply r) {
    if ((ec || !r.is_integer()) && !s->failed.exchange(true)) {
      std::lock_guard lock(s->mutex);
      s->error = "INCR failed: " + (ec ? ec.message() + ": " : std::string()) + r.str;
    }
    s->completed.fetch_add(1);
    if (s->sleeping.load()) {
      std::lock_guard lock(s->mutex);
      s->wake.notify_one();
    }
  };
  // Blocks until at most `limit` requests are in flight.
  auto wait_until_in_flight_at_most = [&state](std::uint64_t issued, std::uint64_t limit) {
    if (issued - state.completed.load() <= limit) return;
    std::unique_lock lock(state.mutex);
    state.sleeping.store(true);
    state.wake.wait(lock, [&] { return issued - state.completed.load() <= limit; });
    state.sleeping.store(false);
  };
  const std::string_view args[] = {"INCR", key};
  const auto slots = static_cast<std::uint64_t>(window);
  const auto t0 = steady::now();
  std::uint64_t issued = 0;
  try {
    for (; issued < n && !state.failed.load(std::memory_order_relaxed); ++issued) {
      wait_until_in_flight_at_most(issued, slots - 1);
      c.async_command(std::span<const std::string_view>(args), on_reply);
    }
  } catch (...) {
    wait_until_in_flight_at_most(issued, 0);
    throw;
  }
  wait_until_in_flight_at_most(issued, 0);  // the callbacks reference `state`
  const double took = seconds_since(t0);
  if (state.failed) throw std::runtime_error(state.error);
  return took;
}

// --- the redis-benchmark side ------------------------------------------------------------------

std::vector<std::string> redis_benchmark_argv(const bench_options& o,
                                              const dlock::client_options& target, int clients,
                                              int pipeline, std::uint64_t n) {
  std::vector<std::string> argv{o.redis_benchmark};
  if (!target.unix_path.empty()) {
    argv.insert(argv.end(), {"-s", target.unix_path});
  } else {
    argv.insert(argv.end(), {"-h", target.host, "-p", std::to_string(target.port)});
  }
  if (!target.username.empty()) argv.insert(argv.end(), {"--user", target.username});
  if (!target.password.empty()) argv.insert(argv.end(), {"-a", target.password});
  if (target.database != 0) argv.insert(argv.end(), {"--dbnum", std::to_string(target.database)});
  argv.insert(argv.end(), {"-t", "incr", "-n", std::to_string(n), "-c", std::to_string(clients),
                           "-P", std::to_string(pipeline), "--csv"});
  return argv;
}

std::string join_for_display(const std::vector<std::string>& argv) {
  std::string line;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) line += ' ';
    // Never print a password.
    line += (i > 0 && argv[i - 1] == "-a") ? std::string("***") : argv[i];
  }
  return line;
}

// Runs redis-benchmark for `n` requests and returns the requests/s it reports for INCR.
double run_redis_benchmark(const std::vector<std::string>& argv, std::uint64_t n) {
  // Generous: only a hung run should hit it, even at 10k requests/s.
  const auto timeout = std::chrono::milliseconds(120'000 + n / 10);
  const dlock::tools::command_result res = dlock::tools::run_command(argv, timeout);
  if (res.timed_out || res.exit_code != 0) {
    throw std::runtime_error(join_for_display(argv) + (res.timed_out ? " timed out" : " failed") +
                             ": " + res.err + res.out);
  }
  // --csv: a header line, then "INCR","<rps>",...
  const std::size_t row = res.out.find("\"INCR\",\"");
  if (row != std::string::npos) {
    const std::size_t begin = row + 8;
    const std::size_t end = res.out.find('"', begin);
    if (end != std::string::npos) {
      const std::string field = res.out.substr(begin, end - begin);
      char* stop = nullptr;
      const double rate = std::strtod(field.c_str(), &stop);
      if (stop != field.c_str() && rate > 0) return rate;
    }
  }
  throw std::runtime_error("no INCR rate in the output of " + join_for_display(argv) + ":\n" +
                           res.out);
}

// --- measuring ---------------------------------------------------------------------------------

// What one measured run gives. The three counters explain a rate: how many commands the server
// got per read() (the pipeline depth it saw), and what each request cost the client process.
struct run_result {
  double rate = 0;                  // requests/s
  double commands_per_read = 0;     // at the server
  double cpu_us_per_request = 0;    // client process, user + system
  double switches_per_request = 0;  // client process, voluntary + involuntary
};

// One side of a case: runs `n` requests.
using runner = std::function<run_result(std::uint64_t n)>;

struct server_counters {
  std::int64_t commands = 0;
  std::int64_t reads = 0;
};

server_counters read_server_counters(dlock::client& c) {
  const std::string stats = c.command({"INFO", "stats"}).str;
  auto field = [&stats](std::string_view name) {
    const std::size_t at = stats.find(std::string(name) + ":");
    return at == std::string::npos ? 0 : std::stoll(stats.substr(at + name.size() + 1));
  };
  return {field("total_commands_processed"), field("total_reads_processed")};
}

struct process_usage {
  double cpu_seconds = 0;
  double switches = 0;
};

// RUSAGE_SELF: this process, all threads. RUSAGE_CHILDREN: children reaped so far, so a
// difference around run_command() is that redis-benchmark run.
process_usage read_usage(int who) {
  rusage ru{};
  getrusage(who, &ru);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return {seconds(ru.ru_utime) + seconds(ru.ru_stime),
          static_cast<double>(ru.ru_nvcsw + ru.ru_nivcsw)};
}

// Runs `body` (which returns requests/s) and adds the counters around it.
run_result measure(dlock::client& c, int usage_of, std::uint64_t n,
                   const std::function<double()>& body) {
  const server_counters server0 = read_server_counters(c);
  const process_usage usage0 = read_usage(usage_of);
  run_result r;
  r.rate = body();
  const process_usage usage1 = read_usage(usage_of);
  const server_counters server1 = read_server_counters(c);
  const auto requests = static_cast<double>(n);
  const auto reads = static_cast<double>(std::max<std::int64_t>(server1.reads - server0.reads, 1));
  r.commands_per_read = static_cast<double>(server1.commands - server0.commands) / reads;
  r.cpu_us_per_request = (usage1.cpu_seconds - usage0.cpu_seconds) * 1e6 / requests;
  r.switches_per_request = (usage1.switches - usage0.switches) / requests;
  return r;
}

// Warms a side up and returns how many requests make a run of about `seconds`: runs growing
// sizes until one lasts long enough (0.3 s) to give a trustworthy rate. With a fixed count it
// only warms up.
std::uint64_t size_runs(const runner& run, std::uint64_t first, std::uint64_t granule,
                        const bench_options& o) {
  auto round_up = [granule](double x) {
    const auto v = static_cast<std::uint64_t>(std::max(x, 1.0));
    return (v + granule - 1) / granule * granule;
  };
  if (o.requests != 0) {
    run(round_up(static_cast<double>(o.requests) / 10));
    return round_up(static_cast<double>(o.requests));
  }
  std::uint64_t n = round_up(static_cast<double>(first));
  for (;;) {
    const double rate = run(n).rate;
    const double took = static_cast<double>(n) / rate;
    if (took >= 0.3) return round_up(rate * o.seconds);
    n = round_up(std::max(2.0 * static_cast<double>(n), rate * 0.4));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The median of one counter over a side's runs.
double median_of(const std::vector<run_result>& runs, double run_result::*field) {
  std::vector<double> v;
  for (const run_result& r : runs)
    v.push_back(r.*field);
  return median(std::move(v));
}

struct bench_case {
  std::string id;    // as for --only
  std::string name;  // for the table
  int clients = 1;   // redis-benchmark -c
  int pipeline = 1;  // redis-benchmark -P
  runner dlock_run;
  runner baseline_run;
  std::uint64_t dlock_n = 0;
  std::uint64_t baseline_n = 0;
  std::vector<run_result> dlock_runs;
  std::vector<run_result> baseline_runs;
};

void print_results(const std::vector<bench_case>& cases) {
  std::printf("\n%-18s  %12s  %15s  %6s  %s\n", "case", "dlock req/s", "baseline req/s", "ratio",
              "baseline");
  for (const bench_case& bc : cases) {
    const double d = median_of(bc.dlock_runs, &run_result::rate);
    const double b = median_of(bc.baseline_runs, &run_result::rate);
    std::printf("%-18s  %12.0f  %15.0f  %5.2fx  redis-benchmark -c %d -P %d\n", bc.name.c_str(), d,
                b, d / b, bc.clients, bc.pipeline);
  }
  std::printf("\n%-18s  %20s  %20s  %20s\n", "medians", "commands/server read", "client CPU us/req",
              "client switches/req");
  std::printf("%-18s  %9s %10s  %9s %10s  %9s %10s\n", "", "dlock", "baseline", "dlock", "baseline",
              "dlock", "baseline");
  for (const bench_case& bc : cases) {
    std::printf("%-18s", bc.name.c_str());
    for (auto field : {&run_result::commands_per_read, &run_result::cpu_us_per_request,
                       &run_result::switches_per_request}) {
      std::printf("  %9.2f %10.2f", median_of(bc.dlock_runs, field),
                  median_of(bc.baseline_runs, field));
    }
    std::printf("\n");
  }
}

int run(int argc, char** argv) {
  bench_options parsed;
  if (const std::optional<int> exit_code = parse_args(argc, argv, parsed)) return *exit_code;
  const bench_options o = std::move(parsed);
  // Before any thread or child exists, so that all of them inherit it.
  if (!o.cpus.empty()) pin_to_cpus(o.cpus);

  std::optional<dlock::tools::redis_process> server;
  std::string url = o.redis_url;
  if (url.empty()) {
    server.emplace(dlock::tools::service_options());
    url = server->url();
  }
  const dlock::client_options target = dlock::client_options::from_url(url);
  if (target.tls.enabled)
    throw std::runtime_error("TLS servers are not supported: the baseline would not match");
  dlock::client c{target};

  const std::string info = c.command({"INFO", "server"}).str;
  const auto rb_version = dlock::tools::run_command({o.redis_benchmark, "--version"});
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
  std::printf("dlock_bench_client: INCR %s, one dlock::client\n", o.key.c_str());
  std::printf("  command:         %s\n", command_line.c_str());
  std::printf("  machine:         %u hardware threads, %s\n", std::thread::hardware_concurrency(),
              cpu_model().c_str());
  std::printf("  cpus:            %s\n",
              o.cpus.empty() ? "not pinned"
                             : ("pinned to " + o.cpus +
                                (server ? " (client, server, redis-benchmark)"
                                        : " (client and redis-benchmark; not the --redis server)"))
                                   .c_str());
  std::printf("  redis-server:    %s (%s)\n", info_field(info, "redis_version").c_str(),
              server ? "private, started by the benchmark" : "given with --redis");
  std::printf("  redis-benchmark: %s", rb_version.out.c_str());
  if (o.requests != 0) {
    std::printf("  runs:            %llu requests each",
                static_cast<unsigned long long>(o.requests));
  } else {
    std::printf("  runs:            sized to ~%.1f s each by the warm-up", o.seconds);
  }
  std::printf(", %d per case and side, median reported\n", o.repeat);
  print_idle("  machine idle:    ", "before the runs");
  std::printf("\n");
  std::fflush(stdout);

  // Each dlock run must move the counter by exactly its request count: nothing lost, nothing
  // sent twice.
  auto dlock_side = [&](auto body) -> runner {
    return [&c, &o, body](std::uint64_t n) {
      return measure(c, RUSAGE_SELF, n, [&] {
        const std::int64_t before = read_counter(c, o.key);
        const double took = body(n);
        const std::int64_t moved = read_counter(c, o.key) - before;
        if (moved != static_cast<std::int64_t>(n)) {
          throw std::runtime_error("INCR count mismatch: sent " + std::to_string(n) +
                                   ", the counter moved by " + std::to_string(moved) +
                                   " (does another client use the key?)");
        }
        return static_cast<double>(n) / took;
      });
    };
  };
  auto baseline_side = [&](int clients, int pipeline) -> runner {
    return [&c, &o, &target, clients, pipeline](std::uint64_t n) {
      return measure(c, RUSAGE_CHILDREN, n, [&] {
        return run_redis_benchmark(redis_benchmark_argv(o, target, clients, pipeline, n), n);
      });
    };
  };

  std::vector<bench_case> cases;
  auto add_case = [&](std::string id, std::string name, int clients, int pipeline,
                      runner dlock_run) {
    if (!o.only.empty() && o.only != id) return;
    bench_case& bc = cases.emplace_back();
    bc.id = std::move(id);
    bc.name = std::move(name);
    bc.clients = clients;
    bc.pipeline = pipeline;
    bc.dlock_run = std::move(dlock_run);
    bc.baseline_run = baseline_side(clients, pipeline);
  };
  add_case("sync-1", "sync, 1 thread", 1, 1,
           dlock_side([&](std::uint64_t n) { return run_sync(c, o.key, 1, n); }));
  add_case("sync-n", "sync, " + std::to_string(o.threads) + " threads", o.threads, 1,
           dlock_side([&](std::uint64_t n) { return run_sync(c, o.key, o.threads, n); }));
  add_case("async", "async, window " + std::to_string(o.window), 8, 16,
           dlock_side([&](std::uint64_t n) { return run_async(c, o.key, o.window, n); }));

  for (bench_case& bc : cases) {
    std::printf("warming up: %s\n", bc.name.c_str());
    std::fflush(stdout);
    bc.dlock_n = size_runs(bc.dlock_run, 10'000, 1, o);
    // redis-benchmark sends whole pipelines per client; a multiple of -c * -P keeps -n exact.
    bc.baseline_n =
        size_runs(bc.baseline_run, 10'000, static_cast<std::uint64_t>(bc.clients * bc.pipeline), o);
  }

  // Interleaved: case by case within each round, alternating which side goes first, so slow
  // drifts of the machine (other load, frequency) hit both sides alike.
  for (int round = 0; round < o.repeat; ++round) {
    for (bench_case& bc : cases) {
      auto measure_dlock = [&] { bc.dlock_runs.push_back(bc.dlock_run(bc.dlock_n)); };
      auto measure_baseline = [&] { bc.baseline_runs.push_back(bc.baseline_run(bc.baseline_n)); };
      if (round % 2 == 0) {
        measure_dlock();
        measure_baseline();
      } else {
        measure_baseline();
        measure_dlock();
      }
      std::printf("round %d/%d  %-18s dlock %10.0f req/s   redis-benchmark %10.0f req/s\n",
                  round + 1, o.repeat, bc.name.c_str(), bc.dlock_runs.back().rate,
                  bc.baseline_runs.back().rate);
      std::fflush(stdout);
    }
  }

  print_results(cases);
  std::printf("\nrequests per measured run:\n");
  for (const bench_case& bc : cases)
    std::printf("  %-18s dlock %llu, redis-benchmark %llu\n", bc.name.c_str(),
                static_cast<unsigned long long>(bc.dlock_n),
                static_cast<unsigned long long>(bc.baseline_n));
  std::printf("baseline command lines:\n");
  for (const bench_case& bc : cases) {
    std::printf("  %s\n", join_for_display(redis_benchmark_argv(o, target, bc.clients, bc.pipeline,
                                                                bc.baseline_n))
                              .c_str());
  }

  std::printf("\n");
  print_idle("machine idle:    ", "after the runs");
  for (const bench_case& bc : cases) {
    if (bc.id != "sync-n") continue;
    const double ratio = median_of(bc.dlock_runs, &run_result::rate) /
                         median_of(bc.baseline_runs, &run_result::rate);
    std::printf("target: %s >= 1.00x redis-benchmark -c %d -P 1: %s (%.2fx)\n", bc.name.c_str(),
                o.threads, ratio >= 1.0 ? "met" : "NOT met", ratio);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_client: %s\n", e.what());
    return 1;
  }
}
