// src/net/backoff.hpp
//
// Reconnect delays, sans I/O: the caller supplies the randomness, so tests are deterministic.
#pragma once

#include <chrono>
#include <cstdint>

namespace dlock::net {

// Delays between reconnect attempts. The first attempt after a working connection drops is
// immediate (a server restart is usually over at once); after that the delay doubles from `min`
// up to `max`. Each delay is drawn from [d/2, d] ("equal jitter") so that many clients cut off at
// once do not reconnect in lockstep.
class backoff {
 public:
  using duration = std::chrono::milliseconds;

  backoff(duration min, duration max) noexcept;

  // The delay before the next attempt. `unit_random` is uniform in [0, 1).
  duration next(double unit_random) noexcept;

  // Call when a connection was established, so the next drop retries at once.
  void reset() noexcept { attempt_ = 0; }

  std::uint32_t attempts() const noexcept { return attempt_; }

 private:
  duration min_;
  duration max_;
  std::uint32_t attempt_ = 0;
};

}  // namespace dlock::net
