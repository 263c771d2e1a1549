// bench/watchdog_bench.cpp
//
// What holding many locks costs one client: (1) N locks held with a short watchdog lease (default
// 100,000 and 3 s): renewal scripts per round and per 1,000 leases, renewals missed, holds lost,
// and the client's CPU while it only renews; (2) the time to acquire M locks (default 20,000) one
// after another with a 3 s lease beside the same with a 30 s lease, measured in the same run. A
// short lease means more rounds while acquiring; the ratio shows whether each round costs the
// acquisitions anything.
//
//   dlock_bench_watchdog [--locks N] [--acquire M] [--lease-ms L] [--rounds R] [--redis URL]
//
// Without --redis it starts a private redis-server (no persistence) on a free loopback port.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "redis_process.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct options {
  std::uint32_t locks = 100000;
  std::uint32_t acquire = 20000;
  std::uint32_t lease_ms = 3000;
  std::uint32_t rounds = 3;
  std::string redis;
};

// The process's CPU time (user + system) in seconds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double seconds_since(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

dlock::client_options with_lease(const std::string& url, milliseconds lease) {
  dlock::client_options o = dlock::client_options::from_url(url);
  o.locks.watchdog_timeout = lease;
  return o;
}

// (1) Holds `o.locks` locks as asynchronous leases (at most 1,000 acquisitions in flight), then
// lets the watchdog renew them for `o.rounds` renewal intervals.
void held_locks(const options& o, const std::string& url) {
  const milliseconds lease(o.lease_ms);
  dlock::client c{with_lease(url, lease)};
  std::vector<dlock::lock_lease> held;
  held.reserve(o.locks);
  std::deque<std::future<dlock::lock_lease>> in_flight;
  const auto start = steady_clock::now();
  for (std::uint32_t i = 0; i < o.locks; ++i) {
    in_flight.push_back(c.get_lock("bench:watchdog:" + std::to_string(i)).async_lock());
    if (in_flight.size() >= 1000) {
      held.push_back(in_flight.front().get());
      in_flight.pop_front();
    }
  }
  for (auto& f : in_flight)
    held.push_back(f.get());
  const double acquire_s = seconds_since(start);
  std::printf("(1) %u locks held by one client, %u ms watchdog lease (renewed every %u ms)\n",
              o.locks, o.lease_ms, o.lease_ms / 3);
  std::printf("    acquired in %.2f s (%.0f/s, asynchronous, 1,000 in flight)\n", acquire_s,
              o.locks / acquire_s);

  const dlock::lock_metrics before = c.lock_metrics();
  const double cpu_before = cpu_seconds();
  const auto watch_start = steady_clock::now();
  std::this_thread::sleep_for(milliseconds(o.lease_ms / 3 * o.rounds + o.lease_ms / 6));
  const double wall = seconds_since(watch_start);
  const double cpu = cpu_seconds() - cpu_before;
  const dlock::lock_metrics after = c.lock_metrics();

  const auto scripts = after.renewal_scripts - before.renewal_scripts;
  const auto renewed = after.leases_renewed - before.leases_renewed;
  const std::uint64_t expected = static_cast<std::uint64_t>(o.locks) * o.rounds;
  std::size_t still_held = 0;
  for (const auto& l : held)
    still_held += l.lost() ? 0 : 1;
  std::printf("    over %.2f s (%u renewal intervals):\n", wall, o.rounds);
  std::printf("      renewal scripts       %llu (%.2f per round, %.2f per 1,000 leases renewed)\n",
              static_cast<unsigned long long>(scripts), static_cast<double>(scripts) / o.rounds,
              renewed ? 1000.0 * static_cast<double>(scripts) / static_cast<double>(renewed) : 0);
  std::printf("      leases renewed        %llu of %llu expected (%s)\n",
              static_cast<unsigned long long>(renewed), static_cast<unsigned long long>(expected),
              renewed >= expected ? "none missed" : "SOME MISSED");
  std::printf("      holds lost            %llu; still held %zu of %u\n",
              static_cast<unsigned long long>(after.lost), still_held, o.locks);
  std::printf("      client CPU            %.3f s = %.1f%% of one core while only renewing\n", cpu,
              100 * cpu / wall);
  const auto release_start = steady_clock::now();
  held.clear();  // releases every lease
  std::printf("    released in %.2f s\n", seconds_since(release_start));
}

// (2) Acquires `count` locks one after another on one thread with a watchdog lease of `lease`,
// then releases them. Returns the acquisition time in seconds.
double acquire_one_by_one(const std::string& url, milliseconds lease, std::uint32_t count) {
  dlock::client c{with_lease(url, lease)};
  std::vector<dlock::mutex> locks;
  locks.reserve(count);
  const auto start = steady_clock::now();
  for (std::uint32_t i = 0; i < count; ++i) {
    locks.push_back(
        c.get_lock("bench:acquire:" + std::to_string(lease.count()) + ":" + std::to_string(i)));
    locks.back().lock();
  }
  const double elapsed = seconds_since(start);
  for (auto& m : locks)
    m.unlock();
  return elapsed;
}

int run(const options& o) {
  std::optional<dlock::tools::redis_process> server;
  std::string url = o.redis;
  if (url.empty()) {
    server.emplace(dlock::tools::service_options());
    url = server->url();
  }
  std::printf("dlock_bench_watchdog  cpu: %s, %u cores\n", dlock::bench::cpu_model().c_str(),
              std::thread::hardware_concurrency());
  dlock::bench::print_idle("  machine idle: ", "before the runs");

  held_locks(o, url);

  const double short_lease = acquire_one_by_one(url, milliseconds(o.lease_ms), o.acquire);
  const double long_lease = acquire_one_by_one(url, milliseconds(o.lease_ms) * 10, o.acquire);
  std::printf("(2) %u locks acquired one after another on one thread:\n", o.acquire);
  std::printf("      %u ms lease  %.2f s\n", o.lease_ms, short_lease);
  std::printf("      %u ms lease  %.2f s   ratio %.2fx (target <= 2x)\n", o.lease_ms * 10,
              long_lease, short_lease / long_lease);
  dlock::bench::print_idle("machine idle:    ", "after the runs");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"The cost of holding many locks: renewal rounds, scripts, CPU."};
  dlock::bench::add_whole_option(app, "--locks", o.locks, "(1) locks held (default 100000)", "N",
                                 1u, 10000000u);
  dlock::bench::add_whole_option(app, "--acquire", o.acquire,
                                 "(2) locks acquired one by one (default 20000)", "M", 1u,
                                 10000000u);
  dlock::bench::add_whole_option(app, "--lease-ms", o.lease_ms,
                                 "watchdog lease (default 3000; (2) also runs 10x it)", "L", 30u,
                                 3600000u);
  dlock::bench::add_whole_option(app, "--rounds", o.rounds,
                                 "(1) renewal intervals watched (default 3)", "R", 1u, 100u);
  app.add_option("--redis", o.redis, "A server to use instead of a private one (redis://...)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_watchdog: %s\n", e.what());
    return 1;
  }
}
