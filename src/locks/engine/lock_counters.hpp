// src/locks/engine/lock_counters.hpp
//
// The counters behind client::lock_metrics(): atomics, so any thread may bump or read them.
#pragma once

#include <atomic>
#include <cstdint>

#include "dlock/lock_metrics.hpp"

namespace dlock::locks {

struct lock_counters {
  std::atomic<std::uint64_t> acquired{0}, reentered{0}, waited{0}, timed_out{0}, released{0},
      lost{0}, renewal_scripts{0}, leases_renewed{0}, release_retries{0}, unconfirmed{0};

  lock_metrics snapshot() const noexcept {
    lock_metrics m;
    m.acquired = acquired;
    m.reentered = reentered;
    m.waited = waited;
    m.timed_out = timed_out;
    m.released = released;
    m.lost = lost;
    m.renewal_scripts = renewal_scripts;
    m.leases_renewed = leases_renewed;
    m.release_retries = release_retries;
    m.unconfirmed = unconfirmed;
    return m;
  }
};

}  // namespace dlock::locks
