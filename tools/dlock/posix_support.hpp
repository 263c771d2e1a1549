// Small POSIX helpers of the dlock command: an owning file descriptor, pipes, signal names.
#pragma once

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

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

}  // namespace dlock::cli
