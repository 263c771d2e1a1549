// src/client/prometheus_text.hpp
//
// The Prometheus text exposition format (version 0.0.4) as dlock writes it: a writer of families
// and samples, and the dlock_lock_* series of a lock_counters (one series per lock type, label
// `type`). client::metrics_text() and redlock::metrics_text() both use them, so the shared series
// keep one name, help text and bucket layout. Pure formatting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "locks/engine/lock_counters.hpp"

namespace dlock::detail {

// The shortest text that reads back as the same double ("0.001", "2.5", "60").
std::string prometheus_number(double v);
// A label value escaped as the format requires (backslash, double quote, line feed).
std::string prometheus_escaped(std::string_view value);

class prometheus_writer {
 public:
  // The HELP and TYPE lines of a family; its samples follow.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample line; `labels` is the text inside the braces ("type=\"redlock\""), or empty.
  void sample(std::string_view name, std::string_view labels, std::string_view value);
  void sample(std::string_view name, std::string_view labels, std::uint64_t value);
  // The _bucket, _sum and _count samples of one histogram series with `labels` (may be empty).
  void histogram_series(std::string_view name, const std::string& labels,
                        const locks::duration_histogram& h);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Which dlock_lock_* series apply to a lock kind: Redlock has no re-entries, sends no release
// twice and has no replicas to confirm a hold.
struct lock_series {
  bool reentries = true;
  bool release_retries = true;
  bool unconfirmed = true;
};

// Writes the dlock_lock_* families (attempts to hold_seconds) for every type of `counters`.
void write_lock_series(prometheus_writer& w, const locks::lock_counters& counters,
                       lock_series which = {});

}  // namespace dlock::detail
