// A second process for the Redlock tests: threads doing read-modify-write under a Redlock.
//
//   dlock_test_redlock_worker count RESOURCE_URL NAME THREADS ITERATIONS MASTER_URL...
//       THREADS threads (one dlock::redlock for the process) each do ITERATIONS times: lock NAME
//       on the masters, GET then SET the counter "<NAME>:counter" on RESOURCE_URL (not atomic:
//       an overlap loses an update), and check the hold's fencing token against the highest
//       token any holder recorded there ("<NAME>:highest"): a token not above it is counted.
//       Prints "ready" once its redlock exists, then "result <tokens_not_increasing>".
#include <atomic>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

// Records `token` as the highest seen unless it is not above it; returns 1 when it was not.
const dlock::script record_token{R"lua(
local highest = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) <= highest then return 1 end
redis.call('set', KEYS[1], ARGV[1])
return 0
)lua"};

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 6 && args[0] == "count") {
      dlock::client resource{args[1]};
      const std::string name = args[2];
      const int threads = std::stoi(args[3]), iterations = std::stoi(args[4]);
      const std::vector<std::string> masters(args.begin() + 5, args.end());
      dlock::redlock rl{masters};
      std::cout << "ready" << std::endl;
      std::atomic<int> not_increasing{0};
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
          dlock::redlock_mutex m = rl.get_lock(name);
          for (int i = 0; i < iterations; ++i) {
            std::unique_lock guard{m};
            const std::string token = std::to_string(m.fencing_token());
            not_increasing +=
                static_cast<int>(resource.eval(record_token, {name + ":highest"}, {token}).integer);
            const dlock::reply v = resource.command({"GET", name + ":counter"});
            const long long n = v.is_nil() ? 0 : std::stoll(v.str);
            resource.command({"SET", name + ":counter", std::to_string(n + 1)});
          }
        });
      }
      for (auto& w : workers)
        w.join();
      std::cout << "result " << not_increasing.load() << std::endl;
      return 0;
    }
  } catch (const dlock::error& e) {
    std::cerr << "redlock_worker: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: see tests/support/redlock_worker.cpp\n";
  return 64;
}
