// dlock exec with --redis given more than once: the command runs under a Redlock over those
// masters (dlock::redlock_mutex), with the same options, environment, signals and exit codes as
// `dlock exec` on one server (exec.cpp).
//
// A redlock_mutex hold belongs to the thread that took it, so one helper thread acquires, reports
// the hold through a pipe, waits to be told to release, and releases. The main thread reads
// signals from a signalfd as exec.cpp does; a signal while the lock is awaited ends dlock, whose
// redlock destructor then ends the helper's wait.
#include "redlock_exec.hpp"

#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <stop_token>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "posix_support.hpp"
#include "redlock_masters.hpp"
#include "tethered_spawn.hpp"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace dlock::cli {
namespace {

using clock_type = std::chrono::steady_clock;

bool is_forwarded(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

int read_signal(int fd) {
  signalfd_siginfo info{};
  if (::read(fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
  return static_cast<int>(info.ssi_signo);
}

void write_byte(int fd) noexcept {
  const char byte = 1;
  (void)!::write(fd, &byte, 1);
}

// What the helper thread tells the main thread once its acquisition is over.
struct acquired {
  bool held = false;
  std::uint64_t token = 0;
  std::string owner;
  std::stop_token lost;
  std::optional<dlock::error> failed;
};

// The helper thread: acquires, then holds until release_now is set, then releases.
class holder {
 public:
  holder(dlock::redlock& rl, const exec_options& o) : wake_(make_pipe(O_NONBLOCK)) {
    thread_ = std::jthread([this, m = rl.get_lock(o.name), o]() mutable { run(m, o); });
  }
  // Lets the thread end (releasing a hold it still has) and joins it.
  ~holder() {
    if (!released_) release_now_.set_value();
  }
  holder(const holder&) = delete;
  holder& operator=(const holder&) = delete;

  int fd() const { return wake_.read.get(); }
  std::future<acquired>& outcome() { return outcome_future_; }
  // Releases the hold (once it is held) and returns what unlock_checked() said.
  std::error_code release() {
    release_now_.set_value();
    released_ = true;
    return unlocked_.get_future().get();
  }

 private:
  void run(dlock::redlock_mutex& m, const exec_options& o) {
    acquired result;
    try {
      const auto lease = o.lease ? std::optional(dlock::lease_time(*o.lease)) : std::nullopt;
      if (o.nonblock || o.wait) {
        const auto wait = o.nonblock ? std::chrono::milliseconds(0) : *o.wait;
        result.held = lease ? m.try_lock_for(wait, *lease) : m.try_lock_for(wait);
      } else {
        lease ? m.lock(*lease) : m.lock();
        result.held = true;
      }
      if (result.held) {
        result.token = m.fencing_token();
        result.owner = m.owner_id();
        result.lost = m.stop_token();
      }
    } catch (const dlock::error& e) {
      result.failed = e;
    }
    const bool held = result.held;
    outcome_.set_value(std::move(result));
    write_byte(wake_.write.get());
    if (!held) return;
    release_future_.wait();
    unlocked_.set_value(m.unlock_checked());
  }

  pipe_ends wake_;
  std::promise<acquired> outcome_;
  std::future<acquired> outcome_future_ = outcome_.get_future();
  std::promise<void> release_now_;
  std::future<void> release_future_ = release_now_.get_future();
  std::promise<std::error_code> unlocked_;
  bool released_ = false;
  std::jthread thread_;  // last: joined before the rest goes
};

}  // namespace

int run_redlock_exec(const exec_options& o, const std::vector<std::string>& master_urls) {
  exec_signals taken = take_exec_signals();  // as run_exec does
  const unique_fd& signals = taken.fd;
  const sigset_t& original = taken.original;
  const bool default_sigpipe = taken.default_sigpipe;
  if (!signals.valid()) {
    print_error(fmt::format("signalfd: {}", std::strerror(errno)));
    return exit_os_error;
  }

  try {
    connected_masters masters;  // before the redlock, which logs into it
    dlock::redlock_options options;
    if (o.watchdog) options.watchdog_timeout = *o.watchdog;
    options.on_log = masters.handler(verbose_log_handler());
    // Declared before the redlock, so destroyed after it: a wait still running then ends with
    // client_stopped when the redlock goes, and the thread can be joined.
    std::optional<holder> hold;
    dlock::redlock rl{master_urls, options};
    // Unreachable masters only cost a Redlock votes (it keeps trying), so a majority out of reach
    // would read as "held" or wait in silence: say it, as one unreachable server is (run_exec's
    // PING).
    const std::size_t up = masters.wait_for(rl.quorum(), rl.options().connect_timeout);
    if (up < rl.quorum()) {
      std::string missing;
      for (const std::size_t i : masters.not_connected(rl.size())) {
        missing += (missing.empty() ? "" : ", ") +
                   shown(dlock::client_options::from_url(master_urls[i]).endpoint(), 200);
      }
      print_error(
          fmt::format("lock '{}': only {} of the {} Redlock masters could be reached "
                      "within {}; {} are needed (not reached: {})",
                      shown_name(o.name), up, rl.size(),
                      format_seconds(rl.options().connect_timeout), rl.quorum(), missing));
      return exit_unavailable;
    }
    hold.emplace(rl, o);
    int signalled = 0;
    while (hold->outcome().wait_for(std::chrono::seconds(0)) != std::future_status::ready &&
           signalled == 0) {
      std::array<pollfd, 2> fds{pollfd{signals.get(), POLLIN, 0}, pollfd{hold->fd(), POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) throw os_error("poll");
      for (int sig = 0; (sig = read_signal(signals.get())) != 0;) {
        if (signalled == 0 && is_forwarded(sig)) signalled = sig;
      }
    }
    if (signalled != 0) {
      print_error(fmt::format("{} while waiting for lock '{}'; the command was not run",
                              signal_name(signalled), shown_name(o.name)));
      return exit_signal_base + signalled;
    }
    const acquired got = hold->outcome().get();
    if (got.failed) {
      print_error(fmt::format("lock '{}': {}", shown_name(o.name), got.failed->what()));
      return exit_code_for(*got.failed);
    }
    if (!got.held) {
      print_error(o.nonblock ? fmt::format("lock '{}' is held; the command was not run (-n)",
                                           shown_name(o.name))
                             : fmt::format("lock '{}' is still held after waiting {}; the "
                                           "command was not run",
                                           shown_name(o.name), format_seconds(*o.wait)));
      return o.conflict_exit_code;
    }

    const pipe_ends lost_pipe = make_pipe(O_NONBLOCK);
    const std::stop_callback on_lost(got.lost,
                                     [fd = lost_pipe.write.get()]() noexcept { write_byte(fd); });
    std::vector<std::string> argv_storage = o.command;
    std::vector<std::string> env = command_environment(o.name, got.token, got.owner, {});
    const std::vector<char*> argv = c_strings(argv_storage);
    const std::vector<char*> envp = c_strings(env);
    const sigset_t defaults =
        default_sigpipe ? make_sigset({SIGPIPE, SIGCHLD}) : make_sigset({SIGCHLD});
    group_guard guard;
    pid_t child = -1;
    try {
      child = spawn_tethered(argv.data(), envp.data(), original, defaults, guard.group());
    } catch (const std::system_error& e) {
      (void)hold->release();
      const bool missing = e.code() == std::errc::no_such_file_or_directory;
      print_error(fmt::format("cannot run '{}': {}", shown_name(o.command.front()),
                              missing ? "command not found" : e.code().message()));
      return missing ? exit_not_found : exit_cannot_execute;
    }

    bool lost = false;
    std::optional<clock_type::time_point> kill_at;
    int exit_code = -1;
    while (exit_code < 0) {
      std::array<pollfd, 2> fds{pollfd{signals.get(), POLLIN, 0},
                                pollfd{lost ? -1 : lost_pipe.read.get(), POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), kill_at ? poll_timeout(*kill_at) : -1) < 0 &&
          errno != EINTR) {
        throw os_error("poll");
      }
      if (!lost && fds[1].revents != 0) {
        lost = true;
        ::kill(-guard.group(), o.kill_grace.count() == 0 ? SIGKILL : SIGTERM);
        ::kill(-guard.group(), SIGCONT);
        kill_at = clock_type::now() + o.kill_grace;
        print_error(fmt::format(
            "lost lock '{}' while the command ran ({}): stopping the command", shown_name(o.name),
            o.lease ? fmt::format("its --lease of {} ran out", format_seconds(*o.lease))
                    : std::string("a majority of the masters could not confirm it in time, or "
                                  "it was deleted or taken")));
      }
      if (kill_at && clock_type::now() >= *kill_at) {
        ::kill(-guard.group(), SIGKILL);
        kill_at.reset();
      }
      for (int sig = 0; (sig = read_signal(signals.get())) != 0;) {
        if (is_forwarded(sig)) ::kill(-guard.group(), sig);
      }
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG) == 0 &&
          info.si_pid != 0) {
        exit_code = info.si_code == CLD_EXITED ? info.si_status : exit_signal_base + info.si_status;
      }
    }
    guard.dismiss();
    if (hold->release() == errc::lock_lost) lost = true;
    if (lost) {
      print_error(fmt::format("the command ended after lock '{}' was lost; exit status {}",
                              shown_name(o.name), exit_lock_lost));
      return exit_lock_lost;
    }
    return exit_code;
  } catch (const dlock::error& e) {
    print_error(fmt::format("lock '{}': {}", shown_name(o.name), e.what()));
    return exit_code_for(e);
  } catch (const std::system_error& e) {
    print_error(e.what());
    return exit_os_error;
  }
}

}  // namespace dlock::cli
