// 1,000 waiters on one name for each lock type, against a real server: asynchronous acquisitions
// spread over a few clients queue behind a holder, and once it lets go every waiter gets its hold
// exactly once, never beside a hold it excludes (concurrent holders are counted), within a named
// bound. The latch's 1,000 waiters all return on one zero, never before it. Each test prints its
// wall time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

constexpr std::size_t waiters = 1000;
constexpr std::size_t clients = 4;  // 250 waiters each
// Threads that take the granted holds from the I/O threads, hold them for one round trip of
// "work" and release them: more than the semaphore's permits, so that all of them can be in use.
constexpr std::size_t holder_threads = 4;
// The whole run, queueing included. Measured on a shared 2-core machine (RelWithDebInfo): 0.3 to
// 2 s per type; TSan is about ten times slower.
constexpr auto all_done_bound = 60s;
// How long every waiter may take to join its client's queue.
constexpr auto queue_bound = 30s;
// Each waiter's own wait: longer than the run, so that no waiter gives up.
constexpr auto waiter_wait = milliseconds(90s);

double seconds_since(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

// The holds the waiters were granted, checked for exclusion and counted.
class hold_checker {
 public:
  hold_checker(const std::string& url, std::size_t capacity)
      : url_(url), capacity_(capacity), acquired_(waiters) {
    for (std::size_t i = 0; i < holder_threads; ++i) {
      threads_.emplace_back([this] { hold_loop(); });
    }
  }
  ~hold_checker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& t : threads_)
      t.join();
  }
  hold_checker(const hold_checker&) = delete;
  hold_checker& operator=(const hold_checker&) = delete;

  // The handler for waiter `i` (runs on its client's I/O thread: it only queues the hold).
  // `exclusive`: the hold excludes every other one (a writer); otherwise up to `capacity` holds
  // that are not exclusive may overlap (readers, permits; 1 for a mutex's holds).
  lease_handler handler(std::size_t i, bool exclusive) {
    return [this, i, exclusive](std::error_code ec, lock_lease lease) {
      {
        std::lock_guard lock(mutex_);
        if (ec || !lease) {
          failures_.push_back("waiter " + std::to_string(i) + ": " +
                              (ec ? ec.message() : std::string("the wait ran out")));
          ++finished_;
        } else {
          granted_.push_back({i, exclusive, std::move(lease)});
        }
      }
      changed_.notify_all();
    };
  }

  // Waits until every waiter finished; false after `limit`.
  bool wait_all(std::chrono::seconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [this] { return finished_ == waiters; });
  }

  void expect_every_waiter_held_once() const {
    std::lock_guard lock(mutex_);
    EXPECT_TRUE(failures_.empty()) << failures_.size() << " failed, first: " << failures_.front();
    std::size_t once = 0;
    for (const auto& n : acquired_)
      once += n.load() == 1 ? 1 : 0;
    EXPECT_EQ(once, waiters) << "waiters that did not hold exactly once";
    EXPECT_EQ(overlaps_, 0u) << "holds that overlapped a hold they exclude";
  }

  std::size_t max_concurrent() const {
    std::lock_guard lock(mutex_);
    return max_concurrent_;
  }

  // The longest time nobody held the name between two holds: a wake-up that came late (or only
  // with a waiter's timer) shows here.
  double longest_idle_ms() const {
    std::lock_guard lock(mutex_);
    return std::chrono::duration<double, std::milli>(longest_idle_).count();
  }

 private:
  struct granted {
    std::size_t waiter;
    bool exclusive;
    lock_lease lease;
  };

  void hold_loop() {
    client work{url_};
    const std::string work_key = unique_key("work");
    for (;;) {
      granted g;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return stopping_ || !granted_.empty(); });
        if (granted_.empty()) return;
        g = std::move(granted_.front());
        granted_.pop_front();
        const bool excluded =
            g.exclusive ? exclusive_ + shared_ > 0 : exclusive_ > 0 || shared_ >= capacity_;
        if (excluded) ++overlaps_;
        if (exclusive_ + shared_ == 0 && last_left_) {
          longest_idle_ = std::max(longest_idle_, steady_clock::now() - *last_left_);
        }
        ++(g.exclusive ? exclusive_ : shared_);
        max_concurrent_ = std::max(max_concurrent_, exclusive_ + shared_);
      }
      ++acquired_[g.waiter];
      (void)work.command({"INCR", work_key});  // one round trip while holding
      if (g.lease.lost()) ADD_FAILURE() << "waiter " << g.waiter << " lost its hold";
      {
        std::lock_guard lock(mutex_);
        --(g.exclusive ? exclusive_ : shared_);
        if (exclusive_ + shared_ == 0) last_left_ = steady_clock::now();
        ++finished_;
      }
      // Released after it stopped counting as a holder: the next hold is granted after this.
      g.lease.release();
      changed_.notify_all();
    }
  }

  std::string url_;
  std::size_t capacity_;
  std::vector<std::atomic<int>> acquired_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<granted> granted_;
  std::vector<std::string> failures_;
  std::size_t finished_ = 0;
  std::size_t exclusive_ = 0, shared_ = 0, overlaps_ = 0, max_concurrent_ = 0;
  std::optional<steady_clock::time_point> last_left_;
  steady_clock::duration longest_idle_{};
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

struct waiter_clients {
  explicit waiter_clients(const std::string& url) {
    for (std::size_t i = 0; i < clients; ++i)
      all.push_back(std::make_unique<client>(url));
  }
  // Every waiter joined its client's queue (found the name held and waits).
  bool all_queued() const {
    return test::eventually(
        [this] {
          std::uint64_t queued = 0;
          for (const auto& c : all)
            queued += c->lock_metrics().waited;
          return queued == waiters;
        },
        queue_bound);
  }
  client& of(std::size_t waiter) { return *all[waiter % clients]; }
  std::vector<std::unique_ptr<client>> all;
};

void report(const char* what, steady_clock::time_point start, const hold_checker& checker) {
  std::cout << what << ": " << waiters << " waiters on " << clients << " clients held in "
            << seconds_since(start) << " s after the first release (at most "
            << checker.max_concurrent() << " at once; longest time nobody held it "
            << checker.longest_idle_ms() << " ms)\n";
}

TEST(ManyWaiters, AThousandWaitersOfAMutexEachHoldItOnceAndAlone) {
  redis_server server;
  client owner{server.url()};
  hold_checker checker{server.url(), 1};
  waiter_clients pool{server.url()};  // after the checker: its clients' handlers use it
  const std::string name = unique_key("m");
  lock_lease first = owner.get_lock(name).async_try_lock_for(0ms).get();
  ASSERT_TRUE(first);
  for (std::size_t i = 0; i < waiters; ++i) {
    pool.of(i).get_lock(name).async_acquire({.wait = waiter_wait}, checker.handler(i, true));
  }
  ASSERT_TRUE(pool.all_queued());
  const auto start = steady_clock::now();
  first.release();
  ASSERT_TRUE(checker.wait_all(all_done_bound)) << "not every waiter held the lock in time";
  report("mutex", start, checker);
  checker.expect_every_waiter_held_once();
  EXPECT_EQ(checker.max_concurrent(), 1u);
}

TEST(ManyWaiters, AThousandReadersAndWritersWaitBehindAWriterAndExcludeAsTheyShould) {
  redis_server server;
  client owner{server.url()};
  hold_checker checker{server.url(), waiters};
  waiter_clients pool{server.url()};
  const std::string name = unique_key("rw");
  lock_lease first = owner.get_read_write_lock(name).async_acquire({}).get();
  ASSERT_TRUE(first);
  constexpr std::size_t writer_every = 10;  // 100 writers among 900 readers
  for (std::size_t i = 0; i < waiters; ++i) {
    shared_mutex rw = pool.of(i).get_read_write_lock(name);
    if (i % writer_every == 0) {
      rw.async_acquire({.wait = waiter_wait}, checker.handler(i, true));
    } else {
      rw.async_acquire_shared({.wait = waiter_wait}, checker.handler(i, false));
    }
  }
  ASSERT_TRUE(pool.all_queued());
  const auto start = steady_clock::now();
  first.release();
  ASSERT_TRUE(checker.wait_all(all_done_bound)) << "not every waiter held the lock in time";
  report("shared_mutex", start, checker);
  checker.expect_every_waiter_held_once();
}

TEST(ManyWaiters, AThousandAcquirersOfThreePermitsEachHoldOneOnceAndNeverMoreThanThree) {
  redis_server server;
  constexpr std::size_t permits = 3;
  client owner{server.url()};
  hold_checker checker{server.url(), permits};
  waiter_clients pool{server.url()};
  const std::string name = unique_key("s");
  semaphore s = owner.get_semaphore(name, permits);
  std::vector<lock_lease> first;
  for (std::size_t i = 0; i < permits; ++i) {
    first.push_back(s.async_acquire({}).get());
    ASSERT_TRUE(first.back());
  }
  for (std::size_t i = 0; i < waiters; ++i) {
    pool.of(i)
        .get_semaphore(name, permits)
        .async_acquire({.wait = waiter_wait}, checker.handler(i, false));
  }
  ASSERT_TRUE(pool.all_queued());
  const auto start = steady_clock::now();
  for (auto& lease : first)
    lease.release();
  ASSERT_TRUE(checker.wait_all(all_done_bound)) << "not every waiter got a permit in time";
  report("semaphore", start, checker);
  checker.expect_every_waiter_held_once();
  EXPECT_LE(checker.max_concurrent(), permits);
  // Every permit comes back (the last releases may still be on their way).
  EXPECT_TRUE(test::eventually(
      [&] { return s.available_permits() == static_cast<std::int64_t>(permits); }));
}

TEST(ManyWaiters, AThousandLatchWaitersAllReturnOnOneZeroAndNoneBefore) {
  redis_server server;
  client counter{server.url()};
  std::atomic<bool> zero_sent{false};
  std::atomic<std::size_t> opened{0}, early{0}, failed{0}, returned{0};
  std::mutex m;
  std::condition_variable all_returned;
  waiter_clients pool{server.url()};  // after what its handlers use
  const std::string name = unique_key("latch");
  ASSERT_TRUE(counter.get_count_down_latch(name).try_set_count(1));
  for (std::size_t i = 0; i < waiters; ++i) {
    pool.of(i).get_count_down_latch(name).async_wait(waiter_wait,
                                                     [&](std::error_code ec, bool open) {
                                                       if (!zero_sent) ++early;
                                                       if (ec) ++failed;
                                                       if (open) ++opened;
                                                       {
                                                         std::lock_guard lock(m);
                                                         ++returned;
                                                       }
                                                       all_returned.notify_all();
                                                     });
  }
  // Every client listens on the latch's channel: its waiters have read a count of 1.
  const std::string channel = "redisson_countdownlatch__channel__{" + name + "}";
  ASSERT_TRUE(test::eventually(
      [&] {
        const reply r = counter.command({"PUBSUB", "NUMSUB", channel});
        return r.elements.size() == 2 && r.elements[1].integer == static_cast<int>(clients);
      },
      queue_bound));
  EXPECT_EQ(returned.load(), 0u);
  const auto start = steady_clock::now();
  zero_sent = true;
  EXPECT_EQ(counter.get_count_down_latch(name).count_down(), 0);
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(all_returned.wait_for(lock, all_done_bound, [&] { return returned == waiters; }));
  }
  std::cout << "latch: " << waiters << " waiters on " << clients << " clients returned in "
            << seconds_since(start) << " s after the count-down\n";
  EXPECT_EQ(opened.load(), waiters);
  EXPECT_EQ(early.load(), 0u);
  EXPECT_EQ(failed.load(), 0u);
}

}  // namespace
}  // namespace dlock
