// dlock_fault_cli_worker: a worker of the fault suite that takes the lock with the `dlock exec`
// command instead of the library, in two roles.
//
// The loop (the worker process the driver starts and counts):
//
//   dlock_fault_cli_worker --dlock PATH --lock URL --resource URL --name NAME --worker N
//       --life L --records FILE --owner-file FILE [--lease-ms MS] [--hold-us US] [--parent PID]
//       [--netns /var/run/netns/NAME] [--log FILE]
//
// runs, until SIGTERM, `dlock --redis URL exec --watchdog LEASE --wait WAIT --kill-grace ... NAME
// -- dlock_fault_cli_worker --child ...`, as a cron job or a script would. The child (the command
// under the lock) does what a library worker does under the lock:
//
//   dlock_fault_cli_worker --child --resource URL --worker N --records FILE --owner-file FILE
//       [--hold-us US]
//
// It reads the fencing token from DLOCK_TOKEN, records `A <acquired> <token>` and tells the loop
// (on its stdout, a pipe) when it began, writes DLOCK_OWNER to the owner file (the driver finds the
// holding worker by it), works --hold-us, does the fenced write with the token and records
// `R <acquired> <end> <lost> <token> <write> 0`, where lost is when `dlock exec` told it the lock
// was lost: the SIGTERM dlock sends then (the command goes on to its write like a library worker
// whose stop_token fired, so that fencing is what refuses it).
//
// When `dlock exec` has exited and every process of the command is gone (the end of the pipe:
// after a kill -9 of dlock its guard kills them), the loop records
// `X <acquired> <time> <exit status of dlock exec>` (format in fault_records.hpp): status 70 means
// dlock reported the lock lost, told after the fact if the child had not been told, and a hold
// with no R line (its child was killed) ended then. `dlock exec` failing before it ran the child
// (other than 75, the lock still held after --wait) is an `E` line.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "dlock/dlock.hpp"
#include "fault_records.hpp"
#include "worker_support.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::fault::now_ns;
using dlock::fault::one_line;
using dlock::fault::record_file;

// dlock exec's own exit statuses (docs/cli.md, README "Exit status").
constexpr int exec_conflict = 75;  // the lock was still held after --wait
constexpr int exec_signal_base = 128;
// After a lost lock dlock exec sends SIGTERM, then SIGKILL after this. Longer than the child's
// fenced write can take (the resource client's request timeout), so the child always records.
constexpr auto exec_kill_grace = 10s;
// After dlock exec has exited, how long its command's processes may keep the pipe open.
constexpr auto command_gone_timeout = 15s;

constexpr std::string_view outlived = "\n(the command outlived dlock exec)";

std::atomic<bool> stop_requested{false};
std::atomic<std::int64_t> told_at{0};
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

extern "C" void on_sigterm_loop(int /*signal*/) {
  stop_requested.store(true);
}

// The child: SIGTERM from dlock exec is the news that the lock was lost.
extern "C" void on_sigterm_child(int /*signal*/) {
  std::int64_t expected = 0;
  told_at.compare_exchange_strong(expected, now_ns());
}

struct options {
  bool child = false;
  std::string dlock;
  std::string lock_url;
  std::string resource_url;
  std::string name = "fault:lock";
  int worker = 0;
  int life = 0;
  std::string records;
  std::string owner_file;
  int lease_ms = 1000;
  int hold_us = 200;
  int idle_us = 0;
  int wait_ms = 500;
  int parent = 0;
  std::string netns;
  std::string log;
};

std::string seconds_text(std::chrono::milliseconds ms) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.3f", static_cast<double>(ms.count()) / 1000.0);
  return text.data();
}

void install(int signal, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  action.sa_flags = SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
}

// --- the child: the command under the lock ------------------------------------------------------

int run_child(const options& o) {
  install(SIGTERM, on_sigterm_child);
  const char* token_text = std::getenv("DLOCK_TOKEN");
  const char* owner = std::getenv("DLOCK_OWNER");
  if (token_text == nullptr || owner == nullptr) {
    std::fprintf(stderr, "dlock_fault_cli_worker --child: DLOCK_TOKEN or DLOCK_OWNER not set\n");
    return 1;
  }
  const std::uint64_t token = std::stoull(token_text);
  const record_file records(o.records);
  const std::int64_t acquired = now_ns();
  records.line("A " + std::to_string(acquired) + " " + std::to_string(token));
  // Told to the loop before the driver can find this hold by its owner (next): a kill -9 of dlock
  // from then on still leaves the loop knowing which hold ended.
  std::printf("H %lld %llu\n", static_cast<long long>(acquired),
              static_cast<unsigned long long>(token));
  std::fflush(stdout);
  {
    // Replaced whole (a rename), so the driver never reads half of it.
    const std::string temporary = o.owner_file + ".new";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const std::string text = std::string(owner) + "\n";
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      throw std::runtime_error("cannot write " + temporary);
    }
    ::close(fd);
    std::rename(temporary.c_str(), o.owner_file.c_str());
  }

  // The work under the lock, then the fenced write, as dlock_fault_worker does.
  if (o.hold_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.hold_us));
  int write = -1;
  try {
    dlock::client_options resource_options = dlock::client_options::from_url(o.resource_url);
    resource_options.client_name = "fault-resource-" + std::to_string(o.worker);
    dlock::client resource{resource_options};
    const dlock::script fenced_write{std::string(dlock::fault::fenced_write_lua)};
    const std::string token_arg = std::to_string(token);
    const std::string worker_arg = std::to_string(o.worker);
    const std::string time_arg = std::to_string(acquired);
    const std::string_view keys[] = {dlock::fault::resource_highest_key,
                                     dlock::fault::resource_list_key,
                                     dlock::fault::resource_refused_key};
    const std::string_view args[] = {token_arg, worker_arg, time_arg};
    write = resource.eval(fenced_write, keys, args).integer == 1 ? 1 : 0;
  } catch (const dlock::error& e) {
    records.line("E " + std::to_string(now_ns()) + " write: " + one_line(e.what()));
  }
  const std::int64_t end = now_ns();
  records.line("R " + std::to_string(acquired) + " " + std::to_string(end) + " " +
               std::to_string(told_at.load()) + " " + std::to_string(token) + " " +
               std::to_string(write) + " 0");
  return 0;
}

// --- the loop
// -------------------------------------------------------------------------------------

// Both servers answer (retried briefly: the lock server may be in the middle of a fault). The
// clients are gone when this returns, so the loop forks from a single-threaded process.
void wait_for_servers(const options& o) {
  dlock::client_options lock_options = dlock::client_options::from_url(o.lock_url);
  lock_options.connect_timeout = 1000ms;
  lock_options.request_timeout = 3000ms;
  dlock::client lock_server{lock_options};
  dlock::client resource{o.resource_url};
  for (int attempt = 0;; ++attempt) {
    try {
      lock_server.command({"PING"});
      resource.command({"PING"});
      return;
    } catch (const dlock::error&) {
      if (attempt >= 50 || stop_requested.load()) throw;
      std::this_thread::sleep_for(100ms);  // retry pacing
    }
  }
}

// Runs one `dlock exec`; returns its exit status (128 + N if a signal N ended it) and what its
// child said on the pipe ("H <acquired> <token>" once it runs under the lock).
std::pair<int, std::string> run_exec(const options& o, const std::string& self, int log_fd) {
  std::vector<std::string> args = {
      o.dlock,        "--redis",
      o.lock_url,     "exec",
      "--watchdog",   seconds_text(std::chrono::milliseconds(o.lease_ms)),
      "--wait",       seconds_text(std::chrono::milliseconds(o.wait_ms)),
      "--kill-grace", seconds_text(exec_kill_grace),
      o.name,         "--",
      self,           "--child",
      "--resource",   o.resource_url,
      "--worker",     std::to_string(o.worker),
      "--records",    o.records,
      "--owner-file", o.owner_file,
      "--hold-us",    std::to_string(o.hold_us)};
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::array<int, 2> out{};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // dlock dies with this loop: a stopped suite leaves no holder behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    if (log_fd >= 0) ::dup2(log_fd, STDERR_FILENO);
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    ::sigaction(SIGTERM, &action, nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(null_fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // The pipe ends when every process that has it is gone: dlock, its guard, the child.
  std::string said;
  const auto deadline = std::chrono::steady_clock::now() + command_gone_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      said += outlived;
      break;
    }
    std::array<char, 256> buffer{};
    const ssize_t got = ::read(out[0], buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    said.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(out[0]);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : exec_signal_base + WTERMSIG(status);
  return {code, said};
}

int run_loop(const options& o, const std::string& self) {
  const record_file records(o.records);
  wait_for_servers(o);
  records.line("W " + std::to_string(o.worker) + " " + std::to_string(o.life) + " " +
               std::to_string(::getpid()) + " cli");
  std::printf("ready cli\n");
  std::fflush(stdout);
  const int log_fd =
      o.log.empty() ? -1 : ::open(o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

  while (!stop_requested.load()) {
    const auto [code, said] = run_exec(o, self, log_fd);
    const std::int64_t gone = now_ns();
    long long acquired = 0;
    unsigned long long token = 0;
    if (said.find(outlived) != std::string::npos) {
      records.line("E " + std::to_string(gone) + " the command outlived dlock exec by " +
                   std::to_string(command_gone_timeout.count()) + " s");
    }
    // No longer the holder, as far as the driver's look for a holder goes.
    std::remove(o.owner_file.c_str());
    if (std::sscanf(said.c_str(), "H %lld %llu", &acquired, &token) == 2) {
      records.line("X " + std::to_string(acquired) + " " + std::to_string(gone) + " " +
                   std::to_string(code));
    } else if (code != exec_conflict) {
      // The command may have begun and been killed before it said so: "X 0" ends the hold this
      // file recorded last, if it is still open.
      records.line("X 0 " + std::to_string(gone) + " " + std::to_string(code));
      if (code != exec_signal_base + SIGKILL) {
        records.line("E " + std::to_string(gone) + " dlock exec exited with " +
                     std::to_string(code) + " before running the command");
        std::this_thread::sleep_for(20ms);  // retry pacing
      }
    }
    if (o.idle_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.idle_us));
  }
  if (log_fd >= 0) ::close(log_fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"dlock_fault_cli_worker: a worker of dlock_fault_suite that uses `dlock exec`",
               "dlock_fault_cli_worker"};
  app.add_flag("--child", o.child, "Run as the command under the lock (started by dlock exec)");
  app.add_option("--dlock", o.dlock, "The dlock command");
  app.add_option("--lock", o.lock_url, "Lock server URL");
  app.add_option("--resource", o.resource_url, "Resource server URL")->required();
  app.add_option("--name", o.name, "Lock name");
  app.add_option("--worker", o.worker, "Worker number")->required();
  app.add_option("--life", o.life, "How many times this worker was started before");
  app.add_option("--records", o.records, "Record file (appended)")->required();
  app.add_option("--owner-file", o.owner_file, "Where the child writes DLOCK_OWNER")->required();
  app.add_option("--lease-ms", o.lease_ms, "Watchdog lease")->check(CLI::Range(10, 600'000));
  app.add_option("--hold-us", o.hold_us, "Work under the lock")->check(CLI::Range(0, 10'000'000));
  app.add_option("--idle-us", o.idle_us, "Time between a release and the next lock call")
      ->check(CLI::Range(0, 10'000'000));
  app.add_option("--wait-ms", o.wait_ms,
                 "dlock exec --wait: how long it waits for the lock before the loop looks at\n"
                 "SIGTERM again (default 500)")
      ->check(CLI::Range(1, 600'000));
  app.add_option("--parent", o.parent, "Exit if this process is not the parent");
  app.add_option("--netns", o.netns, "Enter this network namespace first (/var/run/netns/NAME)");
  app.add_option("--log", o.log, "dlock exec's stderr goes here (appended)");
  CLI11_PARSE(app, argc, argv);

  if (o.child) {
    try {
      return run_child(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlock_fault_cli_worker --child %d: %s\n", o.worker, e.what());
      return 1;
    }
  }
  if (o.dlock.empty() || o.lock_url.empty()) {
    std::fprintf(stderr, "dlock_fault_cli_worker: --dlock and --lock are required\n");
    return 2;
  }
  // Die with the driver; a session of its own, so that dlock exec is never in a terminal's
  // foreground and always gives its command a guarded process group (docs/cli.md).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return 70;
  if (o.parent != 0 && ::getppid() != o.parent) return 70;
  ::setsid();
  install(SIGTERM, on_sigterm_loop);
  install(SIGINT, on_sigterm_loop);
  try {
    if (!o.netns.empty()) dlock::fault::enter_netns(o.netns);
    std::array<char, 4096> self{};
    const ssize_t length = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
    if (length <= 0) throw std::runtime_error("cannot read /proc/self/exe");
    return run_loop(o, std::string(self.data(), static_cast<std::size_t>(length)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_cli_worker %d: %s\n", o.worker, e.what());
    return 1;
  }
}
