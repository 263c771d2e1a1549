// A second process for the count-down latch tests. Prints its results on stdout.
//
//   dlock_test_latch_worker count-down URL NAME THREADS
//       THREADS threads each count NAME down once; prints "done <steady clock ns>" after the
//       last reply (CLOCK_MONOTONIC: comparable with the test process's steady_clock).
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "count-down") {
      dlock::client c{args[1]};
      dlock::count_down_latch latch = c.get_count_down_latch(args[2]);
      std::vector<std::thread> workers;
      for (int t = 0; t < std::stoi(args[3]); ++t)
        workers.emplace_back([&] { latch.count_down(); });
      for (auto& w : workers)
        w.join();
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      std::cout << "done " << std::chrono::nanoseconds(now).count() << std::endl;
      return 0;
    }
  } catch (const dlock::error& e) {
    std::cerr << "latch_worker: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: see tests/support/latch_worker.cpp\n";
  return 64;
}
