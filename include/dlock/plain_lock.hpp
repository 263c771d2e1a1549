// dlock/plain_lock.hpp
//
// dlock::plain_lock: a timed lock that is one string key in Redis, `SET name value NX PX lease`,
// released by compare-and-delete: the protocol of redis-py's Lock, Go's redsync and node-redlock,
// so programs using those and programs using dlock exclude each other on the same key.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   dlock::plain_lock p = c.get_plain_lock("jobs:nightly");   // a cheap handle
//   if (p.try_lock_for(std::chrono::seconds(5))) {
//     ... work; p.fencing_token() orders writes to other systems ...
//     p.unlock();
//   }
//
// Not reentrant. Ownership is per thread, as std::timed_mutex: the thread that locked must
// unlock. A thread that locks a plain lock it already holds gets errc::would_deadlock at once
// (nothing is sent), where std::timed_mutex would hang; use dlock::mutex for a lock that may be
// taken again by its holder.
//
// Data in Redis. The key is the lock's name; its value is "<client id>:<owner key>:<fencing
// token>" for a dlock holder, anything for a foreign one. Releases by dlock are announced with "0"
// on "dlock:plain_unlock:{name}"; the fencing counter is "dlock:fence:{name}", as for dlock::mutex.
//
// Leases, losses, fencing: as dlock::mutex (see dlock/mutex.hpp). lock() and try_lock_for(wait)
// take a watchdog lease renewed every third of it (by a compare-and-PEXPIRE script, batched with
// the client's other renewals); lock(lease_time) and try_lock_for(wait, lease_time) an explicit
// lease, never renewed. A lost hold stops stop_token() and reaches lock_options::on_lock_lost.
// Every acquisition takes a fencing token; tokens of one name strictly increase, across plain
// locks and dlock::mutex alike.
//
// Waiting. A waiter sleeps until a dlock holder's release message, or its lease end. A foreign
// holder announces nothing: while the holder is not a dlock client, waiters re-check after 10 ms,
// doubling to every 100 ms, so they notice its release within about 100 ms plus a round trip
// (docs/locks.md, "Plain lock").
//
// Thread-safety: a handle may be copied and used from any number of threads; copies share the
// lock. Blocking calls throw errc::would_deadlock on the client's own I/O thread (its callbacks).
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/lock_lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/mutex.hpp"
#include "dlock/wait_time.hpp"

namespace dlock {

class plain_lock {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: client::get_plain_lock() makes plain locks.
  class impl;
  explicit plain_lock(std::shared_ptr<impl> state) noexcept : state_(std::move(state)) {}

  // plain_lock::lock()
  // Waits until this thread holds the lock, with a watchdog lease. Throws errc::would_deadlock
  // when this thread holds it already (nothing is sent) or from one of this client's callbacks,
  // and dlock::error when Redis cannot be reached or fails (see client::command()).
  void lock();
  // plain_lock::lock(lease)
  // As lock(), with an explicit lease that is never renewed. Throws errc::invalid_argument for a
  // lease that is not positive or over max_lock_lease (before any I/O).
  void lock(lease_time lease);
  // plain_lock::lock(ec): as lock(), reporting failures in `ec` instead of throwing.
  void lock(std::error_code& ec) noexcept;

  // plain_lock::try_lock()
  // One attempt, no waiting. Returns whether this thread now holds the lock (watchdog lease).
  // Throws as lock().
  [[nodiscard]] bool try_lock();
  [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;

  // plain_lock::try_lock_for(wait), try_lock_for(wait, lease), try_lock_until(deadline)
  // Waits up to `wait` (or until `deadline`, on any clock) for the lock. Returns false when the
  // time ran out. A zero or past wait is one attempt, like try_lock(). Waits beyond a century
  // (duration::max()) wait until acquired. Throws as lock().
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

  // plain_lock::async_acquire(options, done), async_lock(done), async_try_lock_for(wait, done)
  // Acquire without blocking the caller, as mutex::async_acquire(): `done` runs exactly once, on
  // the client's I/O thread, with a lock_lease that any thread may release (empty: the wait ran
  // out). Each lease is its own owner, so two leases of one name exclude each other. Throws
  // errc::invalid_argument for a lease or wait that is not valid (before any I/O).
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

  // plain_lock::unlock()
  // Releases this thread's hold. Never throws. Deletes the key only while it still holds this
  // hold's value, so a late release never frees someone else's lock. Queued without waiting for
  // its reply and retried idempotently, as mutex::unlock().
  void unlock() noexcept { (void)unlock_checked(); }
  // plain_lock::unlock_checked()
  // As unlock(), and says what happened: {} released; errc::not_owner this thread held nothing;
  // errc::lock_lost the hold had been lost before (it is forgotten now).
  std::error_code unlock_checked() noexcept;

  // plain_lock::is_locked(): whether anyone holds the key now (asks Redis; throws dlock::error).
  bool is_locked() const;
  // plain_lock::is_held_by_current_thread(): this thread holds it and has not lost it (no I/O).
  bool is_held_by_current_thread() const noexcept;
  // plain_lock::remaining_lease(): the key's remaining TTL as Redis sees it; std::nullopt when
  // nobody holds it, milliseconds::max() when it has no expiry (asks Redis; throws dlock::error).
  std::optional<std::chrono::milliseconds> remaining_lease() const;
  // plain_lock::force_unlock(): deletes the key whoever holds it (a foreign client too) and wakes
  // dlock's waiters. Returns whether there was a lock. Throws dlock::error on I/O failure, and
  // errc::wrong_type, deleting nothing, when the key is not a string.
  bool force_unlock();
  // plain_lock::fencing_token(): the token of this thread's current hold; 0 when it holds none.
  std::uint64_t fencing_token() const noexcept;
  // plain_lock::stop_token(): stopped when this thread's current hold is lost. A token that can
  // never stop when this thread holds nothing.
  std::stop_token stop_token() const noexcept;

  // plain_lock::status(): the holder's value (holders[0].owner, count 1), the TTL, the last
  // fencing token and how many clients listen for releases (asks Redis; throws dlock::error,
  // errc::wrong_type when the key is not a string).
  lock_status status() const;
  // plain_lock::owner_id(): "<client id>:<thread key>", the start of this thread's values (no I/O).
  std::string owner_id() const;

  const std::string& name() const noexcept;

 private:
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease);
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease,
                   std::error_code& ec) noexcept;

  std::shared_ptr<impl> state_;
};

}  // namespace dlock
