// The fault suite's network for partitions (netns_lab.hpp).
#include "netns_lab.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "redis_process.hpp"

namespace dlock::fault {
namespace {

using namespace std::chrono_literals;

// 10.213.X.0/24: one /24 per run, X picked so that no route or address of the machine overlaps.
constexpr int subnet_a = 10;
constexpr int subnet_b = 213;
// How long a probe connection may take when it must succeed, and how long one that must not
// succeed (the worker's packets are dropped) is given before the probe counts it as blocked.
constexpr auto probe_connect_timeout = 3000ms;
constexpr auto probe_blocked_after = 300ms;
constexpr auto command_timeout = 10s;

std::string join_args(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv)
    out += (out.empty() ? "" : " ") + a;
  return out;
}

tools::command_result run(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = command_timeout) {
  return tools::run_command(argv, timeout);
}

// Runs argv; throws with the command and its stderr when it does not exit 0.
void must(const std::vector<std::string>& argv) {
  const tools::command_result r = run(argv);
  if (r.exit_code != 0) {
    std::string err = r.err.empty() ? r.out : r.err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' '))
      err.pop_back();
    throw std::runtime_error("`" + join_args(argv) + "` failed (exit " +
                             std::to_string(r.exit_code) + "): " + err);
  }
}

void quiet(const std::vector<std::string>& argv) noexcept {
  try {
    (void)run(argv);
  } catch (...) {  // NOLINT(bugprone-empty-catch): cleanup is best effort
  }
}

// Whether `pid` is a running dlock_fault_suite (its comm is cut to 15 characters), not a zombie
// nobody has reaped yet.
bool suite_alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return false;
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= line.size()) {
    return false;
  }
  const std::string name = line.substr(open + 1, close - open - 1);
  const char state = line[close + 2];
  return name.rfind("dlock_fault_sui", 0) == 0 && state != 'Z' && state != 'X';
}

// IPv4 prefixes (network, length) of every route and local address of the root namespace.
std::vector<std::pair<std::uint32_t, int>> used_prefixes() {
  std::vector<std::pair<std::uint32_t, int>> out;
  const tools::command_result r = run({"ip", "-4", "-o", "route", "show", "table", "all"});
  std::istringstream lines(r.out);
  static const std::regex types(
      "^(local|broadcast|unreachable|blackhole|prohibit|throw|unicast|multicast|anycast|nat)$");
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (std::regex_match(first, types)) words >> first;
    if (first == "default" || first.empty()) continue;
    const auto slash = first.find('/');
    const std::string address = first.substr(0, slash);
    const int length = slash == std::string::npos ? 32 : std::stoi(first.substr(slash + 1));
    in_addr a{};
    if (::inet_pton(AF_INET, address.c_str(), &a) != 1) continue;
    out.emplace_back(ntohl(a.s_addr), length);
  }
  return out;
}

bool overlaps(std::uint32_t a, int a_length, std::uint32_t b, int b_length) {
  const int length = std::min(a_length, b_length);
  if (length == 0) return true;
  const std::uint32_t mask = length >= 32 ? 0xffffffffU : ~(0xffffffffU >> length);
  return (a & mask) == (b & mask);
}

// A TCP connection from inside namespace `ns` to address:port, by bash's /dev/tcp (Debian's bash
// always has it). True if it was established within `timeout`.
bool connects_from(const std::string& ns, const std::string& address, std::uint16_t port,
                   std::chrono::milliseconds timeout) {
  const tools::command_result r = run({"ip", "netns", "exec", ns, "bash", "-c",
                                       "exec 3<>/dev/tcp/" + address + "/" + std::to_string(port)},
                                      timeout);
  return !r.timed_out && r.exit_code == 0;
}

}  // namespace

std::unique_ptr<netns_lab> netns_lab::make(int workers, std::string& why) {
  remove_stale();
  std::unique_ptr<netns_lab> lab(new netns_lab());
  try {
    lab->build(workers);
    lab->probe();
  } catch (const std::exception& e) {
    why = e.what();
    lab->remove();
    return nullptr;
  }
  return lab;
}

netns_lab::~netns_lab() {
  remove();
}

void netns_lab::build(int workers) {
  pid_ = static_cast<int>(::getpid());
  workers_ = workers;
  const std::vector<std::pair<std::uint32_t, int>> used = used_prefixes();
  subnet_ = -1;
  for (int i = 0; i < 250 && subnet_ < 0; ++i) {
    const int x = (pid_ + i) % 250 + 1;
    const std::uint32_t net = (static_cast<std::uint32_t>(subnet_a) << 24U) |
                              (static_cast<std::uint32_t>(subnet_b) << 16U) |
                              (static_cast<std::uint32_t>(x) << 8U);
    bool taken = false;
    for (const auto& [prefix, length] : used)
      taken = taken || overlaps(prefix, length, net, 24);
    if (!taken) subnet_ = x;
  }
  if (subnet_ < 0) throw std::runtime_error("no free /24 in 10.213.0.0/16");
  const std::string prefix = std::to_string(subnet_a) + "." + std::to_string(subnet_b) + "." +
                             std::to_string(subnet_) + ".";
  server_address_ = prefix + "1";
  const std::string id = std::to_string(pid_);
  table_ = "dlock_fault_" + id;
  bridge_ = "dlf" + id + "b";

  must({"ip", "link", "add", bridge_, "type", "bridge"});
  must({"ip", "addr", "add", server_address_ + "/24", "dev", bridge_});
  must({"ip", "link", "set", bridge_, "up"});
  for (int i = 0; i < workers; ++i) {
    const std::string ns = "dlock-fault-" + id + "-" + std::to_string(i);
    const std::string root_end = "dlf" + id + "r" + std::to_string(i);
    const std::string ns_end = "dlf" + id + "n" + std::to_string(i);
    must({"ip", "netns", "add", ns});
    namespaces_.push_back(ns);
    must({"ip", "link", "add", root_end, "type", "veth", "peer", "name", ns_end, "netns", ns});
    must({"ip", "link", "set", root_end, "master", bridge_, "up"});
    must({"ip", "-n", ns, "addr", "add", worker_address(i) + "/24", "dev", ns_end});
    must({"ip", "-n", ns, "link", "set", ns_end, "up"});
    must({"ip", "-n", ns, "link", "set", "lo", "up"});
  }
  const std::string rules = "table inet " + table_ +
                            " {\n"
                            "  set cut { type ipv4_addr; flags timeout; }\n"
                            "  set stream { type inet_service . inet_service; flags timeout; }\n"
                            "  chain input { type filter hook input priority -10; policy accept; "
                            "ip saddr @cut drop; }\n"
                            "  chain output { type filter hook output priority -10; policy accept; "
                            "ip daddr @cut drop; tcp sport . tcp dport @stream drop; }\n"
                            "}\n";
  must({"nft", rules});
}

// A listener on the bridge address, reached from worker 0's namespace; then cut off; then again.
void netns_lab::probe() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_fd{fd};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, server_address_.c_str(), &a.sin_addr);
  socklen_t length = sizeof a;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
    throw std::runtime_error("cannot listen on " + server_address_);
  }
  const std::uint16_t port = ntohs(a.sin_port);
  if (!connects_from(namespaces_.at(0), server_address_, port, probe_connect_timeout)) {
    throw std::runtime_error("a namespace cannot reach " + server_address_ +
                             " (a firewall on this machine?)");
  }
  cut(0, 10s);
  const bool blocked =
      !connects_from(namespaces_.at(0), server_address_, port, probe_blocked_after);
  heal(0);
  if (!blocked) {
    throw std::runtime_error("the nftables rule did not cut the namespace off");
  }
  if (!connects_from(namespaces_.at(0), server_address_, port, probe_connect_timeout)) {
    throw std::runtime_error("a namespace cannot reach " + server_address_ + " after a heal");
  }
}

std::vector<std::string> netns_lab::redis_bind_args() const {
  return {"--bind", "127.0.0.1", server_address_};
}

std::string netns_lab::netns_path(int worker) const {
  return "/var/run/netns/" + namespaces_.at(static_cast<std::size_t>(worker));
}

std::string netns_lab::worker_address(int worker) const {
  return std::to_string(subnet_a) + "." + std::to_string(subnet_b) + "." + std::to_string(subnet_) +
         "." + std::to_string(worker + 2);
}

std::string netns_lab::describe() const {
  return std::to_string(workers_) + " network namespaces dlock-fault-" + std::to_string(pid_) +
         "-*, bridge " + bridge_ + " " + server_address_ + "/24, nftables table inet " + table_;
}

void netns_lab::cut(int worker, std::chrono::milliseconds safety) {
  must({"nft", "add element inet " + table_ + " cut { " + worker_address(worker) + " timeout " +
                   std::to_string(safety.count()) + "ms }"});
}

void netns_lab::heal(int worker) {
  const std::vector<std::string> argv = {
      "nft", "delete element inet " + table_ + " cut { " + worker_address(worker) + " }"};
  const tools::command_result r = run(argv);
  // Gone already: its timeout ran out (the suite was slower than the safety margin).
  if (r.exit_code != 0 && r.err.find("No such file or directory") == std::string::npos) {
    throw std::runtime_error("`" + join_args(argv) + "` failed: " + r.err);
  }
}

void netns_lab::cut_stream(std::uint16_t from, std::uint16_t to, std::chrono::milliseconds safety) {
  must({"nft", "add element inet " + table_ + " stream { " + std::to_string(from) + " . " +
                   std::to_string(to) + " timeout " + std::to_string(safety.count()) + "ms }"});
}

void netns_lab::heal_stream(std::uint16_t from, std::uint16_t to) {
  const std::vector<std::string> argv = {"nft", "delete element inet " + table_ + " stream { " +
                                                    std::to_string(from) + " . " +
                                                    std::to_string(to) + " }"};
  const tools::command_result r = run(argv);
  if (r.exit_code != 0 && r.err.find("No such file or directory") == std::string::npos) {
    throw std::runtime_error("`" + join_args(argv) + "` failed: " + r.err);
  }
}

void netns_lab::remove() noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (removed_ || pid_ == 0) return;
  removed_ = true;
  if (!table_.empty()) quiet({"nft", "delete", "table", "inet", table_});
  // A namespace's end of a veth pair goes with the namespace, and the root end with it.
  for (const std::string& ns : namespaces_)
    quiet({"ip", "netns", "delete", ns});
  if (!bridge_.empty()) quiet({"ip", "link", "delete", bridge_});
}

void netns_lab::remove_stale() noexcept {
  try {
    static const std::regex ns_name("^dlock-fault-([0-9]+)-[0-9]+$");
    static const std::regex table_name("^table inet dlock_fault_([0-9]+)$");
    static const std::regex link_name("^[0-9]+: (dlf([0-9]+)[br][0-9]*)[@:].*");
    std::smatch m;
    std::istringstream namespaces(run({"ip", "netns", "list"}).out);
    for (std::string line; std::getline(namespaces, line);) {
      const std::string name = line.substr(0, line.find(' '));
      if (std::regex_match(name, m, ns_name) && !suite_alive(std::stoi(m[1].str()))) {
        quiet({"ip", "netns", "delete", name});
      }
    }
    std::istringstream tables(run({"nft", "list", "tables"}).out);
    for (std::string line; std::getline(tables, line);) {
      if (std::regex_match(line, m, table_name) && !suite_alive(std::stoi(m[1].str()))) {
        quiet({"nft", "delete", "table", "inet", "dlock_fault_" + m[1].str()});
      }
    }
    std::istringstream links(run({"ip", "-o", "link", "show"}).out);
    for (std::string line; std::getline(links, line);) {
      if (std::regex_match(line, m, link_name) && !suite_alive(std::stoi(m[2].str()))) {
        quiet({"ip", "link", "delete", m[1].str()});
      }
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): best effort; a fresh lab uses new names
  }
}

}  // namespace dlock::fault
