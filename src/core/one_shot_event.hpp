// src/core/one_shot_event.hpp
//
// An event that is set once and waited for by one thread, which sleeps on a futex word of its own
// (Linux). Setting it makes one system call when the waiter sleeps and none when it has not gone
// to sleep yet. A mutex and condition variable cost a blocking call three futex calls where this
// costs two: glibc's condition variable hands the mutex back to the woken thread marked
// contended, so that thread's unlock calls the kernel too, to wake nobody.
#pragma once

#include <atomic>
#include <cstdint>

namespace dlock::core {

class one_shot_event {
 public:
  // Marks the event set and wakes the waiter. Call once; the event may be destroyed as soon as
  // wait() returns, so a setter that can race with that destruction must keep the event alive
  // by other means (a shared owner).
  void set() noexcept;
  // Returns once set() was called (at once if it was). At most one thread waits.
  void wait() noexcept;
  bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == done; }

 private:
  static constexpr std::uint32_t pending = 0, sleeping = 1, done = 2;
  std::atomic<std::uint32_t> state_{pending};
};

}  // namespace dlock::core
