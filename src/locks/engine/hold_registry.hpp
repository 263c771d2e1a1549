// src/locks/engine/hold_registry.hpp
//
// This client's holds, sans I/O: per (lock type, name, owner key) the hold count, the fencing
// token, the lease kind and the stop_source that tells the holder of a loss; the watchdog's
// lease_scheduler (src/lease) for renewed leases and a deadline index for explicit ones. It
// decides, and the engine carries out: the engine sends the scripts, reports their replies here
// and fires the losses this returns. Not thread-safe: the engine guards it with one mutex. Every
// call that can find a loss appends it to a `losses` the caller fires after releasing that mutex
// (stop callbacks and on_lock_lost are user code).
//
// Costs: lookups and updates O(log holds); a watchdog round O(due leases · log holds).
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/lock_options.hpp"
#include "lease/lease_scheduler.hpp"
#include "locks/engine/lock_counters.hpp"
#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

using clock = std::chrono::steady_clock;

// One lock of one type (a read-write lock's read and write sides are two).
struct lock_ref {
  const lock_protocol* protocol = nullptr;
  std::string name;
  auto operator<=>(const lock_ref&) const = default;
};

// One owner's hold of one lock. Owners are thread keys or lease keys (src/core/identity.hpp).
struct hold_key {
  lock_ref lock;
  std::uint64_t owner = 0;
  auto operator<=>(const hold_key&) const = default;
};

// Losses found while the engine's mutex was held, to be fired after it is released.
struct losses {
  std::vector<std::shared_ptr<std::stop_source>> stops;
  std::vector<lock_loss> events;
  bool empty() const noexcept { return stops.empty(); }
};

// How an attempt is made, decided before it is sent.
struct attempt_plan {
  std::string owner;  // the owner's hash field
  std::chrono::milliseconds lease{0};
  bool watchdog = true;
  std::uint64_t known_holds = 0;
};

class hold_registry {
 public:
  // `watchdog_lease` renews holds taken without an explicit lease; `client_id` starts every
  // owner field. Throws errc::invalid_argument for a watchdog lease the scheduler cannot keep.
  hold_registry(std::chrono::milliseconds watchdog_lease, std::string client_id,
                lock_counters& counters);

  std::string owner_field(std::uint64_t owner) const;
  std::chrono::milliseconds watchdog_lease() const noexcept { return watchdog_lease_; }

  // The attempt `key` makes: a re-entry keeps the lease kind of the first hold; otherwise
  // `explicit_lease` (nullptr: the watchdog lease).
  attempt_plan plan(const hold_key& key, const std::chrono::milliseconds* explicit_lease) const;

  // Records what an attempt sent at `sent_at` found. Returns when the hold next needs the
  // watchdog's attention if that is sooner than `armed` (the time the watchdog timer is set for),
  // so the engine re-arms the timer only then. A hold that the reply shows was lost meanwhile is
  // reported in `out`; with `stopped`, a new hold is lost at once (nobody would renew it).
  std::optional<clock::time_point> record_attempt(const hold_key& key, const attempt_plan& plan,
                                                  const attempt_outcome& outcome,
                                                  clock::time_point sent_at, bool stopped,
                                                  std::optional<clock::time_point> armed,
                                                  losses& out);

  // Gives up one hold of `key`. Returns the release to send (nullopt and errc::not_owner when
  // `key` holds nothing); `result` becomes errc::lock_lost for a hold lost before (it is
  // forgotten whole). The request is sent even then: the script changes nothing unless the
  // owner's field is still there, and otherwise frees the lock sooner. For a lost hold,
  // `lost_stop` (if given) gets its stop_source: whoever marked it lost requests it after
  // leaving the registry's mutex, so the caller requests it too before it answers lock_lost
  // (a holder told lock_lost must find its stop_token stopped).
  std::optional<release_request> release(const hold_key& key, std::error_code& result,
                                         std::shared_ptr<std::stop_source>* lost_stop = nullptr);

  // A release for an owner whose attempt may have taken the lock without the client learning
  // of it; nullopt when the client knows a hold of `key` (its owner releases it).
  std::optional<release_request> orphan_release(const hold_key& key) const;

  // Every hold of `owner` is lost with `reason` and forgotten (its thread ended).
  void drop_owner(std::uint64_t owner, lock_loss_reason reason, losses& out);
  // Every hold is lost with `reason` (the client stops); they stay until released.
  void lose_all(lock_loss_reason reason, losses& out);

  // The watchdog renewals due at `now`, and the hold each belongs to.
  std::vector<lease::renewal> due_renewals(clock::time_point now) { return scheduler_.due(now); }
  const hold_key* holder_of(lease::lease_id id) const;
  void on_renewal(const lease::renewal& r, lease::renewal_outcome outcome, clock::time_point now);
  // After a reconnect (the server may have lost them): every watchdog lease to renew at once,
  // and every explicit-lease hold to check (it is never extended).
  std::vector<lease::renewal> renew_all(clock::time_point now) { return scheduler_.due_all(now); }
  struct hold_check {
    hold_key key;
    std::string owner_field;
    std::uint64_t token = 0;  // the answer applies only to this hold, not to a later one
  };
  std::vector<hold_check> explicit_holds() const;
  // A check found `check`'s hold gone: lost (not_held), if it is still the hold checked.
  void on_check_failed(const hold_check& check, losses& out);

  // Holds whose renewal failed for good or whose explicit lease ran out by `now`.
  void take_expired(clock::time_point now, losses& out);
  // When the watchdog must look again (nullopt: no holds need it).
  std::optional<clock::time_point> next_wakeup() const;

  // Queries (no I/O). A lost hold counts as not held by count() and stop_token(); token() still
  // gives a lost hold's token until it is released (make_lease hands a late hold's token out).
  std::uint64_t count(const hold_key& key) const noexcept;
  std::uint64_t token(const hold_key& key) const noexcept;
  std::stop_token stop_token(const hold_key& key) const noexcept;
  // The stop_source of `key`'s hold if it is lost (null otherwise): see release().
  std::shared_ptr<std::stop_source> stop_if_lost(const hold_key& key) const noexcept;
  std::size_t size() const noexcept { return holds_.size(); }

 private:
  using deadline_index = std::multimap<clock::time_point, hold_key>;
  struct hold {
    std::uint64_t count = 0;
    std::uint64_t token = 0;
    std::chrono::milliseconds lease{0};
    clock::time_point since{};  // the first hold's request was sent: for the hold-time histogram
    std::optional<lease::lease_id> watchdog;          // renewed holds
    std::optional<deadline_index::iterator> lose_at;  // explicit leases
    std::shared_ptr<std::stop_source> stop = std::make_shared<std::stop_source>();
    bool lost = false;
  };
  using hold_map = std::map<hold_key, hold>;

  void stop_tracking(hold& h);
  void track_explicit(const hold_key& key, hold& h, clock::time_point lose_at);
  void mark_lost(const hold_key& key, hold& h, lock_loss_reason reason, losses& out);
  lock_type_counters& type_counters(const hold_key& key) {
    return counters_.of(key.lock.protocol->kind());
  }

  const std::chrono::milliseconds watchdog_lease_;
  const std::string client_id_;
  lock_counters& counters_;
  hold_map holds_;
  lease::lease_scheduler scheduler_;
  std::map<lease::lease_id, hold_key> watchdog_owner_;
  deadline_index explicit_deadlines_;
};

// A hold counts as lost this much before its lease would end on the server, so the holder hears
// of it while the lock is still its own.
std::chrono::milliseconds safety_margin(std::chrono::milliseconds lease);

}  // namespace dlock::locks
