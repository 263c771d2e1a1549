// tests/support/delay_proxy.hpp
//
// dlock_fault_delay_proxy (tests/fault/delay_proxy.cpp) as a child process: a TCP proxy between
// clients and one server that adds latency, or cuts every connection through it, on command.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace dlock::test {

// How long the proxy may take to answer a command.
constexpr auto proxy_answer_timeout = std::chrono::milliseconds(5000);

// dlock_fault_delay_proxy as a child process: stdin for commands, stdout for its answers.
class delay_proxy {
 public:
  delay_proxy(const std::string& binary, const std::string& listen, const std::string& upstream) {
    std::array<int, 2> in{};
    std::array<int, 2> out{};
    if (::pipe2(in.data(), O_CLOEXEC) != 0 || ::pipe2(out.data(), O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    std::vector<std::string> args = {binary, "--listen", listen, "--upstream", upstream};
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    ::posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    const int rc = ::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
    }
    const std::string line = read_line();
    unsigned port = 0;
    if (std::sscanf(line.c_str(), "listening %u", &port) != 1) {
      throw std::runtime_error("the delay proxy said: " + line);
    }
    port_ = static_cast<std::uint16_t>(port);
  }
  ~delay_proxy() {
    ::close(in_);  // the end of its stdin ends it
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }
  delay_proxy(const delay_proxy&) = delete;
  delay_proxy& operator=(const delay_proxy&) = delete;

  std::uint16_t port() const { return port_; }

  // In effect for every chunk the proxy reads once this returns.
  void set_delay(std::chrono::milliseconds delay) {
    command("delay " + std::to_string(delay.count()));
  }
  // Closes every connection through the proxy, and every one made until mend() (the network
  // takes the links away; the server knows nothing of it).
  void cut() { command("cut"); }
  void mend() { command("mend"); }

 private:
  // Sends a command line; the proxy echoes it once in effect.
  void command(const std::string& line) {
    const std::string text = line + "\n";
    if (::write(in_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("cannot write to the delay proxy");
    }
    const std::string answer = read_line();
    if (answer != line) throw std::runtime_error("the delay proxy said: " + answer);
  }

  std::string read_line() {
    const auto deadline = std::chrono::steady_clock::now() + proxy_answer_timeout;
    while (buffer_.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) throw std::runtime_error("the delay proxy did not answer");
      std::array<char, 256> data{};
      const ssize_t got = ::read(out_, data.data(), data.size());
      if (got <= 0) throw std::runtime_error("the delay proxy exited");
      buffer_.append(data.data(), static_cast<std::size_t>(got));
    }
    const auto end = buffer_.find('\n');
    std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 1);
    return line;
  }

  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  std::uint16_t port_ = 0;
  std::string buffer_;
};

}  // namespace dlock::test
