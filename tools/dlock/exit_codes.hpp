// Exit codes of the dlock command, from sysexits.h where one fits. Documented in the README.
#pragma once

namespace dlock::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;       // a check of the demo failed
inline constexpr int exit_usage = 64;        // EX_USAGE: bad command line
inline constexpr int exit_unavailable = 69;  // EX_UNAVAILABLE: Redis unreachable or auth refused
inline constexpr int exit_software = 70;     // EX_SOFTWARE: internal error (later: lock lost)

}  // namespace dlock::cli
