#include "core/one_shot_event.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dlock::core {
namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

std::uint32_t* word(std::atomic<std::uint32_t>& a) noexcept {
  return reinterpret_cast<std::uint32_t*>(&a);
}

}  // namespace

void one_shot_event::set() noexcept {
  if (state_.exchange(done, std::memory_order_acq_rel) == sleeping) {
    (void)::syscall(SYS_futex, word(state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
}

void one_shot_event::wait() noexcept {
  std::uint32_t s = state_.load(std::memory_order_acquire);
  while (s != done) {
    // Announce the sleep; a set() in between turns the word to `done` and the exchange fails.
    if (s == pending && !state_.compare_exchange_weak(s, sleeping, std::memory_order_acq_rel,
                                                      std::memory_order_acquire)) {
      continue;
    }
    // Returns at once unless the word still says `sleeping` (then set() will wake it), also on
    // a spurious wake-up or a signal: the loop looks again.
    (void)::syscall(SYS_futex, word(state_), FUTEX_WAIT_PRIVATE, sleeping, nullptr, nullptr, 0);
    s = state_.load(std::memory_order_acquire);
  }
}

}  // namespace dlock::core
