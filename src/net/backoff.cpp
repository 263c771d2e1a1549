#include "net/backoff.hpp"

#include <algorithm>

namespace dlock::net {

backoff::backoff(duration min, duration max) noexcept
    : min_(std::max(min, duration{1})), max_(std::max(max, std::max(min, duration{1}))) {}

backoff::duration backoff::next(double unit_random) noexcept {
  const std::uint32_t attempt = attempt_;
  if (attempt_ < 64) ++attempt_;
  if (attempt == 0) return duration{0};
  // min * 2^(attempt-1), computed without overflow by stopping once the cap is reached.
  duration ceiling = min_;
  for (std::uint32_t i = 1; i < attempt && ceiling < max_; ++i)
    ceiling *= 2;
  ceiling = std::min(ceiling, max_);
  const double r = std::clamp(unit_random, 0.0, 1.0);
  const auto half = ceiling / 2;
  return half +
         duration{static_cast<duration::rep>(static_cast<double>((ceiling - half).count()) * r)};
}

}  // namespace dlock::net
