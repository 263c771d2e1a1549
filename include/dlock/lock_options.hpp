// dlock/lock_options.hpp
//
// Settings of a client's locks (client_options::locks), what a lost hold reports, and the lease
// type that keeps a lease from being mistaken for a wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace dlock {

// Why a hold was lost (see lock_options::on_lock_lost).
enum class lock_loss_reason {
  not_held,        // renewal (or a re-lock) found the lock gone or held by someone else
  unconfirmed,     // no renewal could be confirmed before the lease would end (Redis unreachable)
  lease_expired,   // an explicit lease ran out before the holder released it
  client_stopped,  // the client was destroyed while the hold lasted: nobody renews it any more
  thread_exited,   // the holding thread ended without unlocking: nobody renews it any more
};

struct lock_loss {
  std::string name;   // the lock
  std::string owner;  // the hold's field: mutex::owner_id() or lock_lease::owner_id()
  lock_loss_reason reason = lock_loss_reason::not_held;
};

// The longest explicit lease or watchdog lease dlock accepts: longer ones are refused with
// errc::invalid_argument before any I/O (a year is far beyond any sane lease, and keeps every
// deadline far from the steady clock's range).
inline constexpr std::chrono::milliseconds max_lock_lease = std::chrono::hours(24 * 365);
// The largest count a semaphore's permits or a latch may reach (in either sign for permits):
// 2^53 - 1, the largest integer the servers' Lua scripts (numbers are doubles) hold exactly.
// Larger ones are refused with errc::invalid_argument, before any I/O where the call alone says.
inline constexpr std::int64_t max_count = (std::int64_t{1} << 53) - 1;

// An explicit lease: how long a hold lasts unless released first; never renewed.
//   m.try_lock_for(200ms, dlock::lease_time(10s));   // wait 200 ms, hold for at most 10 s
// A distinct type, so a lease and a wait cannot be swapped by mistake.
class lease_time {
 public:
  template <typename Rep, typename Period>
  explicit lease_time(const std::chrono::duration<Rep, Period>& d)
      : value_(std::chrono::ceil<std::chrono::milliseconds>(saturate(d))) {}

  std::chrono::milliseconds value() const noexcept { return value_; }

 private:
  template <typename Rep, typename Period>
  static std::chrono::duration<double, std::milli> saturate(
      const std::chrono::duration<Rep, Period>& d) {
    // Huge values (duration::max()) stay huge instead of overflowing, and are refused later.
    const std::chrono::duration<double, std::milli> ms = d;
    const std::chrono::duration<double, std::milli> cap = max_lock_lease * 2;
    return ms > cap ? cap : ms;
  }
  std::chrono::milliseconds value_;
};

struct lock_options {
  // The lease of locks taken without an explicit one; renewed every third of it while held.
  // Positive, at most max_lock_lease.
  std::chrono::milliseconds watchdog_timeout{30000};
  // Told of every lost hold, after the hold's stop_token was stopped: for logs and alerts. Runs on
  // the thread that noticed the loss (usually the I/O thread) and must not block or throw
  // (exceptions are dropped).
  std::function<void(const lock_loss&)> on_lock_lost;
  // Confirm every first acquisition on this many replicas: `WAIT min_replicas replica_timeout`
  // follows the lock script on the same connection. Fewer acknowledgements undo the acquisition
  // (token-checked) and count as a failed attempt: try_lock* returns false when its wait runs out
  // (the error_code forms say errc::replicas_unavailable), lock() keeps trying. 0: no WAIT.
  // URL: ?min_replicas=N&replica_timeout=MS. replica_timeout: 0 or more (at least 1 ms with
  // min_replicas), at most a day.
  std::uint32_t min_replicas = 0;
  std::chrono::milliseconds replica_timeout{100};
  // Fair locks (dlock::fair_mutex): the thread wait time W, Redisson's fairLockWaitTimeout (also
  // 5 minutes by default). A waiter at the head of a free fair lock that does not take it within
  // W is dropped from the line as dead, so a waiter that died blocks those behind it for at most
  // about W. Live dlock waiters are never dropped (they attempt every W/3 at least). Java and C++
  // clients sharing a fair lock must use the same W. Positive, at most a day.
  // URL: ?fair_wait_timeout=MS.
  std::chrono::milliseconds fair_wait_timeout{300000};
};

}  // namespace dlock
