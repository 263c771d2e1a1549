// src/locks/engine/lock_counters.hpp
//
// The counters behind client::lock_metrics() and client::metrics_text(): atomics, so any thread
// may bump or read them. Totals over every lock type, and per lock type (lock_protocol::kind(),
// a handful of fixed strings: the label stays bounded) the counts and histograms an operator
// scrapes. Link events count the command connections that came up and were lost.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/lock_metrics.hpp"
#include "dlock/lock_options.hpp"

namespace dlock::locks {

// A Prometheus-style histogram of durations: fixed upper bounds in seconds, one count per bucket
// (not cumulative: the exposition adds them up), the sum in microseconds.
class duration_histogram {
 public:
  static constexpr std::size_t max_buckets = 16;

  // `bounds`: increasing upper bounds in seconds, at most max_buckets.
  explicit duration_histogram(std::initializer_list<double> bounds) noexcept {
    for (double b : bounds) {
      if (size_ == max_buckets) break;
      bounds_[size_++] = b;
    }
  }

  void observe(std::chrono::steady_clock::duration d) noexcept {
    const double seconds = std::chrono::duration<double>(d).count();
    std::size_t i = 0;
    while (i < size_ && seconds > bounds_[i])
      ++i;
    ++counts_[i];  // i == size_: the +Inf bucket
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    sum_us_ += us > 0 ? static_cast<std::uint64_t>(us) : 0;
  }

  std::size_t size() const noexcept { return size_; }
  double bound(std::size_t i) const noexcept { return bounds_[i]; }
  // Observations in bucket i alone; i == size() is the bucket above the last bound.
  std::uint64_t count(std::size_t i) const noexcept { return counts_[i]; }
  double sum_seconds() const noexcept { return static_cast<double>(sum_us_.load()) / 1e6; }

 private:
  std::array<double, max_buckets> bounds_{};
  std::size_t size_ = 0;
  std::array<std::atomic<std::uint64_t>, max_buckets + 1> counts_{};
  std::atomic<std::uint64_t> sum_us_{0};
};

// How many lock_loss_reason values there are (they index lock_type_counters::lost).
inline constexpr std::size_t loss_reason_count =
    static_cast<std::size_t>(lock_loss_reason::thread_exited) + 1;

// The label of a loss reason: "not_held", "unconfirmed", "lease_expired", "client_stopped",
// "thread_exited".
constexpr std::string_view loss_reason_name(lock_loss_reason reason) noexcept {
  switch (reason) {
    case lock_loss_reason::not_held:
      return "not_held";
    case lock_loss_reason::unconfirmed:
      return "unconfirmed";
    case lock_loss_reason::lease_expired:
      return "lease_expired";
    case lock_loss_reason::client_stopped:
      return "client_stopped";
    case lock_loss_reason::thread_exited:
      return "thread_exited";
  }
  return "unknown";
}

struct lock_type_counters {
  explicit lock_type_counters(std::string_view kind) : type(kind) {}

  const std::string type;
  std::atomic<std::uint64_t> attempts{0}, acquired{0}, reentered{0}, waited{0}, timed_out{0},
      released{0}, leases_renewed{0}, renewals_failed{0}, release_retries{0}, unconfirmed{0};
  std::array<std::atomic<std::uint64_t>, loss_reason_count> lost{};
  // From the call to the hold, for every acquisition that got its lock (re-entries included).
  duration_histogram wait_seconds{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                  0.5,   1,     2.5,  5,     10,   30,  60};
  // From the first hold to its last release (lost holds are not observed).
  duration_histogram hold_seconds{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
};

struct lock_counters {
  std::atomic<std::uint64_t> attempts{0}, acquired{0}, reentered{0}, waited{0}, timed_out{0},
      released{0}, lost{0}, renewal_scripts{0}, leases_renewed{0}, release_retries{0},
      unconfirmed{0}, releases_deferred{0};
  // Command connections that came up (the first ones included), broke, and came up after one
  // broke.
  std::atomic<std::uint64_t> links_up{0}, links_lost{0}, links_recovered{0};

  lock_metrics snapshot() const noexcept {
    lock_metrics m;
    m.attempts = attempts;
    m.acquired = acquired;
    m.reentered = reentered;
    m.waited = waited;
    m.timed_out = timed_out;
    m.released = released;
    m.lost = lost;
    m.renewal_scripts = renewal_scripts;
    m.leases_renewed = leases_renewed;
    m.release_retries = release_retries;
    m.unconfirmed = unconfirmed;
    m.releases_deferred = releases_deferred;
    return m;
  }

  // The counters of lock type `kind`, made on first use; the reference stays valid for the
  // counters' lifetime.
  lock_type_counters& of(std::string_view kind) {
    std::lock_guard lock(types_mutex_);
    for (lock_type_counters& t : types_)
      if (t.type == kind) return t;
    return types_.emplace_back(kind);
  }

  // Calls `visit` for every lock type seen so far, in the order they were first used.
  void for_each_type(const std::function<void(const lock_type_counters&)>& visit) const {
    std::lock_guard lock(types_mutex_);
    for (const lock_type_counters& t : types_)
      visit(t);
  }

 private:
  mutable std::mutex types_mutex_;
  std::deque<lock_type_counters> types_;  // a deque: elements never move
};

}  // namespace dlock::locks
