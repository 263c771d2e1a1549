#include "redis_cluster.hpp"

#include "node_group.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dlock::tools {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view error_prefix = "dlock::tools::redis_cluster: ";
constexpr std::size_t slot_count = 16384;
// The cluster bus listens on port + bus_offset (Redis' default cluster-port).
constexpr unsigned bus_offset = 10000;
// How often the waits look at the cluster again: short, because a change (an election, a gossip
// round) completes in tens of milliseconds on loopback and starting must stay fast.
constexpr auto poll_interval = 10ms;
// One status question to one node; a node that does not answer within it counts as not ready.
constexpr auto query_timeout = 2s;
// MIGRATE's own timeout for one batch of keys, and the batch size.
constexpr auto migrate_timeout = 5s;
constexpr int migrate_batch = 100;
// Redis ends a manual failover that has not completed after 5 s (CLUSTER_MF_TIMEOUT).
constexpr auto failover_retry = 6s;
// Attempts at starting a node on a fresh port when its port (or bus port) was taken meanwhile.
constexpr int port_attempts = 5;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(std::string(error_prefix) + what);
}

// Ports for nodes whose bus port (port + bus_offset) must be free too.
std::vector<std::uint16_t> pick_ports(std::size_t count, const std::set<unsigned>& avoid) {
  return group::pick_ports(error_prefix, count, avoid, bus_offset);
}

using group::info_field;
using group::join_words;

std::string port_text(std::uint16_t port) {
  return group::loopback_address(port);
}

}  // namespace

// One node's answer to "who serves what": CLUSTER SHARDS (or CLUSTER SLOTS) made plain.
struct redis_cluster::shard {
  std::vector<std::pair<long long, long long>> ranges;  // inclusive slot ranges
  std::uint16_t master = 0;
  std::string master_health = "online";  // CLUSTER SLOTS has no health: taken as online
  std::vector<std::uint16_t> replicas;
};

struct redis_cluster::view {
  std::vector<shard> shards;
  std::vector<std::uint16_t> owner = std::vector<std::uint16_t>(slot_count, 0);  // 0: none

  const shard* shard_of_master(std::uint16_t port) const {
    for (const shard& s : shards) {
      if (s.master == port && !s.ranges.empty()) return &s;
    }
    return nullptr;
  }
};

redis_cluster::redis_cluster(redis_cluster_options options) : options_(std::move(options)) {
  if (options_.masters < 3) {
    throw std::invalid_argument(std::string(error_prefix) +
                                "redis-cli --cluster create needs at least 3 masters");
  }
  if (options_.start_timeout <= 0ms || options_.change_timeout <= 0ms) {
    throw std::invalid_argument(std::string(error_prefix) + "time limits must be positive");
  }
  const std::size_t count = options_.masters * (1 + options_.replicas_per_master);
  const auto deadline = clock_type::now() + options_.start_timeout;
  try {
    ports_ = pick_ports(count, {});
    nodes_.resize(count);
    ids_.resize(count);
    for (std::size_t i = 0; i < count; ++i)
      start_node(i, deadline);

    create_cluster(deadline);
    wait_until("the cluster to form", deadline, [this] { return problem(true); });
  } catch (const std::invalid_argument&) {
    stop_all();
    throw;
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (!nodes_.empty()) message += "\n" + log_tails();
    stop_all();
    nodes_.clear();
    throw std::runtime_error(message);
  }
}

void redis_cluster::create_cluster(clock_type::time_point deadline) {
  std::vector<std::string> create{options_.cli_executable, "--cluster", "create"};
  if (!options_.password.empty()) {
    create.insert(create.begin() + 1, {"-a", options_.password, "--no-auth-warning"});
  }
  for (const std::uint16_t port : ports_)
    create.push_back(port_text(port));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                               "--cluster-yes"});
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
  command_result made;
  std::exception_ptr error;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    try {
      made = run_command(create, std::max(left, 1ms));
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
  });
  introduce_all(done, deadline);
  runner.join();
  if (error) std::rethrow_exception(error);
  if (made.timed_out || made.exit_code != 0) {
    fail("'" + join_words(create) + "' " +
         (made.timed_out ? "timed out" : "failed with exit " + std::to_string(made.exit_code)) +
         ":\n" + made.out + made.err);
  }
  // No announce() of the replicas that redis-cli made replicate last: gossip tells the others
  // within a second, while the masters' 2 s write delay after their start runs out anyway, and a
  // MEET replaces the receiver's inbound bus link from the sender, so messages on the old link
  // can be lost while it is reopened.
}

void redis_cluster::announce(std::uint16_t port) const {
  for (const std::uint16_t other : ports_) {
    if (other == port) continue;
    call(port, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(other)}, query_timeout);
  }
}

void redis_cluster::introduce_all(const std::atomic<bool>& created,
                                  clock_type::time_point deadline) const noexcept {
  // redis-cli assigns the slots and epochs, has every node meet the first one, then checks once a
  // second whether all nodes agree. By gossip alone the nodes learn of each other, and of each
  // other's slots, in about a second (a node pings the others every node_timeout / 2), which
  // misses that first check and costs a second. Instead, once redis-cli's MEETs are in (every
  // node knows 2 nodes): a MEET of every pair completes the mesh in milliseconds, and once every
  // node knows every other by name, each announces itself so all know its slots. (A MEET of a
  // known node makes the receiver replace its inbound bus link from the sender, so a message on
  // the old link can be lost; harmless here, before any replica replicates or any vote is due.)
  const auto waiting = [&] { return !created && clock_type::now() < deadline; };
  const auto known_nodes = [this](std::uint16_t port) -> std::size_t {
    const resp_value info = call(port, {"CLUSTER", "INFO"}, query_timeout);
    return std::stoul("0" + info_field(info.str, "cluster_known_nodes"));
  };
  const auto knows_all_by_name = [&](std::uint16_t port) {
    return known_nodes(port) == ports_.size() &&
           call(port, {"CLUSTER", "NODES"}, query_timeout).str.find("handshake") ==
               std::string::npos;
  };
  try {
    while (waiting() && !std::all_of(ports_.begin() + 1, ports_.end(),
                                     [&](std::uint16_t port) { return known_nodes(port) > 1; })) {
      std::this_thread::sleep_for(poll_interval);
    }
    if (!waiting()) return;
    for (std::size_t i = 1; i < ports_.size(); ++i) {
      for (std::size_t j = i + 1; j < ports_.size(); ++j) {
        call(ports_[i], {"CLUSTER", "MEET", "127.0.0.1", std::to_string(ports_[j])}, query_timeout);
      }
    }
    while (waiting() && !std::all_of(ports_.begin(), ports_.end(), knows_all_by_name)) {
      std::this_thread::sleep_for(poll_interval);
    }
    if (!waiting()) return;
    for (const std::uint16_t port : ports_)
      announce(port);
  } catch (const std::exception&) {
    // Only a speed-up: redis-cli and gossip get there without it.
  }
}

redis_cluster::~redis_cluster() {
  stop_all();
}

void redis_cluster::stop_all() noexcept {
  // SIGTERM to every node first so that they shut down side by side, then reap each.
  for (const auto& node : nodes_) {
    if (node == nullptr) continue;
    if (const pid_t pid = node->pid(); pid > 0) ::kill(pid, SIGTERM);
  }
  for (const auto& node : nodes_) {
    if (node != nullptr) node->stop();
  }
}

redis_process_options redis_cluster::node_options(std::size_t index) const {
  const std::uint16_t port = ports_[index];
  redis_process_options node;
  node.executable = options_.executable;
  node.cli_executable = options_.cli_executable;
  node.port = port;
  node.die_with_parent = options_.die_with_parent;
  node.own_session = options_.own_session;
  node.password = options_.password;
  node.extra_args = {
      "--cluster-enabled", "yes",
      // Relative to the node's --dir, its own temporary directory; kept across restart_node().
      "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
      std::to_string(options_.node_timeout.count()),
      // A replica's first sync would otherwise wait 5 s for more replicas to share it.
      "--repl-diskless-sync-delay", "0",
      // Replicas stay with the master they were given, so tests know where they are.
      "--cluster-allow-replica-migration", "no"};
  if (!options_.password.empty()) {
    node.extra_args.insert(node.extra_args.end(), {"--masterauth", options_.password});
  }
  if (options_.tls) {
    node.tls = true;
    // The first node makes the CA; the others' certificates are signed by it.
    if (index > 0) node.tls_ca_dir = nodes_.front()->dir();
    node.extra_args.insert(node.extra_args.end(),
                           {"--tls-cluster", "yes", "--tls-replication", "yes",
                            // Else the bus would listen on tls-port + 10000, which was not
                            // checked to be free.
                            "--cluster-port", std::to_string(port + bus_offset)});
  }
  node.extra_args.insert(node.extra_args.end(), options_.extra_args.begin(),
                         options_.extra_args.end());
  return node;
}

void redis_cluster::start_node(std::size_t index, clock_type::time_point deadline) {
  for (int attempt = 1;; ++attempt) {
    redis_process_options node = node_options(index);
    node.start_timeout =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now()), 1ms);
    try {
      nodes_[index] = std::make_unique<redis_process>(std::move(node));
      break;
    } catch (const std::runtime_error& e) {
      // Another process took the port or its bus port since it was picked: pick again.
      const bool in_use = std::string_view(e.what()).find("in use") != std::string_view::npos;
      if (!in_use || attempt == port_attempts || clock_type::now() >= deadline) throw;
      std::set<unsigned> avoid;
      for (const std::uint16_t port : ports_)
        avoid.insert({port, port + bus_offset});
      ports_[index] = pick_ports(1, avoid).front();
    }
  }
  const resp_value id = call(ports_[index], {"CLUSTER", "MYID"});
  if (id.type != resp_value::kind::bulk || id.str.empty()) {
    fail("CLUSTER MYID on " + port_text(ports_[index]) + ": " + id.to_string());
  }
  ids_[index] = id.str;
}

std::vector<std::uint16_t> redis_cluster::ports() const {
  return ports_;
}

std::string redis_cluster::userinfo() const {
  if (options_.password.empty()) return {};
  std::string encoded = ":";
  for (const char ch : options_.password) {
    const auto byte = static_cast<unsigned char>(ch);
    if (std::isalnum(byte) != 0 || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      encoded += ch;
    } else {
      static constexpr char hex[] = "0123456789ABCDEF";
      encoded += '%';
      encoded += hex[byte >> 4];
      encoded += hex[byte & 0xf];
    }
  }
  return encoded + "@";
}

std::string redis_cluster::node_url(std::uint16_t port) const {
  return "redis://" + userinfo() + port_text(port);
}

std::string redis_cluster::url(std::uint16_t port) {
  return "redis://" + port_text(port);
}

std::uint16_t redis_cluster::tls_port(std::uint16_t port) const {
  return node(port).tls_port();
}

std::string redis_cluster::tls_url(std::uint16_t port) const {
  if (!options_.tls) return {};
  return "rediss://" + userinfo() + port_text(tls_port(port));
}

std::string redis_cluster::ca_file() const {
  return options_.tls ? nodes_.front()->ca_file() : "";
}

std::uint16_t redis_cluster::plain_port(std::uint16_t announced) const {
  if (!options_.tls) return announced;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (nodes_[i] != nullptr && nodes_[i]->tls_port() == announced) return ports_[i];
  }
  return announced;
}

std::size_t redis_cluster::index_of(std::uint16_t port) const {
  const auto found = std::find(ports_.begin(), ports_.end(), port);
  if (found == ports_.end()) {
    throw std::out_of_range(std::string(error_prefix) + "no node on port " + std::to_string(port));
  }
  return static_cast<std::size_t>(found - ports_.begin());
}

const std::string& redis_cluster::node_id(std::uint16_t port) const {
  return ids_[index_of(port)];
}

redis_process& redis_cluster::node(std::uint16_t port) {
  return *nodes_[index_of(port)];
}

const redis_process& redis_cluster::node(std::uint16_t port) const {
  return *nodes_[index_of(port)];
}

std::chrono::milliseconds redis_cluster::limit(std::chrono::milliseconds timeout) const {
  return timeout > 0ms ? timeout : options_.change_timeout;
}

resp_value redis_cluster::call(std::uint16_t port, const std::vector<std::string>& args,
                               std::chrono::milliseconds timeout) const {
  if (options_.password.empty()) return resp_call(port, args, timeout);
  const std::vector<resp_value> replies =
      resp_call_all(port, {{"AUTH", options_.password}, args}, timeout);
  if (replies.at(0).is_error()) return replies.at(0);
  return replies.at(1);
}

std::string redis_cluster::cli(std::uint16_t port, const std::vector<std::string>& args) const {
  return node(port).cli(args);
}

redis_cluster::view redis_cluster::read_view(std::uint16_t port) const {
  view result;
  const resp_value shards = call(port, {"CLUSTER", "SHARDS"}, query_timeout);
  if (!shards.is_error()) {
    // Redis 7: [[ "slots", [start, end, ...], "nodes", [{id, port, role, health, ...}, ...] ], ...]
    for (const resp_value& entry : shards.elements) {
      shard s;
      if (const resp_value* slots = entry.field("slots")) {
        for (std::size_t i = 0; i + 1 < slots->elements.size(); i += 2) {
          s.ranges.emplace_back(slots->elements[i].integer, slots->elements[i + 1].integer);
        }
      }
      if (const resp_value* nodes = entry.field("nodes")) {
        for (const resp_value& node : nodes->elements) {
          const resp_value* node_port = node.field("port");
          const resp_value* role = node.field("role");
          const resp_value* health = node.field("health");
          if (node_port == nullptr || role == nullptr) continue;
          const auto p = static_cast<std::uint16_t>(node_port->integer);
          if (role->str == "master") {
            s.master = p;
            if (health != nullptr) s.master_health = health->str;
          } else {
            s.replicas.push_back(p);
          }
        }
      }
      result.shards.push_back(std::move(s));
    }
  } else {
    // Before Redis 7: [[start, end, [ip, port, id, ...] (master), [ip, port, id, ...]...], ...]
    const resp_value slots = call(port, {"CLUSTER", "SLOTS"}, query_timeout);
    if (slots.is_error()) fail("CLUSTER SLOTS on " + port_text(port) + ": " + slots.str);
    std::map<std::uint16_t, shard> by_master;
    for (const resp_value& entry : slots.elements) {
      if (entry.elements.size() < 3 || entry.elements[2].elements.size() < 2) continue;
      const auto master = static_cast<std::uint16_t>(entry.elements[2].elements[1].integer);
      shard& s = by_master[master];
      s.master = master;
      s.ranges.emplace_back(entry.elements[0].integer, entry.elements[1].integer);
      s.replicas.clear();
      for (std::size_t i = 3; i < entry.elements.size(); ++i) {
        if (entry.elements[i].elements.size() >= 2) {
          s.replicas.push_back(static_cast<std::uint16_t>(entry.elements[i].elements[1].integer));
        }
      }
    }
    for (auto& [master, s] : by_master)
      result.shards.push_back(std::move(s));
  }
  for (shard& s : result.shards) {
    std::sort(s.replicas.begin(), s.replicas.end());
    for (const auto& [first, last] : s.ranges) {
      for (long long slot = std::max(first, 0LL); slot <= std::min<long long>(last, slot_count - 1);
           ++slot) {
        result.owner[static_cast<std::size_t>(slot)] = s.master;
      }
    }
  }
  return result;
}

redis_cluster::view redis_cluster::first_view() const {
  std::string errors;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    try {
      return read_view(ports_[i]);
    } catch (const std::runtime_error& e) {
      errors += std::string("\n  ") + e.what();
    }
  }
  fail("no running node answers CLUSTER SHARDS" + errors);
}

std::uint16_t redis_cluster::master_for_slot(std::uint16_t slot) const {
  if (slot >= slot_count) throw std::out_of_range(std::string(error_prefix) + "bad slot");
  const std::uint16_t master = first_view().owner[slot];
  if (master == 0) fail("slot " + std::to_string(slot) + " has no master");
  return master;
}

std::uint16_t redis_cluster::key_slot(std::string_view key) const {
  std::string errors;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    try {
      const resp_value slot =
          call(ports_[i], {"CLUSTER", "KEYSLOT", std::string(key)}, query_timeout);
      if (slot.type != resp_value::kind::integer) fail("CLUSTER KEYSLOT: " + slot.to_string());
      return static_cast<std::uint16_t>(slot.integer);
    } catch (const std::runtime_error& e) {
      errors += std::string("\n  ") + e.what();
    }
  }
  fail("no running node answers CLUSTER KEYSLOT" + errors);
}

std::uint16_t redis_cluster::master_for_key(std::string_view key) const {
  return master_for_slot(key_slot(key));
}

std::vector<std::uint16_t> redis_cluster::masters() const {
  std::vector<std::uint16_t> result;
  for (const shard& s : first_view().shards) {
    if (!s.ranges.empty() && s.master != 0) result.push_back(s.master);
  }
  std::sort(result.begin(), result.end());
  result.erase(std::unique(result.begin(), result.end()), result.end());
  return result;
}

std::vector<std::uint16_t> redis_cluster::replicas_of(std::uint16_t master_port) const {
  std::vector<std::uint16_t> result;
  if (node(master_port).running()) {
    // slave0:ip=127.0.0.1,port=7001,state=online,offset=...,lag=0
    const resp_value replication = call(master_port, {"INFO", "replication"}, query_timeout);
    if (replication.is_error()) fail("INFO replication: " + replication.str);
    const std::size_t count = std::stoul("0" + info_field(replication.str, "connected_slaves"));
    for (std::size_t i = 0; i < count; ++i) {
      const std::string entry = info_field(replication.str, "slave" + std::to_string(i));
      const std::size_t at = entry.find("port=");
      if (at != std::string::npos) {
        result.push_back(plain_port(static_cast<std::uint16_t>(std::stoul(entry.substr(at + 5)))));
      }
    }
  } else {
    for (const shard& s : first_view().shards) {
      if (s.master == master_port && (result.empty() || !s.ranges.empty())) result = s.replicas;
    }
  }
  std::sort(result.begin(), result.end());
  return result;
}

void redis_cluster::kill_node(std::uint16_t port) {
  node(port).kill(SIGKILL);
}

void redis_cluster::restart_node(std::uint16_t port) {
  node(port).start();
}

std::string redis_cluster::problem(bool full) const {
  std::optional<view> reference;
  std::uint16_t reference_port = 0;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    const std::uint16_t port = ports_[i];
    if (!nodes_[i]->running()) continue;
    try {
      const resp_value info = call(port, {"CLUSTER", "INFO"}, query_timeout);
      const std::string state = info_field(info.str, "cluster_state");
      if (state != "ok") return port_text(port) + " reports cluster_state:" + state;
      if (full) {
        const std::string known = info_field(info.str, "cluster_known_nodes");
        if (known != std::to_string(ports_.size())) {
          return port_text(port) + " knows " + known + " of " + std::to_string(ports_.size()) +
                 " nodes";
        }
      }
      const resp_value replication = call(port, {"INFO", "replication"}, query_timeout);
      const std::string role = info_field(replication.str, "role");
      if (role == "slave" && info_field(replication.str, "master_link_status") != "up") {
        return "replica " + port_text(port) + " has no link to its master yet";
      }
      view current = read_view(port);
      // At the start: every master has its replicas connected (what replicas_of() reports)...
      if (full && role == "master" && current.shard_of_master(port) != nullptr &&
          info_field(replication.str, "connected_slaves") !=
              std::to_string(options_.replicas_per_master)) {
        return "master " + port_text(port) + " has " +
               info_field(replication.str, "connected_slaves") + " replicas";
      }
      for (std::size_t slot = 0; slot < slot_count; ++slot) {
        const std::uint16_t owner = current.owner[slot];
        if (owner == 0) return port_text(port) + " has no master for slot " + std::to_string(slot);
        if (reference && reference->owner[slot] != owner) {
          return port_text(port) + " maps slot " + std::to_string(slot) + " to " +
                 std::to_string(owner) + ", " + port_text(reference_port) + " to " +
                 std::to_string(reference->owner[slot]);
        }
      }
      for (const shard& s : current.shards) {
        if (s.ranges.empty()) continue;
        // ...and every node knows them as its replicas, which gossip tells the others up to a
        // second later: a failover's voters must know the replica's master.
        if (full && s.replicas.size() != options_.replicas_per_master) {
          return port_text(port) + " sees " + std::to_string(s.replicas.size()) + " replicas of " +
                 std::to_string(s.master);
        }
        const auto owner = std::find(ports_.begin(), ports_.end(), s.master);
        if (owner == ports_.end() ||
            !nodes_[static_cast<std::size_t>(owner - ports_.begin())]->running()) {
          return port_text(port) + " maps slots to " + std::to_string(s.master) +
                 ", which is not running";
        }
        if (s.master_health != "online") {
          return port_text(port) + " sees master " + std::to_string(s.master) + " " +
                 s.master_health;
        }
      }
      if (!reference) {
        reference = std::move(current);
        reference_port = port;
      }
    } catch (const std::runtime_error& e) {
      return e.what();
    }
  }
  if (!reference) return "no node is running";
  return {};
}

void redis_cluster::wait_until(const std::string& what, clock_type::time_point deadline,
                               const std::function<std::string()>& problem_or_empty) const {
  group::wait_until(error_prefix, what, deadline, poll_interval, problem_or_empty);
}

void redis_cluster::wait_ok(std::chrono::milliseconds timeout) const {
  wait_until("cluster_state:ok on every node", clock_type::now() + limit(timeout),
             [this] { return problem(false); });
}

std::string redis_cluster::unlinked_masters(std::uint16_t port) const {
  // CLUSTER NODES: <id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> [<slot>...]
  const resp_value nodes = call(port, {"CLUSTER", "NODES"}, query_timeout);
  if (nodes.is_error()) fail("CLUSTER NODES on " + port_text(port) + ": " + nodes.str);
  std::string missing;
  for (std::size_t begin = 0; begin < nodes.str.size();) {
    std::size_t end = nodes.str.find('\n', begin);
    if (end == std::string::npos) end = nodes.str.size();
    std::vector<std::string> fields;
    for (std::size_t at = begin; at < end;) {
      std::size_t space = nodes.str.find(' ', at);
      if (space == std::string::npos || space > end) space = end;
      fields.push_back(nodes.str.substr(at, space - at));
      at = space + 1;
    }
    begin = end + 1;
    if (fields.size() < 9) continue;  // no slots: not a voter
    const std::string& flags = fields[2];
    if (flags.find("myself") != std::string::npos || flags.find("master") == std::string::npos ||
        flags.find("fail") != std::string::npos) {
      continue;
    }
    if (fields[7] != "connected") missing += " " + fields[1];
  }
  return missing.empty() ? "" : "has no link to the masters" + missing;
}

void redis_cluster::failover(std::uint16_t replica_port, failover_mode mode,
                             std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + limit(timeout);
  const view before = read_view(replica_port);
  const shard* old = nullptr;
  for (const shard& s : before.shards) {
    if (std::find(s.replicas.begin(), s.replicas.end(), replica_port) != s.replicas.end()) {
      old = &s;
    }
  }
  if (old == nullptr || old->ranges.empty()) {
    throw std::invalid_argument(std::string(error_prefix) + port_text(replica_port) +
                                " is not the replica of a master with slots");
  }
  const std::uint16_t old_master = old->master;
  std::vector<std::size_t> slots;
  for (std::size_t slot = 0; slot < slot_count; ++slot) {
    if (before.owner[slot] == old_master) slots.push_back(slot);
  }
  // The masters vote only for a node they know as a replica of the master it replaces; after a
  // start or an earlier failover they may still be learning that by gossip.
  wait_until(port_text(replica_port) + " to be known as a replica of " + port_text(old_master),
             deadline, [&]() -> std::string {
               try {
                 for (std::size_t i = 0; i < ports_.size(); ++i) {
                   if (!nodes_[i]->running()) continue;
                   const view current = read_view(ports_[i]);
                   const shard* known = current.shard_of_master(old_master);
                   if (known == nullptr || std::find(known->replicas.begin(), known->replicas.end(),
                                                     replica_port) == known->replicas.end()) {
                     return port_text(ports_[i]) + " does not list it yet";
                   }
                 }
                 // It asks the masters for their votes on its cluster bus links, which a
                 // restarted node opens only in its first cron runs.
                 const std::string links = unlinked_masters(replica_port);
                 if (!links.empty()) return port_text(replica_port) + " " + links;
               } catch (const std::runtime_error& e) {
                 return e.what();
               }
               return {};
             });
  std::vector<std::string> command{"CLUSTER", "FAILOVER"};
  if (mode == failover_mode::force) command.emplace_back("FORCE");
  if (mode == failover_mode::takeover) command.emplace_back("TAKEOVER");
  // A replica that has only just become one (an earlier failover, a restart) may have no cluster
  // bus link to its master yet, and refuses a graceful failover until it has.
  auto issued = clock_type::now();
  const auto issue = [&] {
    wait_until(join_words(command) + " to be accepted", deadline, [&]() -> std::string {
      const resp_value answer = call(replica_port, command);
      if (!answer.is_error()) return {};
      const bool link_pending = mode == failover_mode::graceful &&
                                answer.str.find("Master is down") != std::string::npos &&
                                node(old_master).running();
      if (!link_pending)
        fail(join_words(command) + " on " + port_text(replica_port) + ": " + answer.str);
      return port_text(replica_port) + " answers " + answer.str;
    });
    issued = clock_type::now();
  };
  issue();

  wait_until("the failover to " + port_text(replica_port), deadline, [&]() -> std::string {
    try {
      const resp_value role = call(replica_port, {"INFO", "replication"}, query_timeout);
      if (info_field(role.str, "role") != "master") {
        // An election that got no majority (a vote request lost while a bus link was being
        // reopened) ends with the manual failover's timeout; then ask again.
        if (mode != failover_mode::takeover && clock_type::now() - issued > failover_retry) {
          issue();
        }
        return port_text(replica_port) + " is still a replica";
      }
      if (node(old_master).running()) {
        const resp_value former = call(old_master, {"INFO", "replication"}, query_timeout);
        if (info_field(former.str, "role") != "slave") {
          return "former master " + port_text(old_master) + " is not a replica yet";
        }
      }
      for (std::size_t i = 0; i < ports_.size(); ++i) {
        if (!nodes_[i]->running()) continue;
        const view current = read_view(ports_[i]);
        for (const std::size_t slot : slots) {
          if (current.owner[slot] != replica_port) {
            return port_text(ports_[i]) + " still maps slot " + std::to_string(slot) + " to " +
                   std::to_string(current.owner[slot]);
          }
        }
      }
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return problem(false);
  });
}

void redis_cluster::begin_slot_migration(std::uint16_t slot, std::uint16_t from_port,
                                         std::uint16_t to_port) {
  if (slot >= slot_count) throw std::invalid_argument(std::string(error_prefix) + "bad slot");
  const view current = read_view(from_port);
  if (current.owner[slot] != from_port) {
    throw std::invalid_argument(std::string(error_prefix) + port_text(from_port) +
                                " does not serve slot " + std::to_string(slot));
  }
  bool to_is_master = false;
  for (const shard& s : current.shards)
    to_is_master = to_is_master || s.master == to_port;
  if (!to_is_master || to_port == from_port) {
    throw std::invalid_argument(std::string(error_prefix) + port_text(to_port) +
                                " is not another master");
  }
  const std::string slot_text = std::to_string(slot);
  // Importing first: once the source says MIGRATING it sends -ASK to the target.
  for (const auto& [port, command] :
       std::vector<std::pair<std::uint16_t, std::vector<std::string>>>{
           {to_port, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", node_id(from_port)}},
           {from_port, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", node_id(to_port)}}}) {
    const resp_value answer = call(port, command);
    if (answer.is_error()) fail(join_words(command) + " on " + port_text(port) + ": " + answer.str);
  }
}

void redis_cluster::finish_slot_migration(std::uint16_t slot, std::uint16_t from_port,
                                          std::uint16_t to_port,
                                          std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + limit(timeout);
  const std::string slot_text = std::to_string(slot);
  for (;;) {
    const resp_value keys =
        call(from_port, {"CLUSTER", "GETKEYSINSLOT", slot_text, std::to_string(migrate_batch)});
    if (keys.is_error()) fail("CLUSTER GETKEYSINSLOT on " + port_text(from_port) + ": " + keys.str);
    if (keys.elements.empty()) break;
    if (clock_type::now() >= deadline) fail("keys of slot " + slot_text + " not moved in time");
    // With tls-cluster, MIGRATE connects with TLS: to the target's TLS port.
    const std::uint16_t target = options_.tls ? tls_port(to_port) : to_port;
    std::vector<std::string> migrate{
        "MIGRATE", "127.0.0.1", std::to_string(target),
        "",        "0",         std::to_string(std::chrono::milliseconds(migrate_timeout).count())};
    if (!options_.password.empty()) migrate.insert(migrate.end(), {"AUTH", options_.password});
    migrate.emplace_back("KEYS");
    for (const resp_value& key : keys.elements)
      migrate.push_back(key.str);
    const resp_value moved = call(from_port, migrate, migrate_timeout + query_timeout);
    if (moved.is_error()) fail("MIGRATE to " + port_text(to_port) + ": " + moved.str);
  }
  // The target first, then the source, then every other master, as the cluster specification
  // advises: the target bumps its epoch, and the source stops redirecting with -ASK.
  std::vector<std::uint16_t> order{to_port, from_port};
  for (const std::uint16_t master : masters()) {
    if (master != to_port && master != from_port) order.push_back(master);
  }
  for (const std::uint16_t port : order) {
    const std::vector<std::string> command{"CLUSTER", "SETSLOT", slot_text, "NODE",
                                           node_id(to_port)};
    const resp_value answer = call(port, command);
    if (answer.is_error()) fail(join_words(command) + " on " + port_text(port) + ": " + answer.str);
  }
  wait_until("slot " + slot_text + " to move to " + port_text(to_port), deadline,
             [&]() -> std::string {
               try {
                 for (std::size_t i = 0; i < ports_.size(); ++i) {
                   if (!nodes_[i]->running()) continue;
                   const std::uint16_t owner = read_view(ports_[i]).owner[slot];
                   if (owner != to_port) {
                     return port_text(ports_[i]) + " maps it to " + std::to_string(owner);
                   }
                 }
               } catch (const std::runtime_error& e) {
                 return e.what();
               }
               return problem(false);
             });
}

void redis_cluster::migrate_slot(std::uint16_t slot, std::uint16_t from_port, std::uint16_t to_port,
                                 std::chrono::milliseconds timeout) {
  const auto began = clock_type::now();
  begin_slot_migration(slot, from_port, to_port);
  const auto left = limit(timeout) - std::chrono::duration_cast<std::chrono::milliseconds>(
                                         clock_type::now() - began);
  finish_slot_migration(slot, from_port, to_port, std::max(left, 1ms));
}

void redis_cluster::keep_files(bool keep) {
  for (const auto& node : nodes_) {
    if (node != nullptr) node->keep_files(keep);
  }
}

std::string redis_cluster::log_tails(std::size_t lines) const {
  std::string text;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] == nullptr) continue;
    text += "--- node " + port_text(ports_[i]) + (nodes_[i]->running() ? "" : " (not running)") +
            ", log " + nodes_[i]->log_file() + " ---\n" + nodes_[i]->log_tail(lines) + "\n";
  }
  return text;
}

}  // namespace dlock::tools
