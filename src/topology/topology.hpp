// src/topology/topology.hpp
//
// "Which server": a topology maps a key to the connection that serves it and a channel to the
// subscriber that hears it. Connections (src/net) only know how to talk to one server; the lock
// types above only know keys. Standalone is the first topology; replicas with WAIT, Sentinel,
// Cluster (slot map, MOVED/ASK) and Redlock's independent masters plug in here.
#pragma once

#include <string_view>

#include "net/connection.hpp"
#include "pubsub/subscriber.hpp"

namespace dlock::topology {

class topology {
 public:
  virtual ~topology() = default;

  // The connection that serves `key` (for a keyless command, any key routes to a master).
  virtual net::connection& connection_for(std::string_view key) = 0;

  // The subscriber that hears `channel`.
  virtual pubsub::subscriber& subscriber_for(std::string_view channel) = 0;

  // Stops every connection; queued requests fail with errc::client_stopped.
  virtual void stop() = 0;
};

}  // namespace dlock::topology
