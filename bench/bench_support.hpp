// bench/bench_support.hpp
//
// What every benchmark here prints about the machine and the server it ran on, and the checks of
// their command-line options.
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
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

// --- command-line checks, beside CLI::Range ------------------------------------------------------

// A transform for whole-number options, added before their CLI::Range: lets through only an
// optional '-' and decimal digits, and strips leading zeros. CLI11 reads integers with base 0, so
// without it "010" would be 8 and "0x10" 16.
inline CLI::Validator decimal_whole_number() {
  return CLI::Validator(
      [](std::string& text) {
        const std::size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
          return "wants a whole number, not '" + text + "'";
        const std::size_t first = std::min(text.find_first_not_of('0', sign), text.size() - 1);
        text.erase(sign, first - sign);
        return std::string();
      },
      "");
}

// A whole-number option from `min` to `max`: decimal digits only (see above), shown as `type_name`.
template <typename T>
CLI::Option* add_whole_option(CLI::App& app, const std::string& name, T& value,
                              const std::string& description, const std::string& type_name, T min,
                              T max) {
  return app.add_option(name, value, description)
      ->type_name(type_name)
      ->transform(decimal_whole_number())
      ->check(CLI::Range(min, max));
}

// A number from `min` to `max`, as strtod reads it; shown in --help like CLI::Range, which would
// let NaN through.
inline CLI::Validator number_range(double min, double max) {
  std::ostringstream shown_min, shown_max;
  shown_min << min;
  shown_max << max;
  const std::string range = shown_min.str() + " to " + shown_max.str();
  return CLI::Validator(
      [min, max, range](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !(value >= min && value <= max))
          return "wants a number from " + range + ", not '" + text + "'";
        return std::string();
      },
      "FLOAT in [" + shown_min.str() + " - " + shown_max.str() + "]");
}

// The CPU time (user + system, seconds) of getrusage(`who`).
inline double rusage_cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// ... of this process's children that have been waited for.
inline double children_cpu_seconds() {
  return rusage_cpu_seconds(RUSAGE_CHILDREN);
}

// ... of this process.
inline double own_cpu_seconds() {
  return rusage_cpu_seconds(RUSAGE_SELF);
}

// The CPU time (user + system, seconds) process `pid` has used, or -1.
inline double cpu_seconds_of(pid_t pid) {
  if (pid <= 0) return -1;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char text[1024] = {};
  const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  // Fields after the command name in parentheses: state is the 3rd, utime the 14th, stime 15th.
  const char* rest = std::strrchr(text, ')');
  if (n == 0 || rest == nullptr) return -1;
  std::istringstream in(rest + 2);
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Pins thread or process `pid` (0: the calling thread) to `cpu`, or lets it run anywhere (-1).
inline bool pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned c = 0; c < cpus; ++c)
    if (cpu < 0 || static_cast<unsigned>(cpu) == c) CPU_SET(c, &set);
  return ::sched_setaffinity(pid, sizeof set, &set) == 0;
}

}  // namespace dlock::bench
