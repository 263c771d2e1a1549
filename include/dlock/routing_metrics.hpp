// dlock/routing_metrics.hpp
//
// What a client's requests met on their way to the servers: client::routing_metrics().
#pragma once

#include <cstdint>

namespace dlock {

enum class deployment_kind {
  unknown,  // no server has answered yet
  single,   // one server
  cluster,  // a Redis Cluster
};

struct routing_metrics {
  deployment_kind deployment = deployment_kind::unknown;
  std::uint64_t moved = 0;          // MOVED replies followed (a slot had moved)
  std::uint64_t asked = 0;          // ASK replies followed (a slot was being migrated)
  std::uint64_t retries = 0;        // requests sent again after TRYAGAIN, CLUSTERDOWN or an
                                    // unreachable node (never after they were written)
  std::uint64_t map_refreshes = 0;  // cluster slot maps loaded (the first one included)
};

}  // namespace dlock
