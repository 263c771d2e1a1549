// bench/bench_support.hpp
//
// What every benchmark here prints about the machine and the server it ran on.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace dlock::bench {

// The CPU model from /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

// The value of `name` in an INFO reply, or "unknown".
inline std::string info_field(const std::string& info, const std::string& name) {
  const std::size_t at = info.find(name + ":");
  if (at == std::string::npos) return "unknown";
  const std::size_t begin = at + name.size() + 1;
  return info.substr(begin, info.find_first_of("\r\n", begin) - begin);
}

// Share of the machine's CPU time spent idle over `window`, from /proc/stat; -1 if unreadable.
// Taken before and after the runs: other load on a small machine skews every figure.
inline double idle_share(std::chrono::milliseconds window) {
  auto sample = [](std::uint64_t& idle, std::uint64_t& total) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    idle = total = 0;
    std::uint64_t v = 0;
    // user nice system idle iowait irq softirq steal: idle and iowait count as idle.
    for (int field = 0; field < 8 && in >> v; ++field) {
      total += v;
      if (field == 3 || field == 4) idle += v;
    }
    return cpu == "cpu" && total > 0;
  };
  std::uint64_t idle0 = 0, total0 = 0, idle1 = 0, total1 = 0;
  if (!sample(idle0, total0)) return -1;
  std::this_thread::sleep_for(window);
  if (!sample(idle1, total1) || total1 <= total0) return -1;
  return static_cast<double>(idle1 - idle0) / static_cast<double>(total1 - total0);
}

// Prints the machine's idle share over one second, with a warning when something else is busy.
inline void print_idle(const char* prefix, const char* when) {
  const double idle = idle_share(std::chrono::milliseconds(1000));
  std::printf(
      "%s%.0f%% %s%s\n", prefix, 100 * idle, when,
      idle < 0.9 ? " -- other load on the machine skews the figures; rerun when quiet" : "");
}

// Option values. nullopt when `text` is not entirely a number in [min, max]; the caller words the
// usage error, since only it knows the program and the option.
template <typename Int>
std::optional<Int> parse_whole(std::string_view text, Int min, Int max) {
  Int value{};
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

inline std::optional<double> parse_number(std::string_view text, double min, double max) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !(value >= min && value <= max)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace dlock::bench
