// Small POSIX helpers of the dlock command: an owning file descriptor, pipes, signal names, the
// command's environment.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "unique_fd.hpp"

namespace dlock::cli {

// A failed system call: what was called, and errno's message.
class os_error : public std::system_error {
 public:
  explicit os_error(const std::string& call)
      : std::system_error(errno, std::generic_category(), call) {}
};

using tools::unique_fd;

struct pipe_ends {
  unique_fd read;
  unique_fd write;
};

// A pipe with close-on-exec ends; `flags` may add O_NONBLOCK. Throws os_error.
inline pipe_ends make_pipe(int flags = 0) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC | flags) != 0) throw os_error("pipe2");
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

// Milliseconds until `deadline` for poll(): rounded up so poll() never wakes early, clamped to
// INT_MAX, 0 once it has passed.
inline int poll_timeout(std::chrono::steady_clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > INT_MAX ? INT_MAX : static_cast<int>(left.count());
}

// "SIGTERM", or "signal 42" for a number without a name.
inline std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

inline sigset_t make_sigset(std::initializer_list<int> signals) {
  sigset_t set;
  ::sigemptyset(&set);
  for (int s : signals)
    ::sigaddset(&set, s);
  return set;
}

// The signals `dlock exec` handles, taken over from their default actions.
struct exec_signals {
  unique_fd fd;            // a non-blocking signalfd of them; not valid if signalfd() failed
  sigset_t original{};     // the mask dlock inherited: the command's
  bool default_sigpipe{};  // whether SIGPIPE had its default action: reset for the command
};

// Call before any other thread exists. Blocks, and reads from exec_signals::fd, SIGCHLD and
// those of SIGINT, SIGTERM and SIGHUP that whoever started dlock did not ignore: an ignored one
// stays ignored, since a blocked signal is queued even when ignored and would end the wait
// (`nohup dlock exec` survives SIGHUP, and the command inherits the ignoring, as from a shell).
// SIGCHLD gets its default action (ignored, the kernel would reap the command unseen) and
// SIGPIPE is ignored (a closed stderr must not kill dlock before it stops a command that lost
// its lock).
inline exec_signals take_exec_signals() {
  exec_signals out;
  sigset_t handled = make_sigset({SIGCHLD});
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_IGN)
      ::sigaddset(&handled, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &handled, &out.original);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &default_action, nullptr);
  struct sigaction ignore_action {};
  ignore_action.sa_handler = SIG_IGN;
  struct sigaction old_sigpipe {};
  ::sigaction(SIGPIPE, &ignore_action, &old_sigpipe);
  out.default_sigpipe = old_sigpipe.sa_handler != SIG_IGN;
  out.fd = unique_fd(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  return out;
}

// The command's environment: dlock's own, with DLOCK_NAME, DLOCK_TOKEN and DLOCK_OWNER set, and
// DLOCK_PERMIT when `permit` is not empty; inherited values of all four never reach the command.
inline std::vector<std::string> command_environment(std::string_view name, std::uint64_t token,
                                                    std::string_view owner,
                                                    std::string_view permit) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("DLOCK_NAME=") || entry.starts_with("DLOCK_TOKEN=") ||
        entry.starts_with("DLOCK_OWNER=") || entry.starts_with("DLOCK_PERMIT=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("DLOCK_NAME=" + std::string(name));
  env.push_back("DLOCK_TOKEN=" + std::to_string(token));
  env.push_back("DLOCK_OWNER=" + std::string(owner));
  if (!permit.empty()) env.push_back("DLOCK_PERMIT=" + std::string(permit));
  return env;
}

// execve()'s view of `strings`: pointers into them, then a null one. `strings` must outlive it.
inline std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace dlock::cli
