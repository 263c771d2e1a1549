// bench/replica_bench.cpp
//
// What lock_options::min_replicas costs: one thread's lock()+unlock() cycles on one key against a
// private master with one replica, with min_replicas 0 (no WAIT) and 1 (WAIT 1 behind every lock
// script), sides interleaved, --repeat rounds, medians reported; plus the median lock() latency
// of each side as a multiple of a PING round trip measured in the same run.
//
//   dlock_bench_replica [--seconds S] [--repeat R] [--replica-timeout-ms T]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "redis_process.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

struct side_result {
  double cycles_per_s = 0;
  double lock_p50_us = 0;
  std::uint64_t unconfirmed = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

side_result run_side(const std::string& url, std::uint32_t replicas, int timeout_ms, double seconds,
                     const std::string& key) {
  dlock::client_options o = dlock::client_options::from_url(url);
  o.locks.min_replicas = replicas;
  o.locks.replica_timeout = std::chrono::milliseconds(timeout_ms);
  dlock::client c{o};
  dlock::mutex m = c.get_lock(key);
  m.lock();  // connect and load scripts outside the measurement
  m.unlock();
  std::vector<double> lock_us;
  std::uint64_t cycles = 0;
  const auto start = steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (steady_clock::now() < end) {
    const auto before = steady_clock::now();
    m.lock();
    lock_us.push_back(
        std::chrono::duration<double, std::micro>(steady_clock::now() - before).count());
    m.unlock();
    ++cycles;
  }
  const double elapsed = std::chrono::duration<double>(steady_clock::now() - start).count();
  return {static_cast<double>(cycles) / elapsed, median(lock_us), c.lock_metrics().unconfirmed};
}

double ping_us(const std::string& url, int n) {
  dlock::client c{url};
  c.command({"PING"});
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto before = steady_clock::now();
    c.command({"PING"});
    us.push_back(std::chrono::duration<double, std::micro>(steady_clock::now() - before).count());
  }
  return median(us);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  int repeat = 3;
  int timeout_ms = 100;
  CLI::App app{"dlock_bench_replica: the cost of lock_options::min_replicas (WAIT)"};
  app.add_option("--seconds", seconds, "Length of one measured run (default 2)");
  app.add_option("--repeat", repeat, "Runs per side; the median is reported (default 3)");
  app.add_option("--replica-timeout-ms", timeout_ms, "replica_timeout (default 100)");
  CLI11_PARSE(app, argc, argv);

  dlock::tools::redis_process_options mo = dlock::tools::service_options();
  mo.extra_args = {"--repl-diskless-sync-delay", "0"};
  dlock::tools::redis_process master{mo};
  dlock::tools::redis_process_options ro = dlock::tools::service_options();
  ro.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())};
  dlock::tools::redis_process replica{ro};
  for (int i = 0; i < 500; ++i) {  // wait until the replica acknowledges writes
    master.cli({"SET", "bench:probe", "1"});
    if (master.cli({"WAIT", "1", "100"}) == "1") break;
  }

  std::printf("dlock_bench_replica: master 127.0.0.1:%u + 1 replica (private, no persistence)\n",
              static_cast<unsigned>(master.port()));
  std::printf("machine: %s, %u cores\n", dlock::bench::cpu_model().c_str(),
              std::thread::hardware_concurrency());
  std::vector<double> plain_cps, plain_p50, wait_cps, wait_p50;
  std::uint64_t unconfirmed = 0;
  for (int r = 0; r < repeat; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool with_wait = (side + r) % 2 == 1;  // alternate which side runs first
      const side_result res = run_side(master.url(), with_wait ? 1 : 0, timeout_ms, seconds,
                                       "bench:replica:" + std::to_string(r));
      (with_wait ? wait_cps : plain_cps).push_back(res.cycles_per_s);
      (with_wait ? wait_p50 : plain_p50).push_back(res.lock_p50_us);
      if (with_wait) unconfirmed += res.unconfirmed;
    }
  }
  const double rtt = ping_us(master.url(), 2000);
  const double p_cps = median(plain_cps), w_cps = median(wait_cps);
  const double p_lat = median(plain_p50), w_lat = median(wait_p50);
  std::printf("\n  side              cycles/s   lock() p50   in PING RTTs\n");
  std::printf("  min_replicas=0  %10.0f  %8.1f us  %12.2f\n", p_cps, p_lat, p_lat / rtt);
  std::printf("  min_replicas=1  %10.0f  %8.1f us  %12.2f\n", w_cps, w_lat, w_lat / rtt);
  std::printf("  ratio (1 / 0)   %10.2fx %10.2fx\n", w_cps / p_cps, w_lat / p_lat);
  std::printf("  PING RTT p50    %8.1f us; unconfirmed holds with min_replicas=1: %llu\n", rtt,
              static_cast<unsigned long long>(unconfirmed));
  std::printf(
      "{\"plain_cycles_per_s\":%.0f,\"wait_cycles_per_s\":%.0f,\"plain_lock_p50_us\":%.1f,"
      "\"wait_lock_p50_us\":%.1f,\"ping_us\":%.1f,\"unconfirmed\":%llu}\n",
      p_cps, w_cps, p_lat, w_lat, rtt, static_cast<unsigned long long>(unconfirmed));
  return 0;
}
