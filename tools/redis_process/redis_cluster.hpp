// Starts, reshapes and stops a private Redis Cluster of redis_process nodes on loopback, for
// integration tests and benchmarks: 3 masters + 3 replicas by default, made with
// `redis-cli --cluster create`, plus the faults a cluster test needs (kill -9 and restart of a
// node, failover, slot migration in whole or in halves).
//
// Every wait is on real state, polled every few milliseconds and bounded by a named time limit:
// no fixed sleeps. Plain C++20 and POSIX like redis_process; not installed with dlock.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis_process.hpp"
#include "resp_call.hpp"

namespace dlock::tools {

// Configuration of a redis_cluster. The defaults make the 3 + 3 cluster of the cluster tests.
struct redis_cluster_options {
  // Masters made by `redis-cli --cluster create`, which needs at least 3.
  std::size_t masters = 3;
  // Replicas of each master.
  std::size_t replicas_per_master = 1;
  // cluster-node-timeout: how long a node may be unreachable before it counts as failing (and an
  // automatic failover of a master begins).
  std::chrono::milliseconds node_timeout{2000};
  // More redis-server arguments for every node, appended last so they override the generated
  // ones.
  std::vector<std::string> extra_args;
  // Server and client binaries, found through PATH unless they contain a '/'.
  std::string executable = "redis-server";
  std::string cli_executable = "redis-cli";
  // requirepass (and masterauth, so replicas can sync) on every node, if not empty. The
  // fixture's own commands authenticate with it; seed_url() and node_url() carry it.
  std::string password;
  // Every node also serves TLS on a port of its own (tls_port()), with certificates of one CA
  // (ca_file()), and the nodes talk TLS to each other: the cluster bus (tls-cluster, so CLUSTER
  // SHARDS and redirections to TLS clients name the TLS ports), replication (tls-replication) and
  // MIGRATE. The plain port stays open for the fixture's own commands (ports(), call(), cli()) and
  // the cluster bus stays on port + 10000 (cluster-port).
  bool tls = false;
  // How long the constructor may take in all: nodes up, cluster created, every node ok.
  std::chrono::milliseconds start_timeout{30000};
  // The default limit of failover(), migrate_slot(), finish_slot_migration() and wait_ok().
  std::chrono::milliseconds change_timeout{20000};
  // As redis_process_options::die_with_parent: the nodes get SIGKILL when the thread that started
  // them (the constructor's or restart_node()'s) exits.
  bool die_with_parent = true;
  // As redis_process_options::own_session: each node in a session of its own.
  bool own_session = false;
};

// How failover() asks the replica to take over (CLUSTER FAILOVER's modes).
enum class failover_mode {
  graceful,  // CLUSTER FAILOVER: the master stops writes, the replica catches up, then takes over
  force,     // CLUSTER FAILOVER FORCE: no handshake with the master (it may be dead)
  takeover,  // CLUSTER FAILOVER TAKEOVER: not even an election among the masters
};

// A Redis Cluster of masters * (1 + replicas_per_master) redis-server processes on 127.0.0.1,
// each with its own temporary directory (config, log, nodes.conf).
//
// Ports: each node's port is below 55536 and its cluster bus port (port + 10000) was free when
// picked; both are chosen below the kernel's ephemeral range when it allows, so that no outgoing
// connection of this host takes them while a node is down.
//
// Not thread-safe: use one object from one thread at a time. ports(), seed_url(), url() and
// node_id() only read fixed data and may be called concurrently once construction is done.
class redis_cluster {
 public:
  // Starts the nodes (cluster-enabled, no persistence, nodes.conf in each node's directory),
  // runs `redis-cli --cluster create ... --cluster-replicas R --cluster-yes` and waits until every
  // node reports cluster_state:ok, all agree on which master serves each of the 16384 slots, every
  // node knows every other, and every master has its replicas connected with their links up.
  // Throws std::invalid_argument for masters < 3, and std::runtime_error when a node cannot start
  // or the cluster is not ready within start_timeout (the message has the last log lines of the
  // nodes). On failure nothing is left running and the directories are removed.
  explicit redis_cluster(redis_cluster_options options = {});

  // Stops every node by PID (SIGTERM to all at once, SIGKILL after their stop_timeout), removes
  // the directories unless keep_files(true). Never throws.
  virtual ~redis_cluster();

  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;
  redis_cluster(redis_cluster&&) = delete;
  redis_cluster& operator=(redis_cluster&&) = delete;

  const redis_cluster_options& options() const { return options_; }

  // Every node's port, in start order. Roles change with failovers; ask masters() for today's.
  std::vector<std::uint16_t> ports() const;
  // "redis://127.0.0.1:<port of the first node>" (with the password, if any).
  std::string seed_url() const { return node_url(ports_.front()); }
  // "redis://127.0.0.1:<port>", without a password.
  static std::string url(std::uint16_t port);
  // url(port) with the cluster's password, if any ("redis://:<password>@127.0.0.1:<port>").
  std::string node_url(std::uint16_t port) const;
  // With options().tls: the node's TLS port, and "rediss://127.0.0.1:<it>" with the cluster's
  // password like node_url(); the CA that verifies every node (the same file for all). 0 or ""
  // without tls. Throw std::out_of_range for a port that is not one of ports().
  std::uint16_t tls_port(std::uint16_t port) const;
  std::string tls_url(std::uint16_t port) const;
  std::string ca_file() const;
  // The node's cluster id (40 hex digits); it survives restarts (nodes.conf is kept).
  // Throws std::out_of_range for a port that is not one of ports().
  const std::string& node_id(std::uint16_t port) const;
  // The node's process (pid(), log_file(), log_tail(), kill(SIGSTOP), ...).
  // Throws std::out_of_range for a port that is not one of ports().
  redis_process& node(std::uint16_t port);
  const redis_process& node(std::uint16_t port) const;

  // The port of the master that serves `slot`, in the slot map of the first running node that
  // answers (CLUSTER SHARDS, or CLUSTER SLOTS on servers before 7.0). After wait_ok() every node
  // agrees. Throws std::runtime_error when no running node answers or the slot has no master.
  std::uint16_t master_for_slot(std::uint16_t slot) const;
  // master_for_slot(key_slot(key)).
  std::uint16_t master_for_key(std::string_view key) const;
  // CLUSTER KEYSLOT `key` on a running node (binary-safe).
  std::uint16_t key_slot(std::string_view key) const;
  // Ports of the masters that serve at least one slot, ascending, as master_for_slot() sees them.
  std::vector<std::uint16_t> masters() const;
  // Ports of the replicas of `master_port`, ascending: those connected to it now (its INFO
  // replication), or when it is not running those the slot map of the first running node lists.
  std::vector<std::uint16_t> replicas_of(std::uint16_t master_port) const;

  // kill_node()
  //
  // kill -9 of the node; returns once it is reaped. Does nothing if it is not running. The rest
  // of the cluster notices after node_timeout; a killed master's replica is then promoted.
  void kill_node(std::uint16_t port);

  // restart_node()
  //
  // Starts the node again on the same port with the same nodes.conf (stopping it first if it
  // runs), so it rejoins with its old id; returns once it answers PING. Data is not kept. Does not
  // wait for the cluster: call wait_ok() for that (a master that was replaced comes back as a
  // replica of its successor). Throws std::runtime_error like redis_process::start().
  void restart_node(std::uint16_t port);

  // failover()
  //
  // Runs CLUSTER FAILOVER [FORCE|TAKEOVER] on the replica `replica_port` and waits until it is a
  // master serving the slots of its former master in every running node's map, the former master
  // (if running) calls itself a replica, and wait_ok() holds. First waits until every running
  // node knows it as the replica of that master and it has bus links to the masters (the voters
  // need both; just after a start, restart or earlier failover they may take a second); asks
  // again if Redis gave up on an election (after 5 s). Throws std::invalid_argument if the node
  // is not a replica of a master with slots, std::runtime_error on an error reply or at
  // `timeout` (options().change_timeout when zero).
  void failover(std::uint16_t replica_port, failover_mode mode = failover_mode::graceful,
                std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

  // migrate_slot()
  //
  // Moves `slot` with its keys from the master `from_port` to the master `to_port`:
  // begin_slot_migration() then finish_slot_migration(). Throws like them.
  void migrate_slot(std::uint16_t slot, std::uint16_t from_port, std::uint16_t to_port,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

  // begin_slot_migration()
  //
  // CLUSTER SETSLOT `slot` IMPORTING on `to_port`, then MIGRATING on `from_port`, and returns: the
  // slot stays half-moved, so a command for a key of it that `from_port` no longer has gets -ASK
  // (and CLUSTER GETKEYSINSLOT still lists the keys it has). Throws std::invalid_argument if
  // `from_port` does not serve the slot or `to_port` is not another master, std::runtime_error on
  // an error reply.
  void begin_slot_migration(std::uint16_t slot, std::uint16_t from_port, std::uint16_t to_port);

  // finish_slot_migration()
  //
  // After begin_slot_migration(): MIGRATE every key of the slot from `from_port` to `to_port`
  // (CLUSTER GETKEYSINSLOT + MIGRATE ... KEYS, in batches), then CLUSTER SETSLOT `slot` NODE on
  // `to_port`, `from_port` and every other master, and waits until every running node maps the
  // slot to `to_port` and wait_ok() holds. Throws std::runtime_error on an error reply or at
  // `timeout` (options().change_timeout when zero).
  void finish_slot_migration(std::uint16_t slot, std::uint16_t from_port, std::uint16_t to_port,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds::zero());

  // wait_ok()
  //
  // Waits until, among the running nodes: every one reports cluster_state:ok, all have the same
  // map of the 16384 slots and every master in it is running and reported online, and every
  // replica's link to its master is up. Throws std::runtime_error at `timeout`
  // (options().change_timeout when zero) with what was still wrong.
  void wait_ok(std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;

  // cli()
  //
  // `redis-cli -e -h 127.0.0.1 -p <port> <args...>`: its output without the final newline, as
  // redis_process::cli() (which throws on an error reply). Arguments cannot contain NUL bytes;
  // call() can.
  std::string cli(std::uint16_t port, const std::vector<std::string>& args) const;
  template <typename... Args>
  std::string cli(std::uint16_t port, Args&&... args) const
      requires(sizeof...(Args) > 0 && (std::convertible_to<Args, std::string> && ...)) {
    return cli(port, std::vector<std::string>{std::string(std::forward<Args>(args))...});
  }

  // call()
  //
  // One command through resp_call(): binary-safe, structured reply, error replies returned.
  resp_value call(std::uint16_t port, const std::vector<std::string>& args,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

  // true: the destructor leaves every node's directory (logs, configs, nodes.conf) in place.
  void keep_files(bool keep);
  // For failure messages: per node its address, whether it runs, its log file and the log's last
  // `lines` lines.
  std::string log_tails(std::size_t lines = 15) const;

 private:
  struct shard;
  struct view;

  std::chrono::milliseconds limit(std::chrono::milliseconds timeout) const;
  void create_cluster(std::chrono::steady_clock::time_point deadline);
  // Has the node send CLUSTER MEET to every other: each that knows it by name reads its role,
  // slots and epoch from the MEET's header at once instead of from its next ping, up to
  // node_timeout / 2 later. The handshake a MEET opens ends when the answer names a node already
  // known, but the receiver replaces its inbound bus link from the sender, so a message on the
  // old link can be lost: only while nothing waits on the bus (creation). Throws
  // std::runtime_error if a node does not answer.
  void announce(std::uint16_t port) const;
  void introduce_all(const std::atomic<bool>& created,
                     std::chrono::steady_clock::time_point deadline) const noexcept;
  std::size_t index_of(std::uint16_t port) const;
  // ":<password, percent-encoded>@" for a URL, "" without a password.
  std::string userinfo() const;
  // The node's port for a port a node announced: with tls, replicas announce their TLS port.
  std::uint16_t plain_port(std::uint16_t announced) const;
  void start_node(std::size_t index, std::chrono::steady_clock::time_point deadline);
  redis_process_options node_options(std::size_t index) const;
  view read_view(std::uint16_t port) const;
  view first_view() const;
  // "" when every condition of wait_ok() holds, else what is wrong. `full`: also every node knows
  // every other and every master has replicas_per_master replicas connected (start only).
  std::string problem(bool full) const;
  void wait_until(const std::string& what, std::chrono::steady_clock::time_point deadline,
                  const std::function<std::string()>& problem_or_empty) const;
  // "" when `port` has a cluster bus link to every master with slots that is not failing, else
  // which it lacks.
  std::string unlinked_masters(std::uint16_t port) const;
  void stop_all() noexcept;

  redis_cluster_options options_;
  std::vector<std::uint16_t> ports_;
  std::vector<std::unique_ptr<redis_process>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace dlock::tools
