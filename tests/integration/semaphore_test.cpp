// dlock::semaphore against a real redis-server: thread-owned and object-owned permits, release by
// id (here and from another process), the count operations while permits are held, waking on
// release without polling, leases (explicit, and a SIGKILLed holder's), loss notification, kind
// mixing; at most N holders across 2 processes x 4 threads; and `dlock exec --semaphore`.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdio>
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
// The semaphore scripts' clock: the server's TIME in whole milliseconds (rounded down).
constexpr auto server_clock_resolution = 1ms;
// How soon a waiter must get a permit after a release wakes it (a message and one attempt),
// far below the leases in play, so that only the wake-up can explain it.
constexpr auto wake_bound = 1s;

static_assert(std::is_invocable_v<decltype(&std::unique_lock<semaphore>::try_lock),
                                  std::unique_lock<semaphore>&>);

client_options fast_watchdog(const redis_server& server, std::chrono::milliseconds lease) {
  client_options o = client_options::from_url(server.url());
  o.locks.watchdog_timeout = lease;
  return o;
}

bool is_hex32(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Resolves when `token` is stopped; lets a test wait for a loss as an event.
class stop_waiter {
 public:
  explicit stop_waiter(std::stop_token token)
      : callback_(std::move(token), [this] { stopped_.set_value(steady_clock::now()); }) {}
  std::optional<steady_clock::time_point> wait_for(std::chrono::milliseconds limit) {
    if (future_.wait_for(limit) != std::future_status::ready) return std::nullopt;
    return future_.get();
  }

 private:
  std::promise<steady_clock::time_point> stopped_;
  std::future<steady_clock::time_point> future_ = stopped_.get_future();
  std::stop_callback<std::function<void()>> callback_;
};

TEST(Semaphore, AThreadTakesAndGivesBackOnePermit) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 2);
  EXPECT_EQ(s.name(), name);
  EXPECT_EQ(s.initial_permits(), 2);
  EXPECT_EQ(s.permit_id(), "");
  s.acquire();
  EXPECT_TRUE(s.is_held_by_current_thread());
  const std::string id = s.permit_id();
  EXPECT_TRUE(is_hex32(id)) << id;
  EXPECT_EQ(c.command({"GET", name}).str, "1");
  EXPECT_EQ(s.available_permits(), 1);
  const lock_status st = s.status();
  EXPECT_EQ(st.permits_available, 1);
  EXPECT_EQ(st.permits_total, 2);
  ASSERT_EQ(st.holders.size(), 1u);
  EXPECT_EQ(st.holders[0].owner, id);
  EXPECT_GT(st.holders[0].lease_left, 30s - timing_slack - 2s);
  // One permit per thread through the thread-owned form: a second would wait for itself.
  try {
    s.acquire();
    ADD_FAILURE() << "a second thread-owned permit was taken";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::would_deadlock);
  }
  EXPECT_EQ(s.release_checked(), std::error_code{});
  EXPECT_FALSE(s.is_held_by_current_thread());
  EXPECT_EQ(s.available_permits(), 2);
  EXPECT_EQ(s.release_checked(), errc::not_owner);
  {
    std::lock_guard guard{s};
    EXPECT_EQ(s.available_permits(), 1);
  }
  EXPECT_EQ(s.available_permits(), 2);
}

TEST(Semaphore, AtMostTheCountOfPermitsAreHeldAndAReleaseLetsTheNextIn) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 2);
  permit a = s.acquire_permit();
  permit b = s.try_acquire_permit();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a.name(), name);
  EXPECT_FALSE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire_permit());
  const auto started = steady_clock::now();
  EXPECT_FALSE(s.try_acquire_for(200ms));
  EXPECT_GE(steady_clock::now() - started, 200ms);
  EXPECT_EQ(a.release(), std::error_code{});
  EXPECT_FALSE(a.owns_permit());
  EXPECT_EQ(a.release(), errc::not_owner);
  EXPECT_TRUE(s.try_acquire_until(steady_clock::now() + 1s));
  s.release();
}

TEST(Semaphore, AnExistingCountIsKeptAndShownByStatus) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  EXPECT_EQ(c.get_semaphore(name, 3).available_permits(), 3);
  semaphore five = c.get_semaphore(name, 5);
  EXPECT_EQ(five.available_permits(), 3);
  EXPECT_EQ(five.status().permits_total, 3);
  EXPECT_FALSE(five.try_set_permits(5));
  try {
    (void)c.get_semaphore(name, -1);
    ADD_FAILURE() << "a negative count was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW((void)five.try_set_permits(-2), error);
}

TEST(Semaphore, ReleaseByIdFromAnotherClientMakesTheHolderLoseIt) {
  redis_server server;
  client holder{fast_watchdog(server, 900ms)};
  client other{server.url()};
  const std::string name = unique_key("s");
  semaphore s = holder.get_semaphore(name, 1);
  permit p = s.acquire_permit();
  ASSERT_TRUE(is_hex32(p.id())) << p.id();
  stop_waiter lost(p.stop_token());
  other.get_semaphore(name, 1).release(p.id());
  EXPECT_EQ(other.get_semaphore(name, 1).available_permits(), 1);
  // The holder's next renewal (every third of 900 ms) finds it gone.
  EXPECT_TRUE(lost.wait_for(900ms + timing_slack).has_value());
  EXPECT_TRUE(p.lost());
  EXPECT_EQ(p.release(), errc::lock_lost);
  EXPECT_EQ(s.available_permits(), 1);  // the lost permit's release gave back nothing more
  try {
    s.release("0123456789abcdef0123456789abcdef");
    ADD_FAILURE() << "a permit nobody holds was released";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_owner);
  }
  try {
    s.release("not-a-permit");
    ADD_FAILURE() << "a malformed id was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

TEST(Semaphore, AWaiterWakesOnAReleaseLongBeforeTheLeaseEnds) {
  redis_server server;
  client c{server.url()};  // 30 s watchdog leases: only a wake-up can explain a quick acquisition
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 1);
  permit held = s.acquire_permit();
  std::promise<steady_clock::time_point> got;
  std::jthread waiter([&] {
    client other{server.url()};
    semaphore mine = other.get_semaphore(name, 1);
    if (mine.try_acquire_for(20s)) {
      got.set_value(steady_clock::now());
      mine.release();
    } else {
      got.set_value(steady_clock::time_point::min());
    }
  });
  ASSERT_TRUE(test::eventually([&] { return s.status().subscribers == 1; }))
      << "the waiter never subscribed";
  const auto released_at = steady_clock::now();
  ASSERT_EQ(held.release(), std::error_code{});
  const auto acquired_at = got.get_future().get();
  ASSERT_NE(acquired_at, steady_clock::time_point::min()) << "the waiter timed out";
  EXPECT_LT(acquired_at - released_at, wake_bound);
  std::printf("release to waiter holding: %lld us\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::microseconds>(acquired_at - released_at)
                      .count()));
}

TEST(Semaphore, AddPermitsWakesAsManyWaitersAndANegativeChangeHoldsNewcomersBack) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 2);
  permit a = s.acquire_permit(), b = s.acquire_permit();
  // Two fewer while both are held: nobody new gets in until both are back and more.
  EXPECT_EQ(s.add_permits(-2), -2);
  EXPECT_EQ(s.status().permits_total, 0);
  (void)a.release();
  EXPECT_FALSE(s.try_acquire());
  (void)b.release();
  EXPECT_EQ(s.available_permits(), 0);
  EXPECT_FALSE(s.try_acquire());
  // Two waiters in this client; adding 2 permits publishes "2", which wakes both.
  std::atomic<int> acquired{0};
  std::vector<std::jthread> waiters;
  std::vector<permit> permits(2);
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      permits[static_cast<std::size_t>(i)] = s.try_acquire_permit_for(20s);
      if (permits[static_cast<std::size_t>(i)]) ++acquired;
    });
  }
  ASSERT_TRUE(test::eventually([&] { return s.status().subscribers == 1; }));
  // Both have made their first attempt once the client's metrics count two waits.
  ASSERT_TRUE(test::eventually([&] { return c.lock_metrics().waited >= 2; }));
  const auto added_at = steady_clock::now();
  EXPECT_EQ(s.add_permits(2), 2);
  for (auto& w : waiters)
    w.join();
  EXPECT_EQ(acquired.load(), 2);
  EXPECT_LT(steady_clock::now() - added_at, wake_bound);
  EXPECT_EQ(s.available_permits(), 0);
}

TEST(Semaphore, TrySetPermitsOnlySetsAMissingSemaphore) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 1);
  EXPECT_TRUE(s.try_set_permits(4));
  EXPECT_EQ(s.available_permits(), 4);
  permit p = s.acquire_permit();
  EXPECT_FALSE(s.try_set_permits(9));  // in use: kept
  EXPECT_EQ(s.available_permits(), 3);
  EXPECT_EQ(s.status().permits_total, 4);
}

// Counts stay integers the server's Lua holds exactly (|count| <= 2^53 - 1): beyond, add_permits
// wrote "1e+17", which every later call then failed on with a raw server error.
TEST(Semaphore, CountsBeyondTwoToThe53AreRefusedAndTheCountIsKept) {
  redis_server server;
  client c{server.url()};
  semaphore s = c.get_semaphore(unique_key("s"), 3);
  const auto refused = [](auto&& call) {
    try {
      call();
      return std::error_code{};
    } catch (const error& e) {
      return e.code();
    }
  };
  EXPECT_EQ(refused([&] { s.add_permits(max_count + 1); }), errc::invalid_argument);
  EXPECT_EQ(refused([&] { s.add_permits(-max_count - 1); }), errc::invalid_argument);
  EXPECT_EQ(refused([&] { (void)c.get_semaphore(unique_key("s"), max_count + 1); }),
            errc::invalid_argument);
  EXPECT_EQ(s.add_permits(max_count - 3), max_count);                     // exactly the largest
  EXPECT_EQ(refused([&] { s.add_permits(1); }), errc::invalid_argument);  // would pass it
  EXPECT_EQ(s.available_permits(), max_count) << "a refused change changed the count";
  EXPECT_EQ(s.add_permits(-max_count), 0);
  permit p = s.try_acquire_permit();
  EXPECT_FALSE(p) << "no permit is free at 0";
  EXPECT_EQ(s.add_permits(123456789012345), 123456789012345);
  EXPECT_EQ(c.command({"GET", s.name()}).str, "123456789012345");  // written as digits
  // A 20-digit string is no count Lua can hold: another kind, not a raw server error.
  const std::string huge = unique_key("huge");
  c.command({"SET", huge, "99999999999999999999"});
  EXPECT_EQ(refused([&] { (void)c.get_semaphore(huge, 1).try_acquire_permit(); }),
            errc::wrong_type);
}

TEST(Semaphore, AnExplicitLeaseEndsThePermitAndItComesBack) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 1);
  const auto lease = 400ms;
  // Before the request: the server starts the lease after it (taken after the reply, this once
  // read 398.7 ms when the permit came back).
  const auto started = steady_clock::now();
  permit p = s.acquire_permit(lease_time(lease));
  stop_waiter lost(p.stop_token());
  EXPECT_TRUE(lost.wait_for(lease + timing_slack).has_value());
  // Another waiter gets it once the lease has run out on the server (never earlier, but for the
  // server clock's whole milliseconds: the script takes "now" as TIME rounded down to one).
  client other{server.url()};
  semaphore s2 = other.get_semaphore(name, 1);
  ASSERT_TRUE(s2.try_acquire_for(lease * 5));
  EXPECT_GE(steady_clock::now() - started + server_clock_resolution, lease);
  s2.release();
  EXPECT_EQ(p.release(), errc::lock_lost);
}

TEST(Semaphore, ForceReleaseGivesEveryPermitBackAndHoldersHearIt) {
  redis_server server;
  client c{fast_watchdog(server, 900ms)};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 2);
  permit p = s.acquire_permit();
  stop_waiter lost(p.stop_token());
  EXPECT_TRUE(s.force_release());
  EXPECT_EQ(s.available_permits(), 2);
  EXPECT_TRUE(lost.wait_for(900ms + timing_slack).has_value());
  EXPECT_FALSE(s.force_release());
}

TEST(Semaphore, KindMixingIsRefusedNamingBothKinds) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("s");
  mutex m = c.get_lock(name);
  m.lock();
  semaphore s = c.get_semaphore(name, 3);
  try {
    (void)s.try_acquire();
    ADD_FAILURE() << "a semaphore was taken on a mutex's name";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("mutex"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("semaphore"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)s.available_permits(), error);
  EXPECT_THROW((void)s.status(), error);
  m.unlock();

  const std::string other = unique_key("s2");
  semaphore s2 = c.get_semaphore(other, 3);
  s2.acquire();
  try {
    (void)c.get_lock(other).try_lock();
    ADD_FAILURE() << "a mutex was taken on a semaphore's name";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
  s2.release();
  EXPECT_EQ(s2.available_permits(), 3);
}

// --- processes
// ------------------------------------------------------------------------------------

TEST(SemaphoreProcesses, AtMostThreeHoldersAcrossTwoProcessesOfFourThreads) {
  redis_server server;
  const std::string name = unique_key("s"), current = unique_key("current"),
                    max = unique_key("max");
  constexpr int permits = 3, threads = 4, iterations = 25;
  auto run = [&] {
    return tools::run_command(
        {DLOCK_TEST_SEMAPHORE_WORKER, "count", server.url(), name, std::to_string(permits), current,
         max, std::to_string(threads), std::to_string(iterations)},
        120s);
  };
  auto first = std::async(std::launch::async, run);
  auto second = std::async(std::launch::async, run);
  for (auto* result : {&first, &second}) {
    const tools::command_result r = result->get();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "over 0\n");
  }
  client c{server.url()};
  // Never more than 3 at once, and 3 were reached: the test could fail either way.
  EXPECT_EQ(c.command({"GET", max}).str, std::to_string(permits));
  EXPECT_EQ(c.command({"GET", current}).str, "0");
  EXPECT_EQ(c.get_semaphore(name, permits).available_permits(), permits);
}

TEST(SemaphoreProcesses, AHolderKilledWithSigkillGivesItsPermitBackWithinItsLease) {
  redis_server server;
  const std::string name = unique_key("s");
  const auto lease = 1500ms;
  child_process holder({DLOCK_TEST_SEMAPHORE_WORKER, "hold", server.url(), name, "1",
                        std::to_string(lease.count())});
  const std::string line = holder.read_line(10s);
  ASSERT_EQ(line.rfind("held ", 0), 0u) << "the worker holds no permit: '" << line << "'";
  EXPECT_TRUE(is_hex32(line.substr(5))) << line;

  client c{server.url()};
  semaphore s = c.get_semaphore(name, 1);
  EXPECT_FALSE(s.try_acquire()) << "the worker's permit is not held";
  const auto killed_at = steady_clock::now();
  holder.kill(SIGKILL);
  ASSERT_TRUE(s.try_acquire_for(lease * 3)) << "a dead holder's permit never came back";
  const auto took = steady_clock::now() - killed_at;
  EXPECT_LE(took, lease + timing_slack);
  // It stayed taken until its lease ran out (the last renewal left at least 2/3 of it).
  EXPECT_GE(took, lease / 2);
  std::printf(
      "SIGKILL to permit back (lease %lld ms): %lld ms\n", static_cast<long long>(lease.count()),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  s.release();
}

TEST(SemaphoreProcesses, AnotherProcessReleasesAPermitById) {
  redis_server server;
  client c{fast_watchdog(server, 900ms)};
  const std::string name = unique_key("s");
  semaphore s = c.get_semaphore(name, 1);
  permit p = s.acquire_permit();
  stop_waiter lost(p.stop_token());
  const tools::command_result r =
      tools::run_command({DLOCK_TEST_SEMAPHORE_WORKER, "release", server.url(), name, p.id()}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "released\n");
  EXPECT_EQ(s.available_permits(), 1);
  EXPECT_TRUE(lost.wait_for(900ms + timing_slack).has_value());
  // Again: nobody holds it now.
  const tools::command_result again =
      tools::run_command({DLOCK_TEST_SEMAPHORE_WORKER, "release", server.url(), name, p.id()}, 30s);
  EXPECT_EQ(again.out.rfind("error " + std::to_string(static_cast<int>(errc::not_owner)) + " ", 0),
            0u)
      << again.out;
}

#ifdef DLOCK_CLI
TEST(SemaphoreCli, ExecHoldsOnePermitWhileTheCommandRuns) {
  redis_server server;
  const std::string name = unique_key("s");
  // The command prints its permit id and what `dlock status` says meanwhile.
  const std::string script = std::string("echo permit=$DLOCK_PERMIT; ") + DLOCK_CLI + " --redis " +
                             server.url() + " status " + name;
  const tools::command_result r =
      tools::run_command({DLOCK_CLI, "--redis", server.url(), "exec", "--semaphore", "2", name,
                          "--", "sh", "-c", script},
                         30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto at = r.out.find("permit=");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string id = r.out.substr(at + 7, 32);
  EXPECT_TRUE(is_hex32(id)) << r.out;
  EXPECT_NE(r.out.find("1 of 2 permits available"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("permit              " + id), std::string::npos) << r.out;
  // Released afterwards.
  client c{server.url()};
  EXPECT_EQ(c.get_semaphore(name, 2).available_permits(), 2);
}

TEST(SemaphoreCli, ForceUnlockGivesEveryPermitBackAndDataIsRefused) {
  redis_server server;
  const std::string name = unique_key("s"), data = unique_key("data");
  client c{server.url()};
  semaphore s = c.get_semaphore(name, 2);
  permit p = s.acquire_permit();
  const tools::command_result r =
      tools::run_command({DLOCK_CLI, "--redis", server.url(), "unlock", "--force", name}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("semaphore '")) << r.out;
  EXPECT_NE(r.out.find("' released"), std::string::npos) << r.out;
  EXPECT_EQ(s.available_permits(), 2);
  (void)c.command({"SET", data, "not a count"});
  const tools::command_result refused =
      tools::run_command({DLOCK_CLI, "--redis", server.url(), "unlock", "--force", data}, 30s);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(c.command({"GET", data}).str, "not a count");
}

TEST(SemaphoreCli, ExecWithoutAFreePermitFailsWithTheConflictCode) {
  redis_server server;
  const std::string name = unique_key("s");
  client c{server.url()};
  permit p = c.get_semaphore(name, 1).acquire_permit();
  const tools::command_result r = tools::run_command(
      {DLOCK_CLI, "--redis", server.url(), "exec", "-n", "--semaphore", "1", name, "--", "true"},
      30s);
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("no permit free"), std::string::npos) << r.err;
  const tools::command_result both =
      tools::run_command({DLOCK_CLI, "--redis", server.url(), "exec", "--plain", "--semaphore", "1",
                          name, "--", "true"},
                         30s);
  EXPECT_NE(both.exit_code, 0);
}
#endif

}  // namespace
}  // namespace dlock
