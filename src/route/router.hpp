// src/route/router.hpp
//
// Between the callers (the client facade and the lock engine) and the topology: a request names
// its target (the key it touches, or "any master"); the router picks the connection, runs scripts
// with EVALSHA and falls back to EVAL on NOSCRIPT, and on a Redis Cluster follows redirections:
//
//   MOVED slot host:port   the topology learns the new owner (and refreshes its map once, in
//                          the background); the request goes again to that node
//   ASK slot host:port     ASKING + the request on that node, once; the map is not changed
//   TRYAGAIN, CLUSTERDOWN, the node unreachable (the request was never written)
//                          the request goes again after a growing delay while its timeout allows
//   READONLY, LOADING, MASTERDOWN, the master unreachable (with Sentinel)
//                          the same, after asking the topology to find the master again
//
// A request that was written and whose connection then broke is never sent again here: it may
// have run (the lock engine decides what is safe to retry). On one server none of this costs
// anything: requests go straight to the connection.
//
// Thread-safe: callers on any thread; completions run on the I/O thread.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "dlock/routing_metrics.hpp"
#include "dlock/script.hpp"
#include "net/connection.hpp"
#include "route/resend_gate.hpp"
#include "topology/topology.hpp"

namespace dlock::route {

// Where a request goes.
class target {
 public:
  // The master that serves `key` (the view must outlive the call that takes the target).
  static target key(std::string_view key) noexcept { return target(key, false); }
  // Any master: keyless commands (PING, PUBSUB, SCRIPT ...).
  static target any_master() noexcept { return target({}, true); }

  std::string_view routing_key() const noexcept { return key_; }
  bool is_any_master() const noexcept { return any_; }

 private:
  target(std::string_view key, bool any) noexcept : key_(key), any_(any) {}
  std::string_view key_;
  bool any_;
};

// A command's keys, for the commands whose keys are known here (DEL, MGET, MSET, EVAL ...), so
// that a command whose keys lie in different cluster slots is refused before it is sent. Other
// commands: their first argument. Exposed for tests.
std::vector<std::string_view> keys_of(std::span<const std::string_view> args);

// Replicas that must acknowledge a script's writes (lock_options::min_replicas): `WAIT replicas
// timeout` goes right behind the script on the same connection, in the same write when nothing
// else is being written (no round trip of its own).
struct confirmation {
  std::uint32_t replicas = 0;  // 0: no WAIT
  std::chrono::milliseconds timeout{0};
};

// The longest delay between two of the router's own tries of a refused request.
inline constexpr std::chrono::milliseconds retry_delay_cap{200};

// How a request goes out; the defaults: in order, no confirmation, `done` on the I/O thread.
struct send_options {
  bool urgent = false;     // ahead of everything not yet written (release retries)
  confirmation confirm{};  // eval() only: see there
  net::connection::caller caller_does = net::connection::caller::leaves;  // see router::send
  net::polled_reads* polled = nullptr;  // with caller::polls: see router::eval
  std::shared_ptr<resend_gate> gate;    // asked before each of the router's own re-sends
};

class router {
 public:
  router(asio::io_context& io, std::unique_ptr<topology::topology> servers)
      : io_(io), servers_(std::move(servers)), follows_failovers_(servers_->follows_failovers()) {}

  // Queues `args` for `to`; `done` runs once (see net::connection::send). `options.urgent` puts
  // it ahead of everything not yet written (release retries). `options.caller_does`: see
  // net::connection::caller; honoured on one server (elsewhere the routing's own completions need
  // the I/O thread). `options.gate`: a re-send (the list at the top of this file) goes out only
  // while the gate is open; a withdrawn request completes with the refusal that would have sent
  // it again.
  using caller = net::connection::caller;
  void send(target to, std::span<const std::string_view> args, net::completion done,
            std::chrono::milliseconds timeout, const send_options& options = {});

  // Runs `s` on `to` by EVALSHA, and by EVAL when the server answers NOSCRIPT. The fallback goes
  // out after commands queued meanwhile: a caller that needs a script ordered before later
  // commands must not rely on it (the lock scripts are loaded with every connection). On a
  // cluster, keys in different slots are refused with errc::invalid_argument. With a
  // confirmation, a script that succeeded completes with the array [its reply, WAIT's reply].
  // caller::polls adds the link to `options.polled` (see net::polled_reads) when the caller takes
  // it. The EVAL fallback is a re-send: `options.gate` is asked first (on one server too).
  void eval(target to, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, std::chrono::milliseconds timeout,
            net::completion done, const send_options& options = {});

  // Refuses (errc::invalid_argument, naming two of them) keys that a cluster would refuse with
  // CROSSSLOT. Nothing to check unless the deployment is a cluster.
  void check_same_slot(std::span<const std::string_view> keys) const;

  // The program's own subscriptions (classic pub/sub).
  pubsub::subscriber& subscriber_for(std::string_view channel) {
    return servers_->subscriber_for(channel);
  }
  // Lock wake-ups: see topology::wake_subscriber and publish_command.
  pubsub::subscriber& wake_subscriber() { return servers_->wake_subscriber(); }
  std::string_view publish_command() const noexcept { return servers_->publish_command(); }
  topology::mode mode() const noexcept { return servers_->mode(); }
  // Whether the master of a key can change under this client (a cluster, or Sentinel): a broken
  // link is then more likely a failover in progress than a dead deployment.
  bool masters_move() const noexcept {
    return follows_failovers_ || mode() == topology::mode::cluster;
  }

  // Keys of one shard may share a multi-key script (see topology::shard_of).
  std::uint32_t shard_of(std::string_view key) const { return servers_->shard_of(key); }

  // See topology::set_link_listener (I/O thread only).
  void set_link_listener(topology::topology::link_listener listener) {
    servers_->set_link_listener(std::move(listener));
  }

  void stop() { servers_->stop(); }

  // Thread-safe.
  routing_metrics metrics() const noexcept;

 private:
  struct request;
  net::connection& connection_for(target to);
  void start(const std::shared_ptr<request>& r);
  void dispatch(const std::shared_ptr<request>& r, net::connection& link, bool asking);
  // dispatch() again, unless the request's gate was withdrawn: then it completes with `ec`,
  // `answer` (the refusal that called for the re-send).
  void resend(const std::shared_ptr<request>& r, net::connection& link, bool asking,
              std::error_code ec, reply answer);
  void on_reply(const std::shared_ptr<request>& r, net::connection& link, std::error_code ec,
                reply answer);
  void retry_later(const std::shared_ptr<request>& r);

  asio::io_context& io_;
  std::unique_ptr<topology::topology> servers_;
  const bool follows_failovers_;  // Sentinel: READONLY and an unreachable master are retried
  std::atomic<std::uint64_t> moved_{0}, asked_{0}, retries_{0};
};

}  // namespace dlock::route
