#include "locks/engine/hold_registry.hpp"

#include <algorithm>
#include <stdexcept>

#include "dlock/error.hpp"

namespace dlock::locks {

using std::chrono::milliseconds;

namespace {

lease::lease_scheduler make_scheduler(milliseconds watchdog) {
  if (watchdog > max_lock_lease) {
    throw error(errc::invalid_argument,
                "lock watchdog timeout of " + std::to_string(watchdog.count()) +
                    " ms is over the limit of " + std::to_string(max_lock_lease.count()) + " ms");
  }
  try {
    // Renewals due within a third of the renewal interval go together, so holds taken at
    // different moments share rounds and scripts (at most three rounds per interval).
    return lease::lease_scheduler(watchdog, safety_margin(watchdog), watchdog / 9);
  } catch (const std::invalid_argument& e) {
    throw error(errc::invalid_argument, std::string("lock watchdog timeout: ") + e.what());
  }
}

}  // namespace

milliseconds safety_margin(milliseconds lease) {
  return std::max(lease / 10, milliseconds(1));
}

hold_registry::hold_registry(milliseconds watchdog_lease, std::string client_id,
                             lock_counters& counters)
    : watchdog_lease_(watchdog_lease),
      client_id_(std::move(client_id)),
      counters_(counters),
      scheduler_(make_scheduler(watchdog_lease)) {}

std::string hold_registry::owner_field(std::uint64_t owner) const {
  std::string field;
  field.reserve(client_id_.size() + 21);  // ':' and a uint64: one allocation
  field.append(client_id_).append(":").append(std::to_string(owner));
  return field;
}

attempt_plan hold_registry::plan(const hold_key& key, const milliseconds* explicit_lease) const {
  attempt_plan plan;
  plan.owner = owner_field(key.owner);
  plan.lease = explicit_lease != nullptr ? *explicit_lease : watchdog_lease_;
  plan.watchdog = explicit_lease == nullptr;
  const auto it = holds_.find(key);
  if (it != holds_.end() && !it->second.lost && it->second.count > 0) {
    // A re-entry keeps the lease kind of the first hold.
    plan.known_holds = it->second.count;
    plan.lease = it->second.lease;
    plan.watchdog = !it->second.lose_at.has_value();
  }
  return plan;
}

void hold_registry::stop_tracking(hold& h) {
  if (h.watchdog) {
    (void)scheduler_.remove(*h.watchdog);
    watchdog_owner_.erase(*h.watchdog);
    h.watchdog.reset();
  }
  if (h.lose_at) {
    explicit_deadlines_.erase(*h.lose_at);
    h.lose_at.reset();
  }
}

void hold_registry::track_explicit(const hold_key& key, hold& h, clock::time_point lose_at) {
  if (h.lose_at) explicit_deadlines_.erase(*h.lose_at);
  h.lose_at = explicit_deadlines_.emplace(lose_at, key);
}

void hold_registry::mark_lost(const hold_key& key, hold& h, lock_loss_reason reason, losses& out) {
  if (h.lost) return;
  h.lost = true;
  stop_tracking(h);
  out.stops.push_back(h.stop);
  out.events.push_back({key.lock.name, owner_field(key.owner), reason});
  ++counters_.lost;
  ++type_counters(key).lost[static_cast<std::size_t>(reason)];
}

std::optional<clock::time_point> hold_registry::record_attempt(
    const hold_key& key, const attempt_plan& plan, const attempt_outcome& outcome,
    clock::time_point sent_at, bool stopped, std::optional<clock::time_point> armed, losses& out) {
  using kind = attempt_outcome::kind;
  const auto it = holds_.find(key);
  const bool live = it != holds_.end() && !it->second.lost && it->second.count > 0;
  // Our server-side hold is gone (taken by someone, or expired and freshly acquired) while we
  // still counted it: that hold is lost, whatever this call does next.
  if (live && outcome.status != kind::reentered) {
    mark_lost(key, it->second, lock_loss_reason::not_held, out);
  }
  if (outcome.status == kind::held_by_other) return std::nullopt;

  std::optional<clock::time_point> due;
  hold& h = holds_[key];
  if (outcome.status == kind::acquired || !live) {
    const std::uint64_t token = outcome.status == kind::acquired ? outcome.token : h.token;
    stop_tracking(h);
    h = hold{};
    h.token = token;
    h.lease = plan.lease;
    h.since = sent_at;
    if (plan.watchdog) {
      h.watchdog = scheduler_.add({key.lock.name, plan.owner}, sent_at);
      watchdog_owner_.emplace(*h.watchdog, key);
      due = scheduler_.next_wakeup();
    } else {
      due = sent_at + plan.lease - safety_margin(plan.lease);
      track_explicit(key, h, *due);
    }
    ++counters_.acquired;
    ++type_counters(key).acquired;
  } else {
    ++counters_.reentered;
    ++type_counters(key).reentered;
    if (h.lose_at) {
      // The re-entry re-set the TTL: an explicit lease runs from this request on (later than
      // before, so an armed timer is early, never late).
      track_explicit(key, h, sent_at + h.lease - safety_margin(h.lease));
    }
  }
  h.count = outcome.count;
  // A reply applied after the client stopped: nobody will renew this hold either.
  if (stopped) mark_lost(key, h, lock_loss_reason::client_stopped, out);
  if (due && (!armed || *due < *armed)) return due;
  return std::nullopt;
}

std::optional<release_request> hold_registry::release(
    const hold_key& key, std::error_code& result, std::shared_ptr<std::stop_source>* lost_stop) {
  const auto it = holds_.find(key);
  if (it == holds_.end() || it->second.count == 0) {
    result = make_error_code(errc::not_owner);
    return std::nullopt;
  }
  hold& h = it->second;
  result = h.lost ? make_error_code(errc::lock_lost) : std::error_code{};
  if (h.lost && lost_stop != nullptr) *lost_stop = h.stop;
  // The script sets the count we keep, so a lost hold is forgotten with all its counts.
  h.count = h.lost ? 0 : h.count - 1;
  // Every try checks the hold's token (see reentrant_unlock.lua): it travels with the request.
  release_request request{key.lock.name, owner_field(key.owner), h.lease, h.count, h.token};
  if (h.count == 0) {
    if (!h.lost) {
      ++counters_.released;
      lock_type_counters& type = type_counters(key);
      ++type.released;
      type.hold_seconds.observe(clock::now() - h.since);
    }
    stop_tracking(h);
    holds_.erase(it);
  }
  return request;
}

std::optional<release_request> hold_registry::orphan_release(const hold_key& key) const {
  if (holds_.count(key) != 0) return std::nullopt;
  // The token is unknown (the reply was lost): the field alone says whose hold it is. A thread's
  // field serves each of its acquisitions; the release queue keeps a retry of this release from
  // following the owner's next attempt (release_queue::supersede).
  return release_request{key.lock.name, owner_field(key.owner), watchdog_lease_, 0, 0};
}

void hold_registry::drop_owner(std::uint64_t owner, lock_loss_reason reason, losses& out) {
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->first.owner != owner) {
      ++it;
      continue;
    }
    mark_lost(it->first, it->second, reason, out);
    it = holds_.erase(it);
  }
}

void hold_registry::lose_all(lock_loss_reason reason, losses& out) {
  for (auto& [key, h] : holds_)
    mark_lost(key, h, reason, out);
}

const hold_key* hold_registry::holder_of(lease::lease_id id) const {
  const auto it = watchdog_owner_.find(id);
  return it == watchdog_owner_.end() ? nullptr : &it->second;
}

void hold_registry::on_renewal(const lease::renewal& r, lease::renewal_outcome outcome,
                               clock::time_point now) {
  if (outcome == lease::renewal_outcome::renewed) ++counters_.leases_renewed;
  if (const hold_key* key = holder_of(r.id)) {
    lock_type_counters& type = type_counters(*key);
    ++(outcome == lease::renewal_outcome::renewed ? type.leases_renewed : type.renewals_failed);
  }
  scheduler_.on_result(r.id, r.sent_at, outcome, now);
}

std::vector<hold_registry::hold_check> hold_registry::explicit_holds() const {
  std::vector<hold_check> out;
  out.reserve(explicit_deadlines_.size());
  for (const auto& [deadline, key] : explicit_deadlines_) {
    const auto it = holds_.find(key);
    if (it == holds_.end() || it->second.lost) continue;
    out.push_back({key, owner_field(key.owner), it->second.token});
  }
  return out;
}

void hold_registry::on_check_failed(const hold_check& check, losses& out) {
  const auto it = holds_.find(check.key);
  if (it == holds_.end() || it->second.lost || it->second.token != check.token) return;
  mark_lost(it->first, it->second, lock_loss_reason::not_held, out);
}

void hold_registry::take_expired(clock::time_point now, losses& out) {
  for (const lease::lost_lease& l : scheduler_.take_lost(now)) {
    const auto owner = watchdog_owner_.find(l.id);
    if (owner == watchdog_owner_.end()) continue;
    const auto it = holds_.find(owner->second);
    watchdog_owner_.erase(owner);
    if (it == holds_.end()) continue;
    it->second.watchdog.reset();  // the scheduler forgot it already
    mark_lost(it->first, it->second,
              l.reason == lease::lost_reason::not_held ? lock_loss_reason::not_held
                                                       : lock_loss_reason::unconfirmed,
              out);
  }
  while (!explicit_deadlines_.empty() && explicit_deadlines_.begin()->first <= now) {
    const hold_key key = explicit_deadlines_.begin()->second;
    hold& h = holds_.at(key);
    mark_lost(key, h, lock_loss_reason::lease_expired, out);  // erases the index entry
  }
}

std::optional<clock::time_point> hold_registry::next_wakeup() const {
  std::optional<clock::time_point> next = scheduler_.next_wakeup();
  if (!explicit_deadlines_.empty()) {
    const auto first = explicit_deadlines_.begin()->first;
    if (!next || first < *next) next = first;
  }
  return next;
}

std::uint64_t hold_registry::count(const hold_key& key) const noexcept {
  const auto it = holds_.find(key);
  return it == holds_.end() || it->second.lost ? 0 : it->second.count;
}

std::uint64_t hold_registry::token(const hold_key& key) const noexcept {
  const auto it = holds_.find(key);
  return it == holds_.end() ? 0 : it->second.token;
}

std::stop_token hold_registry::stop_token(const hold_key& key) const noexcept {
  const auto it = holds_.find(key);
  return it == holds_.end() ? std::stop_token{} : it->second.stop->get_token();
}

std::shared_ptr<std::stop_source> hold_registry::stop_if_lost(const hold_key& key) const noexcept {
  const auto it = holds_.find(key);
  return it == holds_.end() || !it->second.lost ? nullptr : it->second.stop;
}

}  // namespace dlock::locks
