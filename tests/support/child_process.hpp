// A child process for the integration tests, with its stdout on a pipe; killed (SIGKILL) and
// reaped when destroyed. Header-only; include as "support/child_process.hpp".
#pragma once

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv) {
    // Everything the child needs is built before fork(): after it, a multi-threaded process may
    // only call async-signal-safe functions (no allocation).
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~child_process() {
    kill(SIGKILL);
    ::close(out_);
  }
  // The next line of the child's stdout, or "" if none comes within `limit`.
  std::string read_line(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string line;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0))) <= 0) break;
      char ch;
      if (::read(out_, &ch, 1) != 1) break;
      if (ch == '\n') return line;
      line += ch;
    }
    return {};
  }
  void kill(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    if (signal == SIGKILL) {
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

}  // namespace dlock::test
