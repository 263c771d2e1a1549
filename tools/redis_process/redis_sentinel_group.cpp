#include "redis_sentinel_group.hpp"

#include "node_group.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dlock::tools {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view error_prefix = "dlock::tools::redis_sentinel_group: ";
// How often the waits look at the group again: short, because a step of a failover (a vote, a
// promotion, a reconfigured replica) completes in milliseconds on loopback.
constexpr auto poll_interval = 10ms;
// One status question to one node; a node that does not answer within it counts as not ready.
constexpr auto query_timeout = 2s;
// How long resume_node() waits for the node to answer again.
constexpr auto resume_timeout = 10s;
// What confirms that a master streams to its replicas: a write that changes no key (PUBLISH
// is replicated) followed by WAIT <replicas> wait_probe_ms on the same connection.
constexpr std::string_view sync_channel = "dlock-fixture:sync";
constexpr std::string_view wait_probe_ms = "100";
// Attempts at starting a node on a fresh port when its port was taken meanwhile.
constexpr int port_attempts = 5;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(std::string(error_prefix) + what);
}

// The parts one after another, without the temporaries of a chain of operator+.
std::string concat(std::initializer_list<std::string_view> parts) {
  std::string text;
  for (const std::string_view part : parts)
    text.append(part);
  return text;
}

// RFC 3986 percent-encoding of everything but unreserved characters.
std::string percent_encode(std::string_view value) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const char ch : value) {
    const auto byte = static_cast<unsigned char>(ch);
    if (std::isalnum(byte) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      encoded += ch;
    } else {
      encoded += '%';
      encoded += hex[byte >> 4];
      encoded += hex[byte & 0xf];
    }
  }
  return encoded;
}

// Whether `name` is an executable regular file somewhere in $PATH.
bool in_path(const std::string& name) {
  const char* env_path = std::getenv("PATH");
  const std::string path_list = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= path_list.size();) {
    std::size_t end = path_list.find(':', begin);
    if (end == std::string::npos) end = path_list.size();
    std::string candidate = end == begin ? "." : path_list.substr(begin, end - begin);
    candidate.append("/").append(name);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return true;
    }
    begin = end + 1;
  }
  return false;
}

std::vector<std::uint16_t> pick_ports(std::size_t count, const std::vector<std::uint16_t>& avoid) {
  return group::pick_ports(error_prefix, count, std::set<unsigned>(avoid.begin(), avoid.end()));
}

std::string port_text(std::uint16_t port) {
  return group::loopback_address(port);
}

using group::info_field;
using group::join_words;

// The state ("online", "wait_bgsave", ...) the master's INFO replication gives its replica on
// `port` ("slave<n>:ip=...,port=<port>,state=<state>,..."), "" if it lists none there.
std::string replica_state(std::string_view info, std::uint16_t port) {
  const std::string needle = ",port=" + std::to_string(port) + ",state=";
  for (std::size_t begin = 0; begin < info.size();) {
    std::size_t end = info.find('\n', begin);
    if (end == std::string_view::npos) end = info.size();
    const std::string_view line = info.substr(begin, end - begin);
    begin = end + 1;
    if (!line.starts_with("slave") || line.size() < 6 || std::isdigit(line[5]) == 0) continue;
    const std::size_t at = line.find(needle);
    if (at == std::string_view::npos) continue;
    const std::string_view rest = line.substr(at + needle.size());
    return std::string(rest.substr(0, rest.find_first_of(",\r")));
  }
  return {};
}

// A port given as text ("6379"), 0 if it is not one.
std::uint16_t parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    return 0;
  }
  return static_cast<std::uint16_t>(value);
}

// The text of field `name` in one entry of SENTINEL MASTER / REPLICAS / SENTINELS, "" if absent.
std::string entry_field(const resp_value& entry, std::string_view name) {
  const resp_value* value = entry.field(name);
  return value == nullptr ? std::string() : value->str;
}

}  // namespace

std::vector<std::string> fast_sentinel_debug() {
  return {"info-period",    "500", "ping-period", "500", "ask-period", "200",
          "publish-period", "200", "tilt-period", "2000"};
}

redis_sentinel_group::redis_sentinel_group(redis_sentinel_group_options options)
    : options_(std::move(options)) {
  if (options_.sentinels == 0) {
    throw std::invalid_argument(std::string(error_prefix) + "needs at least 1 sentinel");
  }
  if (options_.quorum == 0 || options_.quorum > options_.sentinels) {
    throw std::invalid_argument(std::string(error_prefix) + "quorum must be 1.." +
                                std::to_string(options_.sentinels));
  }
  if (options_.master_name.empty() ||
      !std::all_of(options_.master_name.begin(), options_.master_name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '.' || ch == '_' ||
               ch == '-';
      })) {
    throw std::invalid_argument(std::string(error_prefix) + "master name '" + options_.master_name +
                                "' is not letters, digits, '.', '_', '-'");
  }
  if (options_.start_timeout <= 0ms || options_.change_timeout <= 0ms ||
      options_.down_after <= 0ms || options_.failover_timeout <= 0ms) {
    throw std::invalid_argument(std::string(error_prefix) + "time limits must be positive");
  }
  if (options_.sentinel_debug.size() % 2 != 0) {
    throw std::invalid_argument(std::string(error_prefix) +
                                "sentinel_debug must be pairs of parameter and value");
  }
  if (options_.sentinel_executable.empty()) {
    options_.sentinel_executable =
        in_path("redis-sentinel") ? "redis-sentinel" : options_.executable;
  }

  const auto deadline = clock_type::now() + options_.start_timeout;
  try {
    const std::size_t data_count = 1 + options_.replicas;
    std::vector<std::uint16_t> ports = pick_ports(data_count + options_.sentinels, {});
    data_ports_.assign(ports.begin(), ports.begin() + static_cast<std::ptrdiff_t>(data_count));
    sentinel_ports_.assign(ports.begin() + static_cast<std::ptrdiff_t>(data_count), ports.end());
    data_nodes_.resize(data_ports_.size());
    sentinels_.resize(sentinel_ports_.size());

    for (std::size_t i = 0; i < data_ports_.size(); ++i)
      start_process(data_ports_, data_nodes_, i, false, deadline);
    // At run time, not as --replicaof: a restarted node then follows its config file, which the
    // sentinels rewrite with every reconfiguration (and this CONFIG REWRITE with the first).
    const std::string master = std::to_string(announced(data_ports_.front()));
    for (std::size_t i = 1; i < data_ports_.size(); ++i) {
      for (const std::vector<std::string>& command :
           {std::vector<std::string>{"REPLICAOF", "127.0.0.1", master},
            std::vector<std::string>{"CONFIG", "REWRITE"}}) {
        const resp_value answer = call(data_ports_[i], command, query_timeout);
        if (answer.is_error()) {
          fail(join_words(command) + " on " + port_text(data_ports_[i]) + ": " + answer.str);
        }
      }
    }
    // The sentinels start while the replicas sync; they monitor the master once the replicas
    // are linked, so that their first INFO of the master lists every replica.
    for (std::size_t i = 0; i < sentinel_ports_.size(); ++i)
      start_process(sentinel_ports_, sentinels_, i, true, deadline);
    wait_until("the replicas to sync with " + port_text(data_ports_.front()), deadline,
               [this] { return replication_problem(); });
    for (const std::uint16_t sentinel : sentinel_ports_) {
      apply_sentinel_debug(sentinel);
      monitor(sentinel);
    }
    wait_until("the sentinels to know the master, its replicas and each other", deadline,
               [this] { return problem(0, true, nullptr); });
  } catch (const std::invalid_argument&) {
    stop_all();
    throw;
  } catch (const std::exception& e) {
    std::string message = e.what();
    message += "\n" + log_tails();
    stop_all();
    data_nodes_.clear();
    sentinels_.clear();
    throw std::runtime_error(message);
  }
}

redis_sentinel_group::~redis_sentinel_group() {
  stop_all();
}

void redis_sentinel_group::stop_all() noexcept {
  // SIGTERM to every process first so that they shut down side by side (sentinels first: they
  // need not watch the data nodes go), SIGCONT for paused ones, then reap each.
  for (const auto* group : {&sentinels_, &data_nodes_}) {
    for (const auto& process : *group) {
      if (process == nullptr) continue;
      if (const pid_t pid = process->pid(); pid > 0) {
        ::kill(pid, SIGTERM);
        ::kill(pid, SIGCONT);
      }
    }
  }
  for (const auto* group : {&sentinels_, &data_nodes_}) {
    for (const auto& process : *group) {
      if (process != nullptr) process->stop();
    }
  }
  paused_.clear();
}

void redis_sentinel_group::add_tls(redis_process_options& node) const {
  node.tls = true;
  // The first data node makes the CA; every other node's certificate is signed by it.
  if (!data_nodes_.empty() && data_nodes_.front() != nullptr) {
    node.tls_ca_dir = data_nodes_.front()->dir();
  }
}

redis_process_options redis_sentinel_group::data_options(std::uint16_t port) const {
  redis_process_options node;
  node.executable = options_.executable;
  node.cli_executable = options_.cli_executable;
  node.port = port;
  node.die_with_parent = options_.die_with_parent;
  node.password = options_.password;
  // A replica's first sync would otherwise wait 5 s for more replicas to share it.
  node.extra_args = {// Sync through an RDB file: after a diskless sync, Redis 7.0 streams writes to
                     // the replica only from its next REPLCONF ACK on if its first came before
                     // the master saw its fork end (up to a second later), so WAIT would fail for
                     // that long although INFO lists the replica online.
                     "--repl-diskless-sync", "no",
                     // Neither the master nor the replica keeps that file (to load at a restart).
                     "--rdb-del-sync-files", "yes"};
  if (!options_.password.empty()) {
    node.extra_args.insert(node.extra_args.end(), {"--masterauth", options_.password});
  }
  if (options_.tls) {
    add_tls(node);
    // The replicas connect to their master with TLS (and announce their TLS port).
    node.extra_args.insert(node.extra_args.end(), {"--tls-replication", "yes"});
  }
  node.extra_args.insert(node.extra_args.end(), options_.extra_args.begin(),
                         options_.extra_args.end());
  return node;
}

redis_process_options redis_sentinel_group::sentinel_options(std::uint16_t port) const {
  redis_process_options node;
  node.executable = options_.sentinel_executable;
  node.cli_executable = options_.cli_executable;
  node.port = port;
  node.die_with_parent = options_.die_with_parent;
  // requirepass on the sentinel; with no sentinel-pass set, a sentinel also uses its requirepass
  // to authenticate to the other sentinels.
  node.password = options_.sentinel_password;
  // The config file is redis_process's own (in the sentinel's directory, writable): the sentinel
  // rewrites it with its id and everything it learns, and a restart reads it back.
  node.extra_args = {"--sentinel"};
  if (options_.tls) {
    add_tls(node);
    // In a sentinel's config this makes its links to the data nodes and to the other sentinels
    // TLS.
    node.extra_args.insert(node.extra_args.end(), {"--tls-replication", "yes"});
  }
  node.extra_args.insert(node.extra_args.end(), options_.sentinel_extra_args.begin(),
                         options_.sentinel_extra_args.end());
  return node;
}

void redis_sentinel_group::start_process(std::vector<std::uint16_t>& ports,
                                         std::vector<std::unique_ptr<redis_process>>& nodes,
                                         std::size_t index, bool sentinel,
                                         clock_type::time_point deadline) {
  for (int attempt = 1;; ++attempt) {
    redis_process_options node =
        sentinel ? sentinel_options(ports[index]) : data_options(ports[index]);
    node.start_timeout =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now()), 1ms);
    try {
      nodes[index] = std::make_unique<redis_process>(std::move(node));
      return;
    } catch (const std::runtime_error& e) {
      // Another process took the port since it was picked: pick again.
      const bool in_use = std::string_view(e.what()).find("in use") != std::string_view::npos;
      if (!in_use || attempt == port_attempts || clock_type::now() >= deadline) throw;
      std::vector<std::uint16_t> avoid = data_ports_;
      avoid.insert(avoid.end(), sentinel_ports_.begin(), sentinel_ports_.end());
      ports[index] = pick_ports(1, avoid).front();
    }
  }
}

void redis_sentinel_group::apply_sentinel_debug(std::uint16_t sentinel_port) const {
  if (options_.sentinel_debug.empty()) return;
  std::vector<std::string> command{"SENTINEL", "DEBUG"};
  command.insert(command.end(), options_.sentinel_debug.begin(), options_.sentinel_debug.end());
  const resp_value answer = call(sentinel_port, command, query_timeout);
  // A sentinel before 7.0 has no SENTINEL DEBUG: it keeps its own periods.
  if (answer.is_error() && answer.str.find("subcommand") == std::string::npos) {
    fail(join_words(command) + " on " + port_text(sentinel_port) + ": " + answer.str);
  }
}

void redis_sentinel_group::monitor(std::uint16_t sentinel_port) const {
  std::vector<std::string> set{"SENTINEL",
                               "SET",
                               options_.master_name,
                               "down-after-milliseconds",
                               std::to_string(options_.down_after.count()),
                               "failover-timeout",
                               std::to_string(options_.failover_timeout.count()),
                               "parallel-syncs",
                               std::to_string(options_.parallel_syncs)};
  if (!options_.password.empty()) set.insert(set.end(), {"auth-pass", options_.password});
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"SENTINEL", "MONITOR", options_.master_name, "127.0.0.1",
                                 // With tls, the TLS port: the sentinels report what they got.
                                 std::to_string(announced(data_ports_.front())),
                                 std::to_string(options_.quorum)},
        set}) {
    const resp_value answer = call(sentinel_port, command, query_timeout);
    if (answer.is_error()) {
      // The password stays out of the message.
      fail(command[1] + " " + options_.master_name + " on " + port_text(sentinel_port) + ": " +
           answer.str);
    }
  }
}

bool redis_sentinel_group::is_sentinel(std::uint16_t port) const {
  return sentinel_index(port) < sentinel_ports_.size();
}

std::size_t redis_sentinel_group::data_index(std::uint16_t port) const {
  return static_cast<std::size_t>(std::find(data_ports_.begin(), data_ports_.end(), port) -
                                  data_ports_.begin());
}

std::size_t redis_sentinel_group::sentinel_index(std::uint16_t port) const {
  return static_cast<std::size_t>(std::find(sentinel_ports_.begin(), sentinel_ports_.end(), port) -
                                  sentinel_ports_.begin());
}

redis_process& redis_sentinel_group::node(std::uint16_t port) {
  return const_cast<redis_process&>(std::as_const(*this).node(port));
}

const redis_process& redis_sentinel_group::node(std::uint16_t port) const {
  if (const std::size_t i = data_index(port); i < data_nodes_.size()) return *data_nodes_[i];
  if (const std::size_t i = sentinel_index(port); i < sentinels_.size()) return *sentinels_[i];
  throw std::out_of_range(std::string(error_prefix) + "no node on port " + std::to_string(port));
}

const std::string& redis_sentinel_group::password_of(std::uint16_t port) const {
  return is_sentinel(port) ? options_.sentinel_password : options_.password;
}

std::uint16_t redis_sentinel_group::tls_port(std::uint16_t port) const {
  return node(port).tls_port();
}

std::string redis_sentinel_group::ca_file() const {
  return options_.tls ? data_nodes_.front()->ca_file() : "";
}

std::uint16_t redis_sentinel_group::announced(std::uint16_t port) const {
  return options_.tls ? tls_port(port) : port;
}

std::uint16_t redis_sentinel_group::plain_port(std::uint16_t reported) const {
  if (!options_.tls) return reported;
  for (const auto* group : {&data_nodes_, &sentinels_}) {
    for (const auto& process : *group) {
      if (process != nullptr && process->tls_port() == reported) return process->port();
    }
  }
  return reported;
}

bool redis_sentinel_group::live(std::uint16_t port) const {
  return !paused_.contains(port) && node(port).running();
}

std::chrono::milliseconds redis_sentinel_group::limit(std::chrono::milliseconds timeout) const {
  return timeout > 0ms ? timeout : options_.change_timeout;
}

std::string redis_sentinel_group::url(std::uint16_t port) {
  return "redis://" + port_text(port);
}

std::string redis_sentinel_group::node_url(std::uint16_t port) const {
  const std::string& password = password_of(port);
  if (password.empty()) return url(port);
  return "redis://:" + percent_encode(password) + "@" + port_text(port);
}

std::string redis_sentinel_group::sentinel_url(std::string_view query) const {
  std::string text = options_.tls ? "rediss-sentinel://" : "redis-sentinel://";
  if (!options_.password.empty()) text += ":" + percent_encode(options_.password) + "@";
  for (std::size_t i = 0; i < sentinel_ports_.size(); ++i) {
    if (i > 0) text += ',';
    text += port_text(announced(sentinel_ports_[i]));
  }
  std::string parameters;
  if (!options_.sentinel_password.empty()) {
    parameters = "sentinel_password=" + percent_encode(options_.sentinel_password);
  }
  if (!query.empty()) {
    if (!parameters.empty()) parameters += '&';
    parameters += query;
  }
  if (!parameters.empty()) text += "?" + parameters;
  return text + "#" + options_.master_name;
}

resp_value redis_sentinel_group::call(std::uint16_t port, const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout) const {
  return std::move(call_all(port, {args}, timeout).front());
}

std::vector<resp_value> redis_sentinel_group::call_all(
    std::uint16_t port, const std::vector<std::vector<std::string>>& commands,
    std::chrono::milliseconds timeout) const {
  const std::string& password = password_of(port);
  if (password.empty()) return resp_call_all(port, commands, timeout);
  std::vector<std::vector<std::string>> with_auth{{"AUTH", password}};
  with_auth.insert(with_auth.end(), commands.begin(), commands.end());
  std::vector<resp_value> replies = resp_call_all(port, with_auth, timeout);
  if (replies.front().is_error()) return std::vector<resp_value>(commands.size(), replies.front());
  replies.erase(replies.begin());
  return replies;
}

std::string redis_sentinel_group::cli(std::uint16_t port,
                                      const std::vector<std::string>& args) const {
  return node(port).cli(args);
}

std::uint16_t redis_sentinel_group::master_port_from(std::uint16_t sentinel_port) const {
  if (!is_sentinel(sentinel_port)) {
    throw std::out_of_range(std::string(error_prefix) + "no sentinel on port " +
                            std::to_string(sentinel_port));
  }
  const resp_value answer = call(
      sentinel_port, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name}, query_timeout);
  if (answer.is_error()) {
    fail("SENTINEL GET-MASTER-ADDR-BY-NAME on " + port_text(sentinel_port) + ": " + answer.str);
  }
  const std::uint16_t port =
      answer.elements.size() == 2 ? plain_port(parse_port(answer.elements[1].str)) : 0;
  if (port == 0) {
    fail("sentinel " + port_text(sentinel_port) + " names no master " + options_.master_name +
         ": " + answer.to_string());
  }
  return port;
}

std::uint16_t redis_sentinel_group::master_port() const {
  std::string errors;
  for (const std::uint16_t sentinel : sentinel_ports_) {
    if (!live(sentinel)) continue;
    try {
      return master_port_from(sentinel);
    } catch (const std::runtime_error& e) {
      errors += std::string("\n  ") + e.what();
    }
  }
  fail("no running sentinel names the master" + errors);
}

std::vector<std::uint16_t> redis_sentinel_group::replica_ports() const {
  const std::uint16_t master = master_port();
  std::vector<std::uint16_t> replicas;
  for (const std::uint16_t port : data_ports_) {
    if (port != master) replicas.push_back(port);
  }
  return replicas;
}

void redis_sentinel_group::kill_node(std::uint16_t port) {
  node(port).kill(SIGKILL);
  paused_.erase(port);
}

void redis_sentinel_group::restart_node(std::uint16_t port) {
  redis_process& process = node(port);
  // stop() (inside start()) sends SIGCONT too, so a paused node stops as well.
  paused_.erase(port);
  process.start();
  // SENTINEL DEBUG settings live in memory only.
  if (is_sentinel(port)) apply_sentinel_debug(port);
}

void redis_sentinel_group::pause_node(std::uint16_t port) {
  redis_process& process = node(port);
  if (!process.running()) return;
  process.kill(SIGSTOP);
  paused_.insert(port);
}

void redis_sentinel_group::resume_node(std::uint16_t port) {
  redis_process& process = node(port);
  paused_.erase(port);
  if (!process.running()) return;
  process.kill(SIGCONT);
  // Once it answers, it has run its event loop again: a replica has read what its master sent
  // meanwhile (and answered its GETACKs) in the same pass or an earlier one.
  wait_until(port_text(port) + " to answer after SIGCONT", clock_type::now() + resume_timeout,
             [&]() -> std::string {
               try {
                 const resp_value pong = call(port, {"PING"}, query_timeout);
                 return pong.str == "PONG" ? "" : "it answers " + pong.to_string();
               } catch (const std::runtime_error& e) {
                 return e.what();
               }
             });
}

void redis_sentinel_group::cut_replica(std::uint16_t replica_port) {
  if (data_index(replica_port) == data_ports_.size() || !live(replica_port)) {
    throw std::invalid_argument(std::string(error_prefix) + port_text(replica_port) +
                                " is not a running data node");
  }
  // "id=.. addr=127.0.0.1:<master port> laddr=127.0.0.1:<local port> fd=.. ... flags=M ..."
  const resp_value link = call(replica_port, {"CLIENT", "LIST", "TYPE", "master"}, query_timeout);
  if (link.is_error()) fail("CLIENT LIST on " + port_text(replica_port) + ": " + link.str);
  const auto field = [&](std::string_view name) -> std::string {
    const std::string key = " " + std::string(name) + "=";
    const std::string line = " " + link.str.substr(0, link.str.find('\n'));
    const std::size_t at = line.find(key);
    if (at == std::string::npos) return {};
    const std::size_t begin = at + key.size();
    return line.substr(begin, line.find_first_of(" \r", begin) - begin);
  };
  const std::string master_address = field("addr");
  const std::string local_address = field("laddr");
  const std::size_t colon = master_address.rfind(':');
  const std::uint16_t master =
      colon == std::string::npos
          ? 0
          : plain_port(parse_port(std::string_view(master_address).substr(colon + 1)));
  if (master == 0 || local_address.empty()) {
    throw std::invalid_argument(std::string(error_prefix) + port_text(replica_port) +
                                " has no link to a master");
  }
  pause_node(replica_port);
  const resp_value killed = call(master, {"CLIENT", "KILL", "ADDR", local_address}, query_timeout);
  if (killed.type != resp_value::kind::integer || killed.integer != 1) {
    fail("CLIENT KILL ADDR " + local_address + " on " + port_text(master) + ": " +
         killed.to_string());
  }
}

std::string redis_sentinel_group::streaming_problem(std::uint16_t master,
                                                    std::size_t replicas) const {
  if (replicas == 0) return {};
  const std::vector<resp_value> replies =
      call_all(master,
               {{"PUBLISH", std::string(sync_channel), "sync"},
                {"WAIT", std::to_string(replicas), std::string(wait_probe_ms)}},
               query_timeout);
  if (replies.at(1).type != resp_value::kind::integer) {
    return "WAIT on master " + port_text(master) + ": " + replies.at(1).to_string();
  }
  if (replies.at(1).integer < static_cast<long long>(replicas)) {
    return "master " + port_text(master) + " has " + std::to_string(replicas) +
           " replicas linked but WAIT gets " + std::to_string(replies.at(1).integer) +
           " acknowledgements";
  }
  return {};
}

std::string redis_sentinel_group::replication_problem() const {
  try {
    const std::uint16_t master = data_ports_.front();
    const resp_value info = call(master, {"INFO", "replication"}, query_timeout);
    for (std::size_t i = 1; i < data_ports_.size(); ++i) {
      const resp_value replica = call(data_ports_[i], {"INFO", "replication"}, query_timeout);
      if (info_field(replica.str, "master_link_status") != "up") {
        return "replica " + port_text(data_ports_[i]) + " has no link to the master yet";
      }
      const std::string state = replica_state(info.str, announced(data_ports_[i]));
      if (state != "online") {
        return "the master lists replica " + port_text(data_ports_[i]) + " as '" + state + "'";
      }
    }
    if (std::string wrong = streaming_problem(master, data_ports_.size() - 1); !wrong.empty()) {
      return wrong;
    }
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

std::string redis_sentinel_group::problem(std::uint16_t not_master, bool full,
                                          std::uint16_t* agreed) const {
  try {
    std::vector<std::uint16_t> sentinels;
    std::uint16_t master = 0;
    std::uint16_t named_by = 0;
    for (const std::uint16_t sentinel : sentinel_ports_) {
      if (!live(sentinel)) continue;
      sentinels.push_back(sentinel);
      const resp_value info = call(sentinel, {"INFO", "sentinel"}, query_timeout);
      if (info_field(info.str, "sentinel_tilt") == "1") {
        return "sentinel " + port_text(sentinel) + " is in TILT mode";
      }
      const std::uint16_t named = master_port_from(sentinel);
      if (named == not_master) {
        return "sentinel " + port_text(sentinel) + " still names the former master " +
               port_text(named);
      }
      if (master == 0) {
        master = named;
        named_by = sentinel;
      } else if (named != master) {
        return "sentinel " + port_text(sentinel) + " names master " + port_text(named) +
               ", sentinel " + port_text(named_by) + " " + port_text(master);
      }
    }
    if (sentinels.empty()) return "no sentinel is running";
    if (data_index(master) == data_ports_.size()) {
      return "the sentinels name " + port_text(master) + ", which is not a node of the group";
    }
    if (!live(master)) return "the sentinels name master " + port_text(master) + ", which is down";

    std::vector<std::uint16_t> replicas;
    const resp_value master_info = call(master, {"INFO", "replication"}, query_timeout);
    if (info_field(master_info.str, "role") != "master") {
      return "master " + port_text(master) + " reports role:" + info_field(master_info.str, "role");
    }
    for (const std::uint16_t port : data_ports_) {
      if (port == master || !live(port)) continue;
      replicas.push_back(port);
      const resp_value info = call(port, {"INFO", "replication"}, query_timeout);
      if (info_field(info.str, "role") != "slave" ||
          info_field(info.str, "master_port") != std::to_string(announced(master))) {
        return port_text(port) + " is not a replica of " + port_text(master) +
               " yet (role:" + info_field(info.str, "role") +
               ", master_port:" + info_field(info.str, "master_port") + ")";
      }
      if (info_field(info.str, "master_link_status") != "up") {
        return "replica " + port_text(port) + " has no link to " + port_text(master) + " yet";
      }
      if (const std::string state = replica_state(master_info.str, announced(port));
          state != "online") {
        return "master " + port_text(master) + " lists replica " + port_text(port) + " as '" +
               state + "'";
      }
    }
    if (std::string wrong = streaming_problem(master, replicas.size()); !wrong.empty()) {
      return wrong;
    }

    for (const std::uint16_t sentinel : sentinels) {
      const std::string who = "sentinel " + port_text(sentinel);
      const resp_value seen =
          call(sentinel, {"SENTINEL", "MASTER", options_.master_name}, query_timeout);
      if (seen.is_error()) return concat({who, ": SENTINEL MASTER: ", seen.str});
      if (const std::string flags = entry_field(seen, "flags"); flags != "master") {
        return concat({who, " sees the master with flags ", flags});
      }
      if (full) {
        const std::string known_replicas = entry_field(seen, "num-slaves");
        const std::string known_sentinels = entry_field(seen, "num-other-sentinels");
        if (known_replicas != std::to_string(options_.replicas)) {
          return concat({who, " knows ", known_replicas, " of ", std::to_string(options_.replicas),
                         " replicas"});
        }
        if (known_sentinels != std::to_string(options_.sentinels - 1)) {
          return concat({who, " knows ", known_sentinels, " of ",
                         std::to_string(options_.sentinels - 1), " other sentinels"});
        }
      }
      const resp_value listed =
          call(sentinel, {"SENTINEL", "REPLICAS", options_.master_name}, query_timeout);
      if (listed.is_error()) return concat({who, ": SENTINEL REPLICAS: ", listed.str});
      for (const std::uint16_t replica : replicas) {
        const auto entry =
            std::find_if(listed.elements.begin(), listed.elements.end(), [&](const resp_value& e) {
              return plain_port(parse_port(entry_field(e, "port"))) == replica;
            });
        if (entry == listed.elements.end()) {
          return concat({who, " does not list replica ", port_text(replica), " yet"});
        }
        const std::string flags = entry_field(*entry, "flags");
        const std::string link = entry_field(*entry, "master-link-status");
        const std::string its_master = entry_field(*entry, "master-port");
        if (flags != "slave" || link != "ok" || its_master != std::to_string(announced(master))) {
          return concat({who, " sees replica ", port_text(replica), " with flags ", flags,
                         ", master-link-status ", link, ", master-port ", its_master});
        }
      }
      const resp_value others =
          call(sentinel, {"SENTINEL", "SENTINELS", options_.master_name}, query_timeout);
      if (others.is_error()) return concat({who, ": SENTINEL SENTINELS: ", others.str});
      for (const std::uint16_t other : sentinels) {
        if (other == sentinel) continue;
        const auto entry =
            std::find_if(others.elements.begin(), others.elements.end(), [&](const resp_value& e) {
              return plain_port(parse_port(entry_field(e, "port"))) == other;
            });
        if (entry == others.elements.end()) {
          return concat({who, " does not know sentinel ", port_text(other), " yet"});
        }
        if (const std::string flags = entry_field(*entry, "flags"); flags != "sentinel") {
          return concat({who, " sees sentinel ", port_text(other), " with flags ", flags});
        }
      }
    }
    if (agreed != nullptr) *agreed = master;
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

void redis_sentinel_group::wait_until(const std::string& what, clock_type::time_point deadline,
                                      const std::function<std::string()>& problem_or_empty) const {
  group::wait_until(error_prefix, what, deadline, poll_interval, problem_or_empty);
}

void redis_sentinel_group::wait_ok(std::chrono::milliseconds timeout) const {
  wait_until("the group to settle", clock_type::now() + limit(timeout),
             [this] { return problem(0, false, nullptr); });
}

std::uint16_t redis_sentinel_group::wait_for_failover(std::uint16_t old_master,
                                                      std::chrono::milliseconds timeout) {
  std::uint16_t master = 0;
  wait_until("a master other than " + port_text(old_master), clock_type::now() + limit(timeout),
             [&] { return problem(old_master, false, &master); });
  return master;
}

std::uint16_t redis_sentinel_group::failover(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + limit(timeout);
  std::uint16_t old_master = 0;
  wait_until("the group to settle before a failover", deadline,
             [&] { return problem(0, false, &old_master); });
  const std::vector<std::string> command{"SENTINEL", "FAILOVER", options_.master_name};
  wait_until(join_words(command) + " to be accepted", deadline, [&]() -> std::string {
    const auto sentinel = std::find_if(sentinel_ports_.begin(), sentinel_ports_.end(),
                                       [this](std::uint16_t port) { return live(port); });
    if (sentinel == sentinel_ports_.end()) return "no sentinel is running";
    const resp_value answer = call(*sentinel, command, query_timeout);
    if (!answer.is_error()) return {};
    // INPROG: an earlier failover has not ended; NOGOODSLAVE: the sentinel's INFO of the
    // replicas is not fresh enough yet.
    if (answer.str.starts_with("INPROG") || answer.str.starts_with("NOGOODSLAVE")) {
      return "sentinel " + port_text(*sentinel) + " answers " + answer.str;
    }
    fail(join_words(command) + " on " + port_text(*sentinel) + ": " + answer.str);
  });
  std::uint16_t master = 0;
  wait_until("the failover from " + port_text(old_master), deadline,
             [&] { return problem(old_master, false, &master); });
  return master;
}

void redis_sentinel_group::keep_files(bool keep) {
  for (const auto* group : {&data_nodes_, &sentinels_}) {
    for (const auto& process : *group) {
      if (process != nullptr) process->keep_files(keep);
    }
  }
}

std::string redis_sentinel_group::log_tails(std::size_t lines) const {
  std::string text;
  const auto describe = [&](const std::string& role, std::uint16_t port,
                            const std::unique_ptr<redis_process>& process) {
    if (process == nullptr) return;
    text += "--- " + role + " " + port_text(port) +
            (process->running() ? (paused_.contains(port) ? " (paused)" : "") : " (not running)") +
            ", log " + process->log_file() + " ---\n" + process->log_tail(lines) + "\n";
  };
  for (std::size_t i = 0; i < data_nodes_.size(); ++i)
    describe(i == 0 ? "first master" : "first replica", data_ports_[i], data_nodes_[i]);
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    describe("sentinel", sentinel_ports_[i], sentinels_[i]);
  return text;
}

}  // namespace dlock::tools
