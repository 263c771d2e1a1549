// dlock/semaphore.hpp
//
// dlock::semaphore: a counting semaphore that lives in Redis, shared by every process that uses
// the same name: at most N permits are held at once. Data and messages follow Redisson's
// RPermitExpirableSemaphore, so Java services using Redisson and C++ services using dlock share
// the permits of one name.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   dlock::semaphore s = c.get_semaphore("exports", 3);   // at most 3 permits; sends nothing
//   {
//     std::lock_guard guard{s};                           // acquire() ... release()
//     ... work: at most 3 threads in all processes are here at once ...
//   }
//   dlock::permit p = s.acquire_permit();                 // a permit owned by an object
//   hand_to_another_process(p.id());                      // 32 hex digits; that process calls
//                                                         // s.release(id) (p becomes lost)
//
// Two ways to hold a permit:
//   * Thread-owned, as std::counting_semaphore used as a lock guard: acquire(), try_acquire*()
//     and release() on the same thread. A thread holds at most one permit of a semaphore this way:
//     a second acquire() while it holds one throws errc::would_deadlock at once (nothing is sent).
//     The aliases lock()/try_lock()/unlock() make a semaphore usable with std::lock_guard and
//     std::unique_lock.
//   * Object-owned: acquire_permit() and friends return a dlock::permit that any thread may move
//     and release (each permit is its own owner, so one thread may hold several). Its id() can be
//     released by id from any thread or process with release(id), as Redisson's release(id).
//
// The count. get_semaphore(name, n) makes a handle whose first acquisition (or count operation)
// creates the semaphore with n permits when it does not exist. A semaphore that exists keeps its
// count: a different n is ignored (status() shows the real total). try_set_permits(),
// add_permits() and available_permits() read or change the count as Redisson's trySetPermits(),
// addPermits() and availablePermits().
//
// Leases. Every permit has a lease: acquire() and the other forms without a lease take a watchdog
// lease (lock_options::watchdog_timeout) renewed every third of it while the holder lives, so a
// crashed holder's permit comes back within the lease; the forms with a lease_time take an
// explicit lease, never renewed (the permit comes back when it runs out even if the holder still
// works). A permit whose renewal finds it gone (released by id elsewhere, given back by
// force_release(), or its lease ran out) is lost: the holder's stop_token() stops, on_lock_lost
// hears it, and its release reports errc::lock_lost. Expired permits are given back lazily, by
// the next script that touches the semaphore (any acquisition, release or count operation).
//
// Waiting. A waiter subscribes to the semaphore's channel and sleeps until a message or the
// earliest permit's lease end, then retries; it never polls. A message carries the available
// count n and wakes up to n of this client's waiters.
//
// No fencing tokens: a semaphore excludes nobody in particular, so permits take none.
//
// Data in Redis (Redisson's names): the string `name` counts the available permits (no TTL);
// the sorted set "{name}:timeout" holds each taken permit's 16 id bytes scored by its expiry in
// epoch ms (server time); "redisson_sc:{name}" hears the new count when permits come back.
//
// Thread-safety: a handle may be copied and used from any number of threads; copies share the
// semaphore. Blocking calls throw errc::would_deadlock on the client's own I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/lock_lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/mutex.hpp"
#include "dlock/wait_time.hpp"

namespace dlock {

// dlock::permit: one permit of a dlock::semaphore owned by an object, not a thread. Move it into
// another thread or a callback and release it there; destroying it releases the permit. Not safe
// for concurrent use by several threads (as std::unique_lock).
class permit {
 public:
  // An empty permit: holds nothing (what a timed-out try_acquire_permit_for() returns).
  permit() noexcept = default;
  // The permit that a lease from semaphore::async_acquire() holds; empty for an empty lease.
  explicit permit(lock_lease lease);
  // The permit id of a lease from semaphore::async_acquire() ("" for an empty lease; no I/O).
  static std::string id_of(const lock_lease& lease);
  permit(permit&&) noexcept = default;
  // Releases the permit this one had (as release()), then takes `other`'s.
  permit& operator=(permit&& other) noexcept = default;
  // Releases the permit, if any. Never throws.
  ~permit() = default;

  // Whether this object has a permit that was not released (a lost one counts until release()).
  bool owns_permit() const noexcept { return lease_.owns_lock(); }
  explicit operator bool() const noexcept { return owns_permit(); }

  // permit::id()
  // The permit's id, 32 lowercase hex digits as Redisson's; empty for an empty permit. Any thread
  // or process may give it back with semaphore::release(id).
  const std::string& id() const noexcept { return id_; }

  // permit::release()
  // Gives the permit back; never throws; the object is empty afterwards. Returns {} released;
  // errc::lock_lost the permit had been lost before (released by id elsewhere, or its lease ran
  // out); errc::not_owner the object was empty. Queued without waiting, retried idempotently.
  std::error_code release() noexcept {
    id_.clear();
    return lease_.release();
  }

  // permit::stop_token(): stopped when the permit is lost (see dlock/semaphore.hpp, "Leases").
  std::stop_token stop_token() const noexcept { return lease_.stop_token(); }
  bool lost() const noexcept { return lease_.lost(); }

  // The semaphore's name; empty for an empty permit.
  const std::string& name() const noexcept { return lease_.name(); }

 private:
  lock_lease lease_;
  std::string id_;
};

class semaphore {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: client::get_semaphore() makes semaphores.
  class impl;
  explicit semaphore(std::shared_ptr<impl> state) noexcept : state_(std::move(state)) {}

  // --- thread-owned permits ---------------------------------------------------------------------

  // semaphore::acquire()
  // Waits until this thread holds a permit, with a watchdog lease. Throws errc::would_deadlock
  // when this thread holds one of this semaphore already (nothing is sent) or from one of this
  // client's callbacks, errc::wrong_type when the name holds something else (a dlock::mutex, a
  // plain lock, data), and dlock::error when Redis cannot be reached or fails.
  void acquire();
  // semaphore::acquire(lease): as acquire(), with an explicit lease that is never renewed. Throws
  // errc::invalid_argument for a lease that is not positive or over max_lock_lease.
  void acquire(lease_time lease);

  // semaphore::try_acquire()
  // One attempt, no waiting. Returns whether this thread now holds a permit. Throws as acquire().
  [[nodiscard]] bool try_acquire();

  // semaphore::try_acquire_for(wait), try_acquire_for(wait, lease), try_acquire_until(deadline)
  // Waits up to `wait` (or until `deadline`, on any clock) for a permit. Returns false when the
  // time ran out. A zero or past wait is one attempt. Waits beyond a century wait until acquired.
  // Throws as acquire().
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_acquire_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_for(detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_acquire_for(const std::chrono::duration<Rep, Period>& wait,
                                     lease_time lease) {
    const auto explicit_lease = lease.value();
    return acquire_for(detail::steady_wait(wait), &explicit_lease);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_for(detail::steady_wait_until(deadline), nullptr);
  }

  // semaphore::release()
  // Gives this thread's permit back. Never throws. Queued without waiting for its reply and
  // retried idempotently (a permit id is never reused).
  void release() noexcept { (void)release_checked(); }
  // semaphore::release_checked()
  // As release(), and says what happened: {} released; errc::not_owner this thread held no
  // permit; errc::lock_lost the permit had been lost before (it is forgotten now).
  std::error_code release_checked() noexcept;

  // Aliases for std::lock_guard / std::unique_lock (BasicLockable, Lockable).
  void lock() { acquire(); }
  [[nodiscard]] bool try_lock() { return try_acquire(); }
  void unlock() noexcept { release(); }

  // semaphore::is_held_by_current_thread(): this thread holds a permit and has not lost it.
  bool is_held_by_current_thread() const noexcept;
  // semaphore::stop_token(): stopped when this thread's permit is lost.
  std::stop_token stop_token() const noexcept;
  // semaphore::permit_id(): the id of this thread's permit (empty when it holds none; no I/O).
  std::string permit_id() const;

  // --- object-owned permits ---------------------------------------------------------------------

  // semaphore::acquire_permit(), acquire_permit(lease)
  // Waits for a permit owned by the returned object (watchdog lease, or an explicit one). Throws
  // as acquire() (errc::would_deadlock only from a callback: a thread may hold many permits).
  permit acquire_permit();
  permit acquire_permit(lease_time lease);
  // semaphore::try_acquire_permit(), try_acquire_permit_for(wait[, lease])
  // As acquire_permit() with one attempt, or a wait; an empty permit when none was had in time.
  permit try_acquire_permit();
  template <typename Rep, typename Period>
  permit try_acquire_permit_for(const std::chrono::duration<Rep, Period>& wait) {
    return permit_for(detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  permit try_acquire_permit_for(const std::chrono::duration<Rep, Period>& wait, lease_time lease) {
    const auto explicit_lease = lease.value();
    return permit_for(detail::steady_wait(wait), &explicit_lease);
  }

  // semaphore::async_acquire(options)
  // Acquires a permit without blocking the caller, as mutex::async_acquire(): the future holds a
  // lock_lease that is the permit (an empty one when the wait ran out; dlock::permit(lease) gives
  // its id), or the failure as a dlock::error. Throws errc::invalid_argument for a lease or wait
  // that is not valid (before any I/O).
  std::future<lock_lease> async_acquire(const acquire_options& options);
  // The same with a handler `done(ec, lease)`, run once on the client's I/O thread (it must not
  // block), as mutex::async_acquire(options, done): many permits can be awaited without a
  // thread or a future each.
  void async_acquire(const acquire_options& options, lease_handler done);

  // semaphore::release(id)
  // Gives back the permit `id` (32 hex digits), whoever holds it: this process, another one, or
  // a Redisson client. Its holder, here as anywhere, finds it lost at its next renewal (within a
  // third of the watchdog lease; an explicit lease at its end). Throws errc::not_owner when no
  // permit `id` is held (never taken, released already, or given back after its lease),
  // errc::lock_lost when it was held but its lease had run out (it is given back now),
  // errc::invalid_argument for an id that is not 32 hex digits, errc::wrong_type for a name of
  // another kind, and dlock::error on I/O failure.
  void release(std::string_view id);

  // --- the count --------------------------------------------------------------------------------

  // semaphore::available_permits()
  // The permits free now (negative when permits were removed while held); gives expired permits
  // back first and creates the semaphore with the handle's count if it does not exist. Throws
  // errc::wrong_type for a name of another kind and dlock::error on I/O failure.
  std::int64_t available_permits();
  // semaphore::try_set_permits(n)
  // Sets the count to n (>= 0) only if the semaphore does not exist (Redisson's trySetPermits),
  // waking up to n waiters. Returns whether it was set. Throws errc::invalid_argument for n < 0
  // or n > max_count.
  bool try_set_permits(std::int64_t n);
  // semaphore::add_permits(delta)
  // Adds delta (may be negative) to the available permits (Redisson's addPermits), creating the
  // semaphore with the handle's count first if it does not exist; a positive delta wakes up to
  // delta waiters. Permits held stay held: after a negative delta the count may go below zero
  // and nobody gets a permit until enough have come back. Returns the new available count.
  // Throws errc::invalid_argument when |delta| or the new count would exceed max_count (the
  // count is left as it was).
  std::int64_t add_permits(std::int64_t delta);

  // semaphore::force_release()
  // Gives back every permit whoever holds it (their holders find them lost at their next
  // renewal) and wakes waiters. Returns whether any permit was held.
  bool force_release();

  // semaphore::status()
  // permits_available, permits_total (available + held), and each permit held as a holder
  // (owner = permit id, lease_left); locked = some permit is held; plus how many clients wait
  // (subscribers). Asks Redis; throws errc::wrong_type for a name of another kind.
  lock_status status() const;

  const std::string& name() const noexcept;
  // The permits the semaphore is created with when it does not exist (get_semaphore()'s n).
  std::int64_t initial_permits() const noexcept;

 private:
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease);
  permit permit_for(steady_clock::duration wait, const std::chrono::milliseconds* lease);

  std::shared_ptr<impl> state_;
};

}  // namespace dlock
