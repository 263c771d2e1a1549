// dlock::mutex across processes and the scenario of seed 000: a holder killed with SIGKILL,
// two processes of eight threads doing non-atomic updates, five clients with 1.1 s of work.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "support/child_process.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::child_process;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 300ms;

TEST(MutexProcesses, AHolderKilledWithSigkillFreesTheLockWithinItsLease) {
  redis_server server;
  const std::string name = unique_key("m");
  const auto lease = 1500ms;
  child_process holder(
      {DLOCK_TEST_LOCK_WORKER, "hold", server.url(), name, std::to_string(lease.count())});
  const std::string line = holder.read_line(10s);
  ASSERT_EQ(line.rfind("locked ", 0), 0u) << "the worker did not lock: '" << line << "'";

  client c{server.url()};
  mutex m = c.get_lock(name);
  EXPECT_FALSE(m.try_lock()) << "the worker's lock is not held";
  const auto killed_at = steady_clock::now();
  holder.kill(SIGKILL);
  ASSERT_TRUE(m.try_lock_for(lease * 3)) << "a dead holder's lock never came free";
  const auto took = steady_clock::now() - killed_at;
  EXPECT_LE(took, lease + lease / 10 + timing_slack);
  // It stayed held until its lease ran out (the last renewal left at least 2/3 of it).
  EXPECT_GE(took, lease / 2);
  m.unlock();
}

TEST(MutexProcesses, TwoProcessesOfEightThreadsKeepANonAtomicCountExact) {
  redis_server server;
  const std::string name = unique_key("m"), counter = unique_key("counter");
  constexpr int threads = 8, iterations = 25;
  auto run = [&] {
    return tools::run_command({DLOCK_TEST_LOCK_WORKER, "count", server.url(), name, counter,
                               std::to_string(threads), std::to_string(iterations)},
                              60s);
  };
  auto first = std::async(std::launch::async, run);
  auto second = std::async(std::launch::async, run);
  for (auto* result : {&first, &second}) {
    const tools::command_result r = result->get();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "tokens_not_increasing 0\n");
  }
  client c{server.url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations));
}

// Seed 000: five clients each hold the lock for 1.1 s of work. With a watchdog lease (1 s here,
// renewed every 333 ms) their holds never overlap. With an explicit 1 s lease the lock expires
// under the working holder, the next client gets it, the holds overlap, and every holder whose
// lease ran out is told so.
struct interval {
  steady_clock::time_point start, end;
  bool reported_lost;
};

std::vector<interval> five_clients_with_work(const redis_server& server, const std::string& name,
                                             const std::chrono::milliseconds* explicit_lease) {
  std::mutex m;
  std::vector<interval> holds;
  std::vector<std::thread> clients;
  for (int i = 0; i < 5; ++i) {
    clients.emplace_back([&] {
      client_options o = client_options::from_url(server.url());
      o.locks.watchdog_timeout = 1s;
      client c{o};
      mutex lock = c.get_lock(name);
      if (explicit_lease) {
        lock.lock(lease_time(*explicit_lease));
      } else {
        lock.lock();
      }
      const auto start = steady_clock::now();
      std::this_thread::sleep_for(1100ms);  // the work of seed 000
      const auto end = steady_clock::now();
      const bool lost = lock.unlock_checked() == errc::lock_lost;
      std::lock_guard l(m);
      holds.push_back({start, end, lost});
    });
  }
  for (auto& t : clients)
    t.join();
  std::sort(holds.begin(), holds.end(),
            [](const interval& a, const interval& b) { return a.start < b.start; });
  return holds;
}

TEST(SlowMutexProcesses, SeedScenarioWatchdogLeasesNeverOverlap) {
  redis_server server;
  const auto holds = five_clients_with_work(server, unique_key("m"), nullptr);
  ASSERT_EQ(holds.size(), 5u);
  for (std::size_t i = 1; i < holds.size(); ++i) {
    EXPECT_GE(holds[i].start, holds[i - 1].end) << "holds " << i - 1 << " and " << i << " overlap";
  }
  for (const auto& h : holds)
    EXPECT_FALSE(h.reported_lost);
}

TEST(SlowMutexProcesses, SeedScenarioExplicitOneSecondLeasesOverlapAndAreReportedLost) {
  redis_server server;
  const std::chrono::milliseconds lease = 1s;
  const auto holds = five_clients_with_work(server, unique_key("m"), &lease);
  ASSERT_EQ(holds.size(), 5u);
  int overlaps = 0;
  for (std::size_t i = 1; i < holds.size(); ++i) {
    if (holds[i].start < holds[i - 1].end) {
      ++overlaps;
      EXPECT_TRUE(holds[i - 1].reported_lost) << "hold " << i - 1 << " was overtaken silently";
    }
  }
  EXPECT_GT(overlaps, 0) << "1.1 s of work under a 1 s lease must overlap";
}

}  // namespace
}  // namespace dlock
