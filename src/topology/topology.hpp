// src/topology/topology.hpp
//
// "Which server": a topology knows the servers of one deployment and maps a key to the
// connection of the master that serves it, and a channel to the subscriber that hears it.
// Connections (src/net) only know how to talk to one server; the router above (src/route) turns
// a request's target into a connection through this interface and follows redirections.
// deployment.hpp is one server or a Redis Cluster, as the server says; Sentinel plugs in here.
// A quorum over N independent servers (Redlock) is not a topology: it composes N clients.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "net/connection.hpp"
#include "pubsub/subscriber.hpp"
#include "topology/slot_map.hpp"

namespace dlock::topology {

enum class mode {
  unknown,  // the first server has not answered yet: replies may still redirect
  single,   // one server: no redirections, classic pub/sub, every key in shard 0
  cluster,  // a Redis Cluster: keys by slot, redirections, sharded pub/sub for lock wake-ups
};

class topology {
 public:
  virtual ~topology() = default;

  virtual enum mode mode() const noexcept = 0;
  // Whether the master can move under the same URL without redirections (Sentinel): the router
  // then retries READONLY, LOADING and unreachable-master replies after refresh_soon().
  virtual bool follows_failovers() const noexcept { return false; }
  // Whether a request whose connect failed may meet a server if sent again before its deadline
  // (a failover or a restart ends); false when the failure will last (no sentinel knows the
  // master's name): then it fails at once.
  virtual bool connect_may_succeed_soon() const noexcept { return true; }

  // The connection of the master that serves `key`. Connections live as long as the topology.
  virtual net::connection& master_for(std::string_view key) = 0;
  // A master, for keyless commands.
  virtual net::connection& any_master() = 0;
  // The connection to one node, made on first use (the target of a redirection).
  virtual net::connection& node(const server_address& address) = 0;

  // A MOVED reply said `r.slot` is served by `r.target`: use it at once, and refresh the whole
  // map in the background (one refresh for many such replies). Thread-safe.
  virtual void moved(const redirection& r) = 0;
  // Something suggests the map is stale (CLUSTERDOWN, a dead node): refresh it soon, once.
  virtual void refresh_soon() = 0;

  // The subscriber for the program's own channels (client::subscribe): classic pub/sub.
  virtual pubsub::subscriber& subscriber_for(std::string_view channel) = 0;
  // The subscriber for lock wake-up channels, which the lock scripts publish to with
  // publish_command(): on a cluster, sharded pub/sub on the node of the channel's slot.
  virtual pubsub::subscriber& wake_subscriber() = 0;
  // "publish" or "spublish", as wake_subscriber() listens.
  virtual std::string_view publish_command() const noexcept = 0;

  // Keys with the same shard may be touched by one script (one server, and on a cluster one
  // slot). One server: every key is shard 0.
  virtual std::uint32_t shard_of(std::string_view key) const = 0;

  // Told on the I/O thread each time a command connection becomes ready (`up`, after every
  // reconnect) or is lost. Set it on the I/O thread.
  using link_listener = std::function<void(bool up)>;
  virtual void set_link_listener(link_listener listener) = 0;

  // While the deployment's kind is unknown (its first server has not answered), keeps `resume`
  // and returns true: it runs on the I/O thread once the kind is known, or after connect_timeout
  // at the latest (an unreachable server: the request then meets the connection's own error).
  // Otherwise returns false. Keyed requests wait so that they go to the right node at once.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): overrides keep the function
  virtual bool defer_until_known(std::function<void()> resume) {
    (void)resume;
    return false;
  }

  // Whether requests are waiting in defer_until_known() (later ones must queue behind them).
  virtual bool holding() const noexcept { return false; }

  // How many slot maps were loaded so far. Thread-safe.
  virtual std::uint64_t map_refreshes() const noexcept = 0;

  // Stops every connection; queued requests fail with errc::client_stopped.
  virtual void stop() = 0;
};

}  // namespace dlock::topology
