// src/lease/lease_scheduler.hpp
//
// The watchdog's decisions, sans I/O: which held locks to renew now, what a renewal's answer
// means, and when a hold must count as lost. One scheduler per client serves every lock held with
// a watchdog lease. It has no threads, sockets or clock of its own: every call takes `now` from
// the caller (a steady clock), and the caller sends the renewals it returns, batched into
// renew_leases.lua scripts as routing allows, and reports each answer back. Not thread-safe: the
// driver guards it with its mutex.
//
// Time model. A hold is GUARANTEED until `confirmed_at + lease`, where `confirmed_at` is when the
// latest request that the server confirmed as setting the TTL (the acquisition, or a renewal
// answered `renewed`) was SENT. The server ran it at some later moment, so the TTL it set cannot
// run out before then. The server's clock and the network delay never enter the arithmetic.
//
//   renew_interval  = max(lease / 3, 1 ms)      a renewal is due at confirmed_at + renew_interval
//   retry_interval  = clamp(lease / 10, 1 ms, 1 s)   after a `failed` answer
//   loss_deadline   = confirmed_at + lease - safety_margin
//
// At `now >= loss_deadline` a hold is lost unless a confirmation arrived before: an answer
// reported with `now` at or after the deadline comes too late and is ignored. Every call that
// takes `now` applies this rule first, so the outcome depends only on the timeline the caller
// reports, never on which call happened to run first.
//
// A lease's life (rows are states, columns are calls):
//
//   state      | due(now)               | on_result renewed | on_result not_held | on_result failed
//   -----------+------------------------+-------------------+--------------------+-----------------
//   waiting    | at next_attempt:       | (no renewal sent; | lost (not_held)    | ignored
//              |   -> in_flight         |  may only extend  |                    |
//              |                        |  confirmed_at)    |                    |
//   in_flight  | not returned again     | -> waiting, next  | lost (not_held)    | -> waiting, next
//              |                        |  attempt at       |                    |  attempt at
//              |                        |  confirmed_at +   |                    |  now + retry
//              |                        |  renew_interval   |                    |
//   lost       | not returned           | ignored           | ignored            | ignored
//
//   any state except lost, at now >= loss_deadline           -> lost (expired_unconfirmed)
//   lost      --take_lost()--> reported once, then forgotten (the id is never used again)
//   any state --remove()-----> forgotten: never returned by due() nor reported by take_lost()
//
// Results for unknown ids (removed, or lost and already reported) are ignored. Ids are never
// reused, so such a result cannot touch a later hold.
//
// Safety. Nothing here renews a released lock: after remove(id), due() never returns id. The
// driver must issue a batch returned by due() before it issues any later release of those locks,
// on the lock's connection (the driver's mutex covers due() and the enqueue), so that a renewal
// runs on the server before the release, never after it. renew_leases.lua renews only while the
// holder's field exists, which makes a renewal that does run after a full release a no-op; the
// ordering also keeps it from extending a new hold of the same field with an explicit lease. A
// renewal in flight when its hold is declared lost may still extend the key on the server; the
// holder has been told it lost the lock either way, and the key then lives one lease at most.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dlock::lease {

using clock = std::chrono::steady_clock;
using lease_id = std::uint64_t;

// A held lock as the renewal script sees it: the lock hash and this holder's field in it.
struct lease_key {
  std::string name;
  std::string owner_field;
};

// One renewal to send. The caller groups a batch into scripts (it knows the routing) and later
// reports the answer with on_result(id, sent_at, ...). `key` is shared with the scheduler, so a
// batch costs no string copies and stays valid after the lease is removed.
struct renewal {
  lease_id id;
  std::shared_ptr<const lease_key> key;
  clock::time_point sent_at;  // the `now` of the due() call that returned it
};

// The answer to one renewal.
enum class renewal_outcome {
  renewed,   // the script found our field and re-set the TTL
  not_held,  // the script found the lock gone or owned by someone else: the hold is lost
  failed,    // no answer (timeout, connection lost, server error): unknown, retry
};

// Why a hold was lost.
enum class lost_reason {
  not_held,             // a renewal found the lock gone or held by someone else
  expired_unconfirmed,  // the loss deadline came without a confirmed renewal
};

struct lost_lease {
  lease_id id;
  lost_reason reason;
};

class lease_scheduler {
 public:
  using duration = std::chrono::milliseconds;

  // lease_scheduler::lease_scheduler()
  //
  // `lease` is the watchdog lease that each renewal sets. `safety_margin` is how long before the
  // guaranteed expiry an unconfirmed hold already counts as lost; it absorbs the holder's reaction
  // time and clock-rate differences between client and server. Throws std::invalid_argument
  // unless lease >= 1 ms, safety_margin >= 0 and safety_margin + renew_interval < lease (else
  // every hold would be lost before its first renewal could be sent), and unless 0 <=
  // batch_window < renew_interval. due(now) also returns leases due within `batch_window` after
  // `now`: renewing a little early only moves a guarantee later, and it lets leases taken at
  // different moments fall into one round, so one script renews many (see due()).
  lease_scheduler(duration lease, duration safety_margin, duration batch_window = duration{0});

  // lease_scheduler::add()
  //
  // Starts tracking a watchdog hold and returns its id (never 0, never reused). `sent_at` is when
  // the acquiring request was SENT, not when it was answered: the hold is guaranteed until
  // sent_at + lease, and the first renewal is due at sent_at + renew_interval. The key is
  // allocated here once; due() only shares it.
  lease_id add(lease_key key, clock::time_point sent_at);

  // lease_scheduler::remove()
  //
  // The hold ended (released). Forgets the lease: it is never returned by due() again nor
  // reported by take_lost(), and the answer of a renewal still in flight for it is ignored.
  // Returns false if `id` was not tracked (already removed, or lost and reported).
  bool remove(lease_id id);

  // lease_scheduler::due()
  //
  // Returns the renewals to send now, in id order: when at least one lease's next attempt time is
  // at or before `now`, every lease whose next attempt is at or before `now` + batch_window, that
  // has no renewal in flight and is not lost; otherwise none. Each returned lease
  // is marked in flight with sent_at = now and is not returned again until its answer is reported.
  // Leases whose loss deadline has passed are marked lost instead (see take_lost()). All due leases
  // come back in this one call so they can share scripts; the only allocation is the returned
  // vector. Every returned renewal must be answered by exactly one on_result() call; one that never
  // is only delays its lease's next renewal, and the loss deadline still applies.
  [[nodiscard]] std::vector<renewal> due(clock::time_point now);

  // lease_scheduler::due_all()
  //
  // As due(), for every lease that is not lost, whenever its next renewal would be and even with
  // a renewal in flight (that one's answer is then ignored unless it says renewed or not_held):
  // after a reconnect every hold must be checked at once, since the server may have lost them.
  [[nodiscard]] std::vector<renewal> due_all(clock::time_point now);

  // lease_scheduler::on_result()
  //
  // Reports the answer to the renewal of `id` sent at `sent_at`, received at `now`. Ignored when
  // `id` is unknown or already lost, and when `now` is at or past the loss deadline (the lease is
  // then marked lost as expired_unconfirmed instead). Otherwise:
  //   renewed   confirmed_at becomes max(confirmed_at, sent_at): a stale answer never moves the
  //             expiry backwards. If it answers the renewal in flight, the next one is due at
  //             confirmed_at + renew_interval (which may already be due when the answer was slow).
  //   not_held  the lease is lost (not_held), whichever renewal the answer belongs to.
  //   failed    if it answers the renewal in flight, the next attempt is at now + retry_interval;
  //             a failed answer to any other renewal is ignored.
  void on_result(lease_id id, clock::time_point sent_at, renewal_outcome outcome,
                 clock::time_point now);

  // lease_scheduler::take_lost()
  //
  // Returns the leases lost as of `now`, in id order: those with a not_held answer and those whose
  // loss deadline is at or before `now` without a confirmation. Each is returned exactly once and
  // then forgotten, so later answers for it are ignored. The holder of each must be told.
  [[nodiscard]] std::vector<lost_lease> take_lost(clock::time_point now);

  // lease_scheduler::next_wakeup()
  //
  // When the caller should next call due() and take_lost(): the earliest of every lease's next
  // attempt (unless a renewal is in flight) and loss deadline, or the time a lease was marked
  // lost if it has not been taken yet (then the time is in the past). nullopt when size() == 0.
  std::optional<clock::time_point> next_wakeup() const;

  // lease_scheduler::size()
  //
  // The number of tracked leases: held ones plus lost ones not yet returned by take_lost().
  std::size_t size() const noexcept { return leases_.size(); }

  // The guaranteed expiry (confirmed_at + lease) of a tracked lease, or nullopt if `id` is not
  // tracked. For diagnostics and tests.
  std::optional<clock::time_point> guaranteed_expiry(lease_id id) const;

  duration lease() const noexcept { return lease_; }
  duration safety_margin() const noexcept { return safety_margin_; }
  duration renew_interval() const noexcept { return renew_interval_; }
  duration retry_interval() const noexcept { return retry_interval_; }
  duration batch_window() const noexcept { return batch_window_; }

 private:
  // Costs: add, remove, on_result O(log n); due() and take_lost() O(k log n) for the k leases
  // they return; next_wakeup() O(1). Three ordered indexes keep a tick from scanning every lease.
  using timeline = std::set<std::pair<clock::time_point, lease_id>>;
  struct entry {
    std::shared_ptr<const lease_key> key;
    clock::time_point confirmed_at;              // send time of the latest confirmed TTL set
    clock::time_point next_attempt;              // when to send the next renewal
    std::optional<clock::time_point> in_flight;  // send time of the unanswered renewal
    std::optional<clock::time_point> lost_at;    // set once lost; waits for take_lost()
    lost_reason reason = lost_reason::not_held;  // meaningful once lost_at is set
  };

  clock::time_point loss_deadline(const entry& e) const noexcept {
    return e.confirmed_at + lease_ - safety_margin_;
  }
  // Marks lost (expired_unconfirmed) every lease whose loss deadline is at or before `now`.
  void expire(clock::time_point now);
  // Marks `e` lost now, taking it out of the attempt and deadline indexes.
  void mark_lost(lease_id id, entry& e, lost_reason reason, clock::time_point now);
  // Moves `e`'s confirmation or next attempt, keeping the indexes in step.
  void set_confirmed(lease_id id, entry& e, clock::time_point confirmed_at);
  void schedule(lease_id id, entry& e, clock::time_point next_attempt);
  void erase_indexes(lease_id id, const entry& e);

  duration lease_;
  duration safety_margin_;
  duration renew_interval_;
  duration retry_interval_;
  duration batch_window_;
  lease_id next_id_ = 1;
  std::map<lease_id, entry> leases_;
  timeline attempts_;        // (next_attempt, id) of leases neither in flight nor lost
  timeline deadlines_;       // (loss deadline, id) of leases not lost
  std::set<lease_id> lost_;  // lost, not yet returned by take_lost()
  std::optional<clock::time_point> earliest_lost_at_;  // the first lost_at among lost_
};

}  // namespace dlock::lease
