// src/route/router.hpp
//
// Between the callers (the client facade and the lock engine) and the topology: a request names
// its target (the key it touches, or "any master"); the router picks the connection, runs scripts
// with EVALSHA and falls back to EVAL on NOSCRIPT, and is where MOVED/ASK redirections will be
// followed. Thread-safe: callers on any thread; completions run on the I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "dlock/script.hpp"
#include "net/connection.hpp"
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

class router {
 public:
  explicit router(std::unique_ptr<topology::topology> servers) : servers_(std::move(servers)) {}

  // Queues `args` for `to`; `done` runs once (see net::connection::send). `urgent` puts it ahead
  // of everything not yet written (release retries).
  void send(target to, std::span<const std::string_view> args, net::completion done,
            std::chrono::milliseconds timeout, bool urgent = false);

  // Runs `s` on `to` by EVALSHA, and by EVAL when the server answers NOSCRIPT. The fallback goes
  // out after commands queued meanwhile: a caller that needs a script ordered before later
  // commands must not rely on it (the lock scripts are loaded with every connection).
  void eval(target to, const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> args, std::chrono::milliseconds timeout,
            net::completion done, bool urgent = false);

  pubsub::subscriber& subscriber_for(std::string_view channel) {
    return servers_->subscriber_for(channel);
  }
  // Keys of one shard may share a multi-key script (see topology::shard_of).
  std::uint32_t shard_of(std::string_view key) const { return servers_->shard_of(key); }

  // See topology::set_link_listener (I/O thread only).
  void set_link_listener(topology::topology::link_listener listener) {
    servers_->set_link_listener(std::move(listener));
  }

  void stop() { servers_->stop(); }

 private:
  net::connection& connection_for(target to);

  std::unique_ptr<topology::topology> servers_;
};

}  // namespace dlock::route
