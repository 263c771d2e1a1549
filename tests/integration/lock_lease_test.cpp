// The asynchronous lock API against a real redis-server: lock_lease objects acquired by callback
// and by std::future, released from any thread, cancelled, and outliving their client.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 300ms;
// How long a test waits for an event that should come at once.
constexpr auto event_limit = 5s;

// The outcome of one callback-style acquisition, delivered as an event.
struct outcome {
  std::error_code ec;
  lock_lease lease;
};
lease_handler to_promise(std::shared_ptr<std::promise<outcome>> p) {
  return [p](std::error_code ec, lock_lease lease) { p->set_value({ec, std::move(lease)}); };
}

TEST(LockLease, FutureAcquiresALeaseThatAnotherThreadReleases) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  lock_lease lease = m.async_lock().get();
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease.name(), m.name());
  EXPECT_GT(lease.fencing_token(), 0u);
  EXPECT_FALSE(lease.lost());
  EXPECT_TRUE(lease.stop_token().stop_possible());
  EXPECT_NE(lease.owner_id(), m.owner_id()) << "a lease must not be this thread's owner";
  const lock_status held = m.status();
  ASSERT_EQ(held.holders.size(), 1u);
  EXPECT_EQ(held.holders[0].owner, lease.owner_id());
  EXPECT_EQ(held.holders[0].count, 1u);
  EXPECT_FALSE(m.is_held_by_current_thread());

  std::error_code released;
  std::thread([&] { released = lease.release(); }).join();
  EXPECT_EQ(released, std::error_code{});
  EXPECT_FALSE(lease);
  EXPECT_EQ(lease.release(), errc::not_owner) << "a second release must change nothing";
  EXPECT_FALSE(m.is_locked());
}

TEST(LockLease, CallbackRunsOnceWithTheLease) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  auto p = std::make_shared<std::promise<outcome>>();
  auto f = p->get_future();
  std::atomic<int> calls{0};
  m.async_lock([p, &calls](std::error_code ec, lock_lease lease) {
    ++calls;
    p->set_value({ec, std::move(lease)});
  });
  ASSERT_EQ(f.wait_for(event_limit), std::future_status::ready);
  outcome o = f.get();
  EXPECT_EQ(o.ec, std::error_code{});
  EXPECT_TRUE(o.lease);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(m.is_locked());
  o.lease = lock_lease{};  // move-assignment releases the hold it replaces
  EXPECT_FALSE(m.is_locked());
}

TEST(LockLease, LeasesAreNotReentrantAndAWaitRunsOutOnTime) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  lock_lease first = m.async_lock().get();
  ASSERT_TRUE(first);
  const auto start = steady_clock::now();
  lock_lease second = m.async_try_lock_for(300ms).get();
  const auto waited = steady_clock::now() - start;
  EXPECT_FALSE(second) << "a second lease of the same name must wait for the first";
  EXPECT_GE(waited, 300ms);
  EXPECT_LE(waited, 300ms + timing_slack);
  // A thread's mutex hold and a lease exclude each other too.
  EXPECT_FALSE(m.try_lock());
}

TEST(LockLease, AWaitingAcquisitionWakesOnTheUnlockMessage) {
  redis_server server;
  client holder{server.url()}, waiter{server.url()};
  const std::string name = unique_key("m");
  mutex held = holder.get_lock(name);
  held.lock();  // watchdog lease of 30 s: only the unlock message can wake the waiter in time
  auto acquired = waiter.get_lock(name).async_lock();
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 1; }))
      << "the waiting client never subscribed";
  const auto unlocked_at = steady_clock::now();
  held.unlock();
  ASSERT_EQ(acquired.wait_for(event_limit), std::future_status::ready);
  const auto woke_after = steady_clock::now() - unlocked_at;
  lock_lease lease = acquired.get();
  EXPECT_TRUE(lease);
  EXPECT_LT(woke_after, timing_slack) << "woke by polling or at the lease end, not by the message";
  EXPECT_GT(lease.fencing_token(), 1u);
}

// Non-atomic read-modify-write done by worker threads under leases acquired asynchronously by two
// clients (so two owners per acquisition round): any overlap loses an increment.
TEST(LockLease, LeasesHandedToWorkerThreadsNeverOverlap) {
  redis_server server;
  client a{server.url()}, b{server.url()};
  const std::string name = unique_key("m");
  const std::string counter = unique_key("counter");
  constexpr int per_client = 40;
  constexpr int workers = 4;

  // The callbacks hand each lease to a queue; workers take leases as they come and release them.
  std::mutex queue_mutex;
  std::condition_variable queue_cv;
  std::deque<lock_lease> ready;
  std::atomic<int> failures{0};
  auto enqueue = [&](std::error_code ec, lock_lease lease) {
    if (ec) ++failures;
    std::lock_guard lock(queue_mutex);
    ready.push_back(std::move(lease));
    queue_cv.notify_one();
  };
  for (int i = 0; i < per_client; ++i) {
    a.get_lock(name).async_lock(enqueue);
    b.get_lock(name).async_lock(enqueue);
  }
  std::atomic<int> inside{0}, overlaps{0}, taken{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      while (taken.fetch_add(1) < 2 * per_client) {
        lock_lease lease;
        {
          std::unique_lock lock(queue_mutex);
          if (!queue_cv.wait_for(lock, event_limit, [&] { return !ready.empty(); })) {
            ADD_FAILURE() << "no lease came within " << event_limit.count() << " s";
            return;
          }
          lease = std::move(ready.front());
          ready.pop_front();
        }
        if (!lease) continue;
        if (++inside != 1) ++overlaps;
        const auto value = a.command({"GET", counter});
        const long n = value.is_nil() ? 0 : std::stol(value.str);
        a.command({"SET", counter, std::to_string(n + 1)});
        --inside;
        EXPECT_EQ(lease.release(), std::error_code{});
      }
    });
  }
  for (auto& t : pool)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(a.command({"GET", counter}).str, std::to_string(2 * per_client));
}

TEST(LockLease, AnExplicitLeaseRunsOutAndTheLeaseIsTold) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  lock_lease lease = m.async_acquire({.lease = 400ms}).get();
  ASSERT_TRUE(lease);
  std::promise<void> lost;
  std::stop_callback on_lost(lease.stop_token(), [&] { lost.set_value(); });
  ASSERT_EQ(lost.get_future().wait_for(400ms + timing_slack), std::future_status::ready);
  EXPECT_TRUE(lease.lost());
  EXPECT_EQ(lease.release(), errc::lock_lost);
}

TEST(LockLease, ACancelledWaitEndsAndUnsubscribes) {
  redis_server server;
  client holder{server.url()}, waiter{server.url()};
  const std::string name = unique_key("m");
  mutex held = holder.get_lock(name);
  held.lock();
  std::stop_source cancel;
  auto p = std::make_shared<std::promise<outcome>>();
  auto f = p->get_future();
  waiter.get_lock(name).async_acquire({.cancel = cancel.get_token()}, to_promise(p));
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 1; }));
  cancel.request_stop();
  ASSERT_EQ(f.wait_for(event_limit), std::future_status::ready);
  const outcome o = f.get();
  EXPECT_EQ(o.ec, errc::cancelled);
  EXPECT_FALSE(o.lease);
  EXPECT_TRUE(eventually([&] { return held.status().subscribers == 0; }))
      << "the cancelled waiter kept its subscription";
  EXPECT_TRUE(held.is_held_by_current_thread());
  held.unlock();
}

TEST(LockLease, DestroyingTheClientEndsWaitsAndLeases) {
  redis_server server;
  client holder{server.url()};
  const std::string name = unique_key("m");
  holder.get_lock(name).lock();
  auto waiting = std::make_shared<std::promise<outcome>>();
  auto waiting_result = waiting->get_future();
  lock_lease outliving;
  {
    client c{server.url()};
    outliving = c.get_lock(unique_key("other")).async_lock().get();
    ASSERT_TRUE(outliving);
    c.get_lock(name).async_lock(to_promise(waiting));
    ASSERT_TRUE(eventually([&] { return holder.get_lock(name).status().subscribers == 1; }));
  }
  ASSERT_EQ(waiting_result.wait_for(event_limit), std::future_status::ready);
  EXPECT_EQ(waiting_result.get().ec, errc::client_stopped);
  EXPECT_TRUE(outliving.lost()) << "a hold nobody renews any more must be reported lost";
  EXPECT_EQ(outliving.release(), errc::client_stopped);
}

// Review finding: a waiter's subscription parked at shutdown kept the subscriber (and its
// timers) alive past the io_context when a handle outlived the client (ASan: use after free).
TEST(LockLease, AHandleThatOutlivesAClientWithAWaiterIsSafe) {
  redis_server server;
  client holder{server.url()};
  const std::string name = unique_key("m");
  mutex held = holder.get_lock(name);
  held.lock();
  auto waiting_client = std::make_unique<client>(server.url());
  auto m = std::make_unique<mutex>(waiting_client->get_lock(name));
  auto pending = m->async_lock();
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 1; }));
  waiting_client.reset();
  EXPECT_THROW((void)pending.get(), error);
  m.reset();  // the last reference to the client's lock machinery
  EXPECT_TRUE(eventually([&] { return held.status().subscribers == 0; }));
}

// Review finding: a hold granted while the client was being destroyed was never reported lost.
TEST(LockLease, AHoldGrantedDuringShutdownIsReportedLost) {
  redis_server server;
  constexpr int rounds = 200;
  int unreported = 0;
  for (int i = 0; i < rounds; ++i) {
    lock_lease lease;
    std::future<lock_lease> pending;
    {
      client c{server.url()};
      pending = c.get_lock(unique_key("m" + std::to_string(i))).async_lock();
      if (i % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * (i % 8)));
    }  // destroyed with the attempt anywhere between queued and answered
    try {
      lease = pending.get();
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::client_stopped) << e.what();
      continue;
    }
    if (lease && !lease.lost()) ++unreported;
  }
  EXPECT_EQ(unreported, 0) << "holds that nobody renews were not reported lost";
}

// Review finding: a cancel that came while an attempt was in flight was ignored until the
// holder's lease ended, if that attempt found the lock taken again.
TEST(LockLease, ACancelDuringAnAttemptEndsTheWaitWhenTheAttemptFails) {
  redis_server server;
  client first{server.url()}, second{server.url()}, waiter{server.url()};
  const std::string name = unique_key("m");
  mutex a = first.get_lock(name);
  a.lock();
  std::stop_source cancel;
  auto p = std::make_shared<std::promise<outcome>>();
  auto f = p->get_future();
  waiter.get_lock(name).async_acquire({.cancel = cancel.get_token()}, to_promise(p));
  ASSERT_TRUE(eventually([&] { return a.status().subscribers == 1; }));
  // Keep the waiter's connection busy, so that its next attempt stays in flight.
  constexpr auto busy = std::chrono::seconds(1);
  auto blocked = waiter.async_command({"BLPOP", unique_key("never"), "1"});
  std::this_thread::sleep_for(50ms);  // let BLPOP reach the server first
  a.unlock();                         // the waiter's attempt goes out, behind BLPOP
  mutex b = second.get_lock(name);
  b.lock();  // and will find the lock taken by `second` (30 s watchdog lease)
  const auto cancelled_at = steady_clock::now();
  cancel.request_stop();
  ASSERT_EQ(f.wait_for(busy + timing_slack + timing_slack), std::future_status::ready)
      << "the cancel waited for the holder's lease";
  const outcome o = f.get();
  EXPECT_EQ(o.ec, errc::cancelled);
  EXPECT_FALSE(o.lease);
  EXPECT_LT(steady_clock::now() - cancelled_at, busy + timing_slack + timing_slack);
  blocked.wait();
  b.unlock();
}

// Review finding: a blocking lock call from an I/O-thread callback waited for itself forever.
TEST(LockLease, BlockingLockCallsFromACallbackAreRefused) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  mutex other = c.get_lock(unique_key("other"));
  std::promise<std::error_code> refused;
  m.async_lock([&](std::error_code, lock_lease) {
    try {
      (void)other.try_lock();
      refused.set_value({});
    } catch (const error& e) {
      refused.set_value(e.code());
    }
  });
  auto f = refused.get_future();
  ASSERT_EQ(f.wait_for(event_limit), std::future_status::ready) << "the callback deadlocked";
  EXPECT_EQ(f.get(), errc::would_deadlock);
}

TEST(LockLease, BadInputIsRejectedBeforeAnyCommand) {
  redis_server server;
  client c{server.url()};
  mutex m = c.get_lock(unique_key("m"));
  EXPECT_THROW(m.async_acquire({.lease = 0ms}), error);
  EXPECT_THROW(m.async_acquire({.lease = -1ms}, [](std::error_code, lock_lease) {}), error);
  EXPECT_THROW(m.async_lock(lease_handler{}), error);
  EXPECT_FALSE(m.is_locked());
}

TEST(LockLease, AnUnreachableServerFailsTheFuture) {
  const std::uint16_t port = tools::find_free_port();
  client_options o = client_options::from_url("redis://127.0.0.1:" + std::to_string(port));
  o.connect_timeout = 500ms;
  client c{o};
  auto f = c.get_lock("m").async_lock();
  ASSERT_EQ(f.wait_for(event_limit), std::future_status::ready);
  try {
    (void)f.get();
    ADD_FAILURE() << "acquired a lock without a server";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::connect_failed) << e.what();
  }
}

}  // namespace
}  // namespace dlock
