#include "demo_race.hpp"

#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "cli_support.hpp"
#include "exit_codes.hpp"
#include "posix_support.hpp"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace dlock::cli {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Bounds that only a broken worker reaches: starting and connecting, and running its share.
constexpr auto worker_ready_limit = 10s;
constexpr auto worker_done_limit = 60s;

constexpr int worker_processes = 2;

// One worker: this binary again (/proc/self/exe), its stdin and stdout on pipes to us. Killed and
// reaped on destruction if it is still running.
class worker_process {
 public:
  explicit worker_process(std::vector<std::string> args) {
    pipe_ends in = make_pipe(), out = make_pipe();
    const std::vector<char*> argv = c_strings(args);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    // dup2 leaves the copies open across exec; the close-on-exec originals close.
    ::posix_spawn_file_actions_adddup2(&actions, in.read.get(), STDIN_FILENO);
    ::posix_spawn_file_actions_adddup2(&actions, out.write.get(), STDOUT_FILENO);
    const int rc = ::posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      throw std::system_error(rc, std::generic_category(),
                              "starting a worker process (/proc/self/exe)");
    }
    to_ = std::move(in.write);
    from_ = std::move(out.read);
  }
  ~worker_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  // The next line the worker prints, by `deadline`; throws std::runtime_error if none comes.
  std::string read_line(clock_type::time_point deadline, std::string_view step) {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd p{from_.get(), POLLIN, 0};
      const int ready = ::poll(&p, 1, poll_timeout(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        throw std::runtime_error(fmt::format("a worker process did not {} in time", step));
      }
      char chunk[256];
      const ssize_t got = ::read(from_.get(), chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw std::runtime_error(fmt::format(
            "a worker process ended before it could {} (exit status {})", step, wait()));
      }
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  void send(std::string_view line) {
    while (!line.empty()) {
      const ssize_t put = ::write(to_.get(), line.data(), line.size());
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) throw os_error("writing to a worker process");
      line.remove_prefix(static_cast<std::size_t>(put));
    }
  }

  // Waits for the worker to end; its exit status (128 + signal if killed).
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : exit_signal_base + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  unique_fd to_;
  unique_fd from_;
  std::string buffer_;
};

// Collects the first exception of the participant threads.
class first_error {
 public:
  void capture() noexcept {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  void rethrow_if_any() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
};

// Gives the start signal of a latch once: by start(), or at the latest on destruction, so that an
// exception between creating the waiting threads and starting them cannot leave them waiting
// forever. Declared after the threads (jthreads join on destruction) and with the latch declared
// before them, so the latch outlives every thread that waits on it.
class start_signal {
 public:
  explicit start_signal(std::latch& go) : go_(go) {}
  ~start_signal() { start(); }
  start_signal(const start_signal&) = delete;
  start_signal& operator=(const start_signal&) = delete;
  void start() {
    if (!started_) {
      started_ = true;
      go_.count_down();
    }
  }

 private:
  std::latch& go_;
  bool started_ = false;
};

}  // namespace

race_split split_participants(int participants, int first_id) {
  race_split split{.first_id = first_id};
  if (participants >= 2 * worker_processes) {
    split.processes = worker_processes;
    split.per_process = participants / (2 * worker_processes);
  }
  split.local = participants - split.processes * split.per_process;
  return split;
}

std::string describe(const race_split& split) {
  std::string text = fmt::format("{} thread{} here", split.local, split.local == 1 ? "" : "s");
  if (split.processes > 0) {
    text += fmt::format(" and {} processes of {} thread{}", split.processes, split.per_process,
                        split.per_process == 1 ? "" : "s");
  }
  return text;
}

std::chrono::duration<double> run_race(const std::string& url, dlock::client& redis,
                                       const race_split& split,
                                       const std::vector<std::string>& worker_args,
                                       const participant_fn& local) {
  // A worker that dies makes our write of "go" fail with EPIPE instead of killing the demo.
  ::signal(SIGPIPE, SIG_IGN);

  std::vector<std::unique_ptr<worker_process>> workers;
  int next_id = split.first_id + split.local;
  for (int p = 0; p < split.processes; ++p) {
    std::vector<std::string> args{"dlock", "--redis", url, "demo", "worker"};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    args.insert(args.end(), {"--first-id", std::to_string(next_id), "--count",
                             std::to_string(split.per_process)});
    next_id += split.per_process;
    workers.push_back(std::make_unique<worker_process>(std::move(args)));
  }
  const auto ready_by = clock_type::now() + worker_ready_limit;
  for (auto& w : workers) {
    const std::string line = w->read_line(ready_by, "connect to Redis");
    if (line != "ready") throw std::runtime_error("a worker process said '" + line + "'");
  }
  redis.command({"PING"});  // this process is connected too

  first_error errors;
  const auto started = clock_type::now();
  std::latch go(1);
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(split.local));
    start_signal start(go);
    for (int i = 0; i < split.local; ++i) {
      threads.emplace_back([&, id = split.first_id + i] {
        go.wait();
        try {
          local(redis, id);
        } catch (...) {
          errors.capture();
        }
      });
    }
    for (auto& w : workers)
      w->send("go\n");
    start.start();
  }
  const auto done_by = clock_type::now() + worker_done_limit;
  for (auto& w : workers) {
    const std::string line = w->read_line(done_by, "finish");
    const int status = w->wait();
    if (line != "done" || status != exit_ok) {
      throw std::runtime_error(
          fmt::format("a worker process failed (it said '{}', exit status {})", line, status));
    }
  }
  const auto took = clock_type::now() - started;
  errors.rethrow_if_any();
  return took;
}

int run_race_worker(const std::string& url, int first_id, int count, const participant_fn& fn) {
  try {
    dlock::client redis{url};
    redis.command({"PING"});
    std::fputs("ready\n", stdout);
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line) || line != "go") return exit_usage;
    first_error errors;
    {
      std::vector<std::jthread> threads;
      threads.reserve(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i) {
        threads.emplace_back([&, id = first_id + i] {
          try {
            fn(redis, id);
          } catch (...) {
            errors.capture();
          }
        });
      }
    }
    errors.rethrow_if_any();
    std::fputs("done\n", stdout);
    std::fflush(stdout);
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(fmt::format("demo worker: {}", e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(fmt::format("demo worker: {}", e.what()));
    return exit_failure;
  }
}

}  // namespace dlock::cli
