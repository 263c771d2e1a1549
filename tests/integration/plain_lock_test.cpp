// dlock::plain_lock against a real redis-server: the value in Redis, no reentry, waiting by
// pub/sub and by re-checking a foreign holder, leases, losses, fencing tokens, the asynchronous
// form, errors; and 2 processes x 4 threads of non-atomic updates under it.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "support/command_stats.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 300ms;

// std::unique_lock, std::scoped_lock and std::lock_guard need BasicLockable / Lockable /
// TimedLockable; these fail to compile if dlock::plain_lock stops meeting them.
static_assert(
    std::is_invocable_v<decltype(&std::unique_lock<plain_lock>::try_lock_for<long, std::milli>),
                        std::unique_lock<plain_lock>&, const std::chrono::milliseconds&>);
[[maybe_unused]] void lockable_requirements_compile(plain_lock& a, plain_lock& b) {
  std::lock_guard g{a};
  std::scoped_lock both{a, b};
  std::unique_lock timed{a, 2s};
  std::unique_lock until{a, steady_clock::now() + 1s};
  std::unique_lock deferred{a, std::defer_lock};
  (void)deferred.try_lock();
}

// How long after a foreign holder's release a waiter re-checks at the latest
// (acquisition_machine::foreign_recheck_max, documented in dlock/plain_lock.hpp).
constexpr auto foreign_recheck_bound = 100ms;

client_options fast_watchdog(const redis_server& server, std::chrono::milliseconds lease) {
  client_options o = client_options::from_url(server.url());
  o.locks.watchdog_timeout = lease;
  return o;
}

// Resolves when `token` is stopped; lets a test wait for loss notification as an event.
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

TEST(PlainLock, LockSetsTheValueOwnerAndTokenAndUnlockDeletesIt) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  EXPECT_EQ(p.name(), name);
  p.lock();
  EXPECT_TRUE(p.is_held_by_current_thread());
  EXPECT_GT(p.fencing_token(), 0u);
  EXPECT_EQ(c.command({"TYPE", name}).str, "string");
  EXPECT_EQ(c.command({"GET", name}).str, p.owner_id() + ":" + std::to_string(p.fencing_token()));
  const auto lease = p.remaining_lease();
  ASSERT_TRUE(lease.has_value());
  EXPECT_GT(*lease, 30s - timing_slack);
  EXPECT_TRUE(p.is_locked());
  EXPECT_EQ(p.unlock_checked(), std::error_code{});
  EXPECT_FALSE(p.is_held_by_current_thread());
  EXPECT_EQ(p.fencing_token(), 0u);
  // unlock() is queued; a later command on the same client runs after it.
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_FALSE(p.remaining_lease().has_value());
  EXPECT_EQ(p.unlock_checked(), errc::not_owner);
  p.unlock();  // never throws, changes nothing
}

// Scripts the server has run (EVALSHA and EVAL), from INFO commandstats.
std::int64_t script_calls(client& c) {
  return dlock::test::script_calls(c.command({"INFO", "commandstats"}).str);
}

TEST(PlainLock, RelockingFromTheHoldingThreadIsAnErrorAndSendsNothing) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  p.lock();
  const std::string value = c.command({"GET", name}).str;
  const std::int64_t scripts_before = script_calls(c);
  for (int form = 0; form < 4; ++form) {
    try {
      switch (form) {
        case 0:
          p.lock();
          break;
        case 1:
          (void)p.try_lock();
          break;
        case 2:
          (void)p.try_lock_for(10s);
          break;
        default:
          p.lock(lease_time(5s));
      }
      ADD_FAILURE() << "form " << form << " re-locked a plain lock";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::would_deadlock) << e.what();
      EXPECT_NE(std::string(e.what()).find("not reentrant"), std::string::npos) << e.what();
    }
  }
  std::error_code ec;
  EXPECT_FALSE(p.try_lock(ec));
  EXPECT_EQ(ec, errc::would_deadlock);
  EXPECT_EQ(script_calls(c), scripts_before) << "a refused re-lock ran a script";
  EXPECT_TRUE(p.is_held_by_current_thread());
  EXPECT_EQ(c.command({"GET", name}).str, value);
  EXPECT_EQ(p.unlock_checked(), std::error_code{});
  // Another thread is not refused: it waits (here: one attempt that fails while we hold it).
  p.lock();
  std::async(std::launch::async, [&] { EXPECT_FALSE(p.try_lock()); }).get();
  p.unlock();
}

TEST(PlainLock, BadNamesAndDurationsAreRejectedBeforeAnyCommand) {
  redis_server server;
  client c{server.url()};
  for (const std::string& name : {std::string(), std::string(64 * 1024 + 1, 'x'),
                                  std::string("a\0b", 3), std::string("line\nbreak")}) {
    try {
      (void)c.get_plain_lock(name);
      ADD_FAILURE() << "accepted a bad name of " << name.size() << " bytes";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
    }
  }
  plain_lock p = c.get_plain_lock(unique_key("p"));
  EXPECT_THROW(p.lock(lease_time(0ms)), error);
  EXPECT_THROW((void)p.try_lock_for(0ms, lease_time(-1ms)), error);
  EXPECT_THROW(p.lock(lease_time(max_lock_lease + 1ms)), error);
  EXPECT_THROW((void)p.async_acquire({.lease = 0ms}), error);
  EXPECT_FALSE(p.is_locked()) << "a rejected call sent a command";
}

TEST(PlainLock, TwoClientsExcludeEachOtherAndTryLockForGivesUpOnTime) {
  redis_server server;
  client a{server.url()}, b{server.url()};
  const std::string name = unique_key("p");
  plain_lock pa = a.get_plain_lock(name), pb = b.get_plain_lock(name);
  ASSERT_TRUE(pa.try_lock());
  EXPECT_FALSE(pb.try_lock());
  const auto start = steady_clock::now();
  EXPECT_FALSE(pb.try_lock_for(300ms));
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 300ms + timing_slack);
  // A plain lock and a reentrant lock of the same name are different keys' kinds: the reentrant
  // one meets a string and says so.
  EXPECT_THROW((void)b.get_lock(name).try_lock(), error);
  pa.unlock();
  // The release is queued on a's connection: a command of a's after it runs after it.
  EXPECT_EQ(a.command({"EXISTS", name}).integer, 0);
  EXPECT_TRUE(pb.try_lock());
  pb.unlock();
}

TEST(PlainLock, AWaiterWakesOnTheUnlockMessageNotAtTheLeaseEnd) {
  redis_server server;
  client holder{server.url()}, waiter{server.url()};
  const std::string name = unique_key("p");
  plain_lock held = holder.get_plain_lock(name);
  held.lock();  // 30 s watchdog lease: waking at its end would take far too long
  plain_lock p = waiter.get_plain_lock(name);
  auto acquired = std::async(std::launch::async, [&] {
    const bool ok = p.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) p.unlock();
    return std::make_pair(ok, at);
  });
  // The waiter's client subscribes once it has seen the holder: then the unlock must wake it.
  ASSERT_TRUE(test::eventually([&] { return held.status().subscribers == 1; }));
  // A new subscription has its waiters attempt once more when it is confirmed (a release may
  // have come before it): the server counts the subscriber before that attempt is sent.
  ASSERT_TRUE(test::eventually([&] { return waiter.lock_metrics().attempts >= 2; }));
  // A dlock holder publishes its release: its waiters sleep, they do not re-check.
  const std::int64_t scripts_before = script_calls(holder);
  ASSERT_EQ(acquired.wait_for(500ms), std::future_status::timeout) << "acquired a held lock";
  EXPECT_EQ(script_calls(holder), scripts_before) << "a waiter polled a dlock holder";
  const auto unlocked_at = steady_clock::now();
  held.unlock();
  ASSERT_EQ(acquired.wait_for(5s), std::future_status::ready);
  const auto [ok, at] = acquired.get();
  EXPECT_TRUE(ok);
  EXPECT_LT(at - unlocked_at, timing_slack) << "woke late: TTL wait instead of pub/sub";
}

// A holder that is not a dlock client (here a bare SET NX PX, as redis-py does it) announces
// nothing: the waiter re-checks with a bounded backoff and notices the release in time.
TEST(PlainLock, AForeignHoldersReleaseIsNoticedWithinTheRecheckBound) {
  redis_server server;
  client c{server.url()}, foreign{server.url()};
  const std::string name = unique_key("p");
  ASSERT_EQ(foreign.command({"SET", name, "foreign-token", "NX", "PX", "30000"}).str, "OK");
  plain_lock p = c.get_plain_lock(name);
  EXPECT_FALSE(p.try_lock());
  auto acquired = std::async(std::launch::async, [&] {
    const bool ok = p.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) p.unlock();
    return std::make_pair(ok, at);
  });
  // Well past the backoff's growth (10, 20, 40, 80, 100 ms): it re-checks every 100 ms by now.
  ASSERT_EQ(acquired.wait_for(600ms), std::future_status::timeout) << "acquired a held lock";
  const auto released_at = steady_clock::now();
  ASSERT_EQ(foreign.command({"DEL", name}).integer, 1);
  ASSERT_EQ(acquired.wait_for(5s), std::future_status::ready);
  const auto [ok, at] = acquired.get();
  EXPECT_TRUE(ok);
  EXPECT_LT(at - released_at, foreign_recheck_bound + timing_slack);
}

TEST(PlainLock, ExplicitLeaseRunsOutAndTheHolderIsTold) {
  redis_server server;
  client c{server.url()};
  plain_lock p = c.get_plain_lock(unique_key("p"));
  const auto start = steady_clock::now();
  p.lock(lease_time(500ms));
  stop_waiter lost{p.stop_token()};
  const auto at = lost.wait_for(3s);
  ASSERT_TRUE(at.has_value()) << "an expired explicit lease was not reported";
  EXPECT_LE(*at - start, 500ms);
  EXPECT_GE(*at - start, 400ms);
  EXPECT_FALSE(p.is_held_by_current_thread());
  EXPECT_EQ(p.unlock_checked(), errc::lock_lost);
}

TEST(PlainLock, WatchdogKeepsAHoldPastItsLeaseAndTellsWhenTheKeyIsTaken) {
  redis_server server;
  const auto lease = 600ms;
  std::promise<lock_loss> reported;
  client_options o = fast_watchdog(server, lease);
  o.locks.on_lock_lost = [&](const lock_loss& loss) { reported.set_value(loss); };
  client c{o};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  p.lock();
  const std::string value = c.command({"GET", name}).str;
  stop_waiter lost{p.stop_token()};
  // Three leases later it is still held, by the same value (renewed by compare-and-PEXPIRE).
  EXPECT_FALSE(lost.wait_for(lease * 3).has_value());
  EXPECT_TRUE(p.is_held_by_current_thread());
  EXPECT_EQ(c.command({"GET", name}).str, value);
  EXPECT_GT(c.lock_metrics().leases_renewed, 3u);
  // Someone else's value replaces ours: the next renewal finds it and the holder is told.
  const auto taken_at = steady_clock::now();
  c.command({"SET", name, "someone-else", "PX", "10000"});
  const auto at = lost.wait_for(5s);
  ASSERT_TRUE(at.has_value()) << "losing the key went unnoticed";
  EXPECT_LT(*at - taken_at, lease / 3 + timing_slack);
  auto loss = reported.get_future();
  ASSERT_EQ(loss.wait_for(1s), std::future_status::ready);
  const lock_loss l = loss.get();
  EXPECT_EQ(l.name, name);
  EXPECT_EQ(l.reason, lock_loss_reason::not_held);
  EXPECT_EQ(p.unlock_checked(), errc::lock_lost);
  // The release changed nothing: the key is not ours.
  EXPECT_EQ(c.command({"GET", name}).str, "someone-else");
}

TEST(PlainLock, FencingTokensStrictlyIncreaseAcrossClientsAndLockTypes) {
  redis_server server;
  client a{server.url()}, b{server.url()};
  const std::string name = unique_key("p");
  std::uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    plain_lock p = (i % 2 == 0 ? a : b).get_plain_lock(name);
    p.lock();
    EXPECT_GT(p.fencing_token(), last);
    last = p.fencing_token();
    p.unlock();
  }
  // The reentrant lock of the same name draws from the same counter.
  mutex m = a.get_lock(name);
  a.command({"DEL", name});  // unlock() above is queued before this
  m.lock();
  EXPECT_GT(m.fencing_token(), last);
  m.unlock();
}

TEST(PlainLock, AsynchronousLeasesExcludeEachOtherAndReleaseFromAnyThread) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  lock_lease first = p.async_lock().get();
  ASSERT_TRUE(first);
  EXPECT_GT(first.fencing_token(), 0u);
  EXPECT_EQ(c.command({"GET", name}).str,
            first.owner_id() + ":" + std::to_string(first.fencing_token()));
  // A second lease (even from this thread) waits for the first.
  std::future<lock_lease> second = p.async_try_lock_for(10s);
  EXPECT_EQ(second.wait_for(200ms), std::future_status::timeout);
  std::thread([lease = std::move(first)]() mutable {
    EXPECT_EQ(lease.release(), std::error_code{});
  }).join();
  ASSERT_EQ(second.wait_for(5s), std::future_status::ready);
  lock_lease held = second.get();
  ASSERT_TRUE(held);
  // Contention is a value: a wait that runs out gives an empty lease.
  EXPECT_FALSE(p.async_try_lock_for(50ms).get());
  // The callback form with the detail, and cancellation.
  std::stop_source give_up;
  std::promise<std::error_code> told;
  p.async_acquire({.wait = 20s, .cancel = give_up.get_token()},
                  [&](std::error_code ec, const std::string&, lock_lease lease) {
                    EXPECT_FALSE(lease);
                    told.set_value(ec);
                  });
  give_up.request_stop();
  auto outcome = told.get_future();
  ASSERT_EQ(outcome.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(outcome.get(), errc::cancelled);
}

TEST(PlainLock, StatusAndForceUnlockWorkOnDlockAndForeignHolders) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  lock_status s = p.status();
  EXPECT_FALSE(s.locked);
  EXPECT_EQ(s.remaining_ttl.count(), -2);
  p.lock();
  s = p.status();
  EXPECT_TRUE(s.locked);
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, p.owner_id() + ":" + std::to_string(p.fencing_token()));
  EXPECT_EQ(s.last_fencing_token, p.fencing_token());
  EXPECT_GT(s.remaining_ttl, 0ms);
  // Forcing it frees it (the holder hears at its next renewal); its unlock then finds nothing.
  EXPECT_TRUE(p.force_unlock());
  EXPECT_FALSE(p.is_locked());
  p.unlock();
  EXPECT_FALSE(p.force_unlock());
  // A foreign holder's value is shown and can be forced too.
  c.command({"SET", name, "redis-py-token", "PX", "10000"});
  s = p.status();
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, "redis-py-token");
  EXPECT_TRUE(p.force_unlock());
  // A hash (a reentrant lock, or data) is refused and kept.
  mutex m = c.get_lock(name);
  m.lock();
  try {
    (void)p.status();
    ADD_FAILURE() << "status read a hash as a plain lock";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
  try {
    (void)p.force_unlock();
    ADD_FAILURE() << "force_unlock deleted a reentrant lock";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
  EXPECT_TRUE(m.is_held_by_current_thread());
  // And the plain lock refuses the hash as another kind.
  std::error_code ec;
  EXPECT_FALSE(p.try_lock(ec));
  EXPECT_EQ(ec, errc::wrong_type);
  m.unlock();
}

TEST(PlainLock, AKilledServerFailsTheCallsAndAWaiterCleanly) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.connect_timeout = 500ms;
  client holder{server.url()};
  client c{o};
  const std::string name = unique_key("p");
  plain_lock held = holder.get_plain_lock(name);
  held.lock();  // 30 s lease
  plain_lock p = c.get_plain_lock(name);
  auto waiting = std::async(std::launch::async, [&] {
    try {
      p.lock();
      return std::error_code{};
    } catch (const error& e) {
      return e.code();
    }
  });
  ASSERT_TRUE(test::eventually([&] { return held.status().subscribers == 1; }));
  const auto killed_at = steady_clock::now();
  server.kill(SIGKILL);
  ASSERT_EQ(waiting.wait_for(o.connect_timeout + o.request_timeout + timing_slack),
            std::future_status::ready)
      << "the waiter slept on with its server gone";
  const std::error_code ec = waiting.get();
  EXPECT_TRUE(ec == errc::connect_failed || ec == errc::connect_timeout ||
              ec == errc::connection_lost)
      << ec.message();
  EXPECT_LT(steady_clock::now() - killed_at, o.connect_timeout + o.request_timeout + timing_slack);
  EXPECT_FALSE(p.is_held_by_current_thread());
  std::error_code tried;
  EXPECT_FALSE(p.try_lock(tried));
  EXPECT_TRUE(tried) << "a try_lock on a dead server reported no error";
  held.unlock();  // never throws, even with the server gone
  server.start();
  EXPECT_TRUE(p.try_lock_for(5s));
  p.unlock();
}

TEST(PlainLock, DestroyingTheClientReportsTheHoldLostAndStopsTheHandle) {
  redis_server server;
  auto c = std::make_unique<client>(server.url());
  plain_lock p = c->get_plain_lock(unique_key("p"));
  p.lock();
  stop_waiter lost{p.stop_token()};
  c.reset();
  EXPECT_TRUE(lost.wait_for(1s).has_value());
  std::error_code ec;
  EXPECT_FALSE(p.try_lock(ec));
  EXPECT_EQ(ec, errc::client_stopped);
  p.unlock();  // never throws
}

TEST(PlainLock, TwoClientsAndEightThreadsNeverOverlap) {
  redis_server server;
  client a{server.url()}, b{server.url()};
  const std::string name = unique_key("p");
  std::atomic<int> inside{0}, overlaps{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      plain_lock p = (t % 2 == 0 ? a : b).get_plain_lock(name);
      for (int i = 0; i < 25; ++i) {
        std::unique_lock guard{p};
        if (inside.fetch_add(1) != 0) ++overlaps;
        inside.fetch_sub(1);
        ++done;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(done.load(), 200);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(PlainLockProcesses, TwoProcessesOfFourThreadsKeepANonAtomicCountExact) {
  redis_server server;
  const std::string name = unique_key("p"), counter = unique_key("counter");
  constexpr int threads = 4, iterations = 50;
  auto run = [&] {
    return tools::run_command({DLOCK_TEST_LOCK_WORKER, "plain-count", server.url(), name, counter,
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

}  // namespace
}  // namespace dlock
