// dlock/count_down_latch.hpp
//
// dlock::count_down_latch: a count that lives in Redis; waiters return once it has reached zero.
// Data, scripts and messages follow Redisson's RCountDownLatch, so Java services using Redisson
// and C++ services using dlock count down and wait on the same latch.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   dlock::count_down_latch boot = c.get_count_down_latch("boot");  // a cheap handle
//   boot.try_set_count(3);                  // once, by whoever starts first
//   ... each of 3 services, when ready:  boot.count_down();
//   ... anyone:  if (boot.wait_for(std::chrono::seconds(30))) { all 3 are ready }
//
// Data in Redis. The key is the latch's name and holds the count as a decimal string, without a
// TTL. count_down() decrements it; at zero the key is deleted and "0" is published on
// "redisson_countdownlatch__channel__{name}" (a name containing '}' uses the fallback form of
// docs/locks.md). A latch that does not exist is open: its count reads 0 and waiters pass.
//
// Waiting. A waiter reads the count; while it is above zero the waiter subscribes to the latch's
// channel (sharded pub/sub on a Redis Cluster) and reads the count again after every message and
// after every (re)subscription, so a message lost while disconnected is made up for, and a new
// count set right after zero does not let anyone through (the waiter then waits for the next
// zero, as Redisson's do). It never polls Redis. async_wait() does the same without a thread.
//
// Errors. Calls throw dlock::error: errc::wrong_type, changing nothing, when the key holds
// something else (a lock's hash, a string that is not a whole number); errc::invalid_argument for
// a negative count; the errors of client::command() when Redis cannot be reached or fails.
// Blocking calls throw errc::would_deadlock on the client's own I/O thread (its callbacks).
//
// Thread-safety: a handle may be copied and used from any number of threads; copies share the
// latch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include "dlock/wait_time.hpp"

namespace dlock {

// A snapshot of a latch (count_down_latch::status()).
struct latch_status {
  bool exists = false;     // whether the key exists (a latch that does not is open)
  std::int64_t count = 0;  // the count; 0 when it does not exist
  // Connections subscribed to the latch's channel: waiting clients (one per dlock client however
  // many of its threads wait; Redisson: one per JVM), read just after the count.
  std::uint64_t subscribers = 0;
};

class count_down_latch {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: client::get_count_down_latch() makes latches.
  class impl;
  explicit count_down_latch(std::shared_ptr<impl> state) noexcept : state_(std::move(state)) {}

  // count_down_latch::try_set_count()
  // Sets the count to `count` when the latch does not exist, and announces the new count
  // (Redisson's trySetCount). Returns whether it was set: false when a latch exists (its count
  // is left as it is). Throws errc::invalid_argument for a negative count (before any I/O). A
  // count of 0 creates a latch that is open and stays until count_down() or delete_latch().
  bool try_set_count(std::int64_t count);

  // count_down_latch::count_down()
  // Decrements the count. When it reaches zero the latch is deleted and its waiters are woken.
  // Returns the count left: 0 when this call opened the latch, -1 when there was no latch (it
  // stays missing, as with Redisson) or its count was 0 already (an open latch made by
  // try_set_count(0): this deletes it, as with Redisson; a stored negative count reads so too).
  // Never retried by dlock: a connection lost with the call in flight throws errc::connection_lost,
  // and it may have counted.
  std::int64_t count_down();

  // count_down_latch::count(): the count now; 0 when the latch does not exist.
  std::int64_t count() const;

  // count_down_latch::wait()
  // Returns once the count is zero (or the latch does not exist). Waits for ever otherwise.
  // Throws errc::client_stopped within about a second when the client is destroyed meanwhile.
  void wait() const;
  // count_down_latch::wait_for(d), wait_until(t)
  // As wait(), up to `d` (or until `t`, on any clock). Returns false when the time ran out with
  // the count still above zero. A zero or past wait reads the count once.
  template <typename Rep, typename Period>
  [[nodiscard]] bool wait_for(const std::chrono::duration<Rep, Period>& d) const {
    return wait_steady(detail::steady_wait(d));
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool wait_until(const std::chrono::time_point<Clock, Duration>& t) const {
    return wait_steady(detail::steady_wait_until(t));
  }

  // count_down_latch::async_wait(wait, done), async_wait(wait)
  // As wait_for(*wait) (std::nullopt: wait()) without blocking the caller. `done(ec, opened)`
  // runs exactly once, on the client's I/O thread (it must not block or throw): opened is false
  // when the wait ran out; ec holds the errors wait_for() throws. It runs on the calling thread
  // when the wait fails before anything was queued (a destroyed client). A client destroyed
  // during the wait completes it with errc::client_stopped within about a second (its
  // destructor waits for that). The future form rethrows those errors from get().
  using wait_handler = std::function<void(std::error_code ec, bool opened)>;
  void async_wait(std::optional<std::chrono::milliseconds> wait, wait_handler done) const;
  std::future<bool> async_wait(std::optional<std::chrono::milliseconds> wait = std::nullopt) const;

  // count_down_latch::delete_latch()
  // Deletes the latch whatever its count and publishes "1" (Redisson's delete): dlock's waiters
  // re-read and pass; Redisson's waiters take "1" as a new count and keep waiting. Returns
  // whether there was a latch.
  bool delete_latch();

  // count_down_latch::status(): the count and the waiting clients (asks Redis).
  latch_status status() const;

  const std::string& name() const noexcept;

 private:
  bool wait_steady(steady_clock::duration wait) const;

  std::shared_ptr<impl> state_;
};

}  // namespace dlock
