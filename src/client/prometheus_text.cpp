#include "client/prometheus_text.hpp"

#include <array>
#include <charconv>
#include <cstddef>
#include <functional>
#include <system_error>

namespace dlock::detail {

std::string prometheus_number(double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return ec == std::errc{} ? std::string(buf.data(), end) : std::string("NaN");
}

std::string prometheus_escaped(std::string_view value) {
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

void prometheus_writer::family(std::string_view name, std::string_view type,
                               std::string_view help) {
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

void prometheus_writer::sample(std::string_view name, std::string_view labels,
                               std::string_view value) {
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

void prometheus_writer::sample(std::string_view name, std::string_view labels,
                               std::uint64_t value) {
  sample(name, labels, std::to_string(value));
}

void prometheus_writer::histogram_series(std::string_view name, const std::string& labels,
                                         const locks::duration_histogram& h) {
  const std::string bucket = std::string(name) + "_bucket";
  const std::string le_prefix = labels.empty() ? "le=\"" : labels + ",le=\"";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    cumulative += h.count(i);
    sample(bucket, le_prefix + prometheus_number(h.bound(i)) + "\"", cumulative);
  }
  cumulative += h.count(h.size());
  sample(bucket, le_prefix + "+Inf\"", cumulative);
  sample(std::string(name) + "_sum", labels, prometheus_number(h.sum_seconds()));
  sample(std::string(name) + "_count", labels, cumulative);
}

namespace {

using locks::lock_type_counters;

std::string type_label(const lock_type_counters& t) {
  return "type=\"" + prometheus_escaped(t.type) + "\"";
}

// A counter with one sample per lock type.
void per_type(prometheus_writer& w, const locks::lock_counters& counters, std::string_view name,
              std::string_view help,
              const std::function<std::uint64_t(const lock_type_counters&)>& value) {
  w.family(name, "counter", help);
  counters.for_each_type(
      [&](const lock_type_counters& t) { w.sample(name, type_label(t), value(t)); });
}

// A histogram with one series per lock type.
void per_type_histogram(
    prometheus_writer& w, const locks::lock_counters& counters, std::string_view name,
    std::string_view help,
    const std::function<const locks::duration_histogram&(const lock_type_counters&)>& of) {
  w.family(name, "histogram", help);
  counters.for_each_type(
      [&](const lock_type_counters& t) { w.histogram_series(name, type_label(t), of(t)); });
}

}  // namespace

void write_lock_series(prometheus_writer& w, const locks::lock_counters& counters,
                       lock_series which) {
  using t = lock_type_counters;
  per_type(w, counters, "dlock_lock_attempts_total",
           "Acquisition attempts sent to Redis, failed ones included (above acquisitions: "
           "contention).",
           [](const t& x) { return x.attempts.load(); });
  per_type(w, counters, "dlock_lock_acquisitions_total",
           "First holds taken, blocking and asynchronous.",
           [](const t& x) { return x.acquired.load(); });
  if (which.reentries) {
    per_type(w, counters, "dlock_lock_reentries_total", "Re-entries of a hold the same thread had.",
             [](const t& x) { return x.reentered.load(); });
  }
  per_type(w, counters, "dlock_lock_waits_total",
           "Acquisitions that found the lock taken and waited.",
           [](const t& x) { return x.waited.load(); });
  per_type(w, counters, "dlock_lock_wait_timeouts_total", "Acquisitions whose wait ran out.",
           [](const t& x) { return x.timed_out.load(); });
  per_type(w, counters, "dlock_lock_releases_total",
           "Holds given up by their last unlock or release.",
           [](const t& x) { return x.released.load(); });

  w.family("dlock_lock_losses_total", "counter",
           "Holds lost (stop_token stopped, on_lock_lost called), by reason.");
  counters.for_each_type([&](const t& x) {
    for (std::size_t r = 0; r < locks::loss_reason_count; ++r) {
      const auto reason = locks::loss_reason_name(static_cast<lock_loss_reason>(r));
      w.sample("dlock_lock_losses_total", type_label(x) + ",reason=\"" + std::string(reason) + "\"",
               x.lost[r].load());
    }
  });

  per_type(w, counters, "dlock_lock_renewals_total", "Watchdog leases confirmed renewed.",
           [](const t& x) { return x.leases_renewed.load(); });
  per_type(w, counters, "dlock_lock_renewal_failures_total",
           "Watchdog renewals not confirmed: no answer, or the lock was no longer held.",
           [](const t& x) { return x.renewals_failed.load(); });
  if (which.release_retries) {
    per_type(w, counters, "dlock_lock_release_retries_total",
             "Releases sent again after a lost connection or a timeout.",
             [](const t& x) { return x.release_retries.load(); });
  }
  if (which.unconfirmed) {
    per_type(w, counters, "dlock_lock_unconfirmed_total",
             "First holds undone because fewer than min_replicas replicas acknowledged them.",
             [](const t& x) { return x.unconfirmed.load(); });
  }
  per_type_histogram(w, counters, "dlock_lock_wait_seconds",
                     "Time from an acquisition's call to its hold, for acquisitions that got "
                     "the lock (re-entries included).",
                     [](const t& x) -> const locks::duration_histogram& { return x.wait_seconds; });
  per_type_histogram(w, counters, "dlock_lock_hold_seconds",
                     "Time from a first hold to its last release (lost holds not included).",
                     [](const t& x) -> const locks::duration_histogram& { return x.hold_seconds; });
}

}  // namespace dlock::detail
