#include "client/metrics_text.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>

namespace dlock::detail {
namespace {

using locks::lock_type_counters;

// The shortest text that reads back as the same double ("0.001", "2.5", "60").
std::string number(double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return ec == std::errc{} ? std::string(buf.data(), end) : std::string("NaN");
}

// Label values are fixed identifiers today; escaped all the same, as the format requires.
std::string escaped(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class writer {
 public:
  explicit writer(const locks::lock_counters& counters) : counters_(counters) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  void sample(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

  void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
    sample(name, labels, std::to_string(value));
  }

  // A counter with one sample per lock type.
  void per_type(std::string_view name, std::string_view help,
                const std::function<std::uint64_t(const lock_type_counters&)>& value) {
    family(name, "counter", help);
    counters_.for_each_type(
        [&](const lock_type_counters& t) { sample(name, type_label(t), value(t)); });
  }

  // A histogram with one series per lock type.
  void per_type_histogram(
      std::string_view name, std::string_view help,
      const std::function<const locks::duration_histogram&(const lock_type_counters&)>& of) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    counters_.for_each_type([&](const lock_type_counters& t) {
      const locks::duration_histogram& h = of(t);
      const std::string type = type_label(t);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < h.size(); ++i) {
        cumulative += h.count(i);
        sample(bucket, type + ",le=\"" + number(h.bound(i)) + "\"", cumulative);
      }
      cumulative += h.count(h.size());
      sample(bucket, type + ",le=\"+Inf\"", cumulative);
      sample(std::string(name) + "_sum", type, number(h.sum_seconds()));
      sample(std::string(name) + "_count", type, cumulative);
    });
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string type_label(const lock_type_counters& t) {
    return "type=\"" + escaped(t.type) + "\"";
  }

  const locks::lock_counters& counters_;
  std::string out_;
};

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
  writer w(counters);
  using t = lock_type_counters;
  w.per_type("dlock_lock_attempts_total",
             "Acquisition attempts sent to Redis, failed ones included (above acquisitions: "
             "contention).",
             [](const t& x) { return x.attempts.load(); });
  w.per_type("dlock_lock_acquisitions_total", "First holds taken, blocking and asynchronous.",
             [](const t& x) { return x.acquired.load(); });
  w.per_type("dlock_lock_reentries_total", "Re-entries of a hold the same thread had.",
             [](const t& x) { return x.reentered.load(); });
  w.per_type("dlock_lock_waits_total", "Acquisitions that found the lock taken and waited.",
             [](const t& x) { return x.waited.load(); });
  w.per_type("dlock_lock_wait_timeouts_total", "Acquisitions whose wait ran out.",
             [](const t& x) { return x.timed_out.load(); });
  w.per_type("dlock_lock_releases_total", "Holds given up by their last unlock or release.",
             [](const t& x) { return x.released.load(); });

  w.family("dlock_lock_losses_total", "counter",
           "Holds lost (stop_token stopped, on_lock_lost called), by reason.");
  counters.for_each_type([&](const t& x) {
    for (std::size_t r = 0; r < locks::loss_reason_count; ++r) {
      const auto reason = locks::loss_reason_name(static_cast<lock_loss_reason>(r));
      w.sample("dlock_lock_losses_total",
               "type=\"" + escaped(x.type) + "\",reason=\"" + std::string(reason) + "\"",
               x.lost[r].load());
    }
  });

  w.per_type("dlock_lock_renewals_total", "Watchdog leases confirmed renewed.",
             [](const t& x) { return x.leases_renewed.load(); });
  w.per_type("dlock_lock_renewal_failures_total",
             "Watchdog renewals not confirmed: no answer, or the lock was no longer held.",
             [](const t& x) { return x.renewals_failed.load(); });
  w.per_type("dlock_lock_release_retries_total",
             "Releases sent again after a lost connection or a timeout.",
             [](const t& x) { return x.release_retries.load(); });
  w.per_type("dlock_lock_unconfirmed_total",
             "First holds undone because fewer than min_replicas replicas acknowledged them.",
             [](const t& x) { return x.unconfirmed.load(); });
  w.per_type_histogram(
      "dlock_lock_wait_seconds",
      "Time from an acquisition's call to its hold, for acquisitions that got "
      "the lock (re-entries included).",
      [](const t& x) -> const locks::duration_histogram& { return x.wait_seconds; });
  w.per_type_histogram(
      "dlock_lock_hold_seconds",
      "Time from a first hold to its last release (lost holds not included).",
      [](const t& x) -> const locks::duration_histogram& { return x.hold_seconds; });

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
