// dlock/mutex.hpp
//
// dlock::mutex: a reentrant, timed lock that lives in Redis, shared by every process that uses the
// same name. Data and scripts follow Redisson's RLock, so Java services using Redisson and C++
// services using dlock exclude each other on the same lock.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   dlock::mutex m = c.get_lock("orders:42");   // a cheap handle; copies share the lock
//   {
//     std::unique_lock guard{m};                // lock(): waits, watchdog lease
//     ... work; guard.mutex()->fencing_token() orders writes to other systems ...
//   }                                           // unlock()
//
// Ownership is per thread, as std::recursive_timed_mutex: the thread that locked must unlock,
// and may lock again (each lock() needs its unlock()).
//
// Leases. lock() and try_lock_for(wait) take a *watchdog* lease (lock_options::watchdog_timeout,
// 30 s by default) that the client renews every third of it while the hold lasts, so a live
// holder keeps the lock and a crashed one loses it within the lease. lock(lease_time) and
// try_lock_for(wait, lease_time) take an explicit lease that is never renewed: the lock expires
// after it even if the holder still works. A re-entry keeps the lease kind of the first hold.
//
// Losing a hold. If renewal finds the lock gone or taken, or cannot confirm it before the lease
// runs out (measured on this process's steady clock, with a safety margin), or an explicit lease
// runs out before unlock(), the hold is lost: stop_token() of the hold is stopped,
// is_held_by_current_thread() turns false, and unlock() reports errc::lock_lost.
//
// Waiting. A waiter subscribes to the lock's unlock channel and sleeps until an unlock message or
// the holder's lease end, then retries; it never polls. One subscription per lock per client serves
// all its waiting threads, and one unlock message wakes one of them.
//
// Fencing. Every first acquisition (not a re-entry) takes a token from a per-lock counter in the
// same script; tokens of one name strictly increase across all clients. Pass the token along with
// each write to the protected resource and have it reject tokens lower than the highest it has
// seen: that stops a holder whose lease ran out from overwriting a newer holder's work.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/lock_lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/wait_time.hpp"

namespace dlock {

// How an asynchronous acquisition waits; see mutex::async_acquire().
struct acquire_options {
  // How long to wait for the lock: std::nullopt waits until acquired; zero or less makes one
  // attempt.
  std::optional<std::chrono::milliseconds> wait = std::nullopt;
  // An explicit lease, never renewed; std::nullopt takes a watchdog lease (renewed while held).
  std::optional<std::chrono::milliseconds> lease = std::nullopt;
  // Stopping it gives the acquisition up: it completes with errc::cancelled (a hold that arrives
  // meanwhile is released at once).
  std::stop_token cancel = {};
};

// Completion of an asynchronous acquisition: `ec` set on failure (as the errors of lock(), plus
// errc::cancelled); otherwise `lease` holds the lock, or is empty when the wait ran out.
using lease_handler = std::function<void(std::error_code ec, lock_lease lease)>;
// The same, with the failure's detail: the server's or the system's own text (empty on success),
// as dlock::error::detail() gives it on the throwing paths.
using detailed_lease_handler =
    std::function<void(std::error_code ec, const std::string& detail, lock_lease lease)>;

class mutex {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: client::get_lock() makes mutexes.
  class impl;
  explicit mutex(std::shared_ptr<impl> state) noexcept : state_(std::move(state)) {}

  // mutex::lock()
  // Waits until this thread holds the lock, with a watchdog lease; re-enters if it already does.
  // Throws dlock::error when Redis cannot be reached or fails (see client::command()), and
  // errc::would_deadlock from one of this client's callbacks.
  void lock();
  // mutex::lock(lease)
  // As lock(), with an explicit lease that is never renewed. Throws errc::invalid_argument for a
  // lease that is not positive or over max_lock_lease (before any I/O).
  void lock(lease_time lease);
  // mutex::lock(ec): as lock(), reporting failures in `ec` instead of throwing.
  void lock(std::error_code& ec) noexcept;

  // mutex::try_lock()
  // One attempt, no waiting. Returns whether this thread now holds the lock (watchdog lease).
  [[nodiscard]] bool try_lock();
  [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;

  // mutex::try_lock_for(wait), try_lock_for(wait, lease), try_lock_until(deadline)
  // Waits up to `wait` (or until `deadline`, on any clock) for the lock. Returns false when the
  // time ran out. A zero or past wait is one attempt, like try_lock(). Waits beyond a century
  // (duration::max()) wait until acquired. An attempt already sent when the time runs out is
  // still waited for (up to request_timeout): on a stalled server the call can return late, and
  // then with the lock (docs/locks.md, "Waits").
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_for(detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  lease_time lease) {
    const auto explicit_lease = lease.value();
    return acquire_for(detail::steady_wait(wait), &explicit_lease);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  std::error_code& ec) noexcept {
    return acquire_for(detail::steady_wait(wait), nullptr, ec);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_for(detail::steady_wait_until(deadline), nullptr);
  }

  // Milestone 1 forms: two durations are easy to swap; use lease_time.
  template <typename Rep, typename Period, typename LRep, typename LPeriod>
  [[deprecated("use try_lock_for(wait, dlock::lease_time(lease))")]] [[nodiscard]] bool
  try_lock_for(const std::chrono::duration<Rep, Period>& wait,
               const std::chrono::duration<LRep, LPeriod>& lease) {
    return try_lock_for(wait, lease_time(lease));
  }
  [[deprecated("use lock(dlock::lease_time(lease))")]] void lock(std::chrono::milliseconds lease) {
    lock(lease_time(lease));
  }

  // mutex::async_acquire(options, done), async_lock(done), async_try_lock_for(wait, done)
  // Acquire without blocking the caller. `done` runs exactly once, on the client's I/O thread (it
  // must not block), with a lock_lease that any thread may release. Waiting is the same as for
  // lock(): pub/sub wake-ups, one local waiter per unlock message, first come first served among
  // this client's waiters. Throws errc::invalid_argument for a lease or wait that is not valid
  // (before any I/O); when the client is already destroyed `done` gets errc::client_stopped on
  // the calling thread. If the client is destroyed while waiting, `done` gets client_stopped.
  // The future forms deliver the lease (empty: the wait ran out) or throw dlock::error from get(),
  // whose what() and detail() carry the server's or the system's message.
  void async_acquire(const acquire_options& options, lease_handler done);
  void async_acquire(const acquire_options& options, detailed_lease_handler done);
  std::future<lock_lease> async_acquire(const acquire_options& options);
  void async_lock(lease_handler done) { async_acquire({}, std::move(done)); }
  std::future<lock_lease> async_lock() { return async_acquire({}); }
  void async_try_lock_for(std::chrono::milliseconds wait, lease_handler done) {
    async_acquire({.wait = wait}, std::move(done));
  }
  std::future<lock_lease> async_try_lock_for(std::chrono::milliseconds wait) {
    return async_acquire({.wait = wait});
  }

  // mutex::unlock()
  // Releases one hold of this thread. Never throws. A thread that does not hold the lock changes
  // nothing on the server. The release is queued without waiting for its reply; commands issued
  // later on the same client run after it, and the client flushes pending releases when it is
  // destroyed. A release whose connection dies is retried idempotently.
  void unlock() noexcept { (void)unlock_checked(); }
  // mutex::unlock_checked()
  // As unlock(), and says what happened: {} released one hold; errc::not_owner this thread held
  // nothing; errc::lock_lost the hold had been lost before (it is forgotten now).
  std::error_code unlock_checked() noexcept;

  // mutex::is_locked(): whether anyone holds the lock now (asks Redis; throws dlock::error).
  bool is_locked() const;
  // mutex::is_held_by_current_thread(): this thread holds it and has not lost it (no I/O).
  bool is_held_by_current_thread() const noexcept;
  // mutex::hold_count(): how many times this thread holds it (no I/O; 0 if not, or lost).
  std::uint64_t hold_count() const noexcept;
  // mutex::remaining_lease(): the lock's remaining lease as Redis sees it; std::nullopt when
  // nobody holds it, milliseconds::max() when it has no expiry (asks Redis; throws dlock::error).
  std::optional<std::chrono::milliseconds> remaining_lease() const;
  [[deprecated("use remaining_lease()")]] std::chrono::milliseconds remaining_ttl() const;
  // mutex::force_unlock(): deletes the lock whoever holds it and wakes its waiters. Returns
  // whether there was a lock. Throws dlock::error on I/O failure, and errc::wrong_type, deleting
  // nothing, for a key that is not a reentrant lock (a string, a list, a hash of other fields).
  bool force_unlock();
  // mutex::fencing_token(): the token of this thread's current hold; 0 when it holds none.
  std::uint64_t fencing_token() const noexcept;
  // mutex::stop_token(): stopped when this thread's current hold is lost. A token that can never
  // stop (stop_possible() == false) when this thread holds nothing.
  std::stop_token stop_token() const noexcept;

  // mutex::status(): who holds the lock, its TTL, its last fencing token and how many clients
  // listen for its release (asks Redis; throws dlock::error, errc::wrong_type when the key holds
  // something other than a reentrant lock).
  lock_status status() const;
  // mutex::owner_id(): the hash field this thread's holds use, "<client id>:<thread key>" (no I/O).
  std::string owner_id() const;

  const std::string& name() const noexcept;

 private:
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease);
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease,
                   std::error_code& ec) noexcept;

  std::shared_ptr<impl> state_;
};

}  // namespace dlock
