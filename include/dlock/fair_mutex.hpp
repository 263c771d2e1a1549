// dlock/fair_mutex.hpp
//
// dlock::fair_mutex: a reentrant, timed lock in Redis whose waiters, across every client and
// thread, get it in the order they came (first come, first served). Data and scripts follow
// Redisson's RFairLock, so Java services using Redisson and C++ services using dlock share one
// line on the same lock.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   dlock::fair_mutex f = c.get_fair_lock("payouts");  // a cheap handle; copies share the lock
//   {
//     std::lock_guard guard{f};   // waits its turn, watchdog lease
//     ... work; f.fencing_token() orders writes to other systems ...
//   }                             // unlock(): the next in line gets the lock
//
// Everything dlock::mutex says holds here too (per-thread ownership and re-entry, watchdog and
// explicit leases, loss notification by stop_token(), fencing tokens from the same per-name
// counter, asynchronous acquisition with lock_lease); what differs is how waiters are served:
//
// The line. A waiter whose attempt finds the lock taken joins the lock's waiting list on the
// server (redisson_lock_queue:{name}), unless it asked for one attempt only (try_lock(), or a
// zero wait). A free lock goes only to the head of the list: the holder's last unlock wakes the
// head (on the head's own channel, redisson_lock__channel:{name}:<its field>), and nobody can
// take the lock from it meanwhile. A waiter that gives up (its wait runs out, it is cancelled,
// its client is destroyed) leaves the list, waking the next head if it was the head.
//
// Dead waiters. A waiter whose process died stays in the list until its deadline passes: the
// holder's lease end as the waiter last saw it, plus W (lock_options::fair_wait_timeout, 5
// minutes by default, as Redisson's fairLockWaitTimeout). Until then those behind it wait, even
// when the lock comes free sooner: up to a whole lease (30 s under the watchdog) plus W after
// the release. That is the price of the order. Live dlock waiters refresh their deadlines (every
// W/3 at least) and are never dropped. Java and C++ clients sharing a fair lock must use the same
// W.
//
// A holder that locks again at once goes to the back of the line, so threads that contend
// continuously take turns. Costs: each hand-over touches every waiter's deadline (O(waiters)
// on the server, as in Redisson); each waiter has its own subscription.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/mutex.hpp"

namespace dlock {

class fair_mutex {
 public:
  // For dlock's internals: client::get_fair_lock() makes fair mutexes.
  explicit fair_mutex(mutex m) noexcept : m_(std::move(m)) {}

  // fair_mutex::lock(), lock(lease), lock(ec)
  // Waits its turn until this thread holds the lock (watchdog lease, or an explicit one that is
  // never renewed); re-enters at once if it already does. Errors as mutex::lock(); also
  // errc::wrong_type when the name holds another kind of lock (a read-write lock, or a string).
  void lock() { m_.lock(); }
  void lock(lease_time lease) { m_.lock(lease); }
  void lock(std::error_code& ec) noexcept { m_.lock(ec); }

  // fair_mutex::try_lock()
  // One attempt, no waiting, and no place in the line: succeeds only when the lock is free and
  // nobody waits for it (or this thread is the head, or re-enters).
  [[nodiscard]] bool try_lock() { return m_.try_lock(); }
  [[nodiscard]] bool try_lock(std::error_code& ec) noexcept { return m_.try_lock(ec); }

  // fair_mutex::try_lock_for(wait[, lease]), try_lock_until(deadline)
  // Waits in line up to `wait` (or until `deadline`); when the time runs out the thread leaves
  // the line and false is returned. A zero or past wait is try_lock().
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return m_.try_lock_for(wait);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  lease_time lease) {
    return m_.try_lock_for(wait, lease);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  std::error_code& ec) noexcept {
    return m_.try_lock_for(wait, ec);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return m_.try_lock_until(deadline);
  }

  // fair_mutex::async_acquire(options, done), async_lock(done), async_try_lock_for(wait, done)
  // As mutex's: each acquisition is its own owner with its own place in the line.
  void async_acquire(const acquire_options& options, lease_handler done) {
    m_.async_acquire(options, std::move(done));
  }
  void async_acquire(const acquire_options& options, detailed_lease_handler done) {
    m_.async_acquire(options, std::move(done));
  }
  std::future<lock_lease> async_acquire(const acquire_options& options) {
    return m_.async_acquire(options);
  }
  void async_lock(lease_handler done) { m_.async_lock(std::move(done)); }
  std::future<lock_lease> async_lock() { return m_.async_lock(); }
  void async_try_lock_for(std::chrono::milliseconds wait, lease_handler done) {
    m_.async_try_lock_for(wait, std::move(done));
  }
  std::future<lock_lease> async_try_lock_for(std::chrono::milliseconds wait) {
    return m_.async_try_lock_for(wait);
  }

  // fair_mutex::unlock(), unlock_checked(): as mutex's; the last hold's release wakes the head.
  void unlock() noexcept { m_.unlock(); }
  std::error_code unlock_checked() noexcept { return m_.unlock_checked(); }

  bool is_locked() const { return m_.is_locked(); }
  bool is_held_by_current_thread() const noexcept { return m_.is_held_by_current_thread(); }
  std::uint64_t hold_count() const noexcept { return m_.hold_count(); }
  std::optional<std::chrono::milliseconds> remaining_lease() const { return m_.remaining_lease(); }
  // fair_mutex::force_unlock(): deletes the lock whoever holds it and wakes the head of the line
  // (the line stays). Returns whether there was a lock; errc::wrong_type, deleting nothing, for a
  // key that is not a lock.
  bool force_unlock() { return m_.force_unlock(); }
  std::uint64_t fencing_token() const noexcept { return m_.fencing_token(); }
  std::stop_token stop_token() const noexcept { return m_.stop_token(); }
  // fair_mutex::status(): holder, TTL, last fencing token, and the line (lock_status::queue:
  // each waiter's field and the time left before it would be dropped).
  lock_status status() const { return m_.status(); }
  std::string owner_id() const { return m_.owner_id(); }
  const std::string& name() const noexcept { return m_.name(); }

 private:
  mutex m_;
};

}  // namespace dlock
