// src/core/setting_range.hpp
//
// The range check of the clients' duration settings (timeouts, delays, intervals). A setting over
// a day means nothing to a lock library, and near milliseconds::max() it would overflow the
// deadline arithmetic (a time_point plus the setting, in nanoseconds): every request would then
// fail at once. Refused when the client is made instead.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock::core {

inline constexpr std::chrono::milliseconds longest_setting = std::chrono::hours(24);

// Throws errc::invalid_argument unless least <= value <= longest_setting.
inline void check_setting(std::chrono::milliseconds value, std::chrono::milliseconds least,
                          std::string_view name) {
  if (value >= least && value <= longest_setting) return;
  throw error(errc::invalid_argument,
              std::string(name) + " must be " +
                  (least.count() == 0 ? std::string("0 or more")
                                      : "at least " + std::to_string(least.count()) + " ms") +
                  " and at most a day (" + std::to_string(longest_setting.count()) + " ms); got " +
                  std::to_string(value.count()) + " ms");
}

}  // namespace dlock::core
