// Exit codes of the dlock command, from sysexits.h where one fits and from the shell conventions
// for commands that cannot run. Documented in the README ("The `dlock` command").
#pragma once

namespace dlock::cli {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;       // a check of a demo failed
inline constexpr int exit_usage = 64;        // EX_USAGE: bad command line, or NAME is a key
                                             // that holds data, not a lock (status, unlock)
inline constexpr int exit_unavailable = 69;  // EX_UNAVAILABLE: Redis unreachable, auth refused,
                                             // or Redis failed a request
inline constexpr int exit_lock_lost = 70;    // EX_SOFTWARE: exec lost its lock while the command
                                             // ran (or an internal error)
inline constexpr int exit_os_error = 71;     // EX_OSERR: a system call failed (pipe, signalfd, ...)
inline constexpr int exit_conflict = 75;     // EX_TEMPFAIL: exec could not get the lock (-E)
inline constexpr int exit_cannot_execute = 126;  // as shells: the command is not executable
inline constexpr int exit_not_found = 127;       // as shells: the command was not found
inline constexpr int exit_signal_base = 128;     // 128 + N: signal N ended the command (or dlock)

}  // namespace dlock::cli
