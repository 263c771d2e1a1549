// bench/cluster_bench.cpp
//
// dlock_bench_cluster: the same dlock::mutex scenarios against one private redis-server and a
// private Redis Cluster (3 masters + --replicas replicas each, 1 by default) started in the same
// run, each figure printed beside its single-server counterpart.
//
// Scenarios (as in dlock_bench_lock):
//   (a)  one thread, lock+unlock cycles/s on one key; also the median lock()+unlock() time in
//        units of the median PING round trip through the same client, measured just before
//   (b)  --threads threads, each on its own key (on the cluster the keys lie on every master),
//        cycles/s in total
//   (c2) --threads threads on ONE key, hold --hold-ms, think --think-ms: acquisitions/s, wait
//   (w)  watchdog: --locks locks (names over all slots) held by a new client with a --lease-ms
//        watchdog lease for --intervals renewal intervals (lease/3 each): per renewal round
//        (every lock renewed once) the renewal scripts, client writes and Redis CPU, in total and
//        per master; renewals missed, holds lost
// Reported per scenario and side: client commands per acquisition (INFO commandstats deltas over
// the masters, minus the commands the lock scripts run inside Redis, the harness's INFO and
// TOUCH and the replicas' REPLCONF), server reads per acquisition (INFO stats
// total_reads_processed), Redis CPU per acquisition (INFO cpu deltas, per node, masters and
// replicas summed apart), and the cluster clients' routing metrics (MOVED/ASK/retries/map loads).
// Client writes (batches written to the servers' sockets) are counted with strace attached to
// this process during (w)'s window and during a separate, untimed traced run of (a); --strace none
// skips them.
//
// Every scenario runs --repeat rounds; within a round the two sides alternate which goes first;
// the table shows medians. Prints a table and a final JSON line. Exits non-zero only on errors;
// what it finds is reported, not enforced.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "redis_cluster.hpp"
#include "redis_process.hpp"
#include "resp_call.hpp"

extern char** environ;

namespace {

using dlock::bench::cpu_model;
using dlock::bench::info_field;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct bench_options {
  double seconds = 2.0;           // one measured run of (a), (b), (c2)
  int repeat = 3;                 // rounds; the median is reported
  int threads = 8;                // threads of (b) and (c2)
  int hold_ms = 1;                // (c2) time held
  int think_ms = 1;               // (c2) time between unlock and the next lock
  int pings = 2000;               // PINGs for the RTT of (a)
  int locks = 10000;              // (w) locks held
  int lease_ms = 3000;            // (w) watchdog lease
  int intervals = 6;              // (w) renewal intervals (lease/3) watched: 6 = two leases
  int trace_cycles = 2000;        // (a) cycles of the traced run
  int node_timeout_ms = 15000;    // cluster-node-timeout of the private cluster
  int replicas = 1;               // replicas per master of the private cluster
  std::string strace = "strace";  // empty: no write counts
  std::string keep_traces;        // not empty: strace outputs copied to <keep_traces>.<n>
  std::set<std::string> scenarios{"a", "b", "c2", "w"};
};

std::optional<int> parse_args(int argc, char** argv, bench_options& o) {
  CLI::App app{
      "dlock_bench_cluster: dlock::mutex on one private redis-server and on a private Redis\n"
      "Cluster (3 masters, --replicas each) in the same run, each figure beside its counterpart",
      "dlock_bench_cluster"};
  app.footer(
      "Scenarios: (a) one thread, lock+unlock cycles/s on one key; (b) --threads threads, each\n"
      "on its own key; (c2) --threads threads on one key, holding --hold-ms and thinking\n"
      "--think-ms; (w) --locks locks held with a --lease-ms watchdog lease for --intervals\n"
      "renewal intervals.");
  app.get_formatter()->column_width(40);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  using dlock::bench::add_whole_option;
  app.add_option("--seconds", o.seconds, "Length of one measured run of (a), (b), (c2) (default 2)")
      ->type_name("S")
      ->check(dlock::bench::number_range(0.1, 600));
  add_whole_option(app, "--repeat", o.repeat, "Rounds; median reported (default 3)", "R", 1, 100);
  add_whole_option(app, "--threads", o.threads, "Threads of (b) and (c2) (default 8)", "T", 1,
                   1024);
  add_whole_option(app, "--hold-ms", o.hold_ms, "(c2) time held (default 1)", "H", 0, 10'000);
  add_whole_option(app, "--think-ms", o.think_ms,
                   "(c2) time between unlock and next lock (default 1)", "K", 0, 10'000);
  add_whole_option(app, "--pings", o.pings, "PINGs for the RTT of (a) (default 2000)", "N", 1,
                   10'000'000);
  add_whole_option(app, "--locks", o.locks, "(w) locks held (default 10000)", "N", 1, 1'000'000);
  add_whole_option(app, "--lease-ms", o.lease_ms, "(w) watchdog lease (default 3000)", "L", 300,
                   600'000);
  add_whole_option(app, "--intervals", o.intervals,
                   "(w) renewal intervals (lease/3) watched (default 6)", "I", 1, 1000);
  add_whole_option(app, "--trace-cycles", o.trace_cycles,
                   "(a) cycles of the traced run counting writes (default 2000)", "N", 1,
                   10'000'000);
  add_whole_option(app, "--node-timeout-ms", o.node_timeout_ms,
                   "cluster-node-timeout of the private cluster (default 15000)", "MS", 500,
                   600'000);
  add_whole_option(app, "--replicas", o.replicas,
                   "Replicas per master of the private cluster (default 1)", "N", 0, 3);
  app.add_option("--keep-traces", o.keep_traces,
                 "Copy each strace output to PREFIX.<n> (to check the write counts)")
      ->type_name("PREFIX");
  app.add_option("--strace", o.strace,
                 "strace for the write counts (default: through PATH;\n'none' skips them)")
      ->type_name("PATH");
  std::string only;
  app.add_option("--only", only, "Comma-separated scenarios to run (a,b,c2,w; default all)")
      ->type_name("LIST");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.strace == "none") o.strace.clear();
  if (!only.empty()) {
    o.scenarios.clear();
    std::stringstream in(only);
    for (std::string s; std::getline(in, s, ',');) {
      if (s != "a" && s != "b" && s != "c2" && s != "w") {
        std::fprintf(stderr, "--only: unknown scenario '%s' (a, b, c2, w)\n", s.c_str());
        return 2;
      }
      o.scenarios.insert(s);
    }
  }
  return std::nullopt;
}

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Nearest-rank percentile, p in [0, 100].
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// --- cluster slots (the specification's CRC16 XMODEM; checked against CLUSTER KEYSLOT) -------

std::uint16_t crc16(std::string_view s) {
  std::uint16_t crc = 0;
  for (const unsigned char ch : s) {
    crc = static_cast<std::uint16_t>(crc ^ (ch << 8));
    for (int i = 0; i < 8; ++i)
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

std::uint16_t key_slot(std::string_view key) {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16(key) & 16383);
}

// --- server counters ---------------------------------------------------------------------------

struct node_counters {
  std::map<std::string, std::int64_t> calls;  // INFO commandstats calls per command
  std::int64_t commands = 0;                  // INFO stats total_commands_processed
  std::int64_t reads = 0;                     // INFO stats total_reads_processed
  double cpu_seconds = 0;                     // INFO cpu used_cpu_sys + used_cpu_user
};

node_counters read_node(std::uint16_t port) {
  const dlock::tools::resp_value v =
      dlock::tools::resp_call(port, {"INFO", "stats", "cpu", "commandstats"});
  if (v.type != dlock::tools::resp_value::kind::bulk)
    throw std::runtime_error("INFO on port " + std::to_string(port) + " answered " + v.to_string());
  const std::string& info = v.str;
  node_counters n;
  n.commands = std::stoll(info_field(info, "total_commands_processed"));
  n.reads = std::stoll(info_field(info, "total_reads_processed"));
  n.cpu_seconds =
      std::stod(info_field(info, "used_cpu_sys")) + std::stod(info_field(info, "used_cpu_user"));
  // Lines "cmdstat_<name>:calls=<n>,usec=...".
  std::size_t pos = 0;
  while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
    const std::size_t colon = info.find(':', pos);
    const std::size_t calls = info.find("calls=", colon);
    if (colon == std::string::npos || calls == std::string::npos) break;
    n.calls[info.substr(pos + 8, colon - pos - 8)] = std::stoll(info.substr(calls + 6));
    pos = colon;
  }
  return n;
}

// Commands the lock scripts run inside Redis (src/locks/scripts/*.lua; `publish` on one server,
// `spublish` on a cluster). Redis 7 counts them in commandstats and total_commands_processed like
// commands sent by clients; client commands are all the others.
bool script_internal(const std::string& name) {
  static const std::set<std::string> names{
      "del",  "exists",  "get",  "hexists", "hgetall", "hlen", "hset",    "hincrby",
      "incr", "pexpire", "pttl", "set",     "time",    "type", "publish", "spublish"};
  return names.count(name) != 0;
}

// What only the harness sends: INFO (through resp_call) and TOUCH (the flush after a run).
// Also left out: REPLCONF, which replicas send their master.
bool harness_command(const std::string& name) {
  return name == "info" || name == "touch" || name == "replconf";
}

// --- the two deployments -------------------------------------------------------------------------

struct deployment {
  std::string name;  // "single" or "cluster"
  std::string url;
  std::vector<std::uint16_t> masters;
  std::vector<std::uint16_t> replicas;
  std::unique_ptr<dlock::client> client;  // shared by (a), (b), (c2)

  std::vector<std::uint16_t> nodes() const {
    std::vector<std::uint16_t> all = masters;
    all.insert(all.end(), replicas.begin(), replicas.end());
    return all;
  }
};

struct snapshot {
  std::vector<node_counters> nodes;  // masters, then replicas
};

snapshot take(const deployment& d) {
  snapshot s;
  for (const std::uint16_t port : d.nodes())
    s.nodes.push_back(read_node(port));
  return s;
}

// Per node deltas between two snapshots, harness commands left out.
struct node_delta {
  std::uint16_t port = 0;
  bool master = true;
  std::map<std::string, std::int64_t> calls;
  double client_commands = 0;  // calls that are neither script-internal nor the harness's
  double executed = 0;         // total_commands_processed, harness left out
  double reads = 0;            // total_reads_processed, harness left out (about)
  double cpu_seconds = 0;
};

std::vector<node_delta> diff(const deployment& d, const snapshot& s0, const snapshot& s1) {
  std::vector<node_delta> out;
  const std::vector<std::uint16_t> ports = d.nodes();
  for (std::size_t i = 0; i < ports.size(); ++i) {
    node_delta nd;
    nd.port = ports[i];
    nd.master = i < d.masters.size();
    std::int64_t harness = 0;
    for (const auto& [name, n1] : s1.nodes[i].calls) {
      const auto it = s0.nodes[i].calls.find(name);
      const std::int64_t delta = n1 - (it == s0.nodes[i].calls.end() ? 0 : it->second);
      if (delta <= 0) continue;
      if (harness_command(name)) {
        harness += delta;
        continue;
      }
      nd.calls[name] = delta;
      if (!script_internal(name)) nd.client_commands += static_cast<double>(delta);
    }
    nd.executed = static_cast<double>(s1.nodes[i].commands - s0.nodes[i].commands - harness);
    // Every read event counts, a connection's end too. Between the snapshots the harness's INFO
    // connections add two (s0's end, s1's INFO), each TOUCH and REPLCONF one; `harness` holds
    // those and s0's INFO (whose read came before s0).
    nd.reads = static_cast<double>(s1.nodes[i].reads - s0.nodes[i].reads - 1 - harness);
    nd.cpu_seconds = s1.nodes[i].cpu_seconds - s0.nodes[i].cpu_seconds;
    out.push_back(std::move(nd));
  }
  return out;
}

dlock::routing_metrics routing_delta(const dlock::routing_metrics& a,
                                     const dlock::routing_metrics& b) {
  dlock::routing_metrics r = b;
  r.moved -= a.moved;
  r.asked -= a.asked;
  r.retries -= a.retries;
  r.map_refreshes -= a.map_refreshes;
  return r;
}

// --- counting the client's socket writes with strace -----------------------------------------

// What one socket saw. asio writes a batch in system calls of at most 64 KiB, so a "write" here
// is one batch: the system calls up to one that sent all it was given and less than 64 KiB.
struct fd_writes {
  std::uint64_t syscalls = 0;       // write system calls that sent something
  std::uint64_t writes = 0;         // batches
  std::uint64_t script_writes = 0;  // batches whose first bytes are EVALSHA/EVAL
  std::uint64_t bytes = 0;
};

// One strace line's system call: "<tid> sendto(<fd>, "..."..., <len>, ...) = <ret>", possibly
// split into "... <unfinished ...>" and "<tid> <... sendto resumed>) = <ret>".
struct traced_call {
  int fd = -1;
  long long len = -1;
  bool script = false;
};

// The length argument of a write call whose data argument starts at `quote` (a '"').
long long length_after_string(const std::string& line, std::size_t quote) {
  std::size_t i = quote + 1;
  while (i < line.size() && line[i] != '"')
    i += line[i] == '\\' ? 2 : 1;
  i += 1;
  if (line.compare(i, 3, "...") == 0) i += 3;
  if (line.compare(i, 2, ", ") != 0) return -1;
  return std::atoll(line.c_str() + i + 2);
}

long long return_value(const std::string& line) {
  const std::size_t eq = line.rfind(") = ");
  return eq == std::string::npos ? -1 : std::atoll(line.c_str() + eq + 4);
}

// Attaches `strace -f` to this process between start() and stop() and counts the write system
// calls (sendmsg, sendto, write, writev) per socket, mapped to the peer's port.
class write_tracer {
 public:
  write_tracer(std::string strace, std::string keep)
      : strace_(std::move(strace)), keep_(std::move(keep)) {}
  write_tracer(const write_tracer&) = delete;
  write_tracer& operator=(const write_tracer&) = delete;
  ~write_tracer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGINT);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // "" once every thread of this process is traced, else why not.
  std::string start() {
    if (dir_.empty()) {
      std::string tmpl = (std::filesystem::temp_directory_path() / "dlock-bench-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
      dir_ = tmpl;
    }
    out_ = dir_ + "/trace.txt";
    err_ = dir_ + "/strace.err";
    std::filesystem::remove(out_);
    // Lets a child trace this process under Yama ptrace_scope 1.
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    const std::string self = std::to_string(::getpid());
    std::vector<std::string> args{
        strace_, "-f",          "-qq", "-e", "trace=sendmsg,sendto,write,writev",
        "-e",    "signal=none", "-s",  "24", "-o",
        out_,    "-p",          self};
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int rc = ::posix_spawnp(&pid_, strace_.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return strace_ + ": " + std::strerror(rc);
    }
    const auto deadline = steady::now() + std::chrono::seconds(10);
    while (steady::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "strace exited: " + first_line(err_);
      }
      if (all_threads_traced()) return "";
      std::this_thread::sleep_for(milliseconds(5));
    }
    stop();
    return "strace did not attach within 10 s";
  }

  // Detaches strace and returns the writes per peer port (0: not a TCP socket to a server).
  std::map<std::uint16_t, fd_writes> stop() {
    std::map<std::uint16_t, fd_writes> by_port;
    if (pid_ <= 0) return by_port;
    ::kill(pid_, SIGINT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (!keep_.empty()) {
      static int n = 0;
      std::error_code ec;
      std::filesystem::copy_file(out_, keep_ + "." + std::to_string(n++),
                                 std::filesystem::copy_options::overwrite_existing, ec);
    }
    std::ifstream in(out_);
    std::map<int, fd_writes> by_fd;
    std::map<int, bool> in_batch;                // fd -> a batch has started and not ended
    std::map<std::string, traced_call> pending;  // tid -> unfinished call
    auto finish = [&](const traced_call& c, long long ret) {
      if (c.fd < 0 || ret <= 0) return;  // EAGAIN and the like sent nothing
      fd_writes& w = by_fd[c.fd];
      ++w.syscalls;
      w.bytes += static_cast<std::uint64_t>(ret);
      bool& open = in_batch[c.fd];
      if (!open) {
        ++w.writes;
        if (c.script) ++w.script_writes;
      }
      // The batch goes on after a 64 KiB piece or a short write.
      open = ret == 65536 || (c.len >= 0 && ret < c.len);
    };
    for (std::string line; std::getline(in, line);) {
      // strace pads the thread id with spaces.
      const std::size_t end_of_tid = line.find(' ');
      if (end_of_tid == std::string::npos) continue;
      const std::string tid = line.substr(0, end_of_tid);
      const std::size_t sp = line.find_first_not_of(' ', end_of_tid) - 1;
      if (sp + 1 >= line.size()) continue;
      if (line.compare(sp + 1, 4, "<...") == 0) {
        const auto it = pending.find(tid);
        if (it != pending.end()) {
          finish(it->second, return_value(line));
          pending.erase(it);
        }
        continue;
      }
      const std::size_t open = line.find('(', sp + 1);
      if (open == std::string::npos) continue;
      const std::string call = line.substr(sp + 1, open - sp - 1);
      if (call != "sendmsg" && call != "sendto" && call != "write" && call != "writev") continue;
      traced_call c;
      c.fd = std::atoi(line.c_str() + open + 1);
      c.script = line.find("EVAL") != std::string::npos;
      if (call == "sendto" || call == "write") {
        const std::size_t quote = line.find('"', open);
        if (quote != std::string::npos) c.len = length_after_string(line, quote);
      } else {
        // sendmsg/writev: the sum of the iov_len fields.
        long long total = 0;
        for (std::size_t at = line.find("iov_len="); at != std::string::npos;
             at = line.find("iov_len=", at + 8))
          total += std::atoll(line.c_str() + at + 8);
        c.len = total;
      }
      if (line.find("<unfinished ...>") != std::string::npos) {
        pending[tid] = c;
      } else {
        finish(c, return_value(line));
      }
    }
    for (const auto& [fd, w] : by_fd) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      std::uint16_t port = 0;
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
          peer.ss_family == AF_INET)
        port = ntohs(reinterpret_cast<const sockaddr_in*>(&peer)->sin_port);
      fd_writes& to = by_port[port];
      to.syscalls += w.syscalls;
      to.writes += w.writes;
      to.script_writes += w.script_writes;
      to.bytes += w.bytes;
    }
    return by_port;
  }

 private:
  static std::string first_line(const std::string& file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
  }

  bool all_threads_traced() const {
    const std::string want = "TracerPid:\t" + std::to_string(pid_);
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      std::ifstream status(task.path() / "status");
      bool traced = false;
      for (std::string line; std::getline(status, line);)
        if (line == want) traced = true;
      if (!traced) return false;
    }
    return !ec;
  }

  std::string strace_;
  std::string keep_;
  std::string dir_;
  std::string out_;
  std::string err_;
  pid_t pid_ = -1;
};

// --- one run -----------------------------------------------------------------------------------

struct run_result {
  double rate = 0;          // cycles, acquisitions or (w) acquisitions of the held locks per second
  double acquisitions = 0;  // (w): renewals
  double client_per_acq = 0;
  double executed_per_acq = 0;
  double reads_per_acq = 0;                             // server read events on the masters
  double cpu_masters_us = 0;                            // per acquisition ((w): ms per round)
  double cpu_replicas_us = 0;                           // same
  std::map<std::uint16_t, double> node_cpu_us;          // per acquisition ((w): ms per round)
  std::map<std::uint16_t, double> node_client_per_acq;  // masters ((w): scripts per round)
  std::map<std::string, double> calls_per_acq;          // over the masters
  double wait_p50_ms = 0;
  double wait_p99_ms = 0;
  double cycle_p50_us = 0;         // (a) lock()+unlock()
  double rtt_us = 0;               // (a) median PING
  dlock::routing_metrics routing;  // delta over the run
  // (w)
  double scripts_per_round = 0;
  double rounds_seen = 0;
  double missed = 0;
  double lost = 0;
  double still_held = 0;
  double writes_per_round = -1;         // -1: not counted
  double script_writes_per_round = -1;  // those that start with a renewal script
  double kib_per_round = -1;            // bytes written to the masters
  dlock::routing_metrics startup;       // (w): the new client before the window
  double distinct_slots = 0;
  std::map<std::uint16_t, double>
      node_writes;  // (w) writes with renewal scripts per round, per master
};

void account(run_result& r, const deployment& d, const snapshot& s0, const snapshot& s1,
             double per) {
  double client = 0, executed = 0, reads = 0, cpu_m = 0, cpu_r = 0;
  for (const node_delta& nd : diff(d, s0, s1)) {
    r.node_cpu_us[nd.port] = 1e6 * nd.cpu_seconds / per;
    if (nd.master) {
      cpu_m += nd.cpu_seconds;
      client += nd.client_commands;
      executed += nd.executed;
      reads += nd.reads;
      r.node_client_per_acq[nd.port] = nd.client_commands / per;
      for (const auto& [name, n] : nd.calls)
        r.calls_per_acq[name] += static_cast<double>(n) / per;
    } else {
      cpu_r += nd.cpu_seconds;
    }
  }
  r.client_per_acq = client / per;
  r.executed_per_acq = executed / per;
  r.reads_per_acq = reads / per;
  r.cpu_masters_us = 1e6 * cpu_m / per;
  r.cpu_replicas_us = 1e6 * cpu_r / per;
}

// Median PING round trip through `c`, in microseconds.
double ping_rtt_us(dlock::client& c, int n) {
  for (int i = 0; i < 200; ++i)
    c.command({"PING"});
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = steady::now();
    c.command({"PING"});
    v.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
  }
  return median(std::move(v));
}

// `threads` threads lock/unlock dlock::mutex `keys[t]` for `seconds`, sleeping `hold` inside and
// `think` outside the lock when positive.
run_result run_cycles(deployment& d, int threads, const std::vector<std::string>& keys,
                      double seconds, milliseconds hold, milliseconds think, bool record_waits,
                      bool record_cycles) {
  dlock::client& c = *d.client;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(threads));
  std::vector<std::vector<double>> cycles(static_cast<std::size_t>(threads));
  std::mutex failure_mutex;
  std::exception_ptr failure;
  std::latch ready(threads + 1);
  std::latch start(1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      dlock::mutex m = c.get_lock(keys[static_cast<std::size_t>(t) % keys.size()]);
      std::vector<double>& my_waits = waits[static_cast<std::size_t>(t)];
      std::vector<double>& my_cycles = cycles[static_cast<std::size_t>(t)];
      if (record_waits) my_waits.reserve(100'000);
      if (record_cycles) my_cycles.reserve(200'000);
      ready.count_down();
      start.wait();
      std::uint64_t n = 0;
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = steady::now();
          m.lock();
          if (record_waits)
            my_waits.push_back(
                std::chrono::duration<double, std::milli>(steady::now() - t0).count());
          if (hold.count() > 0) std::this_thread::sleep_for(hold);
          m.unlock();
          if (record_cycles)
            my_cycles.push_back(
                std::chrono::duration<double, std::micro>(steady::now() - t0).count());
          ++n;
          if (think.count() > 0) std::this_thread::sleep_for(think);
        }
      } catch (...) {
        stop.store(true);
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      total.fetch_add(n);
    });
  }
  ready.arrive_and_wait();
  const dlock::routing_metrics r0 = c.routing_metrics();
  const snapshot s0 = take(d);
  const auto t0 = steady::now();
  start.count_down();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : pool)
    t.join();
  const double took = seconds_since(t0);
  // A TOUCH of each key goes out on the connection of the key's master after the releases queued
  // there: once it has answered, every release has run.
  for (const std::string& k : std::set<std::string>(keys.begin(), keys.end()))
    c.command({"TOUCH", k});
  const snapshot s1 = take(d);
  const dlock::routing_metrics r1 = c.routing_metrics();
  if (failure) std::rethrow_exception(failure);

  run_result r;
  const auto n = static_cast<double>(std::max<std::uint64_t>(total.load(), 1));
  r.rate = n / took;
  r.acquisitions = n;
  account(r, d, s0, s1, n);
  r.routing = routing_delta(r0, r1);
  if (record_waits) {
    std::vector<double> all;
    for (auto& w : waits)
      all.insert(all.end(), w.begin(), w.end());
    r.wait_p50_ms = percentile(all, 50);
    r.wait_p99_ms = percentile(std::move(all), 99);
  }
  if (record_cycles) {
    std::vector<double> all;
    for (auto& w : cycles)
      all.insert(all.end(), w.begin(), w.end());
    r.cycle_p50_us = percentile(std::move(all), 50);
  }
  return r;
}

// (a) under strace, untimed: client socket writes per lock+unlock cycle (all servers).
struct traced_cycles {
  double writes_per_cycle = -1;
  double script_writes_per_cycle = -1;
  std::string note;
};

traced_cycles run_traced_cycles(deployment& d, const std::string& key, int cycles,
                                const bench_options& o) {
  traced_cycles out;
  dlock::mutex m = d.client->get_lock(key);
  for (int i = 0; i < 100; ++i) {
    m.lock();
    m.unlock();
  }
  d.client->command({"TOUCH", key});
  write_tracer tracer(o.strace, o.keep_traces);
  if (std::string why = tracer.start(); !why.empty()) {
    out.note = why;
    return out;
  }
  for (int i = 0; i < cycles; ++i) {
    m.lock();
    m.unlock();
  }
  const auto by_port = tracer.stop();
  const std::vector<std::uint16_t> nodes = d.nodes();
  std::uint64_t writes = 0, scripts = 0;
  for (const auto& [port, w] : by_port) {
    if (std::find(nodes.begin(), nodes.end(), port) == nodes.end()) continue;
    writes += w.writes;
    scripts += w.script_writes;
  }
  out.writes_per_cycle = static_cast<double>(writes) / cycles;
  out.script_writes_per_cycle = static_cast<double>(scripts) / cycles;
  d.client->command({"TOUCH", key});
  return out;
}

// (w): `o.locks` locks held by a new client with a `o.lease_ms` watchdog lease, watched for
// `o.intervals` renewal intervals (lease/3) plus lease/6. Figures per renewal round: the
// renewals seen divided by the locks (every lock renewed once per round).
run_result run_watchdog(deployment& d, const bench_options& o, const std::string& prefix,
                        std::string& trace_note) {
  const milliseconds lease(o.lease_ms);
  dlock::client_options co = dlock::client_options::from_url(d.url);
  co.locks.watchdog_timeout = lease;
  dlock::client wc{co};
  std::vector<dlock::lock_lease> held;
  held.reserve(static_cast<std::size_t>(o.locks));
  std::deque<std::future<dlock::lock_lease>> in_flight;
  std::set<std::uint16_t> slots;
  const auto a0 = steady::now();
  for (int i = 0; i < o.locks; ++i) {
    std::string name = prefix + std::to_string(i);
    slots.insert(key_slot(name));
    in_flight.push_back(wc.get_lock(std::move(name)).async_lock());
    if (in_flight.size() >= 1000) {
      held.push_back(in_flight.front().get());
      in_flight.pop_front();
    }
  }
  for (auto& f : in_flight)
    held.push_back(f.get());
  in_flight.clear();
  const double acquire_s = seconds_since(a0);

  const dlock::lock_metrics m0 = wc.lock_metrics();
  const dlock::routing_metrics r0 = wc.routing_metrics();
  const snapshot s0 = take(d);
  std::optional<write_tracer> tracer;
  if (!o.strace.empty()) {
    tracer.emplace(o.strace, o.keep_traces);
    if (std::string why = tracer->start(); !why.empty()) {
      trace_note = why;
      tracer.reset();
    }
  }
  std::this_thread::sleep_for(lease / 3 * o.intervals + lease / 6);
  std::map<std::uint16_t, fd_writes> writes;
  if (tracer) writes = tracer->stop();
  const snapshot s1 = take(d);
  const dlock::lock_metrics m1 = wc.lock_metrics();
  const dlock::routing_metrics r1 = wc.routing_metrics();

  run_result r;
  r.rate = o.locks / acquire_s;
  r.distinct_slots = static_cast<double>(slots.size());
  const double renewed = static_cast<double>(m1.leases_renewed - m0.leases_renewed);
  r.acquisitions = renewed;
  r.rounds_seen = renewed / o.locks;
  const double rounds = std::max(r.rounds_seen, 1e-9);
  account(r, d, s0, s1, rounds);
  // account() gives CPU in us per round; (w) reports ms per round.
  r.cpu_masters_us /= 1000;
  r.cpu_replicas_us /= 1000;
  for (auto& [port, v] : r.node_cpu_us)
    v /= 1000;
  r.scripts_per_round = static_cast<double>(m1.renewal_scripts - m0.renewal_scripts) / rounds;
  const double expected = static_cast<double>(o.locks) * o.intervals;
  r.missed = std::max(0.0, expected - renewed);
  r.lost = static_cast<double>(m1.lost - m0.lost);
  for (const auto& l : held)
    r.still_held += l.lost() ? 0 : 1;
  r.startup = r0;  // a new client: everything before the window
  r.routing = routing_delta(r0, r1);
  if (tracer) {
    double total = 0, scripts = 0, bytes = 0;
    for (const std::uint16_t port : d.masters) {
      const auto it = writes.find(port);
      if (it == writes.end()) {
        r.node_writes[port] = 0;
        continue;
      }
      r.node_writes[port] = static_cast<double>(it->second.script_writes) / rounds;
      total += static_cast<double>(it->second.writes);
      scripts += static_cast<double>(it->second.script_writes);
      bytes += static_cast<double>(it->second.bytes);
    }
    r.writes_per_round = total / rounds;
    r.script_writes_per_round = scripts / rounds;
    r.kib_per_round = bytes / 1024 / rounds;
  }
  held.clear();  // releases every lease; the client's destructor waits for the releases
  return r;
}

// --- report ------------------------------------------------------------------------------------

struct scenario {
  scenario(std::string i, std::function<run_result(deployment&, int round)> r)
      : id(std::move(i)), run(std::move(r)) {}
  std::string id;
  std::function<run_result(deployment&, int round)> run;
  std::vector<run_result> runs[2];  // [side]
};

double med(const std::vector<run_result>& runs, double run_result::*field) {
  std::vector<double> v;
  for (const run_result& r : runs)
    v.push_back(r.*field);
  return median(std::move(v));
}

double med_map(const std::vector<run_result>& runs,
               std::map<std::uint16_t, double> run_result::*field, std::uint16_t port) {
  std::vector<double> v;
  for (const run_result& r : runs) {
    const auto it = (r.*field).find(port);
    if (it != (r.*field).end()) v.push_back(it->second);
  }
  return v.empty() ? -1 : median(std::move(v));
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string json_number(double v) {
  if (!(v == v) || v < -1e300 || v > 1e300) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Names prefix + k (k = 0, 1, ...) whose slot the master `port` serves, for `count` names, on
// the masters in turn (so `count` threads' keys lie on every master).
std::vector<std::string> keys_on_every_master(const dlock::tools::redis_cluster& cluster,
                                              const std::vector<std::uint16_t>& masters,
                                              const std::string& prefix, int count) {
  std::vector<std::string> keys;
  int k = 0;
  for (int t = 0; t < count; ++t) {
    const std::uint16_t want = masters[static_cast<std::size_t>(t) % masters.size()];
    for (;; ++k) {
      std::string name = prefix + std::to_string(t) + ":" + std::to_string(k);
      if (cluster.master_for_slot(key_slot(name)) == want) {
        keys.push_back(std::move(name));
        break;
      }
    }
  }
  return keys;
}

int run(int argc, char** argv) {
  bench_options parsed;
  if (const std::optional<int> exit_code = parse_args(argc, argv, parsed)) return *exit_code;
  const bench_options o = std::move(parsed);
  std::string command_line = argv[0];
  for (int i = 1; i < argc; ++i)
    command_line += std::string(" ") + argv[i];

  const double idle_before = dlock::bench::idle_share(milliseconds(1000));

  // The servers.
  dlock::tools::redis_process single_server(dlock::tools::service_options());
  dlock::tools::redis_cluster_options copts;
  copts.own_session = true;
  copts.node_timeout = milliseconds(o.node_timeout_ms);
  copts.replicas_per_master = static_cast<std::size_t>(o.replicas);
  const auto c0 = steady::now();
  dlock::tools::redis_cluster cluster(copts);
  const double cluster_start_s = seconds_since(c0);

  deployment sides[2];
  sides[0].name = "single";
  sides[0].url = single_server.url();
  sides[0].masters = {single_server.port()};
  sides[1].name = "cluster";
  sides[1].url = cluster.seed_url();
  sides[1].masters = cluster.masters();
  for (const std::uint16_t m : sides[1].masters)
    for (const std::uint16_t r : cluster.replicas_of(m))
      sides[1].replicas.push_back(r);
  for (deployment& d : sides)
    d.client = std::make_unique<dlock::client>(d.url);

  // The slot function this benchmark uses to spread names must be the server's.
  for (const char* probe : {"bench:cluster:probe", "{tag}:x", "a{}b", "orders:42"})
    if (cluster.key_slot(probe) != key_slot(probe))
      throw std::logic_error(std::string("local key slot of '") + probe +
                             "' differs from the server's");

  const std::string version =
      info_field(sides[0].client->command({"INFO", "server"}).str, "redis_version");
  const dlock::tools::resp_value cinfo = cluster.call(sides[1].masters.front(), {"INFO", "server"});
  const std::string cluster_version = info_field(cinfo.str, "redis_version");

  std::printf("dlock_bench_cluster: dlock::mutex on one redis-server and on a Redis Cluster\n");
  std::printf("  command:      %s\n", command_line.c_str());
  std::printf("  machine:      %u hardware threads, %s\n", std::thread::hardware_concurrency(),
              cpu_model().c_str());
  std::printf("  single:       redis-server %s on port %u (private, no persistence)\n",
              version.c_str(), single_server.port());
  std::printf("  cluster:      redis-server %s, %zu masters (ports", cluster_version.c_str(),
              sides[1].masters.size());
  for (const std::uint16_t m : sides[1].masters)
    std::printf(" %u", m);
  std::printf(") + %zu replicas", sides[1].replicas.size());
  if (!sides[1].replicas.empty()) {
    std::printf(" (ports");
    for (const std::uint16_t r : sides[1].replicas)
      std::printf(" %u", r);
    std::printf(")");
  }
  std::printf(",\n                cluster-node-timeout %d ms, started in %.1f s\n",
              o.node_timeout_ms, cluster_start_s);
  std::printf(
      "  runs:         %.1f s each for (a), (b), (c2); (w) %d locks, %d ms lease, %d intervals;\n"
      "                %d rounds, sides alternating, median reported\n",
      o.seconds, o.locks, o.lease_ms, o.intervals, o.repeat);
  std::printf("  machine idle: %.0f%% before the runs%s\n", 100 * idle_before,
              idle_before < 0.9 ? " -- other load on the machine skews the figures" : "");
  std::printf("\n");
  std::fflush(stdout);

  // Keys: the same names on both sides; (b)'s lie on every master of the cluster.
  const std::vector<std::string> key_a{"bench:cluster:a"};
  const std::vector<std::string> keys_b =
      keys_on_every_master(cluster, sides[1].masters, "bench:cluster:b:", o.threads);
  const std::vector<std::string> key_c2{"bench:cluster:c2"};
  const milliseconds hold{o.hold_ms}, think{o.think_ms}, none{0};

  std::vector<scenario> scenarios;
  if (o.scenarios.count("a") != 0)
    scenarios.emplace_back("a", [&](deployment& d, int) {
      const double rtt = ping_rtt_us(*d.client, o.pings);
      run_result r = run_cycles(d, 1, key_a, o.seconds, none, none, false, true);
      r.rtt_us = rtt;
      return r;
    });
  if (o.scenarios.count("b") != 0)
    scenarios.emplace_back("b", [&](deployment& d, int) {
      return run_cycles(d, o.threads, keys_b, o.seconds, none, none, false, false);
    });
  if (o.scenarios.count("c2") != 0)
    scenarios.emplace_back("c2", [&](deployment& d, int) {
      return run_cycles(d, o.threads, key_c2, o.seconds, hold, think, true, false);
    });
  std::string trace_note;
  if (o.scenarios.count("w") != 0)
    scenarios.emplace_back("w", [&](deployment& d, int round) {
      return run_watchdog(d, o, "bench:cluster:w:" + std::to_string(round) + ":", trace_note);
    });

  // Warm-up: connections to every master, scripts loaded, sharded subscriptions made.
  std::printf("warming up\n");
  std::fflush(stdout);
  for (int side = 0; side < 2; ++side) {
    deployment& d = sides[side];
    run_cycles(d, 1, key_a, 0.3, none, none, false, false);
    run_cycles(d, o.threads, keys_b, 0.3, none, none, false, false);
    run_cycles(d, o.threads, key_c2, 0.3, hold, think, false, false);
    if (o.scenarios.count("w") != 0) {
      // One renewal round on every master (the renewal script loaded there).
      bench_options quick = o;
      quick.locks = std::min(o.locks, 3000);
      quick.intervals = 1;
      std::string ignored;
      quick.strace.clear();
      run_watchdog(d, quick, "bench:cluster:warm:", ignored);
    }
  }

  // The rounds: scenario by scenario, the two sides alternating which goes first.
  for (int round = 0; round < o.repeat; ++round) {
    for (scenario& s : scenarios) {
      std::printf("round %d/%d  (%s)", round + 1, o.repeat, s.id.c_str());
      for (int k = 0; k < 2; ++k) {
        const int side = (k + round) % 2;
        const run_result r = s.run(sides[side], round);
        s.runs[side].push_back(r);
        std::printf("  %s %.0f/s", sides[side].name.c_str(), r.rate);
        if (s.id == "a") std::printf(" (p50 %.0f us, RTT %.0f us)", r.cycle_p50_us, r.rtt_us);
        if (s.id == "w")
          std::printf(" (%.0f scripts, %.1f writes per round, lost %.0f)", r.scripts_per_round,
                      r.writes_per_round, r.lost);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  // (a) traced: client writes per cycle.
  traced_cycles traced[2];
  if (o.scenarios.count("a") != 0 && !o.strace.empty())
    for (int side = 0; side < 2; ++side)
      traced[side] = run_traced_cycles(sides[side], key_a.front(), o.trace_cycles, o);

  const double idle_after = dlock::bench::idle_share(milliseconds(1000));

  // --- the table ---
  auto find = [&](const std::string& id) -> const scenario* {
    for (const scenario& s : scenarios)
      if (s.id == id) return &s;
    return nullptr;
  };
  struct row_value {
    double single = -1, cluster = -1;
  };
  std::vector<std::pair<std::string, row_value>> json_rows;
  auto print_row = [&](const std::string& label, row_value v, const char* format,
                       const std::string& json_key) {
    auto cell = [&](double x) {
      char buf[32];
      if (x < 0) return std::string("-");
      std::snprintf(buf, sizeof buf, format, x);
      return std::string(buf);
    };
    std::printf("%-44s %10s %10s", label.c_str(), cell(v.single).c_str(), cell(v.cluster).c_str());
    if (v.single > 0 && v.cluster >= 0) {
      std::printf(" %9.2fx\n", v.cluster / v.single);
    } else {
      std::printf(" %10s\n", "-");
    }
    json_rows.emplace_back(json_key, v);
  };
  auto value = [&](const std::string& id, double run_result::*field) {
    row_value v;
    if (const scenario* s = find(id)) {
      v.single = med(s->runs[0], field);
      v.cluster = med(s->runs[1], field);
    }
    return v;
  };
  auto row = [&](const std::string& id, const std::string& label, double run_result::*field,
                 const char* format, const std::string& json_key) {
    if (find(id) != nullptr) print_row(label, value(id, field), format, json_key);
  };
  const std::string threads = std::to_string(o.threads);
  std::printf("\n%-44s %10s %10s %10s\n", "medians", "single", "cluster", "cluster/single");
  row("a", "(a) 1 thread, cycles/s", &run_result::rate, "%.0f", "a_cycles_per_s");
  row("a", "(a) lock()+unlock() p50, us", &run_result::cycle_p50_us, "%.1f", "a_cycle_p50_us");
  row("a", "(a) PING round trip p50, us", &run_result::rtt_us, "%.1f", "a_ping_rtt_us");
  if (const scenario* s = find("a")) {
    row_value v;
    std::vector<double> ratio[2];
    for (int side = 0; side < 2; ++side)
      for (const run_result& r : s->runs[side])
        ratio[side].push_back(r.cycle_p50_us / r.rtt_us);
    v.single = median(ratio[0]);
    v.cluster = median(ratio[1]);
    print_row("(a) lock()+unlock() p50, PING round trips", v, "%.2f", "a_cycle_p50_rtts");
  }
  row("a", "(a) client commands/cycle", &run_result::client_per_acq, "%.2f",
      "a_client_commands_per_cycle");
  row("a", "(a) Redis-executed commands/cycle", &run_result::executed_per_acq, "%.2f",
      "a_executed_commands_per_cycle");
  row("a", "(a) server reads/cycle, masters", &run_result::reads_per_acq, "%.3f",
      "a_server_reads_per_cycle");
  if (find("a") != nullptr && !o.strace.empty()) {
    print_row("(a) client writes/cycle, all (traced run)",
              {traced[0].writes_per_cycle, traced[1].writes_per_cycle}, "%.3f",
              "a_writes_per_cycle_traced");
    print_row("(a)   of them with lock scripts (traced run)",
              {traced[0].script_writes_per_cycle, traced[1].script_writes_per_cycle}, "%.3f",
              "a_script_writes_per_cycle_traced");
  }
  row("a", "(a) Redis CPU us/cycle, masters", &run_result::cpu_masters_us, "%.1f",
      "a_cpu_us_masters");
  row("a", "(a) Redis CPU us/cycle, replicas", &run_result::cpu_replicas_us, "%.1f",
      "a_cpu_us_replicas");
  row("b", "(b) " + threads + " threads own keys, cycles/s", &run_result::rate, "%.0f",
      "b_cycles_per_s");
  row("b", "(b) client commands/cycle", &run_result::client_per_acq, "%.2f",
      "b_client_commands_per_cycle");
  row("b", "(b) Redis-executed commands/cycle", &run_result::executed_per_acq, "%.2f",
      "b_executed_commands_per_cycle");
  row("b", "(b) server reads/cycle, masters", &run_result::reads_per_acq, "%.3f",
      "b_server_reads_per_cycle");
  row("b", "(b) Redis CPU us/cycle, masters", &run_result::cpu_masters_us, "%.1f",
      "b_cpu_us_masters");
  row("b", "(b) Redis CPU us/cycle, replicas", &run_result::cpu_replicas_us, "%.1f",
      "b_cpu_us_replicas");
  row("c2", "(c2) " + threads + " threads 1 key, acq/s", &run_result::rate, "%.0f", "c2_acq_per_s");
  row("c2", "(c2) wait p50, ms", &run_result::wait_p50_ms, "%.2f", "c2_wait_p50_ms");
  row("c2", "(c2) wait p99, ms", &run_result::wait_p99_ms, "%.2f", "c2_wait_p99_ms");
  row("c2", "(c2) client commands/acquisition", &run_result::client_per_acq, "%.2f",
      "c2_client_commands_per_acq");
  row("c2", "(c2) Redis-executed commands/acquisition", &run_result::executed_per_acq, "%.2f",
      "c2_executed_commands_per_acq");
  row("c2", "(c2) server reads/acquisition, masters", &run_result::reads_per_acq, "%.3f",
      "c2_server_reads_per_acq");
  row("c2", "(c2) Redis CPU us/acq, masters", &run_result::cpu_masters_us, "%.1f",
      "c2_cpu_us_masters");
  row("c2", "(c2) Redis CPU us/acq, replicas", &run_result::cpu_replicas_us, "%.1f",
      "c2_cpu_us_replicas");
  const std::string nlocks = std::to_string(o.locks);
  row("w", "(w) " + nlocks + " locks acquired/s (1,000 in flight)", &run_result::rate, "%.0f",
      "w_acquired_per_s");
  row("w", "(w) distinct slots of the names", &run_result::distinct_slots, "%.0f",
      "w_distinct_slots");
  row("w", "(w) renewal rounds seen in the window", &run_result::rounds_seen, "%.2f",
      "w_rounds_seen");
  row("w", "(w) renewal scripts per round", &run_result::scripts_per_round, "%.1f",
      "w_scripts_per_round");
  if (find("w") != nullptr && !o.strace.empty()) {
    row("w", "(w) client writes per round, all masters", &run_result::writes_per_round, "%.2f",
        "w_writes_per_round");
    row("w", "(w)   of them with renewal scripts", &run_result::script_writes_per_round, "%.2f",
        "w_script_writes_per_round");
    row("w", "(w) KiB written per round", &run_result::kib_per_round, "%.0f", "w_kib_per_round");
  }
  row("w", "(w) renewals missed", &run_result::missed, "%.0f", "w_missed");
  row("w", "(w) holds lost", &run_result::lost, "%.0f", "w_lost");
  row("w", "(w) Redis CPU ms/round, masters", &run_result::cpu_masters_us, "%.2f",
      "w_cpu_ms_masters");
  row("w", "(w) Redis CPU ms/round, replicas", &run_result::cpu_replicas_us, "%.2f",
      "w_cpu_ms_replicas");
  std::printf(
      "client commands: INFO commandstats call deltas summed over the masters, minus the\n"
      "commands the lock scripts run inside Redis, the harness's INFO/TOUCH and the replicas'\n"
      "REPLCONF, per acquisition. Server reads: INFO stats total_reads_processed deltas (one per\n"
      "batch of requests the server read; the harness's left out). Redis CPU: INFO cpu\n"
      "used_cpu_user + used_cpu_sys deltas.\n"
      "(w) round: every held lock renewed once (renewals seen / locks). Writes: batches this\n"
      "process wrote to the servers' sockets (asio's write system calls of up to 64 KiB each\n"
      "joined into one batch), counted with strace attached (slows the client; (a) in a separate\n"
      "untimed run of %d cycles).\n",
      o.trace_cycles);

  // Per node.
  std::printf("\nper node (medians)");
  for (const scenario& s : scenarios) {
    const bool w = s.id == "w";
    std::printf("\n  (%s)%s\n", s.id.c_str(),
                w ? "  renewal scripts / script writes / Redis CPU ms, per round"
                  : "  client commands / Redis CPU us, per acquisition");
    for (int side = 0; side < 2; ++side) {
      const deployment& d = sides[side];
      for (const std::uint16_t port : d.nodes()) {
        const bool master = std::find(d.masters.begin(), d.masters.end(), port) != d.masters.end();
        std::printf("    %-8s %5u %-8s", d.name.c_str(), port, master ? "master" : "replica");
        if (master) {
          std::printf(" %9.2f", med_map(s.runs[side], &run_result::node_client_per_acq, port));
        } else {
          std::printf(" %9s", "-");
        }
        if (w) {
          const double wr = med_map(s.runs[side], &run_result::node_writes, port);
          if (wr < 0) {
            std::printf(" %8s", "-");
          } else {
            std::printf(" %8.2f", wr);
          }
        }
        std::printf(" %9.2f\n", med_map(s.runs[side], &run_result::node_cpu_us, port));
      }
    }
  }

  // Commandstats per acquisition, last round.
  for (const char* id : {"a", "c2"}) {
    const scenario* s = find(id);
    if (s == nullptr) continue;
    std::printf("\n(%s) commandstats per acquisition over the masters, last round:\n", id);
    for (int side = 0; side < 2; ++side) {
      std::printf("  %-8s", sides[side].name.c_str());
      for (const auto& [name, n] : s->runs[side].back().calls_per_acq)
        std::printf(" %s %.2f", name.c_str(), n);
      std::printf("\n");
    }
  }

  // Routing.
  dlock::routing_metrics measured[2];
  for (const scenario& s : scenarios)
    for (int side = 0; side < 2; ++side)
      for (const run_result& r : s.runs[side]) {
        measured[side].moved += r.routing.moved;
        measured[side].asked += r.routing.asked;
        measured[side].retries += r.routing.retries;
        measured[side].map_refreshes += r.routing.map_refreshes;
      }
  auto kind = [](dlock::deployment_kind k) {
    return k == dlock::deployment_kind::cluster  ? "cluster"
           : k == dlock::deployment_kind::single ? "single"
                                                 : "unknown";
  };
  std::printf("\nrouting metrics (client::routing_metrics()):\n");
  for (int side = 0; side < 2; ++side) {
    const dlock::routing_metrics total = sides[side].client->routing_metrics();
    std::printf(
        "  %-8s deployment %s; during the measured runs: moved %llu, asked %llu, retries %llu, "
        "map loads %llu;\n           shared client since creation: moved %llu, asked %llu, "
        "retries %llu, map loads %llu\n",
        sides[side].name.c_str(), kind(total.deployment),
        static_cast<unsigned long long>(measured[side].moved),
        static_cast<unsigned long long>(measured[side].asked),
        static_cast<unsigned long long>(measured[side].retries),
        static_cast<unsigned long long>(measured[side].map_refreshes),
        static_cast<unsigned long long>(total.moved), static_cast<unsigned long long>(total.asked),
        static_cast<unsigned long long>(total.retries),
        static_cast<unsigned long long>(total.map_refreshes));
  }
  if (const scenario* w = find("w")) {
    dlock::routing_metrics startup[2];
    for (int side = 0; side < 2; ++side)
      for (const run_result& r : w->runs[side]) {
        startup[side].moved += r.startup.moved;
        startup[side].asked += r.startup.asked;
        startup[side].retries += r.startup.retries;
        startup[side].map_refreshes += r.startup.map_refreshes;
      }
    std::printf(
        "  (w) makes a new client per run; \"during the measured runs\" counts their windows.\n"
        "  (w) new clients while acquiring, %zu runs: cluster moved %llu, asked %llu, retries "
        "%llu, map loads %llu; single moved %llu\n",
        w->runs[1].size(), static_cast<unsigned long long>(startup[1].moved),
        static_cast<unsigned long long>(startup[1].asked),
        static_cast<unsigned long long>(startup[1].retries),
        static_cast<unsigned long long>(startup[1].map_refreshes),
        static_cast<unsigned long long>(startup[0].moved));
  }
  if (!trace_note.empty()) std::printf("(w) writes not counted: %s\n", trace_note.c_str());
  for (int side = 0; side < 2; ++side)
    if (!traced[side].note.empty())
      std::printf("(a) %s writes not counted: %s\n", sides[side].name.c_str(),
                  traced[side].note.c_str());

  // Checks.
  std::printf("\n");
  std::printf("machine idle:    %.0f%% after the runs%s\n", 100 * idle_after,
              idle_after < 0.9 ? " -- other load on the machine skews the figures" : "");
  const std::uint64_t redirections = measured[1].moved + measured[1].asked + measured[1].retries;
  std::printf("check: cluster redirections/retries during the measured runs: %llu (%s)\n",
              static_cast<unsigned long long>(redirections), redirections == 0 ? "ok" : "NOT 0");
  if (find("a") != nullptr) {
    const row_value cmds = value("a", &run_result::client_per_acq);
    std::printf("check: (a) client commands/cycle, cluster %.2f <= single %.2f: %s\n", cmds.cluster,
                cmds.single, cmds.cluster <= cmds.single + 0.005 ? "yes" : "NO");
    const row_value reads = value("a", &run_result::reads_per_acq);
    std::printf("check: (a) server reads/cycle, cluster %.3f <= single %.3f (+5%%): %s\n",
                reads.cluster, reads.single, reads.cluster <= reads.single * 1.05 ? "yes" : "NO");
    if (traced[0].script_writes_per_cycle >= 0 && traced[1].script_writes_per_cycle >= 0)
      std::printf(
          "      (a) client writes with lock scripts per cycle, traced run: cluster %.3f, single "
          "%.3f\n          (above 1 when a release leaves alone instead of with the next lock)\n",
          traced[1].script_writes_per_cycle, traced[0].script_writes_per_cycle);
  }
  if (find("w") != nullptr) {
    double worst_lost = 0, worst_missed = 0;
    for (int side = 0; side < 2; ++side)
      for (const run_result& r : find("w")->runs[side]) {
        worst_lost = std::max({worst_lost, r.lost, o.locks - r.still_held});
        worst_missed = std::max(worst_missed, r.missed);
      }
    std::printf("check: (w) holds lost in any run: %.0f, renewals missed in any run: %.0f (%s)\n",
                worst_lost, worst_missed, worst_lost == 0 && worst_missed == 0 ? "ok" : "NOT 0");
  }

  // JSON.
  std::string json =
      "{\"bench\":\"dlock_bench_cluster\",\"command\":\"" + json_escape(command_line) +
      "\",\"nproc\":" + std::to_string(std::thread::hardware_concurrency()) + ",\"cpu\":\"" +
      json_escape(cpu_model()) + "\",\"redis_version\":\"" + json_escape(version) +
      "\",\"masters\":" + std::to_string(sides[1].masters.size()) +
      ",\"replicas\":" + std::to_string(sides[1].replicas.size()) +
      ",\"repeat\":" + std::to_string(o.repeat) + ",\"idle_before\":" + json_number(idle_before) +
      ",\"idle_after\":" + json_number(idle_after) + ",\"medians\":{";
  for (std::size_t i = 0; i < json_rows.size(); ++i) {
    const auto& [key, v] = json_rows[i];
    json += (i ? "," : "") + std::string("\"") + key +
            "\":{\"single\":" + (v.single < 0 ? "null" : json_number(v.single)) +
            ",\"cluster\":" + (v.cluster < 0 ? "null" : json_number(v.cluster)) + "}";
  }
  json += "},\"cluster_routing_measured\":{\"moved\":" + std::to_string(measured[1].moved) +
          ",\"asked\":" + std::to_string(measured[1].asked) +
          ",\"retries\":" + std::to_string(measured[1].retries) +
          ",\"map_refreshes\":" + std::to_string(measured[1].map_refreshes) + "}}";
  std::printf("\n%s\n", json.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_cluster: %s\n", e.what());
    return 1;
  }
}
