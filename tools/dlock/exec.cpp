// dlock exec: take a lock, run a command under it, release the lock when the command has exited.
//
// Everything is an event; nothing sleeps or polls. The signals dlock handles are blocked in every
// thread (the mask is set before the client starts its I/O thread) and read from one signalfd;
// the asynchronous acquisition completes through a pipe (written by a thread that waits for its
// future); a lost hold (the lease's stop_token) writes a byte to another pipe; the kill grace
// period is the timeout of poll(). The hold is a dlock::lock_lease, which belongs to no thread.
//
//   waiting for the lock ──INT/TERM/HUP──> cancel the wait, exit 128+sig, the command never runs
//        │ acquired
//        v
//   command running ──INT/TERM/HUP──> forwarded to the command (see command_process)
//        │        └──hold lost──> SIGTERM to the command, SIGKILL after --kill-grace, exit 70
//        │ command exited
//        v
//   release the lock; exit with the command's code (70 if the hold was lost meanwhile)
//
// If dlock is killed while the command runs, the command dies with it without dlock's help (the
// kernel's parent-death signal, and a guard process for its process group: tethered_spawn.hpp).
#include "exec.hpp"

#include <dirent.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <set>
#include <stop_token>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "posix_support.hpp"
#include "tethered_spawn.hpp"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace dlock::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// Sent on to the command; while dlock still waits for the lock they end it.
constexpr std::array forwarded_signals{SIGINT, SIGTERM, SIGHUP};

bool is_forwarded(int sig) {
  return std::find(forwarded_signals.begin(), forwarded_signals.end(), sig) !=
         forwarded_signals.end();
}

// The descriptors open now. Taken first thing, it is the set dlock inherited, which the command
// inherits too; descriptors dlock opens later must not leak into the command, where they would
// keep dlock's connections open after dlock is gone. (The library's Redis sockets are close-on-exec
// already; this also covers whatever else dlock or a library it uses may open.)
std::set<int> open_descriptors() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;  // no /proc: nothing is marked, as without this step
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != own) fds.insert(fd);
  }
  ::closedir(dir);
  return fds;
}

void close_on_exec_except(const std::set<int>& inherited) {
  for (const int fd : open_descriptors()) {
    if (inherited.contains(fd)) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

// One pending signal from a non-blocking signalfd; ssi_signo is 0 when there is none.
signalfd_siginfo read_signal(int signal_fd) {
  signalfd_siginfo info{};
  if (::read(signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) {
    info.ssi_signo = 0;
  }
  return info;
}

// The asynchronous acquisition in its future form, whose dlock::error carries the server's or the
// system's message ("NOPERM ...", "Connection refused"); the callback form (lease_handler) gets
// only an error_code, whose message is a bare "server error". A thread waits for the future and
// wakes the main thread's poll() through a pipe.
// Construct it before the client: on an early way out (an exception) the client is then destroyed
// first, which completes the acquisition (client_stopped) and so ends the thread before the
// destructor joins it.
class acquisition {
 public:
  acquisition() : wake_(make_pipe(O_NONBLOCK)) {}

  void start(std::future<lock_lease> outcome) {
    outcome_ = std::move(outcome);
    waiter_ = std::jthread([this] {
      outcome_.wait();
      done_.store(true, std::memory_order_release);
      const char byte = 1;
      (void)!::write(wake_.write.get(), &byte, 1);
    });
  }
  int fd() const { return wake_.read.get(); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  // After done(): the lease, empty when the wait ran out. Throws the acquisition's dlock::error.
  lock_lease take() { return outcome_.get(); }

 private:
  pipe_ends wake_;
  std::future<lock_lease> outcome_;  // the thread's alone until done_
  std::atomic<bool> done_{false};
  std::jthread waiter_;  // the last member: joined before the others are destroyed
};

// Whether the lock still records the lease's hold: the reentrant lock's hash has its field, the
// plain lock's key its value ("<owner>:<token>"). When Redis cannot be asked, the library's view
// stands: it reports a hold it could not confirm in time as lost.
bool still_held(const dlock::mutex& m, const std::optional<dlock::fair_mutex>& fair,
                const std::optional<dlock::plain_lock>& plain,
                const std::optional<dlock::semaphore>& sem, const std::string& permit_id,
                const std::optional<dlock::shared_mutex>& rw, bool writer,
                const lock_lease& lease) {
  try {
    const lock_status s = sem     ? sem->status()
                          : plain ? plain->status()
                          : rw    ? rw->status()
                          : fair  ? fair->status()
                                  : m.status();
    const std::string owner =
        sem      ? permit_id
        : plain  ? lease.owner_id() + ":" + std::to_string(lease.fencing_token())
        : writer ? lease.owner_id() + ":write"  // the read-write lock's writer field
                 : lease.owner_id();
    return std::any_of(s.holders.begin(), s.holders.end(),
                       [&](const lock_holder& h) { return h.owner == owner; });
  } catch (const dlock::error& e) {
    // wrong_type: overwritten with other data (protocol_error: a hash whose values are not hold
    // counts); the hold is gone. Anything else: Redis could not be asked.
    return e.code() != errc::wrong_type && e.code() != errc::protocol_error;
  }
}

// The command as a child process, in one of two setups:
//  - dlock in the foreground of a terminal (interactive): the command stays in dlock's process
//    group, so that it can read the terminal, job control (Ctrl-Z, fg) and pipelines such as
//    `dlock exec x -- make | less` work as without dlock, and Ctrl-C reaches it directly.
//  - otherwise (cron, scripts, services): its own process group, so that forwarded signals and a
//    lost lock reach everything it started, not only the child itself. The group is led by a
//    guard process that kills it if dlock dies (tethered_spawn.hpp).
// Either way the command itself is killed by the kernel when dlock dies (PR_SET_PDEATHSIG).
class command_process {
 public:
  // Starts the command; throws std::system_error with the errno of the exec (ENOENT when it is
  // not found) or of the step before it that failed.
  // `mask`: the signal mask dlock inherited; `default_sigpipe`: whether SIGPIPE had its default
  // action before dlock ignored it for itself.
  command_process(const exec_options& o, std::vector<std::string> env, const sigset_t& mask,
                  bool default_sigpipe) {
    std::vector<std::string> argv_storage = o.command;
    const std::vector<char*> argv = c_strings(argv_storage);
    const std::vector<char*> envp = c_strings(env);
    // What dlock changed for itself goes back to what the command would have had without dlock.
    const sigset_t defaults =
        default_sigpipe ? make_sigset({SIGPIPE, SIGCHLD}) : make_sigset({SIGCHLD});
    if (!in_terminal_foreground()) guard_.emplace();
    pid_ = spawn_tethered(argv.data(), envp.data(), mask, defaults, guard_ ? guard_->group() : 0);
  }
  // Only reached with the child reaped, except when an exception unwinds run_exec: then the
  // command is killed rather than left running without its lock. (The guard goes with guard_.)
  ~command_process() {
    if (pid_ > 0) {
      signal(SIGKILL);
      siginfo_t info{};
      ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED);
    }
  }
  command_process(const command_process&) = delete;
  command_process& operator=(const command_process&) = delete;

  // Sends `sig` to the command: its process group, or itself when it shares dlock's. Only until
  // it is reaped, so the id cannot belong to someone else by then (the group's id is the guard's,
  // which is reaped after the command).
  void signal(int sig) const {
    if (pid_ > 0) ::kill(guard_ ? -guard_->group() : pid_, sig);
  }

  // Whether a signal that reached dlock should be passed on. Signals from the terminal (Ctrl-C,
  // hangup) went to the whole foreground group: a command sharing it has them already.
  bool should_forward(const signalfd_siginfo& info) const {
    return is_forwarded(static_cast<int>(info.ssi_signo)) && (guard_ || info.ssi_code != SI_KERNEL);
  }

  struct ending {
    int exit_code;  // its status, or 128 + signal
    int signal;     // the signal that killed it, 0 if it exited
  };
  // Returns how the command ended once it has, without blocking. `before_reap` runs while the
  // child is a zombie, before the guard is dismissed: signal() still reaches its group. What the
  // command left running in its group afterwards is no longer tied to dlock.
  template <typename F>
  std::optional<ending> check(F&& before_reap) {
    if (pid_ <= 0) return std::nullopt;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) return std::nullopt;
      throw os_error("waitid");  // ECHILD: reaped behind dlock's back; never "still running"
    }
    if (info.si_pid == 0) return std::nullopt;
    before_reap();
    ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED);
    pid_ = -1;
    guard_.reset();
    if (info.si_code == CLD_EXITED) return ending{info.si_status, 0};
    return ending{exit_signal_base + info.si_status, info.si_status};
  }

 private:
  // In a terminal's foreground: dlock's process group is the one the controlling terminal
  // serves. Asked of /dev/tty, not stdin, which may be a pipe in an interactive pipeline.
  static bool in_terminal_foreground() {
    const int tty = ::open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (tty < 0) return false;  // no controlling terminal: cron, services, scripts
    const bool foreground = ::tcgetpgrp(tty) == ::getpgrp();
    ::close(tty);
    return foreground;
  }

  std::optional<group_guard> guard_;  // with a process group of its own; before pid_
  pid_t pid_ = -1;                    // -1 once reaped
};

}  // namespace

int run_exec(const exec_options& o) {
  const std::set<int> inherited = open_descriptors();
  // What the messages call what is held: "lock 'x'", or a permit of "semaphore 'x'".
  const std::string subject =
      fmt::format("{} '{}'", o.semaphore_permits ? "semaphore" : "lock", shown_name(o.name));
  const std::string held = o.semaphore_permits ? "a permit of " + subject : subject;

  // Blocked in this thread before any other exists, so in every thread: these signals wait in the
  // signalfd instead of interrupting anyone. The command gets the original mask.
  exec_signals taken = take_exec_signals();
  const unique_fd& signals = taken.fd;
  const sigset_t& original = taken.original;
  const bool default_sigpipe = taken.default_sigpipe;
  if (!signals.valid()) {
    print_error(fmt::format("signalfd: {}", std::strerror(errno)));
    return exit_os_error;
  }

  try {
    client_options copts = client_options_for(o.redis_url);
    if (o.watchdog) copts.lock_watchdog_timeout = *o.watchdog;
    acquisition waiting;  // before the client: see acquisition
    dlock::client redis{copts};
    dlock::mutex m = redis.get_lock(o.name);
    std::optional<dlock::fair_mutex> fair;
    if (o.fair) fair.emplace(redis.get_fair_lock(o.name));
    std::optional<dlock::plain_lock> plain;
    if (o.plain) plain.emplace(redis.get_plain_lock(o.name));
    std::optional<dlock::semaphore> sem;
    if (o.semaphore_permits) sem.emplace(redis.get_semaphore(o.name, *o.semaphore_permits));
    std::optional<dlock::shared_mutex> rw;
    if (o.shared || o.exclusive) rw.emplace(redis.get_read_write_lock(o.name));
    // Connection and authentication problems surface here, with the server's own words.
    redis.command({"PING"});

    // Waiting, cancelled by a signal: the library then completes with errc::cancelled, or
    // releases a hold that was arriving at that moment.
    std::stop_source give_up;
    acquire_options wait_options{
        .wait = o.nonblock ? std::optional(std::chrono::milliseconds(0)) : o.wait,
        .lease = o.lease,
        .cancel = give_up.get_token()};
    waiting.start(
        sem     ? sem->async_acquire(wait_options)
        : plain ? plain->async_acquire(wait_options)
        : rw ? (o.shared ? rw->async_acquire_shared(wait_options) : rw->async_acquire(wait_options))
        : fair ? fair->async_acquire(wait_options)
               : m.async_acquire(wait_options));
    int signalled = 0;
    while (!waiting.done()) {
      std::array<pollfd, 2> fds{pollfd{signals.get(), POLLIN, 0}, pollfd{waiting.fd(), POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) throw os_error("poll");
      for (int sig = 0; (sig = static_cast<int>(read_signal(signals.get()).ssi_signo)) != 0;) {
        if (signalled == 0 && is_forwarded(sig)) {
          signalled = sig;
          give_up.request_stop();
        }
      }
    }
    // Released on every way out, after the command (declared later) has been reaped. Taken out
    // of the future even when a signal ends dlock now, so that it is released before the client
    // goes.
    lock_lease lease;
    std::optional<dlock::error> failed;
    try {
      lease = waiting.take();
    } catch (const dlock::error& e) {
      failed = e;
    }
    // A signal right after the acquisition still counts as "while waiting".
    for (int sig = 0;
         signalled == 0 && (sig = static_cast<int>(read_signal(signals.get()).ssi_signo)) != 0;) {
      if (is_forwarded(sig)) signalled = sig;
    }
    if (signalled != 0) {
      print_error(fmt::format("{} while waiting for {}; the command was not run",
                              signal_name(signalled), subject));
      return exit_signal_base + signalled;
    }
    if (failed) {
      print_error(fmt::format("{}: {}", subject, failed->what()));
      return exit_code_for(*failed);
    }
    if (!lease) {
      if (sem) {
        print_error(o.nonblock ? fmt::format("semaphore '{}' has no permit free; the command "
                                             "was not run (-n)",
                                             shown_name(o.name))
                               : fmt::format("semaphore '{}' still has no permit free after "
                                             "waiting {}; the command was not run",
                                             shown_name(o.name), format_seconds(*o.wait)));
        return o.conflict_exit_code;
      }
      print_error(o.nonblock ? fmt::format("lock '{}' is held; the command was not run (-n)",
                                           shown_name(o.name))
                             : fmt::format("lock '{}' is still held after waiting {}; the "
                                           "command was not run",
                                           shown_name(o.name), format_seconds(*o.wait)));
      return o.conflict_exit_code;
    }

    const std::string permit_id = sem ? dlock::permit::id_of(lease) : std::string();

    // The lease's stop_token stops on the I/O thread; the callback turns that into a readable
    // pipe. It runs at once if the hold is already lost.
    const pipe_ends lost_pipe = make_pipe(O_NONBLOCK);
    const std::stop_callback on_lost(lease.stop_token(), [fd = lost_pipe.write.get()]() noexcept {
      const char byte = 1;
      (void)!::write(fd, &byte, 1);
    });

    if (lease.lost()) {
      // Lost between the acquisition and now (a tiny --lease, a force unlock): do not start.
      print_error(fmt::format("lost {} before the command started; it was not run", held));
      return exit_lock_lost;
    }
    close_on_exec_except(inherited);
    std::optional<command_process> child;
    try {
      child.emplace(o,
                    command_environment(o.name, o.shared ? 0 : lease.fencing_token(),
                                        lease.owner_id(), permit_id),
                    original, default_sigpipe);
    } catch (const os_error& e) {  // fork, pipe2: not about the command
      print_error(fmt::format("cannot start '{}': {}", shown_name(o.command.front()), e.what()));
      return exit_os_error;
    } catch (const std::system_error& e) {
      const bool missing = e.code() == std::errc::no_such_file_or_directory;
      print_error(fmt::format("cannot run '{}': {}", shown_name(o.command.front()),
                              missing ? "command not found" : e.code().message()));
      return missing ? exit_not_found : exit_cannot_execute;
    }

    bool lost = false;
    auto report_lost = [&](std::string_view action) {
      lost = true;
      const std::string reason =
          o.lease ? fmt::format("its --lease of {} ran out", format_seconds(*o.lease))
                  : std::string("it was deleted or taken, or Redis could not confirm it in time");
      print_error(fmt::format("lost {} while the command ran ({}){}", held, reason, action));
    };
    std::optional<clock_type::time_point> kill_at;
    std::optional<command_process::ending> ended;
    while (!ended) {
      // Once the loss is handled its pipe stays readable: poll() then ignores it (fd -1).
      std::array<pollfd, 2> fds{pollfd{signals.get(), POLLIN, 0},
                                pollfd{lost ? -1 : lost_pipe.read.get(), POLLIN, 0}};
      if (::poll(fds.data(), fds.size(), kill_at ? poll_timeout(*kill_at) : -1) < 0 &&
          errno != EINTR) {
        throw os_error("poll");
      }
      if (!lost && fds[1].revents != 0) {
        // Signal first, then say so: the command must stop even if writing to stderr fails.
        if (o.kill_grace.count() == 0) {
          child->signal(SIGKILL);
          report_lost(": sent SIGKILL to the command");
        } else {
          child->signal(SIGTERM);
          child->signal(SIGCONT);  // a stopped command must run to act on SIGTERM
          kill_at = clock_type::now() + o.kill_grace;
          report_lost(fmt::format(": sent SIGTERM to the command, SIGKILL in {}",
                                  format_seconds(o.kill_grace)));
        }
      }
      if (kill_at && clock_type::now() >= *kill_at) {
        print_error(fmt::format("the command outlived the {} grace period: sending SIGKILL",
                                format_seconds(o.kill_grace)));
        child->signal(SIGKILL);
        kill_at.reset();
      }
      for (signalfd_siginfo info = read_signal(signals.get()); info.ssi_signo != 0;
           info = read_signal(signals.get())) {
        if (child->should_forward(info)) child->signal(static_cast<int>(info.ssi_signo));
      }
      // Checked on every wake-up: a SIGCHLD may have been read together with other signals.
      ended = child->check([&] {
        // What the command of a lost lock left behind in its process group goes too.
        if (lost) child->signal(SIGKILL);
      });
    }

    // Renewals notice a lost hold only every third of the lease, so a lock deleted or taken since
    // the last one would go unnoticed: one look at the lock before releasing it closes that gap.
    if (!lost && !still_held(m, fair, plain, sem, permit_id, rw, o.exclusive, lease)) {
      report_lost(", noticed when it ended");
    }
    // The hold may also have been reported lost just now, with the pipe not yet read.
    if (lease.release() == errc::lock_lost && !lost) report_lost("");
    if (lost) {
      const std::string how = ended->signal != 0 ? "by " + signal_name(ended->signal)
                                                 : fmt::format("with status {}", ended->exit_code);
      print_error(fmt::format("the command ended {} after {} was lost; exit status {}", how, held,
                              exit_lock_lost));
      return exit_lock_lost;
    }
    return ended->exit_code;
  } catch (const dlock::error& e) {
    print_error(fmt::format("{}: {}", subject, e.what()));
    return exit_code_for(e);
  } catch (const std::system_error& e) {
    print_error(e.what());
    return exit_os_error;
  }
}

}  // namespace dlock::cli
