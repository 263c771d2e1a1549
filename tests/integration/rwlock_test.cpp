// dlock::shared_mutex against a real server: readers share, writers exclude, downgrade, no
// upgrade, writer preference, leases and losses of both sides, kind checks, exclusion across
// processes (the lock worker), a crashed reader, and waking on Redisson's own unlock scripts.
#include <gtest/gtest.h>

#include <atomic>
#include <concepts>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stop_token>
#include <thread>

#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "redis_process.hpp"
#include "support/child_process.hpp"
#include "support/redis_fixture.hpp"
#include "support/write_pause.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

// Scheduling and round trips on a shared, loaded machine.
constexpr auto timing_slack = 1500ms;
// A writer facing a stream of readers gets the lock within this: the readers already in leave
// (each holds ~20 ms) and the last one's "0" wakes it.
constexpr auto starvation_bound = 3s;

// std's SharedTimedLockable and TimedLockable requirements, as far as they can be spelt.
template <typename M>
concept shared_timed_lockable = requires(M m) {
  m.lock_shared();
  { m.try_lock_shared() } -> std::same_as<bool>;
  { m.try_lock_shared_for(1ms) } -> std::same_as<bool>;
  { m.try_lock_shared_until(steady_clock::now()) } -> std::same_as<bool>;
  m.unlock_shared();
};
template <typename M>
concept timed_lockable = requires(M m) {
  m.lock();
  { m.try_lock() } -> std::same_as<bool>;
  { m.try_lock_for(1ms) } -> std::same_as<bool>;
  { m.try_lock_until(std::chrono::system_clock::now()) } -> std::same_as<bool>;
  m.unlock();
};
static_assert(shared_timed_lockable<shared_mutex>);
static_assert(timed_lockable<shared_mutex>);

// The std wrappers compile with it (never run).
[[maybe_unused]] void std_wrappers_compile(shared_mutex& rw) {
  std::shared_lock r{rw};
  std::shared_lock timed_r{rw, 1s};
  std::unique_lock w{rw, std::defer_lock};
  std::unique_lock timed_w{rw, steady_clock::now() + 1s};
}

client_options fast_watchdog(const redis_server& server, std::chrono::milliseconds lease) {
  client_options o = client_options::from_url(server.url());
  o.locks.watchdog_timeout = lease;
  return o;
}

// Resolves when `token` is stopped: loss notification as an event.
class stop_waiter {
 public:
  explicit stop_waiter(std::stop_token token)
      : callback_(std::move(token), [this] { stopped_.set_value(); }) {}
  bool wait_for(std::chrono::milliseconds limit) {
    return future_.wait_for(limit) == std::future_status::ready;
  }

 private:
  std::promise<void> stopped_;
  std::future<void> future_ = stopped_.get_future();
  std::stop_callback<std::function<void()>> callback_;
};

// Runs `f` on another thread (another owner) and returns its result.
template <typename F>
auto on_other_thread(F&& f) {
  return std::async(std::launch::async, std::forward<F>(f)).get();
}

TEST(SharedMutex, ReadersShareAndAWriterExcludesEveryone) {
  redis_server server;
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(unique_key("rw"));
  rw.lock_shared();
  EXPECT_EQ(rw.shared_hold_count(), 1u);
  EXPECT_EQ(rw.fencing_token(), 0u);  // read holds take no token
  EXPECT_TRUE(on_other_thread([&] {
    const bool got = rw.try_lock_shared();
    rw.unlock_shared();
    return got;
  }));
  EXPECT_FALSE(on_other_thread([&] { return rw.try_lock(); }));
  lock_status s = rw.status();
  EXPECT_EQ(s.mode, "read");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, rw.owner_id());
  rw.unlock_shared();
  EXPECT_FALSE(rw.is_locked());

  rw.lock();
  const std::uint64_t token = rw.fencing_token();
  EXPECT_GT(token, 0u);
  EXPECT_FALSE(on_other_thread([&] { return rw.try_lock_shared(); }));
  EXPECT_FALSE(on_other_thread([&] { return rw.try_lock_for(50ms); }));
  s = rw.status();
  EXPECT_EQ(s.mode, "write");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].owner, rw.owner_id() + ":write");
  EXPECT_EQ(s.last_fencing_token, token);
  rw.lock();  // re-entry
  EXPECT_EQ(rw.hold_count(), 2u);
  rw.unlock();
  rw.unlock();
  const std::uint64_t next = on_other_thread([&] {
    std::unique_lock w{rw};
    return rw.fencing_token();
  });
  EXPECT_GT(next, token);
}

TEST(SharedMutex, OnlyTheOwnerUnlocks) {
  redis_server server;
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(unique_key("rw"));
  rw.lock_shared();
  EXPECT_EQ(on_other_thread([&] { return rw.unlock_shared_checked(); }), errc::not_owner);
  EXPECT_EQ(rw.unlock_checked(), errc::not_owner);  // holds a read, not the write lock
  EXPECT_TRUE(rw.is_locked());
  EXPECT_EQ(rw.unlock_shared_checked(), std::error_code());
  rw.lock();
  EXPECT_EQ(on_other_thread([&] { return rw.unlock_checked(); }), errc::not_owner);
  EXPECT_EQ(rw.unlock_shared_checked(), errc::not_owner);
  EXPECT_EQ(rw.unlock_checked(), std::error_code());
  EXPECT_FALSE(rw.is_locked());
}

TEST(SharedMutex, AWriterDowngradesToAReader) {
  redis_server server;
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(unique_key("rw"));
  rw.lock();
  ASSERT_TRUE(rw.try_lock_shared());  // admitted at once beside its own write hold
  rw.unlock();
  EXPECT_EQ(rw.status().mode, "read");
  EXPECT_TRUE(on_other_thread([&] {
    const bool got = rw.try_lock_shared();
    rw.unlock_shared();
    return got;
  }));
  EXPECT_FALSE(on_other_thread([&] { return rw.try_lock(); }));
  rw.unlock_shared();
  EXPECT_FALSE(rw.is_locked());
}

TEST(SharedMutex, AReaderAskingForTheWriteLockIsRefusedAtOnce) {
  redis_server server;
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(unique_key("rw"));
  rw.lock_shared();
  const auto started = steady_clock::now();
  for (const auto& attempt : std::vector<std::function<void()>>{
           [&] { rw.lock(); }, [&] { (void)rw.try_lock(); }, [&] { (void)rw.try_lock_for(10s); }}) {
    try {
      attempt();
      ADD_FAILURE() << "an upgrade was accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::would_deadlock);
      EXPECT_NE(std::string(e.what()).find("not upgradable"), std::string::npos) << e.what();
    }
  }
  EXPECT_LT(steady_clock::now() - started, timing_slack);
  std::error_code ec;
  rw.lock(ec);
  EXPECT_EQ(ec, errc::would_deadlock);
  rw.unlock_shared();
  EXPECT_TRUE(rw.try_lock());
  rw.unlock();
}

TEST(SharedMutex, NamesHoldingAnotherKindOfLockAreRefusedNamingBothKinds) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("kinds");
  mutex m = c.get_lock(name);
  shared_mutex rw = c.get_read_write_lock(name);
  m.lock();
  for (const auto& attempt : std::vector<std::function<void()>>{
           [&] { (void)rw.try_lock_shared(); }, [&] { (void)rw.try_lock(); },
           [&] { (void)rw.status(); }, [&] { (void)rw.force_unlock(); }}) {
    try {
      on_other_thread(attempt);
      ADD_FAILURE() << "a read-write lock used a reentrant lock's name";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type);
      const std::string what = e.what();
      EXPECT_NE(what.find("reentrant lock"), std::string::npos) << what;
      EXPECT_NE(what.find("read-write lock"), std::string::npos) << what;
    }
  }
  m.unlock();
  rw.lock_shared();
  try {
    on_other_thread([&] { (void)m.try_lock(); });
    ADD_FAILURE() << "a reentrant lock used a read-write lock's name";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    const std::string what = e.what();
    EXPECT_NE(what.find("reentrant lock"), std::string::npos) << what;
    EXPECT_NE(what.find("read-write lock"), std::string::npos) << what;
  }
  rw.unlock_shared();
}

TEST(SharedMutex, AWaitingWriterWakesWhenTheLastReaderLeaves) {
  redis_server server;
  client a{server.url()}, b{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex reader = a.get_read_write_lock(name);
  shared_mutex writer = b.get_read_write_lock(name);
  reader.lock_shared();  // a 30 s watchdog lease: only the release can explain a quick wake
  std::promise<void> waiting;
  auto got = std::async(std::launch::async, [&] {
    waiting.set_value();
    const bool ok = writer.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) writer.unlock();
    return std::pair{ok, at};
  });
  waiting.get_future().wait();
  ASSERT_TRUE(test::eventually([&] { return reader.status().waiting_writers == 1; }));
  const auto released = steady_clock::now();
  reader.unlock_shared();
  const auto [ok, at] = got.get();
  EXPECT_TRUE(ok);
  EXPECT_LT(at - released, timing_slack);
}

// A waiting writer gives up: `cancelled` through `cancel`, else its client `owner` is destroyed.
// Its acquisition ends with cancelled or client_stopped, without the lock.
void give_up(bool cancelled, std::stop_source& cancel, std::unique_ptr<client>& owner,
             std::future<lock_lease>& waiting) {
  if (cancelled) {
    cancel.request_stop();
  } else {
    owner.reset();
  }
  try {
    (void)waiting.get();
    ADD_FAILURE() << "the writer got the lock";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), cancelled ? errc::cancelled : errc::client_stopped) << e.what();
  }
}

// A writer that gives up without the lock (cancelled, or its client destroyed) withdraws its
// intent at once: new readers are not held back for the intent's 10 s lease.
TEST(SharedMutex, AWriterThatGivesUpStopsHoldingReadersBack) {
  redis_server server;
  client a{server.url()}, c{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex reader = a.get_read_write_lock(name);
  reader.lock_shared();
  enum class way { cancelled, client_destroyed, blocking_lock_of_a_destroyed_client };
  for (const way w :
       {way::cancelled, way::client_destroyed, way::blocking_lock_of_a_destroyed_client}) {
    SCOPED_TRACE(static_cast<int>(w));
    auto b = std::make_unique<client>(server.url());
    std::stop_source cancel;
    std::future<lock_lease> waiting;
    if (w == way::blocking_lock_of_a_destroyed_client) {
      // The blocking path: the caller's own first attempt left the intent.
      waiting = std::async(std::launch::async, [writer = b->get_read_write_lock(name)]() mutable {
        writer.lock();
        return lock_lease{};
      });
    } else {
      waiting = b->get_read_write_lock(name).async_acquire({.cancel = cancel.get_token()});
    }
    ASSERT_TRUE(test::eventually([&] { return reader.status().waiting_writers == 1; }));
    // And the waiter has read its refusal and waits in its client (it listens); the next test
    // gives up while the attempt is still out.
    ASSERT_TRUE(test::eventually([&] { return reader.status().subscribers >= 1; }));
    EXPECT_FALSE(c.get_read_write_lock(name).try_lock_shared()) << "the intent holds readers back";
    give_up(w == way::cancelled, cancel, b, waiting);
    // The withdrawal is in flight (or written by the client's shutdown) when get() returns.
    const auto gave_up = steady_clock::now();
    EXPECT_TRUE(test::eventually([&] { return reader.status().waiting_writers == 0; }));
    EXPECT_LT(steady_clock::now() - gave_up, timing_slack);
    shared_mutex late = c.get_read_write_lock(name);
    EXPECT_TRUE(late.try_lock_shared());
    late.unlock_shared();
  }
  reader.unlock_shared();
}

// The same, given up while the writer's first attempt is still out (its client has not read the
// refusal, so the waiter never joined the client's queue): the attempt records the intent when it
// runs, and the withdrawal sent after it removes it.
TEST(SharedMutex, AWriterThatGivesUpWhileItsAttemptIsOutLeavesNoIntent) {
  redis_server server;
  client a{server.url()}, c{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex reader = a.get_read_write_lock(name);
  reader.lock_shared();
  constexpr auto pause = 400ms;  // holds the writer's attempt on the server
  for (const bool cancelled : {true, false}) {
    SCOPED_TRACE(cancelled ? "cancelled" : "client destroyed");
    auto b = std::make_unique<client>(server.url());
    (void)b->command({"PING"});  // connected: the pause holds the attempt, not the set-up
    const auto attempts_before = b->lock_metrics().attempts;
    std::stop_source cancel;
    const test::write_pause paused{server, pause};
    auto waiting = b->get_read_write_lock(name).async_acquire({.cancel = cancel.get_token()});
    ASSERT_TRUE(test::eventually([&] { return b->lock_metrics().attempts > attempts_before; }));
    ASSERT_TRUE(paused.still_on()) << "the attempt was sent after the pause";
    give_up(cancelled, cancel, b, waiting);
    ASSERT_TRUE(test::eventually([&] { return paused.over(); }));
    // The attempt ran (its intent was recorded) and the withdrawal after it.
    EXPECT_TRUE(test::eventually([&] { return reader.status().waiting_writers == 0; }));
    EXPECT_LT(paused.elapsed(), pause + timing_slack);
    shared_mutex late = c.get_read_write_lock(name);
    EXPECT_TRUE(late.try_lock_shared()) << "an intent holds readers back";
    late.unlock_shared();
  }
  reader.unlock_shared();
}

// Two writers of one client whose first attempts are out together: the one that gives up must not
// withdraw the other's intent (the intents are the client's, withdrawn as one). The client
// withdraws them when its last writer ends, here the one that got the lock.
TEST(SharedMutex, AWriterThatGivesUpLeavesItsSiblingsIntentInPlace) {
  redis_server server;
  client a{server.url()}, b{server.url()}, c{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex reader = a.get_read_write_lock(name);
  reader.lock_shared();
  constexpr auto pause = 400ms;  // holds both writers' attempts on the server
  (void)b.command({"PING"});
  const auto attempts_before = b.lock_metrics().attempts;
  const test::write_pause paused{server, pause};
  auto gives_up = b.get_read_write_lock(name).async_acquire({.wait = 30ms});
  auto waits = b.get_read_write_lock(name).async_acquire({});
  ASSERT_TRUE(test::eventually([&] { return b.lock_metrics().attempts >= attempts_before + 2; }));
  ASSERT_TRUE(paused.still_on()) << "the attempts were sent after the pause";
  EXPECT_FALSE(gives_up.get()) << "the writer that gives up got the lock";
  (void)b.command({"PING"});  // on b's link: what b sent before it has run
  EXPECT_GE(reader.status().waiting_writers, 1)
      << "the give-up withdrew the waiting writer's intent";
  EXPECT_FALSE(c.get_read_write_lock(name).try_lock_shared()) << "a new reader passed a writer";
  reader.unlock_shared();
  ASSERT_EQ(waits.wait_for(timing_slack), std::future_status::ready) << "the writer slept on";
  lock_lease held = waits.get();
  ASSERT_TRUE(held);
  (void)held.release();
  // Both intents are gone with the client's last writer: readers pass at once.
  EXPECT_TRUE(test::eventually([&] { return reader.status().waiting_writers == 0; }));
  shared_mutex late = c.get_read_write_lock(name);
  EXPECT_TRUE(late.try_lock_shared());
  late.unlock_shared();
}

// A reader and a writer of one client and name wait together; the writer gives up. Its intent is
// withdrawn at once (the reader's side has no line: its end must not decide the writer's), so
// readers of other clients are not held back for the intent's 10 s lease once the lock is free.
TEST(SharedMutex, AWriterThatGivesUpBesideAWaitingReaderOfItsClientWithdrawsItsIntent) {
  redis_server server;
  client a{server.url()}, b{server.url()}, c{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex writer = a.get_read_write_lock(name);
  writer.lock();
  auto reading = b.get_read_write_lock(name).async_acquire_shared({});
  ASSERT_TRUE(test::eventually([&] { return writer.status().subscribers >= 1; }));
  // Cancelled (a wait that runs out ends with an attempt that withdraws its own intent).
  std::stop_source cancel;
  auto writing = b.get_read_write_lock(name).async_acquire({.cancel = cancel.get_token()});
  ASSERT_TRUE(test::eventually([&] { return writer.status().waiting_writers == 1; }));
  cancel.request_stop();
  EXPECT_THROW((void)writing.get(), error);
  writer.unlock();
  ASSERT_EQ(reading.wait_for(timing_slack), std::future_status::ready) << "the reader slept on";
  lock_lease read = reading.get();
  EXPECT_TRUE(read);
  shared_mutex other = c.get_read_write_lock(name);
  EXPECT_TRUE(other.try_lock_shared()) << "the writer's intent holds readers back";
  other.unlock_shared();
  (void)read.release();
}

TEST(SharedMutex, AWriterIsNotStarvedByAStreamOfOverlappingReaders) {
  redis_server server;
  client a{server.url()}, b{server.url()}, w{server.url()};
  const std::string name = unique_key("rw");
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, most_inside{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      shared_mutex rw = (t % 2 == 0 ? a : b).get_read_write_lock(name);
      while (!stop) {
        std::shared_lock r{rw};
        const int now = ++inside;
        int seen = most_inside.load();
        while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(20ms);  // the read's work
        --inside;
        ++reads;
      }
    });
  }
  // The stream runs: readers overlap, so without writer preference the lock would never be free.
  ASSERT_TRUE(test::eventually([&] { return most_inside.load() > 1 && reads.load() > 20; }));
  shared_mutex writer = w.get_read_write_lock(name);
  const auto started = steady_clock::now();
  const bool got = writer.try_lock_for(starvation_bound + timing_slack);
  const auto waited = steady_clock::now() - started;
  const int inside_while_writing = inside.load();
  if (got) writer.unlock();
  stop = true;
  for (auto& t : readers)
    t.join();
  EXPECT_TRUE(got);
  EXPECT_LT(waited, starvation_bound);
  EXPECT_EQ(inside_while_writing, 0);
}

TEST(SharedMutex, AsynchronousAcquisitionsGiveLeasesOfEitherSide) {
  redis_server server;
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(unique_key("rw"));
  lock_lease first = rw.async_acquire_shared({}).get();
  lock_lease second = rw.async_acquire_shared({.wait = 0ms}).get();
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);  // readers share
  EXPECT_NE(first.owner_id(), second.owner_id());
  EXPECT_FALSE(rw.async_acquire({.wait = 0ms}).get()) << "a writer beside readers";
  auto writing = rw.async_acquire({.wait = 20s});
  EXPECT_EQ(first.release(), std::error_code());
  EXPECT_EQ(second.release(), std::error_code());
  lock_lease writer = writing.get();
  ASSERT_TRUE(writer);
  EXPECT_GT(writer.fencing_token(), 0u);
  EXPECT_EQ(rw.status().holders.at(0).owner, writer.owner_id() + ":write");
  std::error_code ec;
  EXPECT_FALSE(rw.try_lock_shared_for(0ms, ec));
  EXPECT_FALSE(ec);
  EXPECT_EQ(writer.release(), std::error_code());
  EXPECT_FALSE(rw.is_locked());
}

TEST(SharedMutex, LostReadAndWriteHoldsAreReported) {
  redis_server server;
  constexpr auto lease = 600ms;
  client c{fast_watchdog(server, lease)};
  const std::string name = unique_key("rw");
  shared_mutex rw = c.get_read_write_lock(name);
  rw.lock_shared();
  {
    stop_waiter lost{rw.shared_stop_token()};
    // Behind the holder's back: its first hold's lease key is gone.
    c.command({"DEL", locks::rwlock_timeout_prefix(name, rw.owner_id()) + ":1"});
    EXPECT_TRUE(lost.wait_for(lease / 3 + timing_slack));
  }
  EXPECT_EQ(rw.shared_hold_count(), 0u);
  EXPECT_EQ(rw.unlock_shared_checked(), errc::lock_lost);
  c.command({"DEL", name});

  rw.lock();
  {
    stop_waiter lost{rw.stop_token()};
    c.command({"DEL", name});
    EXPECT_TRUE(lost.wait_for(lease / 3 + timing_slack));
  }
  EXPECT_EQ(rw.unlock_checked(), errc::lock_lost);

  // An explicit lease that runs out before the unlock.
  rw.lock_shared(lease_time(300ms));
  stop_waiter expired{rw.shared_stop_token()};
  EXPECT_TRUE(expired.wait_for(300ms + timing_slack));
  EXPECT_EQ(rw.unlock_shared_checked(), errc::lock_lost);
}

TEST(SharedMutex, TheWatchdogKeepsReadHoldsBeyondTheirLease) {
  redis_server server;
  constexpr auto lease = 600ms;
  client c{fast_watchdog(server, lease)};
  const std::string name = unique_key("rw");
  shared_mutex rw = c.get_read_write_lock(name);
  rw.lock_shared();
  rw.lock_shared();
  stop_waiter lost{rw.shared_stop_token()};
  EXPECT_FALSE(lost.wait_for(3 * lease));  // three leases later, still held
  const std::string prefix = locks::rwlock_timeout_prefix(name, rw.owner_id());
  EXPECT_GT(c.command({"PTTL", prefix + ":2"}).integer, 0);
  EXPECT_EQ(rw.shared_hold_count(), 2u);
  rw.unlock_shared();
  rw.unlock_shared();
  EXPECT_FALSE(rw.is_locked());
}

TEST(SharedMutexProcesses, TwoProcessesOfFourThreadsExcludeWritersAndShareReaders) {
  redis_server server;
  const std::string name = unique_key("rw"), counter = unique_key("counter");
  constexpr int threads = 4, iterations = 30;
  auto run = [&] {
    return tools::run_command({DLOCK_TEST_LOCK_WORKER, "rw-count", server.url(), name, counter,
                               std::to_string(threads), std::to_string(iterations)},
                              120s);
  };
  auto first = std::async(std::launch::async, run);
  auto second = std::async(std::launch::async, run);
  int most_readers = 0;
  for (auto* result : {&first, &second}) {
    const tools::command_result r = result->get();
    ASSERT_EQ(r.exit_code, 0) << r.err;
    int violations = -1, max_readers = -1, not_increasing = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "violations %d max_readers %d tokens_not_increasing %d",
                          &violations, &max_readers, &not_increasing),
              3)
        << r.out;
    EXPECT_EQ(violations, 0);
    EXPECT_EQ(not_increasing, 0);
    most_readers = std::max(most_readers, max_readers);
  }
  EXPECT_GT(most_readers, 1) << "readers never overlapped";
  // Every third hold of each thread writes: (i + t) % 3 == 0 for i in [0, 30) is 10 per thread.
  client c{server.url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations / 3));
}

TEST(SharedMutexProcesses, AKilledReadersHoldEndsWithinItsLease) {
  redis_server server;
  const std::string name = unique_key("rw");
  constexpr auto lease = 2000ms;
  test::child_process child(
      {DLOCK_TEST_LOCK_WORKER, "rw-hold-read", server.url(), name, std::to_string(lease.count())});
  ASSERT_EQ(child.read_line(10s), "locked");
  client c{server.url()};
  shared_mutex rw = c.get_read_write_lock(name);
  EXPECT_FALSE(rw.try_lock());
  child.kill(SIGKILL);
  const auto killed = steady_clock::now();
  EXPECT_TRUE(rw.try_lock_for(lease + timing_slack));
  EXPECT_LT(steady_clock::now() - killed, lease + timing_slack);
  rw.unlock();
}

// Redisson's scripts as a foreign client (see rwlock_scripts_test.cpp for their sources): a
// dlock writer waiting for a Redisson reader wakes on its unlock's "0", long before the lease.
TEST(SharedMutexInterop, AWriterWakesOnRedissonsReadUnlock) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("rw");
  const std::string java = "6f1d2c3b-4a59-4e7f-8a9b-0c1d2e3f4a5b:77";
  const std::string prefix = locks::rwlock_timeout_prefix(name, java);
  const script java_read_lock{
      "redis.call('hset', KEYS[1], 'mode', 'read') redis.call('hincrby', KEYS[1], ARGV[2], 1) "
      "redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1]) "
      "redis.call('pexpire', KEYS[1], ARGV[1]) return nil"};
  // RedissonReadLock.java:82-140, the last reader's path: delete and publish "0".
  const script java_read_unlock{
      "redis.call('hdel', KEYS[1], ARGV[1]) redis.call('del', KEYS[3] .. ':1') "
      "if redis.call('hlen', KEYS[1]) <= 1 then redis.call('del', KEYS[1]) "
      "redis.call('publish', KEYS[2], '0') return 1 end return 0"};
  c.eval(java_read_lock, {name, prefix}, {"30000", java});
  shared_mutex rw = c.get_read_write_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = rw.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) rw.unlock();
    return std::pair{ok, at};
  });
  ASSERT_TRUE(test::eventually([&] { return rw.status().waiting_writers == 1; }));
  const auto released = steady_clock::now();
  EXPECT_EQ(c.eval(java_read_unlock, {name, locks::rwlock_channel(name), prefix}, {java}).integer,
            1);
  const auto [ok, at] = got.get();
  EXPECT_TRUE(ok);
  EXPECT_LT(at - released, timing_slack);
}

// Redisson's write unlock (RedissonWriteLock.java:77-117) publishes "1": every waiting dlock
// reader wakes at once, long before the writer's lease would end.
TEST(SharedMutexInterop, ReadersWakeOnRedissonsWriteUnlock) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("rw");
  const std::string java_writer = "6f1d2c3b-4a59-4e7f-8a9b-0c1d2e3f4a5b:77:write";
  c.command({"HSET", name, "mode", "write", java_writer, "1"});
  c.command({"PEXPIRE", name, "30000"});
  const script java_write_unlock{
      "redis.call('hdel', KEYS[1], ARGV[1]) "
      "if redis.call('hlen', KEYS[1]) == 1 then redis.call('del', KEYS[1]) "
      "redis.call('publish', KEYS[2], '1') end return 1"};
  shared_mutex rw = c.get_read_write_lock(name);
  std::vector<std::future<std::pair<bool, steady_clock::time_point>>> readers;
  for (int i = 0; i < 3; ++i) {
    readers.push_back(std::async(std::launch::async, [&] {
      const bool ok = rw.try_lock_shared_for(20s);
      const auto at = steady_clock::now();
      if (ok) rw.unlock_shared();
      return std::pair{ok, at};
    }));
  }
  ASSERT_TRUE(test::eventually([&] { return rw.status().subscribers == 1; }));
  const auto released = steady_clock::now();
  c.eval(java_write_unlock, {name, locks::rwlock_channel(name)}, {java_writer});
  for (auto& r : readers) {
    const auto [ok, at] = r.get();
    EXPECT_TRUE(ok);
    EXPECT_LT(at - released, timing_slack);
  }
}

}  // namespace
}  // namespace dlock
