// dlock_fault_suite: a mutual-exclusion checker under crashes, pauses, restarts and stalls.
//
// It starts a lock server and a separate resource server (private redis-server processes), runs
// --workers dlock_fault_worker processes that take one dlock::mutex in a loop and do a fenced
// write to the resource under it, injects faults on a schedule until --acquisitions holds were
// taken, stops the workers, and checks their records (fault_records.hpp) together with what the
// resource accepted. It prints a table and, as its last line, a JSON summary.
//
// Exit status: 0 no violation; 1 a violation (unreported overlapping holds, fenced writes accepted
// out of token order, accepted writes no hold explains); 2 usage; 3 the run itself failed (a
// server did not start, a worker crashed on its own, fewer than --min-acquisitions holds).
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
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "dlock/dlock.hpp"
#include "fault_records.hpp"
#include "redis_process.hpp"

#ifndef DLOCK_FAULT_WORKER
#define DLOCK_FAULT_WORKER "dlock_fault_worker"
#endif

extern char** environ;

namespace {

using namespace std::chrono_literals;
using dlock::fault::fault_event;
using dlock::fault::now_ns;

const std::vector<std::string> all_fault_kinds = {"kill",  "pause",        "restart",
                                                  "sleep", "client-pause", "client-kill"};

struct suite_options {
  int workers = 4;
  std::uint64_t acquisitions = 10'000;
  std::uint64_t min_acquisitions = 0;
  int lease_ms = 1000;
  int hold_us = 1000;
  int fault_interval_ms = 500;
  std::vector<std::string> faults = all_fault_kinds;
  std::string persistence = "none";  // none, everysec, always
  bool no_lock = false;
  bool long_run = false;
  int time_limit_s = 170;
  unsigned seed = 1;
  std::string worker = DLOCK_FAULT_WORKER;
  bool keep_records = false;
  bool strict = true;
};

// --- worker processes --------------------------------------------------------------------------

struct worker_process {
  int id = 0;
  int life = 0;
  pid_t pid = -1;
  int out_fd = -1;  // its stdout, for the "ready" line
  std::string client_id;
  std::string records;
};

struct worker_life {
  int worker = 0;
  int life = 0;
  std::string path;
  std::int64_t killed_at = 0;
};

class worker_pool {
 public:
  worker_pool(const suite_options& o, std::string lock_url, std::string resource_url,
              std::string dir)
      : o_(o),
        lock_url_(std::move(lock_url)),
        resource_url_(std::move(resource_url)),
        dir_(std::move(dir)) {}
  ~worker_pool() {
    for (worker_process& w : workers_) {
      if (w.pid > 0) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, nullptr, 0);
      }
      if (w.out_fd >= 0) ::close(w.out_fd);
    }
  }
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  void start_all() {
    workers_.resize(static_cast<std::size_t>(o_.workers));
    for (int i = 0; i < o_.workers; ++i) {
      workers_[static_cast<std::size_t>(i)].id = i;
      spawn(workers_[static_cast<std::size_t>(i)]);
    }
    for (worker_process& w : workers_)
      wait_ready(w);
  }

  // kill -9, reap, and start a new life of the same worker. Returns the kill time.
  std::int64_t kill_and_restart(worker_process& w) {
    ::kill(w.pid, SIGCONT);
    ::kill(w.pid, SIGKILL);
    int status = 0;
    ::waitpid(w.pid, &status, 0);
    const std::int64_t killed = now_ns();  // it can do nothing after this
    w.pid = -1;
    for (worker_life& l : lives_) {
      if (l.worker == w.id && l.life == w.life) l.killed_at = killed;
    }
    ::close(w.out_fd);
    w.out_fd = -1;
    ++w.life;
    spawn(w);
    wait_ready(w);
    return killed;
  }

  // A worker that exited by itself (a crash): its description, or "" when all run.
  std::string find_dead() {
    for (worker_process& w : workers_) {
      int status = 0;
      if (w.pid > 0 && ::waitpid(w.pid, &status, WNOHANG) == w.pid) {
        w.pid = -1;
        return "worker " + std::to_string(w.id) + " life " + std::to_string(w.life) +
               (WIFSIGNALED(status) ? " killed by signal " + std::to_string(WTERMSIG(status))
                                    : " exited with " + std::to_string(WEXITSTATUS(status)));
      }
    }
    return {};
  }

  // SIGTERM to all, then wait up to `limit` for each; SIGKILL whoever is left. Returns how many
  // had to be killed or did not exit with 0.
  int stop_all(std::chrono::milliseconds limit) {
    for (worker_process& w : workers_) {
      if (w.pid > 0) {
        ::kill(w.pid, SIGCONT);
        ::kill(w.pid, SIGTERM);
      }
    }
    int bad = 0;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (worker_process& w : workers_) {
      if (w.pid <= 0) continue;
      int status = 0;
      pid_t got = 0;
      // POSIX has no waitpid() with a timeout: poll, bounded by the deadline.
      while ((got = ::waitpid(w.pid, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
      }
      if (got != w.pid) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, &status, 0);
        ++bad;
      } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ++bad;
      }
      w.pid = -1;
    }
    return bad;
  }

  std::vector<worker_process>& workers() { return workers_; }
  const std::vector<worker_life>& lives() const { return lives_; }

 private:
  void spawn(worker_process& w) {
    w.records = dir_ + "/worker-" + std::to_string(w.id) + "-" + std::to_string(w.life) + ".txt";
    lives_.push_back({w.id, w.life, w.records, 0});
    std::vector<std::string> args = {o_.worker,
                                     "--lock",
                                     lock_url_,
                                     "--resource",
                                     resource_url_,
                                     "--worker",
                                     std::to_string(w.id),
                                     "--life",
                                     std::to_string(w.life),
                                     "--records",
                                     w.records,
                                     "--lease-ms",
                                     std::to_string(o_.lease_ms),
                                     "--hold-us",
                                     std::to_string(o_.hold_us),
                                     "--parent",
                                     std::to_string(::getpid())};
    if (o_.no_lock) args.emplace_back("--no-lock");
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);

    std::array<int, 2> out{};
    if (::pipe2(out.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, o_.worker.c_str(), &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      throw std::runtime_error("cannot start " + o_.worker + ": " + std::strerror(rc));
    }
    w.pid = pid;
    w.out_fd = out[0];
  }

  // Reads the worker's "ready <client id>" line; throws if it does not come within 15 s.
  void wait_ready(worker_process& w) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{w.out_fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) throw std::runtime_error("worker " + std::to_string(w.id) + " not ready");
      std::array<char, 256> buffer{};
      const ssize_t got = ::read(w.out_fd, buffer.data(), buffer.size());
      if (got <= 0) {
        throw std::runtime_error("worker " + std::to_string(w.id) + " exited before ready");
      }
      line.append(buffer.data(), static_cast<std::size_t>(got));
    }
    if (line.rfind("ready ", 0) != 0) throw std::runtime_error("worker said: " + line);
    w.client_id = line.substr(6, line.find('\n') - 6);
  }

  const suite_options& o_;
  std::string lock_url_;
  std::string resource_url_;
  std::string dir_;
  std::vector<worker_process> workers_;
  std::vector<worker_life> lives_;
};

// --- the driver's own Redis commands -------------------------------------------------------------

// A command to the lock server while faults happen: retried a few times (a restart or a CLIENT
// KILL can fail one), bounded.
dlock::reply command_retry(dlock::client& c, std::initializer_list<std::string_view> args) {
  for (int attempt = 1;; ++attempt) {
    try {
      return c.command(args);
    } catch (const dlock::error& e) {
      if (attempt >= 5) throw;
      std::this_thread::sleep_for(50ms);  // retry pacing; the reconnect has no event we can see
    }
  }
}

// The worker whose client holds the lock now, or nullptr.
worker_process* find_holder(dlock::client& lock_server, worker_pool& pool,
                            const std::string& name) {
  const dlock::reply fields = command_retry(lock_server, {"HKEYS", name});
  for (const dlock::reply& f : fields.elements) {
    const std::string client_id = f.str.substr(0, f.str.find(':'));
    for (worker_process& w : pool.workers()) {
      if (w.pid > 0 && w.client_id == client_id) return &w;
    }
  }
  return nullptr;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items)
    out += (out.empty() ? "" : separator) + item;
  return out;
}

// --- the run -------------------------------------------------------------------------------------

int run(const suite_options& o) {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::string lock_name = "fault:lock";

  std::printf(
      "dlock fault suite: %d worker processes, watchdog lease %d ms, hold %d us, "
      "persistence %s, target %llu acquisitions%s\n",
      o.workers, o.lease_ms, o.hold_us, o.persistence.c_str(),
      static_cast<unsigned long long>(o.acquisitions),
      o.no_lock ? ", --no-lock (workers take NO lock: the checker must fail)" : "");
  std::printf("faults: %s, one every %d ms\n", join(o.faults, " ").c_str(), o.fault_interval_ms);
  std::printf(
      "skipped: network partitions and added latency (they need network namespaces and nftables "
      "or tc, i.e. root and a kernel that allows them; not built yet), failovers (dlock talks to "
      "one server: no replicas, Sentinel or Cluster yet)\n");
  std::fflush(stdout);

  dlock::tools::redis_process_options lock_options;
  if (o.persistence == "everysec" || o.persistence == "always") {
    lock_options.extra_args = {"--appendonly", "yes", "--appendfsync", o.persistence};
  }
  dlock::tools::redis_process lock_server_process(lock_options);
  dlock::tools::redis_process resource_process;
  const bool restart_forgets = o.persistence != "always";

  char dir_template[] = "/tmp/dlock-fault-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = dir_template;

  dlock::client_options driver_options = dlock::client_options::from_url(lock_server_process.url());
  driver_options.client_name = "fault-driver";
  driver_options.request_timeout = 10s;  // DEBUG SLEEP and CLIENT PAUSE answer late
  dlock::client lock_server{driver_options};
  dlock::client resource{resource_process.url()};

  std::vector<fault_event> faults;
  std::mt19937 random(o.seed);
  std::string crash;
  int stop_failures = 0;
  std::uint64_t progress = 0;
  bool time_limit_hit = false;
  std::vector<dlock::fault::worker_file> files;
  {
    worker_pool pool(o, lock_server_process.url(), resource_process.url(), dir);
    pool.start_all();

    const auto started = std::chrono::steady_clock::now();
    const auto limit = started + std::chrono::seconds(o.time_limit_s);
    auto next_fault = started + std::chrono::milliseconds(o.fault_interval_ms);
    std::size_t next_kind = 0;
    for (;;) {
      const dlock::reply done = resource.command({"LLEN", dlock::fault::resource_list_key});
      const dlock::reply refused = resource.command({"GET", dlock::fault::resource_refused_key});
      progress = static_cast<std::uint64_t>(done.integer) +
                 (refused.is_nil() ? 0 : std::stoull(refused.str));
      if (progress >= o.acquisitions) break;
      crash = pool.find_dead();
      if (!crash.empty()) break;
      const auto now = std::chrono::steady_clock::now();
      if (now >= limit) {
        time_limit_hit = true;
        break;
      }
      if (now < next_fault || o.faults.empty()) {
        // Progress is a counter on the resource with no event to wait for: look every 50 ms.
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            50ms, std::max<std::chrono::steady_clock::duration>(next_fault - now, 1ms)));
        continue;
      }

      fault_event f;
      f.kind = o.faults[next_kind++ % o.faults.size()];
      if (f.kind == "kill") {
        worker_process* target = find_holder(lock_server, pool, lock_name);
        f.on_holder = target != nullptr;
        if (target == nullptr) {
          target = &pool.workers()[random() % pool.workers().size()];
        }
        f.worker = target->id;
        f.start = now_ns();
        pool.kill_and_restart(*target);
        f.end = now_ns();
      } else if (f.kind == "pause") {
        // SIGSTOP the holder, and check it still holds once stopped (else resume and try again).
        // A killed worker's lock may still be held by nobody alive: look again for up to three
        // leases (the holder is on the server, with no event to wait for), bounded.
        worker_process* target = nullptr;
        const auto give_up =
            std::chrono::steady_clock::now() + 3 * std::chrono::milliseconds(o.lease_ms);
        for (int attempt = 0;
             attempt < 500 && target == nullptr && std::chrono::steady_clock::now() < give_up;
             ++attempt) {
          worker_process* candidate = find_holder(lock_server, pool, lock_name);
          if (candidate == nullptr) {
            std::this_thread::sleep_for(10ms);
            continue;
          }
          f.start = now_ns();
          ::kill(candidate->pid, SIGSTOP);
          if (find_holder(lock_server, pool, lock_name) == candidate) {
            target = candidate;
          } else {
            ::kill(candidate->pid, SIGCONT);
          }
        }
        if (target == nullptr) {
          // No holder to be found (the lock passed between every look): pause anyone.
          target = &pool.workers()[random() % pool.workers().size()];
          f.start = now_ns();
          ::kill(target->pid, SIGSTOP);
        } else {
          f.on_holder = true;
        }
        f.worker = target->id;
        // The fault is the pause itself: twice the lease, so the lease runs out meanwhile.
        std::this_thread::sleep_for(std::chrono::milliseconds(2 * o.lease_ms));
        ::kill(target->pid, SIGCONT);
        f.end = now_ns();
      } else if (f.kind == "restart") {
        f.forgets = restart_forgets;
        f.start = now_ns();
        lock_server_process.kill(SIGKILL);
        lock_server_process.start();
        f.end = now_ns();
      } else if (f.kind == "sleep") {
        // The server sleeps one and a half leases: holders must notice before it wakes.
        const std::string seconds = std::to_string(1.5 * o.lease_ms / 1000.0);
        f.start = now_ns();
        command_retry(lock_server, {"DEBUG", "SLEEP", seconds});
        f.end = now_ns();
      } else if (f.kind == "client-pause") {
        const std::string ms = std::to_string(3 * o.lease_ms / 2);
        f.start = now_ns();
        command_retry(lock_server, {"CLIENT", "PAUSE", ms, "ALL"});
        // Answered once the pause is over: the event that ends the fault.
        command_retry(lock_server, {"PING"});
        f.end = now_ns();
      } else if (f.kind == "client-kill") {
        f.start = now_ns();
        command_retry(lock_server, {"CLIENT", "KILL", "TYPE", "normal"});
        command_retry(lock_server, {"CLIENT", "KILL", "TYPE", "pubsub"});
        f.end = now_ns();
      }
      faults.push_back(f);
      std::printf(
          "  fault %-12s %s at +%.1f s\n", f.kind.c_str(),
          f.worker >= 0 ? (std::string("worker ") + std::to_string(f.worker) +
                           (f.on_holder ? " (holder)" : " (not holding)"))
                              .c_str()
                        : "",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      std::fflush(stdout);
      next_fault =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(o.fault_interval_ms);
    }
    stop_failures = pool.stop_all(10s);
    for (const worker_life& l : pool.lives()) {
      files.push_back({l.worker, l.life, l.killed_at, l.path});
    }
  }

  {
    // The faults beside the records, for a look afterwards: kind start end worker on_holder.
    std::FILE* out = std::fopen((dir + "/faults.txt").c_str(), "w");
    if (out != nullptr) {
      for (const fault_event& f : faults) {
        std::fprintf(out, "%s %lld %lld %d %d\n", f.kind.c_str(), static_cast<long long>(f.start),
                     static_cast<long long>(f.end), f.worker, f.on_holder ? 1 : 0);
      }
      std::fclose(out);
    }
  }

  // What the resource accepted, in its own order.
  std::vector<dlock::fault::accepted_write> accepted;
  const std::int64_t length = resource.command({"LLEN", dlock::fault::resource_list_key}).integer;
  for (std::int64_t from = 0; from < length; from += 10'000) {
    const std::string first = std::to_string(from);
    const std::string last = std::to_string(from + 9'999);
    const dlock::reply chunk =
        resource.command({"LRANGE", dlock::fault::resource_list_key, first, last});
    for (const dlock::reply& e : chunk.elements) {
      std::istringstream fields(e.str);
      dlock::fault::accepted_write w;
      fields >> w.token >> w.worker >> w.time;
      accepted.push_back(w);
    }
  }

  std::vector<dlock::fault::hold> holds;
  std::uint64_t errors = 0;
  for (const dlock::fault::worker_file& f : files) {
    if (!dlock::fault::read_worker_file(f, holds, errors)) {
      throw std::runtime_error("cannot read " + f.path);
    }
  }
  // Recovery: from each fault's start to the first acquisition after it.
  std::vector<std::int64_t> starts;
  for (const dlock::fault::hold& h : holds)
    starts.push_back(h.acquired);
  std::sort(starts.begin(), starts.end());
  const dlock::fault::check_result r =
      dlock::fault::check(holds, accepted, faults, errors, o.strict);

  // --- the table ---
  std::printf("\n  %-46s %12s\n", "what", "count");
  const auto row = [](const char* what, std::uint64_t n, const char* note = "") {
    std::printf("  %-46s %12llu  %s\n", what, static_cast<unsigned long long>(n), note);
  };
  row("acquisitions (believed holds)", r.acquisitions);
  row("holds reported lost (stop_token fired)", r.holds_lost);
  row("  told only after the work was done", r.holds_lost_after_work);
  row("holds ended by kill -9 of their holder", r.holds_killed);
  row("lock calls that failed (retried)", r.lock_errors);
  row("overlapping believed holds", r.overlaps);
  row("  earlier holder told of its loss (late)", r.overlaps_reported,
      "expected after a pause of the holder");
  row("    of which no injected fault explains", r.overlaps_reported_unexplained,
      "not a violation: the holder was told; a descheduled process is a pause too");
  std::printf("  %-46s %12.1f\n", "longest time a holder was told late (ms)",
              static_cast<double>(r.max_told_late_ns) / 1e6);
  row("  unreported, a restart forgot the hold", r.overlaps_forgotten,
      restart_forgets ? "expected without appendfsync always" : "");
  row("  unreported, a holder stalled past its lease", r.overlaps_unreported_stalled,
      o.strict ? "VIOLATION if > 0 (released before its watchdog ran, never told)"
               : "not failing (--no-strict): released before its watchdog ran, never told");
  row("  unreported", r.overlaps_unreported, "VIOLATION if > 0");
  std::printf("  %-46s %12.1f\n", "longest overlap (ms)",
              static_cast<double>(r.max_overlap_ns) / 1e6);
  row("fenced writes accepted", r.writes_accepted);
  row("fenced writes refused (stale token)", r.writes_refused);
  row("fenced writes failed (no answer)", r.writes_failed);
  row("fenced writes accepted out of token order", r.fenced_out_of_order, "VIOLATION if > 0");
  row("accepted writes of no recorded hold", r.accepted_unknown, "VIOLATION if > 0");
  row("holds whose token did not increase", r.tokens_not_increasing, "VIOLATION if > 0");
  row("  the same, granted across a stall of its holder", r.tokens_not_increasing_stalled,
      o.strict ? "VIOLATION if > 0" : "not failing (--no-strict)");

  std::map<std::string, std::vector<double>> recovery;
  std::map<std::string, int> counts, on_holder;
  for (const fault_event& f : faults) {
    ++counts[f.kind];
    if (f.on_holder) ++on_holder[f.kind];
    const auto next = std::upper_bound(starts.begin(), starts.end(), f.start);
    if (next != starts.end()) {
      recovery[f.kind].push_back(static_cast<double>(*next - f.start) / 1e6);
    }
  }
  std::printf("\n  %-14s %6s %8s %22s %12s\n", "fault", "count", "holder", "re-acquired p50 (ms)",
              "max (ms)");
  for (const std::string& kind : all_fault_kinds) {
    std::vector<double>& v = recovery[kind];
    std::sort(v.begin(), v.end());
    const bool targets = kind == "kill" || kind == "pause";
    std::printf("  %-14s %6d %8s %22.1f %12.1f\n", kind.c_str(), counts[kind],
                targets ? std::to_string(on_holder[kind]).c_str() : "-",
                v.empty() ? 0.0 : v[v.size() / 2], v.empty() ? 0.0 : v.back());
  }
  for (const std::string& e : r.examples)
    std::printf("  %s\n", e.c_str());

  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  int status = r.violation() ? 1 : 0;
  std::string failure;
  if (!crash.empty()) failure = crash;
  if (stop_failures > 0)
    failure = std::to_string(stop_failures) + " worker(s) did not stop cleanly";
  if (r.acquisitions < o.min_acquisitions) {
    failure = "only " + std::to_string(r.acquisitions) + " acquisitions (minimum " +
              std::to_string(o.min_acquisitions) + ")";
  }
  if (time_limit_hit) {
    std::printf("  note: the time limit (%d s) ended the run before %llu acquisitions\n",
                o.time_limit_s, static_cast<unsigned long long>(o.acquisitions));
  }
  if (!failure.empty()) {
    std::printf("  RUN FAILED: %s\n", failure.c_str());
    if (status == 0) status = 3;
  }
  std::printf("  %s; wall time %.1f s; records in %s\n",
              status == 0   ? "PASS: no violation"
              : status == 1 ? "FAIL: violation"
                            : "FAIL: the run did not complete",
              wall, dir.c_str());

  // Anything worth a look afterwards keeps the records too.
  const bool unusual = r.overlaps_reported_unexplained > 0 || r.overlaps_unreported_stalled > 0 ||
                       r.tokens_not_increasing_stalled > 0;
  if (status == 0 && !o.keep_records && !unusual) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string fault_json;
  std::string recovery_json;
  for (const std::string& kind : all_fault_kinds) {
    fault_json +=
        (fault_json.empty() ? "" : ",") + ("\"" + kind + "\":") + std::to_string(counts[kind]);
    const std::vector<double>& v = recovery[kind];  // sorted above
    if (v.empty()) continue;
    std::array<char, 128> item{};
    std::snprintf(item.data(), item.size(), "\"%s\":{\"p50\":%.1f,\"max\":%.1f}", kind.c_str(),
                  v[v.size() / 2], v.back());
    recovery_json += (recovery_json.empty() ? "" : ",") + std::string(item.data());
  }
  std::printf(
      "{\"acquisitions\":%llu,\"workers\":%d,\"lease_ms\":%d,\"persistence\":\"%s\",\"no_lock\":%s,"
      "\"overlaps\":%llu,\"overlaps_reported\":%llu,\"overlaps_reported_unexplained\":%llu,"
      "\"overlaps_forgotten\":%llu,\"overlaps_unreported_stalled\":%llu,"
      "\"overlaps_unreported\":%llu,\"fenced_accepted\":%llu,\"fenced_refused\":%llu,"
      "\"fenced_out_of_order\":%llu,\"accepted_unknown\":%llu,\"tokens_not_increasing\":%llu,"
      "\"tokens_not_increasing_stalled\":%llu,"
      "\"holds_lost\":%llu,"
      "\"holds_lost_after_work\":%llu,\"holds_killed\":%llu,\"lock_errors\":%llu,\"faults\":{%s},"
      "\"reacquired_ms\":{%s},"
      "\"skipped\":[\"partition\","
      "\"latency\",\"failover\"],\"wall_s\":%.1f,\"status\":%d}\n",
      static_cast<unsigned long long>(r.acquisitions), o.workers, o.lease_ms, o.persistence.c_str(),
      o.no_lock ? "true" : "false", static_cast<unsigned long long>(r.overlaps),
      static_cast<unsigned long long>(r.overlaps_reported),
      static_cast<unsigned long long>(r.overlaps_reported_unexplained),
      static_cast<unsigned long long>(r.overlaps_forgotten),
      static_cast<unsigned long long>(r.overlaps_unreported_stalled),
      static_cast<unsigned long long>(r.overlaps_unreported),
      static_cast<unsigned long long>(r.writes_accepted),
      static_cast<unsigned long long>(r.writes_refused),
      static_cast<unsigned long long>(r.fenced_out_of_order),
      static_cast<unsigned long long>(r.accepted_unknown),
      static_cast<unsigned long long>(r.tokens_not_increasing),
      static_cast<unsigned long long>(r.tokens_not_increasing_stalled),
      static_cast<unsigned long long>(r.holds_lost),
      static_cast<unsigned long long>(r.holds_lost_after_work),
      static_cast<unsigned long long>(r.holds_killed),
      static_cast<unsigned long long>(r.lock_errors), fault_json.c_str(), recovery_json.c_str(),
      wall, status);
  std::fflush(stdout);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  suite_options o;
  CLI::App app{
      "dlock_fault_suite: a mutual-exclusion checker for dlock::mutex under crashes, pauses,\n"
      "restarts and stalls of worker processes and of the lock server",
      "dlock_fault_suite"};
  app.footer(
      "Faults: kill (kill -9 of the holder, then a new worker), pause (SIGSTOP of the holder for\n"
      "two leases, then SIGCONT), restart (kill -9 of the lock server and a start on the same\n"
      "port), sleep (DEBUG SLEEP 1.5 leases), client-pause (CLIENT PAUSE 1.5 leases ALL),\n"
      "client-kill (CLIENT KILL of every normal and pub/sub connection). Network partitions,\n"
      "added latency and failovers are not injected (printed as skipped).\n"
      "Exit status: 0 pass, 1 violation, 2 usage, 3 the run failed.");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--workers", o.workers, "Worker processes (default 4)")->check(CLI::Range(2, 64));
  app.add_option("--acquisitions", o.acquisitions, "Stop after this many holds (default 10000)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--min-acquisitions", o.min_acquisitions,
                 "Fail (exit 3) with fewer holds than this (default 0)");
  app.add_option("--lease-ms", o.lease_ms, "Watchdog lease of the workers (default 1000)")
      ->check(CLI::Range(100, 60'000));
  app.add_option("--hold-us", o.hold_us, "Work under the lock, microseconds (default 1000)")
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--fault-interval-ms", o.fault_interval_ms,
                 "Time between the end of a fault and the next (default 500)")
      ->check(CLI::Range(10, 600'000));
  app.add_option("--faults", o.faults, "Comma-separated kinds, in turn (default: all); 'none'")
      ->delimiter(',')
      ->check(CLI::IsMember([] {
        std::vector<std::string> kinds = all_fault_kinds;
        kinds.emplace_back("none");
        return kinds;
      }()));
  app.add_option("--persistence", o.persistence,
                 "Lock server: none, everysec or always (AOF appendfsync) (default none)")
      ->check(CLI::IsMember({"none", "everysec", "always"}));
  app.add_flag("--no-lock", o.no_lock, "Workers take no lock: the checker must report a violation");
  app.add_flag("--long", o.long_run,
               "100000 acquisitions, at least 4 workers, every fault, 30 min limit");
  app.add_option("--time-limit-s", o.time_limit_s, "End the run after this long (default 170)")
      ->check(CLI::Range(1, 86'400));
  app.add_option("--seed", o.seed, "Seed of the fault targets (default 1)");
  app.add_option("--worker", o.worker, "dlock_fault_worker binary");
  app.add_flag("--strict,!--no-strict", o.strict,
               "Fail (default) or not (--no-strict) on holders stalled past their lease that\n"
               "released, or were granted the lock, before their watchdog ran and were never told\n"
               "(a dlock bug fixed in a511f6c)");
  app.add_flag("--keep-records", o.keep_records, "Keep the record files after a passing run");
  CLI11_PARSE(app, argc, argv);

  if (std::find(o.faults.begin(), o.faults.end(), "none") != o.faults.end()) o.faults.clear();
  if (o.long_run) {
    o.acquisitions = std::max<std::uint64_t>(o.acquisitions, 100'000);
    o.workers = std::max(o.workers, 4);
    o.faults = all_fault_kinds;
    o.time_limit_s = std::max(o.time_limit_s, 1800);
  }
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_suite: %s\n", e.what());
    std::printf("{\"error\":\"run failed\",\"status\":3}\n");
    return 3;
  }
}
