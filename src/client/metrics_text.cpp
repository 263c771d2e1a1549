#include "client/metrics_text.hpp"

#include <cstdint>
#include <string_view>

#include "client/prometheus_text.hpp"

namespace dlock::detail {
namespace {

std::string_view deployment_name(deployment_kind kind) {
  switch (kind) {
    case deployment_kind::unknown:
      return "unknown";
    case deployment_kind::single:
      return "single";
    case deployment_kind::cluster:
      return "cluster";
  }
  return "unknown";
}

}  // namespace

std::string metrics_text(const locks::lock_counters& counters, const routing_metrics& routing) {
  prometheus_writer w;
  write_lock_series(w, counters);

  w.family("dlock_watchdog_scripts_total", "counter",
           "Watchdog renewal scripts sent (each renews many leases).");
  w.sample("dlock_watchdog_scripts_total", "", counters.renewal_scripts.load());

  const std::uint64_t ups = counters.links_up.load();
  const std::uint64_t losses = counters.links_lost.load();
  w.family("dlock_connections_up", "gauge", "Command connections to Redis currently up.");
  w.sample("dlock_connections_up", "", ups > losses ? ups - losses : 0);
  w.family("dlock_connects_total", "counter",
           "Command connections established, the first ones included.");
  w.sample("dlock_connects_total", "", ups);
  w.family("dlock_connection_losses_total", "counter", "Working command connections that broke.");
  w.sample("dlock_connection_losses_total", "", losses);
  w.family("dlock_reconnects_total", "counter",
           "Command connections established again after one broke.");
  w.sample("dlock_reconnects_total", "", counters.links_recovered.load());

  w.family("dlock_deployment", "gauge",
           "The deployment found: 1 for its kind (unknown until a server answers), 0 for others.");
  for (const deployment_kind kind :
       {deployment_kind::unknown, deployment_kind::single, deployment_kind::cluster}) {
    w.sample("dlock_deployment", "kind=\"" + std::string(deployment_name(kind)) + "\"",
             std::uint64_t{routing.deployment == kind ? 1U : 0U});
  }
  w.family("dlock_routing_moved_total", "counter", "MOVED replies followed (a slot had moved).");
  w.sample("dlock_routing_moved_total", "", routing.moved);
  w.family("dlock_routing_asked_total", "counter",
           "ASK replies followed (a slot was being migrated).");
  w.sample("dlock_routing_asked_total", "", routing.asked);
  w.family("dlock_routing_retries_total", "counter",
           "Requests sent again after TRYAGAIN, CLUSTERDOWN or an unreachable node.");
  w.sample("dlock_routing_retries_total", "", routing.retries);
  w.family("dlock_cluster_map_refreshes_total", "counter",
           "Cluster slot maps loaded, the first one included.");
  w.sample("dlock_cluster_map_refreshes_total", "", routing.map_refreshes);
  return w.take();
}

}  // namespace dlock::detail
