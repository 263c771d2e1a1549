// Starts and stops a private Sentinel-managed Redis group on loopback for integration tests and
// demos: 1 master + N replicas (redis_process nodes, no persistence) and M sentinels monitoring
// the master, plus the faults a Sentinel test needs (kill -9 and restart of any node or sentinel,
// a failover by Sentinel, a replica paused by SIGSTOP so that WAIT gets no acknowledgement, a
// replica cut off so that it never gets the last writes of a master that dies).
//
// Every wait is on real state, polled every few milliseconds and bounded by a named time limit:
// no fixed sleeps. Plain C++20 and POSIX like redis_process; not installed with dlock.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis_process.hpp"
#include "resp_call.hpp"

namespace dlock::tools {

// The default of redis_sentinel_group_options::sentinel_debug: {"info-period", "500",
// "ping-period", "500", "ask-period", "200", "publish-period", "200", "tilt-period", "2000"}.
// (A function, not a braced list in the member's initializer, which makes g++ 12 fail on
// `return {};` of the options in a template.)
std::vector<std::string> fast_sentinel_debug();

// Configuration of a redis_sentinel_group. The defaults make the group of the Sentinel tests:
// 1 master + 2 replicas + 3 sentinels, quorum 2, a master counts as down after 1 s.
struct redis_sentinel_group_options {
  // Replicas of the master (0 is allowed; then no failover can happen).
  std::size_t replicas = 2;
  // Sentinels monitoring the master; at least 1.
  std::size_t sentinels = 3;
  // The name the sentinels monitor the master under (SENTINEL MONITOR <name>): letters, digits,
  // '.', '_' and '-'.
  std::string master_name = "mymaster";
  // Sentinels that must agree the master is down before a failover (1 <= quorum <= sentinels).
  unsigned quorum = 2;
  // down-after-milliseconds: how long the master may not answer before a sentinel calls it down.
  std::chrono::milliseconds down_after{1000};
  // failover-timeout: also the pause before a sentinel retries a failed failover (twice this).
  std::chrono::milliseconds failover_timeout{3000};
  // parallel-syncs: replicas reconfigured at once after a promotion.
  unsigned parallel_syncs = 1;
  // Sent as `SENTINEL DEBUG <args...>` to every sentinel after each (re)start (Redis 7.0+; an
  // older sentinel's refusal is ignored). The defaults shorten Sentinel's internal periods (INFO
  // to every instance every 10 s, hellos every 2 s, PING every 1 s, asking the other sentinels
  // every 1 s) so that the sentinels find each other and the replicas in a few hundred
  // milliseconds and a failover completes in about 3 s; and TILT mode (entered when the
  // sentinel's timer ran more than 2 s late, e.g. its process got no CPU on a busy machine) lasts
  // 2 s instead of 30 s, during which the sentinel does not act. Empty: Sentinel's own periods.
  std::vector<std::string> sentinel_debug = fast_sentinel_debug();
  // requirepass and masterauth on the master and the replicas, and the sentinels' auth-pass for
  // them, if not empty. The fixture's own commands authenticate with it; node_url() and
  // sentinel_url() carry it.
  std::string password;
  // requirepass on the sentinels, if not empty (the sentinels also use it with each other).
  // sentinel_url() carries it as the query parameter sentinel_password.
  std::string sentinel_password;
  // More redis-server arguments for the master and the replicas, and for the sentinels, appended
  // last so they override the generated ones.
  std::vector<std::string> extra_args;
  std::vector<std::string> sentinel_extra_args;
  // Binaries, found through PATH unless they contain a '/'. The sentinels run
  // `<sentinel_executable> <config> --sentinel ...`; empty: redis-sentinel if it is in PATH
  // (Debian's package redis-sentinel), otherwise `executable`; options() shows the choice.
  std::string executable = "redis-server";
  std::string sentinel_executable;
  std::string cli_executable = "redis-cli";
  // The master, the replicas and the sentinels also serve TLS, each on a port of its own
  // (tls_port()), with certificates of one CA (ca_file()), and talk TLS to each other
  // (tls-replication, in the sentinels' config too): replication, the sentinels' links to the data
  // nodes and to each other. The sentinels monitor the master by its TLS port, so what they report
  // (SENTINEL GET-MASTER-ADDR-BY-NAME, +switch-master) are TLS ports, and sentinel_url() is
  // "rediss-sentinel://" with the sentinels' TLS ports. The plain ports stay open for the
  // fixture's own commands (data_ports(), sentinel_ports(), call(), cli()), which keep naming
  // nodes by them.
  bool tls = false;
  // How long the constructor may take in all: nodes up, replicas in sync, every sentinel knowing
  // the master, every replica and every other sentinel.
  std::chrono::milliseconds start_timeout{30000};
  // The default limit of wait_ok(), wait_for_failover() and failover().
  std::chrono::milliseconds change_timeout{30000};
  // As redis_process_options::die_with_parent: the processes get SIGKILL when the thread that
  // started them (the constructor's or restart_node()'s) exits.
  bool die_with_parent = true;
};

// A master, its replicas and the sentinels that monitor it, each a redis_process on 127.0.0.1
// with its own temporary directory (config, log). Data nodes and sentinels are both "nodes" here
// and are told apart by port.
//
// The replicas are made replicas at run time (REPLICAOF + CONFIG REWRITE), not by a command-line
// argument, so a restarted node follows its config file as rewritten by the sentinels (who send
// CONFIG REWRITE with every reconfiguration): a former master comes back as a master and the
// sentinels turn it into a replica of the new one. The sentinels rewrite their own config files
// too (their state survives restart_node()). Replicas sync through an RDB file in their
// directory, deleted after loading (repl-diskless-sync no, rdb-del-sync-files yes): after a
// diskless sync Redis 7.0 may wait up to a second for the replica's next REPLCONF ACK before it
// streams writes to it, and WAIT would fail meanwhile although INFO lists the replica online.
//
// Ports are chosen below the kernel's ephemeral range when it allows, so that no outgoing
// connection of this host takes a node's port while the node is down.
//
// Not thread-safe: use one object from one thread at a time. data_ports(), sentinel_ports(),
// url(), node_url() and sentinel_url() only read fixed data and may be called concurrently once
// construction is done.
class redis_sentinel_group {
 public:
  // Starts the master and the replicas, makes the replicas replicate, starts the sentinels, has
  // each monitor the master (SENTINEL MONITOR + SENTINEL SET, then sentinel_debug) and waits until
  // wait_ok() holds and, moreover, every sentinel lists all replicas and all other sentinels.
  // Throws std::invalid_argument for unusable options and std::runtime_error when a node cannot
  // start or the group is not ready within start_timeout (the message has the last log lines of
  // every node). On failure nothing is left running and the directories are removed.
  explicit redis_sentinel_group(redis_sentinel_group_options options = {});

  // Stops every node by PID (SIGTERM to all at once, SIGCONT for paused ones, SIGKILL after
  // their stop_timeout), removes the directories unless keep_files(true). Never throws.
  virtual ~redis_sentinel_group();

  redis_sentinel_group(const redis_sentinel_group&) = delete;
  redis_sentinel_group& operator=(const redis_sentinel_group&) = delete;
  redis_sentinel_group(redis_sentinel_group&&) = delete;
  redis_sentinel_group& operator=(redis_sentinel_group&&) = delete;

  const redis_sentinel_group_options& options() const { return options_; }
  const std::string& master_name() const { return options_.master_name; }

  // The master and the replicas, in start order: the first was the master at the start. Roles
  // change with failovers; ask master_port() for today's.
  const std::vector<std::uint16_t>& data_ports() const { return data_ports_; }
  // The sentinels, in start order.
  const std::vector<std::uint16_t>& sentinel_ports() const { return sentinel_ports_; }
  // Whether `port` is one of sentinel_ports().
  bool is_sentinel(std::uint16_t port) const;

  // The master according to the sentinels: SENTINEL GET-MASTER-ADDR-BY-NAME on the first running
  // (and not paused) sentinel that answers. During a failover the sentinels may disagree;
  // wait_ok() or wait_for_failover() first when that matters. With tls the sentinels name a TLS
  // port; this returns that node's plain port, like every port of this class. Throws
  // std::runtime_error when no sentinel answers.
  std::uint16_t master_port() const;
  // The same question to the sentinel `sentinel_port` only. Throws std::out_of_range for a port
  // that is not a sentinel, std::runtime_error when it does not answer or names no master.
  std::uint16_t master_port_from(std::uint16_t sentinel_port) const;
  // data_ports() without master_port(), in start order (running or not). Throws like
  // master_port().
  std::vector<std::uint16_t> replica_ports() const;

  // "redis-sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,...#<master_name>", the form dlock::client
  // takes. With a password: "redis-sentinel://:<password>@..." (the data nodes' password);
  // with a sentinel password: "...?sentinel_password=<it>#..."; `query` (such as
  // "min_replicas=1&replica_timeout=100") is added to the query. Passwords are percent-encoded.
  // With options().tls: "rediss-sentinel://" and the sentinels' TLS ports (the client also needs
  // ca_file()).
  std::string sentinel_url(std::string_view query = {}) const;
  // With options().tls: the TLS port of a data node or sentinel (0 without tls; throws
  // std::out_of_range like node()), and the CA that verifies them all ("" without tls).
  std::uint16_t tls_port(std::uint16_t port) const;
  std::string ca_file() const;
  // "redis://127.0.0.1:<port>", without a password.
  static std::string url(std::uint16_t port);
  // url(port) with the node's password, if any ("redis://:<password>@127.0.0.1:<port>"): the
  // data nodes' password for a data node, the sentinel password for a sentinel.
  std::string node_url(std::uint16_t port) const;

  // The process of a data node or sentinel (pid(), log_file(), log_tail(), ...).
  // Throws std::out_of_range for a port that is not one of the group's.
  redis_process& node(std::uint16_t port);
  const redis_process& node(std::uint16_t port) const;

  // kill_node()
  //
  // kill -9 of a data node or sentinel; returns once it is reaped. Does nothing if it is not
  // running. The sentinels call a killed master down after down_after and then promote a
  // replica (wait_for_failover()).
  void kill_node(std::uint16_t port);

  // restart_node()
  //
  // Starts the data node or sentinel again on the same port with its (possibly rewritten) config
  // file, stopping it first if it runs, and returns once it answers PING. Data is not kept. A
  // sentinel gets sentinel_debug again and keeps its id and what it knew. Does not wait for the
  // group: call wait_ok() for that (a former master comes back as a master and the sentinels
  // make it a replica of the new one, about 1 to 3 s later with the default sentinel_debug).
  // Throws std::runtime_error like redis_process::start().
  void restart_node(std::uint16_t port);

  // pause_node(), resume_node()
  //
  // SIGSTOP and SIGCONT of a data node or sentinel; resume_node() returns once the node answers
  // PING again (std::runtime_error if not within 10 s). A paused replica takes no part in
  // replication: the master's WAIT gets no acknowledgement from it (CLIENT PAUSE on the replica
  // would not stop it acknowledging). What the master sent meanwhile waits in the replica's
  // socket buffer and is applied on resume, even if the master has died since. Paused for longer
  // than down_after, the sentinels call it down until it answers again. A paused sentinel may
  // enter Sentinel's TILT mode when resumed (no action for the tilt period: 2 s with the default
  // sentinel_debug, 30 s without). The waits of this class skip
  // paused nodes; the destructor and restart_node() resume them. Both do nothing to a node that
  // is not running.
  void pause_node(std::uint16_t port);
  void resume_node(std::uint16_t port);
  bool paused(std::uint16_t port) const { return paused_.contains(port); }

  // cut_replica()
  //
  // Makes sure that nothing the master writes from now on reaches the replica `replica_port`,
  // even if the master dies before the replica is resumed: asks the replica for its link to the
  // master (CLIENT LIST TYPE master), pauses it (pause_node()) and has the master close that link
  // (CLIENT KILL ADDR). What the master sent before stays in the replica's socket buffer and is
  // applied on resume. resume_node() lets it reconnect; it catches up (partial resync) if its
  // master still runs. This is what a "lost write" demonstration needs: after pause_node() alone
  // the resumed replica still applies the master's last writes from its socket buffer. Throws
  // std::invalid_argument if `replica_port` is not a data node with a link to a master,
  // std::runtime_error if a node does not answer or the master has no such link to close.
  void cut_replica(std::uint16_t replica_port);

  // wait_for_failover()
  //
  // Waits until every running sentinel names the same master, other than `old_master`, that
  // reports role:master, and wait_ok() holds (every other running data node, `old_master`
  // included when it runs, is its replica with the link up). Returns the new master's port.
  // Throws std::runtime_error at `timeout` (options().change_timeout when zero) with what was
  // still wrong.
  std::uint16_t wait_for_failover(std::uint16_t old_master,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  // failover()
  //
  // SENTINEL FAILOVER <master_name> on a running sentinel (promotion without agreement, as
  // Sentinel's manual failover does), after wait_ok() so that the sentinels have a replica to
  // promote; asks again while the answer is -INPROG or -NOGOODSLAVE. Then wait_for_failover() of
  // the master it replaced, which was running and so becomes a replica. Returns the new master's
  // port. Throws std::runtime_error on another error reply or at `timeout`
  // (options().change_timeout when zero).
  std::uint16_t failover(std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  // wait_ok()
  //
  // Waits until, among the running nodes that are not paused: every sentinel names the same
  // master and is not in TILT mode; that master runs and reports role:master; every other data
  // node reports role:slave of it with master_link_status:up, the master lists it online, and
  // all of them acknowledge a write (PUBLISH on a channel of the fixture, then WAIT) in 100 ms;
  // every sentinel sees the master with the flag "master" only, lists every one of those
  // replicas with the flag "slave" only, master-link-status ok and that master, and lists
  // every other sentinel without s_down. Throws std::runtime_error at `timeout`
  // (options().change_timeout when zero) with what was still wrong.
  void wait_ok(std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) const;

  // cli()
  //
  // `redis-cli -e -h 127.0.0.1 -p <port> [-a <password>] <args...>` on a data node or sentinel,
  // with that node's password: its output without the final newline, as redis_process::cli()
  // (which throws on an error reply). Arguments cannot contain NUL bytes; call() can.
  std::string cli(std::uint16_t port, const std::vector<std::string>& args) const;
  template <typename... Args>
  std::string cli(std::uint16_t port, Args&&... args) const
      requires(sizeof...(Args) > 0 && (std::convertible_to<Args, std::string> && ...)) {
    return cli(port, std::vector<std::string>{std::string(std::forward<Args>(args))...});
  }

  // call()
  //
  // One command through resp_call() (after AUTH with the node's password, if any): binary-safe,
  // structured reply, error replies returned. Throws like resp_call().
  resp_value call(std::uint16_t port, const std::vector<std::string>& args,
                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
  // Several commands at once on one connection (after AUTH, if any), through resp_call_all():
  // what one sets on the connection holds for the next. WAIT needs this: it counts the replicas
  // that have the connection's own last write (`SET` then `WAIT 1 100`). One reply per command;
  // if AUTH fails, its error in the place of each. Throws like resp_call_all().
  std::vector<resp_value> call_all(
      std::uint16_t port, const std::vector<std::vector<std::string>>& commands,
      std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

  // true: the destructor leaves every node's directory (logs, configs) in place.
  void keep_files(bool keep);
  // For failure messages: per node its role at the start, address, whether it runs, its log file
  // and the log's last `lines` lines.
  std::string log_tails(std::size_t lines = 15) const;

 private:
  std::chrono::milliseconds limit(std::chrono::milliseconds timeout) const;
  std::size_t data_index(std::uint16_t port) const;      // data_ports_.size() if not a data node
  std::size_t sentinel_index(std::uint16_t port) const;  // sentinel_ports_.size() if not one
  const std::string& password_of(std::uint16_t port) const;
  // The port the servers know a node by: its TLS port with tls, else `port`.
  std::uint16_t announced(std::uint16_t port) const;
  // The node's plain port for a port the servers reported (announced()'s inverse).
  std::uint16_t plain_port(std::uint16_t reported) const;
  bool live(std::uint16_t port) const;  // running and not paused
  // With tls: serve TLS with a certificate of the group's CA.
  void add_tls(redis_process_options& node) const;
  redis_process_options data_options(std::uint16_t port) const;
  redis_process_options sentinel_options(std::uint16_t port) const;
  // Starts the process on ports[index] into nodes[index], picking another port if the picked one
  // was taken meanwhile.
  void start_process(std::vector<std::uint16_t>& ports,
                     std::vector<std::unique_ptr<redis_process>>& nodes, std::size_t index,
                     bool sentinel, std::chrono::steady_clock::time_point deadline);
  void monitor(std::uint16_t sentinel_port) const;
  void apply_sentinel_debug(std::uint16_t sentinel_port) const;
  // "" when `master` gets WAIT's acknowledgement of a write from `replicas` replicas within
  // 100 ms, else what it got.
  std::string streaming_problem(std::uint16_t master, std::size_t replicas) const;
  // "" when the replicas are linked to the master at the start, else what is missing.
  std::string replication_problem() const;
  // "" when every condition of wait_ok() holds and no sentinel names `not_master`, else what is
  // wrong. `full`: also every sentinel lists exactly `replicas` replicas and `sentinels - 1`
  // other sentinels (start only). `agreed` receives the master the sentinels name.
  std::string problem(std::uint16_t not_master, bool full, std::uint16_t* agreed) const;
  void wait_until(const std::string& what, std::chrono::steady_clock::time_point deadline,
                  const std::function<std::string()>& problem_or_empty) const;
  void stop_all() noexcept;

  redis_sentinel_group_options options_;
  std::vector<std::uint16_t> data_ports_;
  std::vector<std::unique_ptr<redis_process>> data_nodes_;
  std::vector<std::uint16_t> sentinel_ports_;
  std::vector<std::unique_ptr<redis_process>> sentinels_;
  std::set<std::uint16_t> paused_;
};

}  // namespace dlock::tools
