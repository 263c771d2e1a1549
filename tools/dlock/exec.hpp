// `dlock exec NAME -- COMMAND [ARG...]`: runs a command while holding a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exit_codes.hpp"

namespace dlock::cli {

struct exec_options {
  std::string redis_url;
  std::string name;
  std::vector<std::string> command;  // not empty
  bool nonblock = false;             // one attempt (-n)
  // The plain lock (SET NX PX, shared with redis-py, redsync, node-redlock; --plain) instead of
  // the reentrant one.
  bool plain = false;
  // Take one permit of the semaphore NAME (--semaphore N: created with N permits when it does not
  // exist; Redisson's permit-expirable semaphore) instead of a lock.
  std::optional<std::int64_t> semaphore_permits;
  // The read-write lock (Redisson's RReadWriteLock layout): a read hold (-s) or the write lock
  // (-x), as flock(1)'s --shared and --exclusive. At most one of plain, shared, exclusive.
  bool shared = false;
  bool exclusive = false;
  // The fair lock (--fair: Redisson's RFairLock layout; waiters served in arrival order) instead
  // of the reentrant one.
  bool fair = false;
  // How long to wait for the lock (-w); std::nullopt waits until it is acquired.
  std::optional<std::chrono::milliseconds> wait;
  // An explicit lease, never renewed (--lease); std::nullopt: a watchdog lease.
  std::optional<std::chrono::milliseconds> lease;
  // The watchdog lease, renewed every third of it (--watchdog); std::nullopt: the library's 30 s.
  std::optional<std::chrono::milliseconds> watchdog;
  int conflict_exit_code = exit_conflict;      // -E
  std::chrono::milliseconds kill_grace{5000};  // SIGTERM to SIGKILL when the lock is lost
};

// Takes the lock, runs the command with DLOCK_NAME, DLOCK_TOKEN and DLOCK_OWNER in its
// environment (in its own process group unless dlock is in the foreground of a terminal),
// forwards SIGINT/SIGTERM/SIGHUP to it, stops it when the lock is lost, and releases the lock once
// it has exited. Returns the exit code dlock should exit with
// (see exit_codes.hpp and the README). Call it before any other thread exists: it blocks
// SIGINT, SIGTERM, SIGHUP and SIGCHLD for the whole process (they are read from a signalfd), and
// the process should exit right after it returns.
int run_exec(const exec_options& options);

}  // namespace dlock::cli
