// dlock/wait_time.hpp
//
// How every timed member of dlock's handles (try_lock_for, try_lock_until, wait_for, ...) turns
// the caller's duration or deadline, on any clock and of any representation, into a wait on the
// steady clock. For dlock's headers; not an API of its own.
#pragma once

#include <chrono>

namespace dlock::detail {

// The longest wait: a century stands for "until done" and cannot overflow a steady time point.
inline constexpr std::chrono::steady_clock::duration wait_forever =
    std::chrono::hours(24 * 365 * 100);

// Waits of a century or more (duration::max() included) wait until done; zero and negative waits
// are one attempt (zero). Never overflows: the comparison is made in floating-point seconds.
template <typename Rep, typename Period>
std::chrono::steady_clock::duration steady_wait(const std::chrono::duration<Rep, Period>& d) {
  const std::chrono::duration<double> seconds = d;
  if (seconds >= std::chrono::duration<double>(wait_forever)) return wait_forever;
  if (seconds <= std::chrono::duration<double>::zero()) {
    return std::chrono::steady_clock::duration::zero();
  }
  return std::chrono::ceil<std::chrono::steady_clock::duration>(d);
}

// The wait until `deadline`, read on its own clock now: zero once it has passed, until done for
// time_point::max().
template <typename Clock, typename Duration>
std::chrono::steady_clock::duration steady_wait_until(
    const std::chrono::time_point<Clock, Duration>& deadline) {
  const auto now = Clock::now();
  if (deadline <= now) return std::chrono::steady_clock::duration::zero();
  if (deadline == std::chrono::time_point<Clock, Duration>::max()) {
    return steady_wait(Duration::max());
  }
  return steady_wait(deadline - now);
}

}  // namespace dlock::detail
