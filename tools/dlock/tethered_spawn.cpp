#include "tethered_spawn.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <system_error>

#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

// The guard's whole life, in the child of fork(). Only async-signal-safe calls: dlock has other
// threads, whose locks (malloc's among them) may be held in this copy of its memory.
[[noreturn]] void run_guard(int alive_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_NAME, "dlock-guard");
  // Signals dlock forwards to the group, and stray ones (`kill 0` in the command), stay pending
  // instead of ending the guard; only SIGKILL (and SIGSTOP) cannot be blocked.
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  // Nothing else of dlock's: its Redis connections, the command's stdout (whose reader would wait
  // for the guard), and the other copies of the pipe's write end.
  if (alive_fd > 0) ::close_range(0, static_cast<unsigned>(alive_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(alive_fd) + 1, UINT_MAX, 0);
  char byte = 0;
  ssize_t got = 0;
  do {
    got = ::read(alive_fd, &byte, 1);
  } while (got < 0 && errno == EINTR);
  // Nobody writes: read() returns only at end-of-file, when dlock has died. The guard goes too.
  ::kill(0, SIGKILL);
  ::_exit(exit_signal_base + SIGKILL);
}

// In the command's child: tells the parent why the program could not be started, and ends.
[[noreturn]] void fail_child(int status_fd, int error) {
  (void)!::write(status_fd, &error, sizeof error);
  ::_exit(exit_not_found);
}

void reap(pid_t pid) noexcept {
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

group_guard::group_guard() {
  pipe_ends pipe = make_pipe();
  const pid_t pid = ::fork();
  if (pid < 0) throw os_error("fork");
  if (pid == 0) run_guard(pipe.read.get());
  // Also here, so that the group exists before the command joins it, whichever runs first.
  ::setpgid(pid, pid);
  pid_ = pid;
  alive_ = std::move(pipe.write);
}

group_guard::~group_guard() {
  dismiss();
}

void group_guard::dismiss() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // an unreaped child: the pid is still the guard's
  reap(pid_);
  pid_ = -1;
  alive_.reset();
}

pid_t spawn_tethered(char* const argv[], char* const envp[], const sigset_t& mask,
                     const sigset_t& defaults, pid_t group) {
  const pid_t dlock_pid = ::getpid();
  // Close-on-exec: end-of-file for the parent once the program runs, an errno before that.
  pipe_ends status = make_pipe();
  const pid_t pid = ::fork();
  if (pid < 0) throw os_error("fork");
  if (pid == 0) {
    // Only async-signal-safe calls until exec (see run_guard). glibc's execvpe searches PATH in
    // buffers on the stack.
    const int fd = status.write.get();
    if (group != 0 && ::setpgid(0, group) != 0) fail_child(fd, errno);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (::sigismember(&defaults, sig) == 1) ::sigaction(sig, &default_action, nullptr);
    }
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail_child(fd, errno);
    // dlock may have died before prctl(), which then never fires: this process has been adopted
    // by another one already.
    if (::getppid() != dlock_pid) ::_exit(exit_signal_base + SIGKILL);
    ::execvpe(argv[0], argv, envp);
    fail_child(fd, errno);
  }
  status.write.reset();
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(status.read.get(), &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof error)) return pid;  // end-of-file: the program runs
  reap(pid);
  throw std::system_error(error, std::generic_category(), "exec");
}

}  // namespace dlock::cli
