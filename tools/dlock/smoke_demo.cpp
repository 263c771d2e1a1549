#include "smoke_demo.hpp"

#include <fmt/core.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

using clock_type = std::chrono::steady_clock;

struct checker {
  int failed = 0;
  void check(bool ok, const std::string& what) {
    fmt::print("  [{}] {}\n", ok ? " ok " : "FAIL", what);
    if (!ok) ++failed;
  }
};

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

}  // namespace

int run_smoke_demo(const std::string& redis_url) {
  checker c;
  try {
    const demo_server server(redis_url);
    fmt::print("Redis: {}\n\n", server.url());
    client redis{server.url()};
    const std::string prefix = fmt::format("dlock-smoke:{}:", ::getpid());

    fmt::print("Commands\n");
    c.check(redis.command({"PING"}).str == "PONG", "PING answers PONG");
    redis.command({"SET", prefix + "greeting", "hello"});
    c.check(redis.command({"GET", prefix + "greeting"}).str == "hello", "SET then GET round trip");

    constexpr int threads = 8;
    constexpr int per_thread = 5000;
    fmt::print("\nAuto-pipelining: {} threads x {} INCR on one client\n", threads, per_thread);
    std::atomic<int> wrong{0};
    const auto start = clock_type::now();
    std::vector<std::thread> workers;
    workers.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, key = prefix + "counter" + std::to_string(t)] {
        for (int i = 1; i <= per_thread; ++i) {
          if (redis.command({"INCR", key}).integer != i) ++wrong;
        }
      });
    }
    for (auto& w : workers)
      w.join();
    const double took = seconds_since(start);
    c.check(wrong == 0, fmt::format("every reply reached its own caller in order ({} commands)",
                                    threads * per_thread));
    fmt::print("         {:.0f} commands/s over one connection\n", threads * per_thread / took);

    fmt::print("\nLua\n");
    const script compare_and_delete{
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
        "return 0"};
    redis.command({"SET", prefix + "lock", "my-token", "NX", "PX", "10000"});
    c.check(redis.eval(compare_and_delete, {prefix + "lock"}, {"not-my-token"}).integer == 0,
            "compare-and-delete refuses a foreign token");
    c.check(redis.eval(compare_and_delete, {prefix + "lock"}, {"my-token"}).integer == 1,
            "compare-and-delete releases the holder's token");

    fmt::print("\nPub/sub\n");
    std::mutex m;
    std::condition_variable cv;
    bool subscribed = false;
    std::optional<std::string> received;
    auto sub = redis.subscribe(
        prefix + "channel",
        [&](std::string_view payload) {
          std::lock_guard lock(m);
          received = std::string(payload);
          cv.notify_all();
        },
        [&] {
          std::lock_guard lock(m);
          subscribed = true;
          cv.notify_all();
        });
    {
      std::unique_lock lock(m);
      c.check(cv.wait_for(lock, std::chrono::seconds(5), [&] { return subscribed; }),
              "subscription confirmed by the server");
    }
    redis.command({"PUBLISH", prefix + "channel", "wake up"});
    {
      std::unique_lock lock(m);
      c.check(cv.wait_for(lock, std::chrono::seconds(5), [&] { return received.has_value(); }) &&
                  *received == "wake up",
              "published message delivered");
    }
    redis.command({"DEL", prefix + "greeting"});
    for (int t = 0; t < threads; ++t)
      redis.command({"DEL", prefix + "counter" + std::to_string(t)});
  } catch (const error& e) {
    print_error(e.what());
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(e.what());  // no redis-server to start
    return exit_failure;
  }

  fmt::print("\n{}\n", c.failed == 0
                           ? "Smoke run passed: the Redis core works against this server."
                           : fmt::format("Smoke run FAILED: {} check(s) failed.", c.failed));
  return c.failed == 0 ? exit_ok : exit_failure;
}

}  // namespace dlock::cli
