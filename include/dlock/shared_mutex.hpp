// dlock/shared_mutex.hpp
//
// dlock::shared_mutex: a read-write lock that lives in Redis: many readers or one writer, shared
// by every process that uses the same name. Data, channel and messages follow Redisson's
// RReadWriteLock, so Java services using Redisson's read and write locks and C++ services using
// dlock exclude each other on the same name.
//
//   dlock::shared_mutex rw = c.get_read_write_lock("catalog");
//   { std::shared_lock r{rw}; ... read ... }    // lock_shared() / unlock_shared()
//   { std::unique_lock w{rw}; ... write ... }   // lock() / unlock(); w.mutex()->fencing_token()
//
// It meets std's SharedTimedLockable and TimedLockable requirements.
//
// Ownership is per thread and per side, as dlock::mutex: the thread that locked must unlock, and
// may lock the same side again (each lock needs its unlock). Leases, the watchdog, losing a hold
// and waiting are as dlock::mutex's (see dlock/mutex.hpp), for read and write holds alike: each
// read hold has its own lease on the server (Redisson's per-hold timeout keys), renewed by the
// watchdog, so a crashed reader lets writers in within its lease.
//
// Downgrade: a thread that holds the write lock may take read holds (lock_shared() succeeds at
// once); when it then unlocks the write lock, it keeps reading while other readers may join.
// Upgrade is refused: a thread that holds only read holds gets errc::would_deadlock from lock()
// and its try forms, at once (it would wait for itself forever, as Redisson's does).
//
// Writer preference. A dlock writer that waits records an intent on the server; new dlock
// readers (not re-entries, not the writer's own read holds) wait while an intent is there, so a
// stream of overlapping readers cannot starve a writer: it gets the lock once the readers already
// in have left. A waiting writer renews its intent every 3 s; one that crashed holds new readers
// back for at most 10 s. Readers may wait behind a continuous stream of writers. Redisson's
// readers ignore intents (they are admitted whenever the lock is in read mode).
//
// Fencing. Every first write hold takes a token from the name's counter (the same counter as
// dlock::mutex's); read holds take none (there is nothing to fence between readers).
//
// Kinds. One name is one kind of lock: a shared_mutex on a name that holds a dlock::mutex (or a
// Redisson RLock), or a dlock::mutex on a read-write lock, fails with errc::wrong_type naming
// both.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <shared_mutex>  // std::shared_lock, for callers
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/lock_lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/mutex.hpp"  // acquire_options, lease_handler
#include "dlock/wait_time.hpp"

namespace dlock {

class shared_mutex {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: client::get_read_write_lock() makes them.
  class impl;
  explicit shared_mutex(std::shared_ptr<impl> state) noexcept : state_(std::move(state)) {}

  // --- the write lock (exclusive) ---

  // shared_mutex::lock()
  // Waits until this thread holds the write lock, with a watchdog lease; re-enters if it already
  // does. Throws dlock::error when Redis cannot be reached or fails, errc::would_deadlock when
  // this thread holds only read holds (no upgrade) or from one of this client's callbacks, and
  // errc::wrong_type when the name holds another kind of lock.
  void lock();
  // As lock(), with an explicit lease that is never renewed (errc::invalid_argument for a lease
  // that is not positive or over max_lock_lease).
  void lock(lease_time lease);
  void lock(std::error_code& ec) noexcept;
  // One attempt, no waiting. Returns whether this thread now holds the write lock.
  [[nodiscard]] bool try_lock();
  [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;
  // Waits up to `wait` (or until `deadline`, on any clock); false when the time ran out. A zero
  // or past wait is one attempt. Waits beyond a century wait until acquired.
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_for(false, detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  lease_time lease) {
    const auto explicit_lease = lease.value();
    return acquire_for(false, detail::steady_wait(wait), &explicit_lease);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  std::error_code& ec) noexcept {
    return acquire_for(false, detail::steady_wait(wait), nullptr, ec);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_for(false, detail::steady_wait_until(deadline), nullptr);
  }
  // Releases one write hold of this thread. Never throws; see mutex::unlock().
  void unlock() noexcept { (void)unlock_checked(); }
  // As unlock(), and says what happened: {} released one hold; errc::not_owner this thread held
  // no write hold; errc::lock_lost the hold had been lost before.
  std::error_code unlock_checked() noexcept;
  // This thread's write holds (no I/O; 0 if none, or lost).
  std::uint64_t hold_count() const noexcept;
  bool is_held_by_current_thread() const noexcept { return hold_count() > 0; }
  // The fencing token of this thread's current write hold; 0 when it holds none.
  std::uint64_t fencing_token() const noexcept;
  // Stopped when this thread's current write hold is lost.
  std::stop_token stop_token() const noexcept;

  // shared_mutex::async_acquire(options, done), async_acquire(options)
  // Take the write lock without blocking the caller, for a new lock_lease that any thread may
  // release; as mutex::async_acquire() in every other respect (the holder is the lease, not a
  // thread, so this is never an upgrade).
  void async_acquire(const acquire_options& options, lease_handler done);
  std::future<lock_lease> async_acquire(const acquire_options& options);

  // --- read holds (shared) ---

  // shared_mutex::lock_shared()
  // Waits until this thread holds a read hold (watchdog lease); a thread that holds read holds
  // or the write lock gets another at once. Throws as lock() does (but never would_deadlock for
  // an upgrade).
  void lock_shared();
  void lock_shared(lease_time lease);
  void lock_shared(std::error_code& ec) noexcept;
  [[nodiscard]] bool try_lock_shared();
  [[nodiscard]] bool try_lock_shared(std::error_code& ec) noexcept;
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_for(true, detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait,
                                         lease_time lease) {
    const auto explicit_lease = lease.value();
    return acquire_for(true, detail::steady_wait(wait), &explicit_lease);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait,
                                         std::error_code& ec) noexcept {
    return acquire_for(true, detail::steady_wait(wait), nullptr, ec);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_lock_shared_until(
      const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_for(true, detail::steady_wait_until(deadline), nullptr);
  }
  // Releases one read hold of this thread. Never throws.
  void unlock_shared() noexcept { (void)unlock_shared_checked(); }
  std::error_code unlock_shared_checked() noexcept;
  // shared_mutex::async_acquire_shared(options, done), async_acquire_shared(options)
  // A read hold for a new lock_lease, as async_acquire(). The lease's fencing_token() is the
  // read hold's id, not a fencing token (read holds take none).
  void async_acquire_shared(const acquire_options& options, lease_handler done);
  std::future<lock_lease> async_acquire_shared(const acquire_options& options);

  // This thread's read holds (no I/O; 0 if none, or lost).
  std::uint64_t shared_hold_count() const noexcept;
  // Stopped when this thread's current read holds are lost.
  std::stop_token shared_stop_token() const noexcept;

  // --- the lock as a whole ---

  // Whether anyone holds it now, in either mode (asks Redis; throws dlock::error).
  bool is_locked() const;
  // The lock's remaining lease as Redis sees it (the longest of its holds'); std::nullopt when
  // nobody holds it (asks Redis).
  std::optional<std::chrono::milliseconds> remaining_lease() const;
  // Deletes the lock whoever holds it (readers and writer) and wakes every waiter. Returns whether
  // there was one; errc::wrong_type, deleting nothing, for a key that is not a read-write lock.
  bool force_unlock();
  // The mode ("read"/"write"), the holders (readers "<client id>:<thread key>", the writer the
  // same + ":write"), the TTL, the last fencing token, the dlock writers waiting and the clients
  // listening (asks Redis; errc::wrong_type for a key that is not a read-write lock).
  lock_status status() const;
  // The hash field of this thread's read holds, "<client id>:<thread key>" (no I/O).
  std::string owner_id() const;
  const std::string& name() const noexcept;

 private:
  bool acquire_for(bool shared, steady_clock::duration wait,
                   const std::chrono::milliseconds* lease);
  bool acquire_for(bool shared, steady_clock::duration wait, const std::chrono::milliseconds* lease,
                   std::error_code& ec) noexcept;

  std::shared_ptr<impl> state_;
};

}  // namespace dlock
