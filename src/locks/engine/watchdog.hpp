// src/locks/engine/watchdog.hpp
//
// Drives the hold registry's clock from a timer on the I/O thread: renews every due watchdog
// lease, turns expired holds into losses, and sleeps until the registry's next wake-up. A round's
// renewals are grouped by lock type and shard (one script may only touch one shard), cut into
// scripts of at most max_renewals_per_script keys, and queued back to back, so they leave in one
// write per connection. Renewals are queued with the holds' mutex held, so a batch is always on
// the wire before a later release of the same lock (see lease_scheduler.hpp, "Safety").
#pragma once

#include <asio.hpp>
#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "locks/engine/engine_io.hpp"
#include "locks/engine/hold_registry.hpp"

namespace dlock::locks {

// The registry and the mutex that guards it, shared by the engine's parts.
struct hold_book {
  hold_book(std::chrono::milliseconds watchdog_lease, std::string client_id,
            lock_counters& counters)
      : registry(watchdog_lease, std::move(client_id), counters) {}
  std::mutex mutex;
  hold_registry registry;
  // When the watchdog timer is set to fire (nullopt: not set). Guarded by `mutex`.
  std::optional<clock::time_point> timer_at;
  // No hold can be past its loss deadline before this time (steady clock ticks): the earliest
  // time the registry needs the watchdog, lowered when a new hold needs it sooner. Lets the
  // callers' checks (lock_engine::expire_due_holds) skip the mutex on the common path.
  std::atomic<clock::rep> nothing_expires_before{std::numeric_limits<clock::rep>::max()};
  void expect_wakeup(std::optional<clock::time_point> at) noexcept {
    const clock::rep t =
        at ? at->time_since_epoch().count() : std::numeric_limits<clock::rep>::max();
    nothing_expires_before.store(t, std::memory_order_release);
  }
  void lower_wakeup(clock::time_point at) noexcept {
    clock::rep current = nothing_expires_before.load(std::memory_order_acquire);
    const clock::rep t = at.time_since_epoch().count();
    while (t < current &&
           !nothing_expires_before.compare_exchange_weak(current, t, std::memory_order_acq_rel)) {
    }
  }
};

class watchdog : public std::enable_shared_from_this<watchdog> {
 public:
  static constexpr std::size_t max_renewals_per_script = 1000;

  // `fire` reports losses (called with no lock held).
  watchdog(engine_io& io, hold_book& holds, lock_counters& counters,
           std::function<void(const losses&)> fire);

  // A hold needs the watchdog sooner than the timer is set for: run a round on the I/O thread.
  void wake() noexcept;
  // On the I/O thread, when a command connection is back: the server may have lost every hold
  // (a restart without persistence, a failover). Renews every watchdog lease and checks every
  // explicit one in one urgent round, ahead of whatever waited for the link, so a lost hold is
  // reported about one round trip after the reconnect instead of at its next renewal.
  void recheck_all();
  // On the I/O thread, when the client stops: drops the timer.
  void stop();

 private:
  void tick();
  // With holds_.mutex held. `urgent`: ahead of every request not yet written.
  void send_renewals(std::vector<lease::renewal> due, bool urgent);
  void send_checks(std::vector<hold_registry::hold_check> checks);
  void on_checked(const std::vector<hold_registry::hold_check>& batch,
                  const lock_protocol& protocol, std::error_code ec, const reply& r);
  void on_renewed(const std::vector<lease::renewal>& batch, const lock_protocol& protocol,
                  std::error_code ec, const reply& r);

  engine_io& io_;
  hold_book& holds_;
  lock_counters& counters_;
  std::function<void(const losses&)> fire_;
  std::optional<asio::steady_timer> timer_;  // I/O thread only
};

}  // namespace dlock::locks
