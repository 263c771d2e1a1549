// dlock_fault_suite: a mutual-exclusion checker under crashes, pauses, restarts, stalls, network
// partitions and added latency.
//
// It starts a lock server and a separate resource server (private redis-server processes), runs
// --workers dlock_fault_worker processes that take one dlock::mutex in a loop and do a fenced
// write to the resource under it, and --workers-cli dlock_fault_cli_worker processes that do the
// same through `dlock exec`, injects faults on a schedule until --acquisitions holds were taken,
// stops the workers, and checks their records (fault_records.hpp) together with what the resource
// accepted. It prints a table and, as its last line, a JSON summary.
//
// Partitions put every worker in a network namespace of its own (netns_lab.hpp: veth pairs, a
// bridge, an nftables set of cut-off addresses); when this machine does not allow that (no root,
// no nftables, a container without CAP_NET_ADMIN) the suite says why and skips only partitions.
// Latency goes through dlock_fault_delay_proxy, between the workers and the lock server.
//
// With --topology cluster the lock server is a private Redis Cluster (tools/redis_process:
// 3 masters + 3 replicas, cluster-node-timeout 2 s); the workers get a seed list of two of its
// nodes, the resource stays a single redis-server, and the faults on the lock side act on the
// master that serves the lock's slot: `failover` (CLUSTER FAILOVER on its replica), `master-kill`
// (kill -9, the replica is promoted, the killed node restarts and rejoins as a replica),
// `master-kill-unreplicated` (the same after the master's replication stream to its replica was
// cut and the lock granted anew, so that the replica lacks the last grants), `migrate` (its slot
// moved to another master, and back the next time), and `sleep`,
// `client-pause` on it and `client-kill` on every node. `restart` of the one server does not
// apply. For partitions and latency every node announces a hostname (cluster-announce-hostname,
// cluster-preferred-endpoint-type hostname) at which the workers reach it: the bridge of the
// namespaces, or with latency one delay proxy per node listening on the node's port at that
// address (127.0.0.2 without namespaces); the cluster bus, replication and the driver's own
// commands to the nodes stay on 127.0.0.1.
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
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
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
#include "netns_lab.hpp"
#include "redis_cluster.hpp"
#include "redis_process.hpp"
#include "support/delay_proxy.hpp"

#ifndef DLOCK_FAULT_WORKER
#define DLOCK_FAULT_WORKER "dlock_fault_worker"
#endif
#ifndef DLOCK_FAULT_CLI_WORKER
#define DLOCK_FAULT_CLI_WORKER "dlock_fault_cli_worker"
#endif
#ifndef DLOCK_FAULT_DELAY_PROXY
#define DLOCK_FAULT_DELAY_PROXY "dlock_fault_delay_proxy"
#endif
// The dlock command, when it is built (DLOCK_BUILD_CLI); "" otherwise.
#ifndef DLOCK_FAULT_CLI
#define DLOCK_FAULT_CLI ""
#endif

extern char** environ;

namespace {

using namespace std::chrono_literals;
using dlock::fault::fault_event;
using dlock::fault::now_ns;

const std::vector<std::string> all_fault_kinds = {"kill",
                                                  "pause",
                                                  "restart",
                                                  "sleep",
                                                  "client-pause",
                                                  "client-kill",
                                                  "partition",
                                                  "latency",
                                                  "failover",
                                                  "master-kill",
                                                  "master-kill-unreplicated",
                                                  "migrate"};
// The default order of injection: the network faults early, so that a short run (the sanitizer
// build's) has them too.
const std::vector<std::string> default_rotation = {
    "kill", "partition", "pause", "latency", "restart", "sleep", "client-pause", "client-kill"};
// The same on a cluster: the cluster's own faults early too, and no restart of the one server.
// A kill is not followed by master-kill: the time from a kill to the next hold would measure the
// master-kill's outage instead.
const std::vector<std::string> cluster_rotation = {
    "master-kill", "kill",    "partition", "failover",     "pause",      "master-kill-unreplicated",
    "migrate",     "latency", "sleep",     "client-pause", "client-kill"};
// Faults that exist only on a cluster, and those that do not apply to one.
const std::vector<std::string> cluster_only_kinds = {"failover", "master-kill",
                                                     "master-kill-unreplicated", "migrate"};
const std::vector<std::string> not_on_cluster_kinds = {"restart"};

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A partitioned holder's deadline is at most 0.9 lease after the cut (its last confirmed renewal
// was sent before the cut); it must be told by then plus this slack for its I/O thread to run.
constexpr auto partition_tell_slack = std::chrono::milliseconds(100);
// The nftables element that cuts a worker off expires by itself this long after the planned end
// of the partition, so that a suite killed meanwhile leaves no partition behind.
constexpr auto partition_safety_margin = std::chrono::milliseconds(5000);
// A holder of a killed master is due to be told by the kill + 0.9 lease (its last confirmed
// renewal was sent before the kill) plus this slack, as for a partition.
constexpr auto failover_tell_slack = partition_tell_slack;
// Cluster: how long a change (a promotion, a rejoin, a failover, a slot move) may take before the
// run fails, and how often the driver looks whether the killed master's replica took over.
constexpr auto cluster_change_timeout = std::chrono::milliseconds(30000);
constexpr auto promotion_poll = std::chrono::milliseconds(10);
// The address at which the workers reach the cluster's delay proxies without namespaces (the
// nodes themselves listen on 127.0.0.1, at the same ports).
constexpr const char* cluster_proxy_host = "127.0.0.2";

// Set by SIGINT, SIGTERM or SIGHUP: the run stops at the end of the current fault, then stops the
// workers and removes its namespaces and nftables table as usual (a second signal kills at once;
// the next run removes what was left).
std::atomic<int> interrupted{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_interrupt(int signal) {
  interrupted.store(signal);
}

struct suite_options {
  int workers = 4;
  int workers_cli = -1;  // -1: 1 when the dlock command is known, else 0
  std::uint64_t acquisitions = 10'000;
  std::uint64_t min_acquisitions = 0;
  int lease_ms = 1000;
  int hold_us = 1000;
  int cli_hold_us = 20'000;
  int idle_us = 1000;
  int wait_ms = 0;  // 0: three leases
  int fault_interval_ms = 500;
  std::vector<std::string> faults = default_rotation;
  std::string persistence = "none";  // none, everysec, always
  std::string topology = "single";   // single, cluster
  bool no_lock = false;
  bool long_run = false;
  int time_limit_s = 170;
  unsigned seed = 1;
  std::string worker = DLOCK_FAULT_WORKER;
  std::string cli_worker = DLOCK_FAULT_CLI_WORKER;
  std::string cli = DLOCK_FAULT_CLI;
  std::string proxy = DLOCK_FAULT_DELAY_PROXY;
  bool keep_records = false;
  bool strict = true;
};

// --- worker processes --------------------------------------------------------------------------

struct worker_process {
  int id = 0;
  int life = 0;
  bool cli = false;  // a dlock_fault_cli_worker (`dlock exec`)
  pid_t pid = -1;
  int out_fd = -1;  // its stdout, for the "ready" line
  std::string client_id;
  std::string records;
  std::string owner_file;  // cli: the hash field of the hold its command runs under
};

struct worker_life {
  int worker = 0;
  int life = 0;
  std::string path;
  std::int64_t killed_at = 0;
  bool cli = false;
};

// Every descendant of `root` as (pid, parent pid), from /proc.
std::vector<std::pair<pid_t, pid_t>> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::FILE* stat = std::fopen(("/proc/" + name + "/stat").c_str(), "r");
    if (stat == nullptr) continue;
    std::array<char, 512> line{};
    const bool got = std::fgets(line.data(), line.size(), stat) != nullptr;
    std::fclose(stat);
    if (!got) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so look after the last ')'.
    const char* close = std::strrchr(line.data(), ')');
    int parent = 0;
    if (close == nullptr || std::sscanf(close + 1, " %*c %d", &parent) != 1) continue;
    children.emplace(parent, static_cast<pid_t>(std::stoi(name)));
  }
  std::vector<std::pair<pid_t, pid_t>> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    const auto [from, to] = children.equal_range(parent);
    for (auto it = from; it != to; ++it) {
      out.emplace_back(it->second, parent);
      todo.push_back(it->second);
    }
  }
  return out;
}

// SIGSTOP of a process and of everything it started (a `dlock exec` worker: its loop, dlock,
// dlock's guard and the command), looked for again until nothing new appears (a fork racing the
// stop). Returns the stopped processes, the root first.
std::vector<pid_t> stop_tree(pid_t root) {
  std::vector<pid_t> stopped = {root};
  ::kill(root, SIGSTOP);
  constexpr int max_rounds = 20;
  for (int round = 0; round < max_rounds; ++round) {
    bool more = false;
    for (const auto& [pid, parent] : descendants(root)) {
      if (std::find(stopped.begin(), stopped.end(), pid) != stopped.end()) continue;
      ::kill(pid, SIGSTOP);
      stopped.push_back(pid);
      more = true;
    }
    if (!more) break;
  }
  return stopped;
}

void continue_tree(const std::vector<pid_t>& stopped) {
  for (auto it = stopped.rbegin(); it != stopped.rend(); ++it)
    ::kill(*it, SIGCONT);
}

class worker_pool {
 public:
  worker_pool(const suite_options& o, std::string lock_url, std::string resource_url,
              std::string dir, const dlock::fault::netns_lab* lab)
      : o_(o),
        lock_url_(std::move(lock_url)),
        resource_url_(std::move(resource_url)),
        dir_(std::move(dir)),
        lab_(lab) {}
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

  // Library workers first (0 .. workers-1), then the `dlock exec` ones.
  void start_all() {
    const int total = o_.workers + o_.workers_cli;
    workers_.resize(static_cast<std::size_t>(total));
    for (int i = 0; i < total; ++i) {
      worker_process& w = workers_[static_cast<std::size_t>(i)];
      w.id = i;
      w.cli = i >= o_.workers;
      spawn(w);
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
    lives_.push_back({w.id, w.life, w.records, 0, w.cli});
    std::vector<std::string> args = {w.cli ? o_.cli_worker : o_.worker,
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
                                     std::to_string(w.cli ? o_.cli_hold_us : o_.hold_us),
                                     "--idle-us",
                                     std::to_string(o_.idle_us),
                                     "--wait-ms",
                                     std::to_string(o_.wait_ms),
                                     "--parent",
                                     std::to_string(::getpid())};
    if (o_.no_lock) args.emplace_back("--no-lock");
    if (lab_ != nullptr) {
      args.emplace_back("--netns");
      args.push_back(lab_->netns_path(w.id));
    }
    if (w.cli) {
      w.owner_file = dir_ + "/owner-" + std::to_string(w.id) + ".txt";
      for (const std::string& a :
           {std::string("--dlock"), o_.cli, std::string("--owner-file"), w.owner_file,
            std::string("--log"), dir_ + "/dlock-exec-" + std::to_string(w.id) + ".log"}) {
        args.push_back(a);
      }
    }
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
    const int rc = ::posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
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
  const dlock::fault::netns_lab* lab_;
  std::vector<worker_process> workers_;
  std::vector<worker_life> lives_;
};

// --- the delay proxy -----------------------------------------------------------------------------

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

std::string read_owner_file(const std::string& path) {
  std::ifstream in(path);
  std::string owner;
  std::getline(in, owner);
  return owner;
}

// The worker whose client holds the lock now, or nullptr. A library worker by its client id; a
// `dlock exec` worker by the hold's field, which its command wrote to its owner file (so it is
// found only once the command runs).
worker_process* find_holder(dlock::client& lock_server, worker_pool& pool,
                            const std::string& name) {
  const dlock::reply fields = command_retry(lock_server, {"HKEYS", name});
  for (const dlock::reply& f : fields.elements) {
    const std::string client_id = f.str.substr(0, f.str.find(':'));
    for (worker_process& w : pool.workers()) {
      if (w.pid <= 0) continue;
      if (w.cli ? read_owner_file(w.owner_file) == f.str : w.client_id == client_id) return &w;
    }
  }
  return nullptr;
}

// Looks for the worker that holds the lock, applies the fault to it (`act`) and checks that it
// still holds once the fault acts; if not, takes the fault back (`undo`) and looks again, for up
// to three leases (the holder is on the server, with no event to wait for: bounded polling). With
// `prefer_cli`, only a `dlock exec` worker is taken during the first half of that time. Returns
// nullptr if no holder could be caught.
template <typename Act, typename Undo>
worker_process* catch_holder(dlock::client& lock_server, worker_pool& pool, const std::string& name,
                             std::chrono::milliseconds lease, bool prefer_cli, Act act, Undo undo) {
  const auto started = std::chrono::steady_clock::now();
  const auto give_up = started + 3 * lease;
  const auto prefer_until = started + 3 * lease / 2;
  constexpr int max_attempts = 500;  // faults applied and taken back
  for (int attempt = 0; attempt < max_attempts && std::chrono::steady_clock::now() < give_up;) {
    worker_process* candidate = find_holder(lock_server, pool, name);
    if (candidate == nullptr ||
        (prefer_cli && !candidate->cli && std::chrono::steady_clock::now() < prefer_until)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(candidate == nullptr ? 10 : 1));
      continue;
    }
    ++attempt;
    act(*candidate);
    if (find_holder(lock_server, pool, name) == candidate) return candidate;
    undo(*candidate);
  }
  return nullptr;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
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
  const bool on_cluster = o.topology == "cluster";

  std::printf(
      "dlock fault suite: lock server %s, %d library worker processes, %d `dlock exec` worker "
      "processes, watchdog lease %d ms, hold %d us (dlock exec: %d us), idle %d us, persistence "
      "%s, target %llu acquisitions%s\n",
      on_cluster ? "a Redis Cluster (3 masters + 3 replicas)" : "one redis-server", o.workers,
      o.workers_cli, o.lease_ms, o.hold_us, o.cli_hold_us, o.idle_us, o.persistence.c_str(),
      static_cast<unsigned long long>(o.acquisitions),
      o.no_lock ? ", --no-lock (workers take NO lock: the checker must fail)" : "");
  std::vector<std::string> kinds = o.faults;
  std::vector<std::string> skipped;  // asked for, not injected
  if (on_cluster) {
    for (const std::string& kind : not_on_cluster_kinds) {
      if (!contains(kinds, kind)) continue;
      kinds.erase(std::remove(kinds.begin(), kinds.end(), kind), kinds.end());
      skipped.push_back(kind);
      std::printf(
          "%s: SKIPPED, it restarts the one lock server and does not apply to a cluster "
          "(master-kill is the cluster's counterpart)\n",
          kind.c_str());
    }
  }
  const auto selected = [&](const char* kind) {
    return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
  };

  // Partitions need a network namespace per worker; without them the workers stay on loopback.
  std::unique_ptr<dlock::fault::netns_lab> lab;
  std::string partition_skipped_because;
  // master-kill-unreplicated cuts a replication stream with the same nftables table.
  const bool partition_requested = selected("partition");
  const bool unreplicated_requested = selected("master-kill-unreplicated");
  if (partition_requested || unreplicated_requested) {
    lab = dlock::fault::netns_lab::make(o.workers + o.workers_cli, partition_skipped_because);
    if (lab == nullptr) {
      for (const char* kind : {"partition", "master-kill-unreplicated"}) {
        if (!selected(kind)) continue;
        kinds.erase(std::find(kinds.begin(), kinds.end(), kind));
        skipped.emplace_back(kind);
        std::printf(
            "%s: SKIPPED, this machine does not let the suite make network namespaces and "
            "nftables rules (needs root, iproute2, nftables and a kernel or container that allows "
            "them; scripts/install-deps.sh installs the packages): %s\n",
            kind, partition_skipped_because.c_str());
      }
    } else {
      std::printf("partition: %s\n", lab->describe().c_str());
    }
  }
  std::printf("faults: %s, one every %d ms\n", join(kinds, " ").c_str(), o.fault_interval_ms);
  if (!on_cluster) {
    std::printf(
        "not injected: failovers (the lock server is one redis-server; --topology cluster has "
        "them)%s\n",
        lab == nullptr && partition_requested ? ", partitions (see above)" : "");
  } else if (!skipped.empty()) {
    std::printf("not injected: %s (see above)\n", join(skipped, ", ").c_str());
  }
  std::fflush(stdout);

  // The resource: one redis-server in every topology.
  const std::string server_host = lab != nullptr ? lab->server_address() : "127.0.0.1";
  dlock::tools::redis_process_options resource_options;
  if (lab != nullptr) resource_options.extra_args = lab->redis_bind_args();
  dlock::tools::redis_process resource_process(resource_options);
  const std::string worker_resource_url =
      "redis://" + server_host + ":" + std::to_string(resource_process.port());

  // The lock side: one server, or a cluster. Workers reach it at worker_lock_url (through the
  // delay proxies with the latency fault), the driver at driver_lock_url.
  std::optional<dlock::tools::redis_process> lock_server_process;
  std::unique_ptr<dlock::tools::redis_cluster> cluster;
  std::vector<std::unique_ptr<dlock::test::delay_proxy>> proxies;
  std::string worker_lock_url;
  std::string driver_lock_url;
  const bool restart_forgets = o.persistence != "always";
  if (!on_cluster) {
    dlock::tools::redis_process_options lock_options;
    if (o.persistence == "everysec" || o.persistence == "always") {
      lock_options.extra_args = {"--appendonly", "yes", "--appendfsync", o.persistence};
    }
    if (lab != nullptr) {
      // Loopback for the driver, the bridge for the workers in their namespaces.
      for (const std::string& a : lab->redis_bind_args())
        lock_options.extra_args.push_back(a);
    }
    lock_server_process.emplace(lock_options);
    std::uint16_t worker_lock_port = lock_server_process->port();
    if (selected("latency")) {
      proxies.push_back(std::make_unique<dlock::test::delay_proxy>(
          o.proxy, server_host, "127.0.0.1:" + std::to_string(lock_server_process->port())));
      worker_lock_port = proxies.back()->port();
      std::printf(
          "latency: workers reach the lock server through dlock_fault_delay_proxy on %s:%u\n",
          server_host.c_str(), static_cast<unsigned>(worker_lock_port));
    }
    worker_lock_url = "redis://" + server_host + ":" + std::to_string(worker_lock_port);
    driver_lock_url = lock_server_process->url();
  } else {
    // The nodes listen on 127.0.0.1 (the bus, replication, the fixture and MIGRATE use it). The
    // workers reach them at `node_host`, which every node announces as its endpoint: loopback,
    // the bridge (the nodes listen there too), or through a delay proxy per node that listens on
    // the node's port at the bridge or at 127.0.0.2.
    const bool proxied = selected("latency");
    const std::string node_host =
        proxied ? (lab != nullptr ? server_host : cluster_proxy_host) : server_host;
    dlock::tools::redis_cluster_options cluster_options;
    cluster_options.node_timeout = std::chrono::milliseconds(2000);
    cluster_options.change_timeout = cluster_change_timeout;
    if (node_host != "127.0.0.1") {
      cluster_options.extra_args = {"--cluster-announce-hostname", node_host,
                                    "--cluster-preferred-endpoint-type", "hostname"};
    }
    if (lab != nullptr && !proxied) {
      for (const std::string& a : lab->redis_bind_args())
        cluster_options.extra_args.push_back(a);
    }
    cluster = std::make_unique<dlock::tools::redis_cluster>(cluster_options);
    const std::vector<std::uint16_t> ports = cluster->ports();
    if (proxied) {
      for (const std::uint16_t port : ports) {
        proxies.push_back(std::make_unique<dlock::test::delay_proxy>(
            o.proxy, node_host + ":" + std::to_string(port), "127.0.0.1:" + std::to_string(port)));
      }
      std::printf(
          "latency: workers reach each node through its own dlock_fault_delay_proxy at "
          "%s:<the node's port>\n",
          node_host.c_str());
    }
    // Two seeds: a worker started while one of them is down (master-kill) uses the other.
    worker_lock_url = "redis://" + node_host + ":" + std::to_string(ports.at(0)) + "," + node_host +
                      ":" + std::to_string(ports.at(1));
    driver_lock_url = "redis://";
    for (std::size_t i = 0; i < ports.size(); ++i)
      driver_lock_url += (i == 0 ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(ports[i]);
    std::string layout;
    for (const std::uint16_t master : cluster->masters()) {
      layout += " " + std::to_string(master) + "(replica";
      for (const std::uint16_t replica : cluster->replicas_of(master))
        layout += " " + std::to_string(replica);
      layout += ")";
    }
    std::printf(
        "cluster: masters%s on 127.0.0.1, cluster-node-timeout %lld ms; the lock's slot %u is "
        "served by %u; workers connect to %s\n",
        layout.c_str(), static_cast<long long>(cluster_options.node_timeout.count()),
        static_cast<unsigned>(cluster->key_slot(lock_name)),
        static_cast<unsigned>(cluster->master_for_key(lock_name)), worker_lock_url.c_str());
  }
  std::fflush(stdout);

  char dir_template[] = "/tmp/dlock-fault-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = dir_template;

  dlock::client_options driver_options = dlock::client_options::from_url(driver_lock_url);
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
  std::map<std::string, int> occurrences;  // of each fault kind so far
  // migrate: the ports of the shard the lock's slot was moved away from, while it is away
  std::vector<std::uint16_t> slot_home;
  const auto lease = std::chrono::milliseconds(o.lease_ms);
  {
    worker_pool pool(o, worker_lock_url, worker_resource_url, dir, lab.get());
    pool.start_all();
    const auto library_worker = [&]() -> worker_process& {
      return pool.workers()[random() % static_cast<unsigned>(o.workers)];
    };

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
      if (interrupted.load() != 0) break;
      if (now < next_fault || kinds.empty()) {
        // Progress is a counter on the resource with no event to wait for: look every 50 ms.
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            50ms, std::max<std::chrono::steady_clock::duration>(next_fault - now, 1ms)));
        continue;
      }

      fault_event f;
      f.kind = kinds[next_kind++ % kinds.size()];
      // Every second kill, pause and partition waits (a while) for a `dlock exec` holder.
      const int occurrence = occurrences[f.kind]++;
      const bool prefer_cli = o.workers_cli > 0 && occurrence % 2 == 1;
      try {
        if (f.kind == "kill") {
          // Stop the holder (with all it started), check it still holds, then kill -9: a library
          // worker is then started anew; of a `dlock exec` worker, dlock itself is killed (its
          // guard kills the command) and the worker's loop goes on with a new `dlock exec`.
          std::vector<pid_t> stopped;
          worker_process* target = catch_holder(
              lock_server, pool, lock_name, lease, prefer_cli,
              [&](worker_process& w) { stopped = stop_tree(w.pid); },
              [&](worker_process& /*w*/) { continue_tree(stopped); });
          f.on_holder = target != nullptr;
          if (target == nullptr) target = &library_worker();
          f.worker = target->id;
          f.cli = target->cli;
          if (target->cli) {
            f.start = now_ns();
            for (const auto& [pid, parent] : descendants(target->pid)) {
              if (parent == target->pid) ::kill(pid, SIGKILL);  // dlock exec
            }
            // Its hold stays on the server until the lease runs out: not a holder to find again.
            std::remove(target->owner_file.c_str());
            continue_tree(stopped);
          } else {
            f.start = now_ns();
            pool.kill_and_restart(*target);
          }
          f.end = now_ns();
        } else if (f.kind == "pause") {
          // SIGSTOP the holder (a `dlock exec` worker: its loop, dlock, the guard and the command),
          // checked to still hold once stopped; if no holder can be caught, anyone.
          std::vector<pid_t> stopped;
          worker_process* target = catch_holder(
              lock_server, pool, lock_name, lease, prefer_cli,
              [&](worker_process& w) {
                f.start = now_ns();
                stopped = stop_tree(w.pid);
              },
              [&](worker_process& /*w*/) { continue_tree(stopped); });
          f.on_holder = target != nullptr;
          if (target == nullptr) {
            target = &library_worker();
            f.start = now_ns();
            stopped = stop_tree(target->pid);
          }
          f.worker = target->id;
          f.cli = target->cli;
          // The fault is the pause itself: twice the lease, so the lease runs out meanwhile.
          std::this_thread::sleep_for(2 * lease);
          continue_tree(stopped);
          f.end = now_ns();
        } else if (f.kind == "partition") {
          // Cut the holder off from both servers for two leases. It must be told by its own
          // deadline; the others get the lock once its lease ran out. A library holder holds for
          // about a millisecond, less than `nft` takes to run: so the holder is stopped (SIGSTOP,
          // with all it started) while the cut is made and checked, a few milliseconds, far less
          // than its lease, and runs on cut off.
          const auto duration = 2 * lease;
          std::vector<pid_t> stopped;
          worker_process* target = catch_holder(
              lock_server, pool, lock_name, lease, prefer_cli,
              [&](worker_process& w) {
                stopped = stop_tree(w.pid);
                lab->cut(w.id, duration + partition_safety_margin);
                f.start = now_ns();
              },
              [&](worker_process& w) {
                lab->heal(w.id);
                continue_tree(stopped);
              });
          f.on_holder = target != nullptr;
          if (target == nullptr) {
            target = &pool.workers()[random() % pool.workers().size()];
            lab->cut(target->id, duration + partition_safety_margin);
            f.start = now_ns();
          } else {
            continue_tree(stopped);
            f.tell_by = f.start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      lease - lease / 10 + partition_tell_slack)
                                      .count();
          }
          f.worker = target->id;
          f.cli = target->cli;
          std::this_thread::sleep_for(duration);
          lab->heal(target->id);
          f.end = now_ns();
        } else if (f.kind == "latency") {
          // Every chunk between the workers and the lock server (every node of a cluster) delayed,
          // in each direction, by a quarter lease (round trip half a lease: renewals still confirm
          // in time) or by a whole lease (round trip two leases: every hold is lost before it is
          // even granted), in turn, for two leases.
          const auto delay = occurrence % 2 == 0 ? lease / 4 : lease;
          for (const auto& proxy : proxies)
            proxy->set_delay(delay);
          f.start = now_ns();
          f.detail = "+" + std::to_string(delay.count()) + " ms each way";
          std::this_thread::sleep_for(2 * lease);
          for (const auto& proxy : proxies)
            proxy->set_delay(0ms);
          f.end = now_ns();
        } else if (f.kind == "restart") {
          f.forgets = restart_forgets;
          f.start = now_ns();
          lock_server_process->kill(SIGKILL);
          lock_server_process->start();
          f.end = now_ns();
        } else if (f.kind == "failover") {
          // A graceful failover of the lock's master to its replica: the replica has every write
          // (the master pauses its clients until the replica caught up), so holds must survive.
          cluster->wait_ok(cluster_change_timeout);
          const std::uint16_t master = cluster->master_for_key(lock_name);
          const std::vector<std::uint16_t> replicas = cluster->replicas_of(master);
          if (replicas.empty()) {
            throw std::runtime_error("the lock's master " + std::to_string(master) +
                                     " has no replica");
          }
          f.detail = std::to_string(master) + " -> " + std::to_string(replicas.front());
          f.start = now_ns();
          cluster->failover(replicas.front(), dlock::tools::failover_mode::graceful,
                            cluster_change_timeout);
          f.end = now_ns();
        } else if (dlock::fault::is_hard_failover(f.kind)) {
          // kill -9 of the lock's master. Its replica is promoted after cluster-node-timeout (and
          // the election); then the killed node restarts (empty) and rejoins as a replica of its
          // successor, so that the cluster keeps its size. Every hold the dead master granted must
          // be told by its own deadline, the kill + 0.9 lease (its last confirmed renewal was sent
          // before the kill), long before the replica can serve (node timeout 2 s > lease); the
          // replica may lack the last grants and renewals (asynchronous replication).
          cluster->wait_ok(cluster_change_timeout);
          const std::uint16_t master = cluster->master_for_key(lock_name);
          const std::vector<std::uint16_t> replicas = cluster->replicas_of(master);
          if (replicas.empty()) {
            throw std::runtime_error("the lock's master " + std::to_string(master) +
                                     " has no replica");
          }
          const std::uint16_t replica = replicas.front();
          // master-kill-unreplicated: first the master's replication stream to the replica is cut
          // (its TCP segments dropped, no reset), then the kill waits until the lock has been
          // granted anew: a grant, and whatever follows, that the replica never receives.
          std::uint16_t stream_port = 0;
          std::string cut_detail;
          if (f.kind == "master-kill-unreplicated") {
            // The replica's end of the replication link: "addr=127.0.0.1:<port>" in CLIENT LIST.
            const dlock::tools::resp_value list =
                cluster->call(master, {"CLIENT", "LIST", "TYPE", "replica"});
            const auto at = list.str.find("addr=127.0.0.1:");
            if (list.is_error() || at == std::string::npos) {
              throw std::runtime_error("no replication link on " + std::to_string(master) + ": " +
                                       list.to_string());
            }
            stream_port = static_cast<std::uint16_t>(std::stoul(list.str.substr(at + 15)));
            const auto holders = [&] {
              const dlock::tools::resp_value fields =
                  cluster->call(master, {"HKEYS", lock_name}, 1s);
              std::string all;
              for (const dlock::tools::resp_value& e : fields.elements)
                all += e.str + " ";
              return all;
            };
            const std::string before = holders();
            const std::int64_t cut_at = now_ns();
            lab->cut_stream(master, stream_port, 2 * cluster_change_timeout);
            // A hand-over is a matter of milliseconds (seconds with --hold-us): bounded polling,
            // the server has no event to wait for.
            const auto give_up = std::chrono::steady_clock::now() + 2 * lease;
            std::string now_held = holders();
            while ((now_held.empty() || now_held == before) &&
                   std::chrono::steady_clock::now() < give_up) {
              std::this_thread::sleep_for(1ms);
              now_held = holders();
            }
            std::array<char, 96> text{};
            std::snprintf(text.data(), text.size(), "replication cut, %s after %.0f ms; ",
                          now_held.empty() || now_held == before ? "no new grant" : "granted anew",
                          static_cast<double>(now_ns() - cut_at) / 1e6);
            cut_detail = text.data();
          }
          cluster->kill_node(master);  // returns once it is reaped: nothing answers after this
          f.start = now_ns();
          f.tell_by = f.start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    lease - lease / 10 + failover_tell_slack)
                                    .count();
          const auto give_up = std::chrono::steady_clock::now() + cluster_change_timeout;
          for (;;) {
            // A reply of "slave" to a question sent at `asked` means it was a replica then.
            const std::int64_t asked = now_ns();
            bool promoted = false;
            try {
              const dlock::tools::resp_value role = cluster->call(replica, {"ROLE"}, 1s);
              promoted = !role.elements.empty() && role.elements.front().str == "master";
            } catch (const std::runtime_error&) {
              // no answer within a second: ask again
            }
            if (promoted) break;
            f.replica_until = asked;
            if (std::chrono::steady_clock::now() >= give_up) {
              throw std::runtime_error("replica " + std::to_string(replica) + " of the killed " +
                                       std::to_string(master) + " was not promoted");
            }
            std::this_thread::sleep_for(promotion_poll);
          }
          const double promoted_ms = static_cast<double>(now_ns() - f.start) / 1e6;
          if (stream_port != 0) lab->heal_stream(master, stream_port);
          cluster->wait_ok(cluster_change_timeout);
          cluster->restart_node(master);
          cluster->wait_ok(cluster_change_timeout);
          f.end = now_ns();
          std::array<char, 160> detail{};
          std::snprintf(
              detail.data(), detail.size(),
              "%u killed, %u promoted after %.0f ms, %u back as its replica after %.0f ms",
              static_cast<unsigned>(master), static_cast<unsigned>(replica), promoted_ms,
              static_cast<unsigned>(master), static_cast<double>(f.end - f.start) / 1e6);
          f.detail = cut_detail + detail.data();
        } else if (f.kind == "migrate") {
          // The lock's slot moves to another master (MIGRATING/IMPORTING, MIGRATE of its keys,
          // SETSLOT NODE), and the next time back to the shard it came from, whichever of its nodes
          // is the master by then.
          cluster->wait_ok(cluster_change_timeout);
          const std::uint16_t slot = cluster->key_slot(lock_name);
          const std::uint16_t from = cluster->master_for_slot(slot);
          const std::vector<std::uint16_t> masters = cluster->masters();
          std::uint16_t to = 0;
          if (slot_home.empty()) {
            slot_home = cluster->replicas_of(from);
            slot_home.push_back(from);
            for (const std::uint16_t m : masters) {
              if (m != from) {
                to = m;
                break;
              }
            }
          } else {
            for (const std::uint16_t m : slot_home) {
              if (m != from && std::find(masters.begin(), masters.end(), m) != masters.end())
                to = m;
            }
            slot_home.clear();
          }
          if (to == 0)
            throw std::runtime_error("no master to move slot " + std::to_string(slot) + " to");
          f.detail = "slot " + std::to_string(slot) + " " + std::to_string(from) + " -> " +
                     std::to_string(to);
          f.start = now_ns();
          cluster->migrate_slot(slot, from, to, cluster_change_timeout);
          f.end = now_ns();
        } else if (f.kind == "sleep") {
          // The server (the lock's master) sleeps one and a half leases: holders must notice before
          // it wakes. On a cluster that is below cluster-node-timeout: no failover.
          const std::string seconds = std::to_string(1.5 * o.lease_ms / 1000.0);
          if (cluster != nullptr) {
            cluster->wait_ok(cluster_change_timeout);
            const std::uint16_t master = cluster->master_for_key(lock_name);
            f.detail = "on " + std::to_string(master);
            f.start = now_ns();
            const dlock::tools::resp_value answer =
                cluster->call(master, {"DEBUG", "SLEEP", seconds}, 10s);
            if (answer.is_error()) throw std::runtime_error("DEBUG SLEEP: " + answer.str);
          } else {
            f.start = now_ns();
            command_retry(lock_server, {"DEBUG", "SLEEP", seconds});
          }
          f.end = now_ns();
        } else if (f.kind == "client-pause") {
          const std::string ms = std::to_string(3 * o.lease_ms / 2);
          if (cluster != nullptr) {
            cluster->wait_ok(cluster_change_timeout);
            const std::uint16_t master = cluster->master_for_key(lock_name);
            f.detail = "on " + std::to_string(master);
            f.start = now_ns();
            const dlock::tools::resp_value answer =
                cluster->call(master, {"CLIENT", "PAUSE", ms, "ALL"});
            if (answer.is_error()) throw std::runtime_error("CLIENT PAUSE: " + answer.str);
            // Answered once the pause is over: the event that ends the fault.
            cluster->call(master, {"PING"}, 10s);
          } else {
            f.start = now_ns();
            command_retry(lock_server, {"CLIENT", "PAUSE", ms, "ALL"});
            command_retry(lock_server, {"PING"});
          }
          f.end = now_ns();
        } else if (f.kind == "client-kill") {
          f.start = now_ns();
          if (cluster != nullptr) {
            // Every connection to every node (through the proxies too), the workers' and the
            // driver's client's.
            for (const std::uint16_t port : cluster->ports()) {
              if (!cluster->node(port).running()) continue;
              cluster->call(port, {"CLIENT", "KILL", "TYPE", "normal"});
              cluster->call(port, {"CLIENT", "KILL", "TYPE", "pubsub"});
            }
          } else {
            command_retry(lock_server, {"CLIENT", "KILL", "TYPE", "normal"});
            command_retry(lock_server, {"CLIENT", "KILL", "TYPE", "pubsub"});
          }
          f.end = now_ns();
        }
      } catch (const std::exception& e) {
        // The fault could not be injected or did not end (a fixture's time limit): the run
        // failed, but what was recorded is still checked.
        crash = "fault " + f.kind + " failed: " + e.what();
        if (f.end == 0) f.end = now_ns();
      }
      if (f.start != 0) faults.push_back(f);
      std::string target;
      if (f.worker >= 0) {
        target = std::string("worker ") + std::to_string(f.worker) +
                 (f.cli ? " (dlock exec, " : " (") + (f.on_holder ? "holder)" : "not holding)");
      }
      if (!f.detail.empty()) target = f.detail;
      std::printf(
          "  fault %-12s %s at +%.1f s\n", f.kind.c_str(), target.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      std::fflush(stdout);
      if (!crash.empty()) break;
      next_fault =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(o.fault_interval_ms);
    }
    // A worker ends its loop after its current lock call and hold: give it that long, and more.
    stop_failures = pool.stop_all(std::chrono::ceil<std::chrono::milliseconds>(
        10s + std::chrono::milliseconds(o.wait_ms) +
        std::chrono::microseconds(std::max(o.hold_us, o.cli_hold_us))));
    for (const worker_life& l : pool.lives()) {
      files.push_back({l.worker, l.life, l.killed_at, l.path, l.cli});
    }
  }

  {
    // The faults beside the records, for a look afterwards:
    // kind start end worker on_holder cli tell_by replica_until [detail]
    std::FILE* out = std::fopen((dir + "/faults.txt").c_str(), "w");
    if (out != nullptr) {
      for (const fault_event& f : faults) {
        std::fprintf(out, "%s %lld %lld %d %d %d %lld %lld %s\n", f.kind.c_str(),
                     static_cast<long long>(f.start), static_cast<long long>(f.end), f.worker,
                     f.on_holder ? 1 : 0, f.cli ? 1 : 0, static_cast<long long>(f.tell_by),
                     static_cast<long long>(f.replica_until), f.detail.c_str());
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
  row("  by `dlock exec` workers", r.acquisitions_cli);
  row("  hand-overs (by another worker than the last)", r.handoffs);
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
  if (on_cluster) {
    row("  unreported, a hard failover lost the hold", r.overlaps_failover_forgotten,
        "expected (asynchronous replication) if the holder released by its deadline");
  }
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
  row("holds cut off by a partition", r.partition_holds);
  row("  ended by being told (stop_token, SIGTERM)", r.partition_holds_told);
  row("  still believed held after their deadline", r.partition_told_late, "VIOLATION if > 0");
  row("overlaps: a partitioned holder told late", r.overlaps_reported_partitioned,
      "VIOLATION if > 0");
  if (on_cluster) {
    row("holds of a killed master (master-kill)", r.failover_holds);
    row("  ended by being told (stop_token, SIGTERM)", r.failover_holds_told);
    row("  still believed held after their deadline", r.failover_told_late, "VIOLATION if > 0");
    row("master-kills unchecked (replica served early)", r.failovers_unchecked);
  }

  // The faults of this topology, in the table and the JSON line.
  std::vector<std::string> shown_kinds;
  for (const std::string& kind : all_fault_kinds) {
    if (on_cluster ? !contains(not_on_cluster_kinds, kind) : !contains(cluster_only_kinds, kind)) {
      shown_kinds.push_back(kind);
    }
  }
  // Holds told of their loss from a fault's start to a lease after its end.
  std::vector<std::int64_t> losses;
  for (const dlock::fault::hold& h : holds) {
    if (h.lost != 0) losses.push_back(h.lost);
  }
  std::sort(losses.begin(), losses.end());
  std::map<std::string, std::vector<double>> recovery;
  std::map<std::string, int> counts, on_holder, on_cli, told;
  // The longest time without an acquisition from a fault's start to a lease after its end (or the
  // next fault's start, if sooner): the outage it caused (a failover's, a migration's).
  std::map<std::string, double> longest_gap;
  const std::int64_t lease_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(lease).count();
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const fault_event& f = faults[i];
    const std::int64_t window_end =
        i + 1 < faults.size() ? std::min(f.end + lease_ns, faults[i + 1].start) : f.end + lease_ns;
    ++counts[f.kind];
    told[f.kind] +=
        static_cast<int>(std::upper_bound(losses.begin(), losses.end(), f.end + lease_ns) -
                         std::lower_bound(losses.begin(), losses.end(), f.start));
    std::int64_t last = f.start;
    std::int64_t gap = 0;
    for (auto it = std::upper_bound(starts.begin(), starts.end(), f.start);
         it != starts.end() && last < window_end; ++it) {
      gap = std::max(gap, std::min(*it, window_end) - last);
      last = *it;
    }
    if (last < window_end) gap = std::max(gap, window_end - last);
    longest_gap[f.kind] = std::max(longest_gap[f.kind], static_cast<double>(gap) / 1e6);
    if (f.on_holder) ++on_holder[f.kind];
    if (f.on_holder && f.cli) ++on_cli[f.kind];
    const auto next = std::upper_bound(starts.begin(), starts.end(), f.start);
    if (next != starts.end()) {
      recovery[f.kind].push_back(static_cast<double>(*next - f.start) / 1e6);
    }
  }
  int kind_width = 14;  // "master-kill-unreplicated" is longer
  for (const std::string& kind : shown_kinds)
    kind_width = std::max(kind_width, static_cast<int>(kind.size()));
  std::printf("\n  %-*s %6s %8s %12s %22s %12s %10s %16s\n", kind_width, "fault", "count", "holder",
              "dlock exec", "re-acquired p50 (ms)", "max (ms)", "told lost", "longest gap (ms)");
  for (const std::string& kind : shown_kinds) {
    std::vector<double>& v = recovery[kind];
    std::sort(v.begin(), v.end());
    const bool targets = kind == "kill" || kind == "pause" || kind == "partition";
    std::printf("  %-*s %6d %8s %12s %22.1f %12.1f %10d %16.1f\n", kind_width, kind.c_str(),
                counts[kind], targets ? std::to_string(on_holder[kind]).c_str() : "-",
                targets ? std::to_string(on_cli[kind]).c_str() : "-",
                v.empty() ? 0.0 : v[v.size() / 2], v.empty() ? 0.0 : v.back(), told[kind],
                longest_gap[kind]);
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
  if (interrupted.load() != 0) {
    failure = "interrupted by signal " + std::to_string(interrupted.load());
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
                       r.tokens_not_increasing_stalled > 0 || r.overlaps_failover_forgotten > 0;
  if (status == 0 && !o.keep_records && !unusual) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string fault_json;
  std::string recovery_json;
  for (const std::string& kind : shown_kinds) {
    fault_json +=
        (fault_json.empty() ? "" : ",") + ("\"" + kind + "\":") + std::to_string(counts[kind]);
    const std::vector<double>& v = recovery[kind];  // sorted above
    if (v.empty()) continue;
    std::array<char, 128> item{};
    std::snprintf(item.data(), item.size(), "\"%s\":{\"p50\":%.1f,\"max\":%.1f}", kind.c_str(),
                  v[v.size() / 2], v.back());
    recovery_json += (recovery_json.empty() ? "" : ",") + std::string(item.data());
  }
  std::string skipped_json;
  if (!on_cluster) skipped.emplace_back("failover");
  for (const std::string& kind : skipped)
    skipped_json += (skipped_json.empty() ? "\"" : ",\"") + kind + "\"";
  std::string cluster_json;
  if (on_cluster) {
    std::array<char, 256> item{};
    std::snprintf(item.data(), item.size(),
                  ",\"failover_holds\":%llu,\"failover_holds_told\":%llu,\"failover_told_late\":"
                  "%llu,\"failovers_unchecked\":%llu,\"overlaps_failover_forgotten\":%llu",
                  static_cast<unsigned long long>(r.failover_holds),
                  static_cast<unsigned long long>(r.failover_holds_told),
                  static_cast<unsigned long long>(r.failover_told_late),
                  static_cast<unsigned long long>(r.failovers_unchecked),
                  static_cast<unsigned long long>(r.overlaps_failover_forgotten));
    cluster_json = item.data();
  }
  std::string skip_reason_json;
  if (!partition_skipped_because.empty()) {
    skip_reason_json = ",\"partition_skipped_because\":" + json_string(partition_skipped_because);
  }
  std::printf(
      "{\"acquisitions\":%llu,\"acquisitions_cli\":%llu,\"handoffs\":%llu,\"workers\":%d,\"workers_"
      "cli\":%d,"
      "\"lease_ms\":%d,\"topology\":\"%s\",\"persistence\":\"%s\",\"no_lock\":%s,"
      "\"overlaps\":%llu,\"overlaps_reported\":%llu,\"overlaps_reported_unexplained\":%llu,"
      "\"overlaps_forgotten\":%llu,\"overlaps_unreported_stalled\":%llu,"
      "\"overlaps_unreported\":%llu,\"fenced_accepted\":%llu,\"fenced_refused\":%llu,"
      "\"fenced_out_of_order\":%llu,\"accepted_unknown\":%llu,\"tokens_not_increasing\":%llu,"
      "\"tokens_not_increasing_stalled\":%llu,\"partition_holds\":%llu,"
      "\"partition_holds_told\":%llu,\"partition_told_late\":%llu,"
      "\"overlaps_reported_partitioned\":%llu%s,"
      "\"holds_lost\":%llu,"
      "\"holds_lost_after_work\":%llu,\"holds_killed\":%llu,\"lock_errors\":%llu,\"faults\":{%s},"
      "\"reacquired_ms\":{%s},"
      "\"skipped\":[%s]%s,\"wall_s\":%.1f,\"status\":%d}\n",
      static_cast<unsigned long long>(r.acquisitions),
      static_cast<unsigned long long>(r.acquisitions_cli),
      static_cast<unsigned long long>(r.handoffs), o.workers, o.workers_cli, o.lease_ms,
      o.topology.c_str(), o.persistence.c_str(), o.no_lock ? "true" : "false",
      static_cast<unsigned long long>(r.overlaps),
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
      static_cast<unsigned long long>(r.partition_holds),
      static_cast<unsigned long long>(r.partition_holds_told),
      static_cast<unsigned long long>(r.partition_told_late),
      static_cast<unsigned long long>(r.overlaps_reported_partitioned), cluster_json.c_str(),
      static_cast<unsigned long long>(r.holds_lost),
      static_cast<unsigned long long>(r.holds_lost_after_work),
      static_cast<unsigned long long>(r.holds_killed),
      static_cast<unsigned long long>(r.lock_errors), fault_json.c_str(), recovery_json.c_str(),
      skipped_json.c_str(), skip_reason_json.c_str(), wall, status);
  std::fflush(stdout);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  suite_options o;
  CLI::App app{
      "dlock_fault_suite: a mutual-exclusion checker for dlock::mutex and `dlock exec` under\n"
      "crashes, pauses, restarts and stalls of worker processes and of the lock server, network\n"
      "partitions and added latency",
      "dlock_fault_suite"};
  app.footer(
      "Faults: kill (kill -9 of the holder, then a new worker; of a `dlock exec` holder, kill -9\n"
      "of dlock), pause (SIGSTOP of the holder for two leases, then SIGCONT), restart (kill -9 of\n"
      "the lock server and a start on the same port), sleep (DEBUG SLEEP 1.5 leases),\n"
      "client-pause (CLIENT PAUSE 1.5 leases ALL), client-kill (CLIENT KILL of every normal and\n"
      "pub/sub connection), partition (the holder's network namespace cut off from both servers\n"
      "by an nftables rule for two leases; needs root, iproute2 and nftables, else skipped with\n"
      "the reason), latency (a delay of a quarter lease, then of a whole lease, each way, between\n"
      "the workers and the lock server, for two leases).\n"
      "With --topology cluster the lock server is a Redis Cluster of 3 masters + 3 replicas\n"
      "(cluster-node-timeout 2 s), the workers get two of its nodes as seeds, and the lock-side\n"
      "faults act on the master of the lock's slot: failover (CLUSTER FAILOVER on its replica),\n"
      "master-kill (kill -9; after the promotion the node restarts and rejoins as a replica;\n"
      "every holder must be told by the kill + 0.9 lease + 100 ms), master-kill-unreplicated\n"
      "(the same after the master's replication stream to its replica was cut with nftables and\n"
      "the lock granted anew: the replica is promoted without the last grants; needs what\n"
      "partitions need), migrate (the slot moved to\n"
      "another master, and back the next time), sleep and client-pause on it, client-kill on\n"
      "every node; restart does not apply; latency delays every node (one proxy per node).\n"
      "Exit status: 0 pass, 1 violation, 2 usage, 3 the run failed.");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--workers", o.workers, "Library worker processes (default 4)")
      ->check(CLI::Range(2, 64));
  app.add_option("--workers-cli", o.workers_cli,
                 "Worker processes that use `dlock exec` (default 1 when the dlock command was\n"
                 "built or --cli names it, else 0)")
      ->check(CLI::Range(0, 16));
  app.add_option("--acquisitions", o.acquisitions, "Stop after this many holds (default 10000)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--min-acquisitions", o.min_acquisitions,
                 "Fail (exit 3) with fewer holds than this (default 0)");
  app.add_option("--lease-ms", o.lease_ms, "Watchdog lease of the workers (default 1000)")
      ->check(CLI::Range(100, 60'000));
  app.add_option("--hold-us", o.hold_us, "Work under the lock, microseconds (default 1000)")
      ->check(CLI::Range(0, 10'000'000));
  app.add_option("--cli-hold-us", o.cli_hold_us,
                 "Work of the command that `dlock exec` runs, microseconds (default 20000: a\n"
                 "command runs longer than the library's 1 ms, so faults find it at work)")
      ->check(CLI::Range(0, 10'000'000));
  app.add_option(
         "--idle-us", o.idle_us,
         "Time a worker lets pass between its release and its next lock call,\n"
         "microseconds (default 1000: without it the releasing worker takes the lock\n"
         "again before a waiter has heard of the release, and the lock seldom changes hands)")
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--wait-ms", o.wait_ms,
                 "How long one lock call of a worker waits (default: three leases, longer than\n"
                 "the round trip under the latency fault, so that waiters still get the lock)")
      ->check(CLI::Range(0, 600'000));
  app.add_option("--fault-interval-ms", o.fault_interval_ms,
                 "Time between the end of a fault and the next (default 500)")
      ->check(CLI::Range(10, 600'000));
  app.add_option("--topology", o.topology,
                 "The lock server: single (one redis-server, default) or cluster (a Redis\n"
                 "Cluster, 3 masters + 3 replicas)")
      ->check(CLI::IsMember({"single", "cluster"}));
  auto* faults_option = app.add_option(
      "--faults", o.faults,
      "Comma-separated kinds, in turn (default: all of the topology, network faults early);\n"
      "failover, master-kill, master-kill-unreplicated and migrate need --topology cluster;\n"
      "'none'");
  faults_option->delimiter(',')->check(CLI::IsMember([] {
    std::vector<std::string> kinds = all_fault_kinds;
    kinds.emplace_back("none");
    return kinds;
  }()));
  app.add_option("--persistence", o.persistence,
                 "Lock server: none, everysec or always (AOF appendfsync) (default none)")
      ->check(CLI::IsMember({"none", "everysec", "always"}));
  app.add_flag("--no-lock", o.no_lock, "Workers take no lock: the checker must report a violation");
  app.add_flag(
      "--long", o.long_run,
      "100000 acquisitions, at least 4 workers, every fault of the topology, 30 min limit");
  app.add_option("--time-limit-s", o.time_limit_s, "End the run after this long (default 170)")
      ->check(CLI::Range(1, 86'400));
  app.add_option("--seed", o.seed, "Seed of the fault targets (default 1)");
  app.add_option("--worker", o.worker, "dlock_fault_worker binary");
  app.add_option("--cli-worker", o.cli_worker, "dlock_fault_cli_worker binary");
  app.add_option("--cli", o.cli, "The dlock command, for --workers-cli");
  app.add_option("--delay-proxy", o.proxy, "dlock_fault_delay_proxy binary");
  app.add_flag("--strict,!--no-strict", o.strict,
               "Fail (default) or not (--no-strict) on holders stalled past their lease that\n"
               "released, or were granted the lock, before their watchdog ran and were never told\n"
               "(a dlock bug fixed in a511f6c)");
  app.add_flag("--keep-records", o.keep_records, "Keep the record files after a passing run");
  CLI11_PARSE(app, argc, argv);

  const bool on_cluster = o.topology == "cluster";
  if (on_cluster && faults_option->count() == 0) o.faults = cluster_rotation;
  if (std::find(o.faults.begin(), o.faults.end(), "none") != o.faults.end()) o.faults.clear();
  if (o.wait_ms == 0) o.wait_ms = 3 * o.lease_ms;
  const bool have_cli = !o.cli.empty() && ::access(o.cli.c_str(), X_OK) == 0;
  if (o.workers_cli < 0) o.workers_cli = have_cli && !o.no_lock ? 1 : 0;
  if (o.long_run) {
    o.acquisitions = std::max<std::uint64_t>(o.acquisitions, 100'000);
    o.workers = std::max(o.workers, 4);
    if (have_cli) o.workers_cli = std::max(o.workers_cli, 1);
    o.faults = on_cluster ? cluster_rotation : default_rotation;
    o.time_limit_s = std::max(o.time_limit_s, 1800);
  }
  if (!on_cluster) {
    for (const std::string& kind : o.faults) {
      if (contains(cluster_only_kinds, kind)) {
        std::fprintf(stderr, "dlock_fault_suite: the %s fault needs --topology cluster\n",
                     kind.c_str());
        return 2;
      }
    }
  }
  if (on_cluster && o.persistence != "none") {
    std::fprintf(stderr,
                 "dlock_fault_suite: --persistence applies to the single server (a killed cluster "
                 "node rejoins as a replica and copies its master)\n");
    return 2;
  }
  if (o.workers_cli > 0 && !have_cli) {
    std::fprintf(stderr, "dlock_fault_suite: --workers-cli needs the dlock command (--cli): '%s'\n",
                 o.cli.c_str());
    return 2;
  }
  if (o.workers_cli > 0 && o.no_lock) {
    std::fprintf(stderr,
                 "dlock_fault_suite: --no-lock applies to library workers only: add "
                 "--workers-cli 0\n");
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Interrupted, the run ends the current fault and cleans up (namespaces, nftables table) before
  // it exits; a second signal ends it at once.
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(signal, &action, nullptr);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_suite: %s\n", e.what());
    std::printf("{\"error\":\"run failed\",\"status\":3}\n");
    return 3;
  }
}
