// Starting the command of `dlock exec` so that it cannot outlive dlock.
//
// dlock may die without running another instruction (kill -9, the OOM killer). Its command must
// not go on without the lock and its renewals, so its end is arranged before it starts, with two
// mechanisms that need nothing from dlock after its death:
//
//  - PR_SET_PDEATHSIG(SIGKILL), set in the child before exec: the kernel kills the command itself
//    when dlock dies (strictly: when the thread that forked it ends; that is dlock's main thread,
//    which lives as long as dlock). It reaches only the direct child, and exec of a set-user-ID,
//    set-group-ID or file-capability program (sudo, ping) clears it.
//  - A guard process for the process group (group_guard), when the command gets its own group:
//    forked before the command, it leads the group the command then joins, and blocks on a pipe
//    whose only write end dlock holds. When dlock dies the kernel closes that end, read() returns
//    end-of-file, and the guard sends SIGKILL to its group: the command and everything it started
//    that stayed in the group, set-user-ID programs included. When the command has ended, dlock
//    kills the guard alone (by its pid, with SIGKILL: it cannot be caught, and works even on a
//    stopped guard), so background jobs the command left behind keep running, as documented.
//
// Why the guard leads the group rather than joining the command's: the group id then belongs to a
// process that exists (at worst as dlock's unreaped zombie) until dlock dismisses it, so neither
// the guard's kill nor dlock's signals can reach a reused id, and the command joins an existing
// group in its child before exec, with no moment in which it runs outside. The alternatives do not
// work: an intermediate supervisor with PR_SET_PDEATHSIG dies by SIGKILL without killing anything;
// a subreaper (PR_SET_CHILD_SUBREAPER) in dlock dies with dlock; only a process that outlives dlock
// can act, and the pipe's end-of-file is how it learns, without a race (it is there even if dlock
// died before the guard began to read).
//
// In the foreground of a terminal the command stays in dlock's process group, which also holds the
// rest of a shell pipeline (`dlock exec x -- make | less`): nothing may kill that group, so there
// PR_SET_PDEATHSIG alone applies and what the command started outlives a killed dlock.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "posix_support.hpp"

namespace dlock::cli {

// The leader of the command's process group, which kills the group when dlock dies (see above).
class group_guard {
 public:
  // Forks the guard. Throws os_error.
  group_guard();
  // dismiss()
  ~group_guard();
  group_guard(const group_guard&) = delete;
  group_guard& operator=(const group_guard&) = delete;

  // The process group the command joins: the guard's pid. A valid target for kill(-group(), ...)
  // until dismiss(); a group-wide SIGKILL kills the guard too, which is fine.
  pid_t group() const { return pid_; }

  // Once the command has ended: kills the guard alone (not its group) and reaps it.
  void dismiss() noexcept;

 private:
  pid_t pid_ = -1;   // -1 once reaped
  unique_fd alive_;  // dlock's end of the pipe, never written: closed by the kernel when dlock dies
};

// Forks and executes `argv` (searched in PATH, as execvpe does) with environment `envp`, signal
// mask `mask` and the signals in `defaults` reset to their default action, with
// PR_SET_PDEATHSIG(SIGKILL); in process group `group` unless it is 0 (then in dlock's). Returns
// the child's pid once it has executed the program. Throws std::system_error with the errno of the
// failed step: ENOENT when the program was not found, EACCES when it is not executable (the child
// is reaped then). Between fork and exec the child calls only async-signal-safe functions, since
// dlock has other threads.
pid_t spawn_tethered(char* const argv[], char* const envp[], const sigset_t& mask,
                     const sigset_t& defaults, pid_t group);

}  // namespace dlock::cli
