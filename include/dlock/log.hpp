// dlock/log.hpp
//
// What a client tells an operator: client_options::on_log receives one log_record per event.
// dlock is silent by default (no hook: nothing is formatted or logged).
//
//   options.on_log = [](const dlock::log_record& r) {
//     std::cerr << dlock::to_string(r.level) << " " << r.message;
//     for (const dlock::log_field& f : r.fields) std::cerr << " " << f.key << "=" << f.value;
//     std::cerr << "\n";
//   };
//
// Events (message, level, fields; docs/operating.md has the table):
//   "connected"              debug    links_up: a command connection is up for the first time
//   "connection lost"        warning  links_up: a working command connection broke
//   "connection recovered"   info     links_up: a command connection is up after a loss
//   "cluster map refreshed"  info     masters: a Redis Cluster's slot map was (re)loaded
//   "master switched"        warning  master, switch: the sentinels announced +switch-master
//   "master re-resolved"     info     master: READONLY or an unreachable master: asking the
//                                     sentinels again
//   "lock lost"              error    name, owner, reason (a lock_loss_reason: "not_held", ...)
//   "slow acquisition"       warning  name, type, wait_ms (client_options::slow_acquisition)
//
// A dlock::redlock logs through redlock_options::on_log: "lock lost", "slow acquisition", "no
// majority", and its masters' clients' records with the fields redlock_master and endpoint.
//
// Thread-safety: the hook runs on the thread that saw the event, usually the client's I/O thread,
// possibly several at once; it must be thread-safe, must not block, and must not throw (an
// exception is dropped). A record and its fields are valid only during the call: copy what you
// keep.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace dlock {

enum class log_level { debug, info, warning, error };

// "debug", "info", "warning", "error".
constexpr std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
  }
  return "unknown";
}

// One structured field: a fixed key (a C++ identifier) and its value as text.
struct log_field {
  std::string_view key;
  std::string value;
};

struct log_record {
  log_level level = log_level::info;
  std::string_view message;  // fixed per event: match on it
  std::span<const log_field> fields;
};

using log_handler = std::function<void(const log_record&)>;

}  // namespace dlock
