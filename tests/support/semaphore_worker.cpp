// A second process for the semaphore's integration tests. Prints its results on stdout.
//
//   dlock_test_semaphore_worker hold URL NAME PERMITS WATCHDOG_MS
//       takes a permit of NAME (created with PERMITS) with a WATCHDOG_MS watchdog lease, prints
//       "held <permit id>", then waits to be killed (the watchdog keeps renewing meanwhile).
//   dlock_test_semaphore_worker release URL NAME ID
//       releases the permit ID by id; prints "released", or "error <errc value> <what>".
//   dlock_test_semaphore_worker count URL NAME PERMITS CURRENT MAX THREADS ITERATIONS
//       THREADS threads each do ITERATIONS times: acquire, INCR CURRENT (the holders now, in all
//       processes), raise MAX to it, yield a little, DECR CURRENT, release. Prints
//       "over <n>": how many times this process saw more than PERMITS holders at once.
#include <atomic>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

// Raises KEYS[1] to ARGV[1] if it is lower.
const dlock::script raise_max(
    std::string("local v = tonumber(redis.call('get', KEYS[1]) or '0') "
                "if tonumber(ARGV[1]) > v then redis.call('set', KEYS[1], ARGV[1]) end return 0"));

int count(const std::vector<std::string>& args) {
  dlock::client c{args[1]};
  const std::string name = args[2], current = args[4], max = args[5];
  const std::int64_t permits = std::stoll(args[3]);
  const int threads = std::stoi(args[6]), iterations = std::stoi(args[7]);
  std::atomic<int> over{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      dlock::semaphore s = c.get_semaphore(name, permits);
      for (int i = 0; i < iterations; ++i) {
        std::lock_guard guard{s};
        const std::int64_t now = c.command({"INCR", current}).integer;
        if (now > permits) ++over;
        (void)c.eval(raise_max, {max}, {std::to_string(now)});
        // Holding a while lets the other holders overlap this one (so that the bound is reached).
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        (void)c.command({"DECR", current});
      }
    });
  }
  for (auto& w : workers)
    w.join();
  std::cout << "over " << over.load() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "hold") {
      dlock::client_options o = dlock::client_options::from_url(args[1]);
      o.locks.watchdog_timeout = std::chrono::milliseconds(std::stoll(args[4]));
      dlock::client c{o};
      dlock::semaphore s = c.get_semaphore(args[2], std::stoll(args[3]));
      dlock::permit p = s.acquire_permit();
      std::cout << "held " << p.id() << std::endl;
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (args.size() == 4 && args[0] == "release") {
      dlock::client c{args[1]};
      try {
        c.get_semaphore(args[2], 0).release(args[3]);
        std::cout << "released" << std::endl;
      } catch (const dlock::error& e) {
        std::cout << "error " << e.code().value() << " " << e.what() << std::endl;
      }
      return 0;
    }
    if (args.size() == 8 && args[0] == "count") return count(args);
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 1;
  }
  std::cerr << "usage: see the top of semaphore_worker.cpp" << std::endl;
  return 2;
}
