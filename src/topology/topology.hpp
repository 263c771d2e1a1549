// src/topology/topology.hpp
//
// "Which server": a topology knows the servers of one deployment and maps a key to the
// connection of the master that serves it, and a channel to the subscriber that hears it.
// Connections (src/net) only know how to talk to one server; the router above (src/route) turns
// a request's target into a connection through this interface and will follow redirections.
// Standalone is the first topology; Cluster (slot map), Sentinel and replicas plug in here. A
// quorum over N independent servers (Redlock) is not a topology: it composes N clients.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "net/connection.hpp"
#include "pubsub/subscriber.hpp"

namespace dlock::topology {

class topology {
 public:
  virtual ~topology() = default;

  // The connection of the master that serves `key`.
  virtual net::connection& master_for(std::string_view key) = 0;
  // A master, for keyless commands.
  virtual net::connection& any_master() = 0;

  // The subscriber that hears `channel`.
  virtual pubsub::subscriber& subscriber_for(std::string_view channel) = 0;

  // Keys with the same shard may be touched by one script (one server, and on a cluster one
  // slot). Standalone: every key is shard 0.
  virtual std::uint32_t shard_of(std::string_view key) const = 0;

  // Told on the I/O thread each time a command connection becomes ready (`up`, after every
  // reconnect) or is lost, with the shard it serves. Set it on the I/O thread.
  using link_listener = std::function<void(std::uint32_t shard, bool up)>;
  virtual void set_link_listener(link_listener listener) = 0;

  // Stops every connection; queued requests fail with errc::client_stopped.
  virtual void stop() = 0;
};

}  // namespace dlock::topology
