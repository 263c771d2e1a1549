// src/client/metrics_text.hpp
//
// client::metrics_text(): the lock engine's counters and the router's metrics in the Prometheus
// text exposition format (version 0.0.4). Pure formatting; the metric table is in
// docs/operating.md.
#pragma once

#include <string>

#include "dlock/routing_metrics.hpp"
#include "locks/engine/lock_counters.hpp"

namespace dlock::detail {

std::string metrics_text(const locks::lock_counters& counters, const routing_metrics& routing);

}  // namespace dlock::detail
