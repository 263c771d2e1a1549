#include "lease/lease_scheduler.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace dlock::lease {

namespace {

using duration = lease_scheduler::duration;

duration renew_interval_for(duration lease) {
  return std::max(lease / 3, duration{1});
}

duration retry_interval_for(duration lease) {
  return std::clamp(lease / 10, duration{1}, duration{std::chrono::seconds{1}});
}

}  // namespace

lease_scheduler::lease_scheduler(duration lease, duration safety_margin, duration batch_window)
    : lease_(lease),
      safety_margin_(safety_margin),
      renew_interval_(renew_interval_for(lease)),
      retry_interval_(retry_interval_for(lease)),
      batch_window_(batch_window) {
  if (lease < duration{1}) throw std::invalid_argument("lease_scheduler: lease must be >= 1 ms");
  if (safety_margin < duration{0})
    throw std::invalid_argument("lease_scheduler: safety_margin must be >= 0");
  if (safety_margin + renew_interval_ >= lease)
    throw std::invalid_argument(
        "lease_scheduler: safety_margin + lease/3 must be less than the lease, or every hold is "
        "lost before its first renewal");
  if (batch_window < duration{0} || batch_window >= renew_interval_)
    throw std::invalid_argument("lease_scheduler: batch_window must be in [0, lease/3)");
}

lease_id lease_scheduler::add(lease_key key, clock::time_point sent_at) {
  const lease_id id = next_id_++;
  entry& e = leases_
                 .emplace_hint(leases_.end(), id,
                               entry{.key = std::make_shared<const lease_key>(std::move(key)),
                                     .confirmed_at = sent_at,
                                     .next_attempt = sent_at + renew_interval_,
                                     .in_flight = std::nullopt,
                                     .lost_at = std::nullopt})
                 ->second;
  attempts_.emplace(e.next_attempt, id);
  deadlines_.emplace(loss_deadline(e), id);
  return id;
}

void lease_scheduler::erase_indexes(lease_id id, const entry& e) {
  if (e.lost_at) {
    lost_.erase(id);
    return;
  }
  deadlines_.erase({loss_deadline(e), id});
  if (!e.in_flight) attempts_.erase({e.next_attempt, id});
}

bool lease_scheduler::remove(lease_id id) {
  const auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  erase_indexes(id, it->second);
  leases_.erase(it);
  if (lost_.empty()) earliest_lost_at_.reset();
  return true;
}

void lease_scheduler::mark_lost(lease_id id, entry& e, lost_reason reason, clock::time_point now) {
  erase_indexes(id, e);
  e.lost_at = now;
  e.reason = reason;
  e.in_flight.reset();
  lost_.insert(id);
  if (!earliest_lost_at_ || now < *earliest_lost_at_) earliest_lost_at_ = now;
}

void lease_scheduler::expire(clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const lease_id id = deadlines_.begin()->second;
    mark_lost(id, leases_.at(id), lost_reason::expired_unconfirmed, now);
  }
}

void lease_scheduler::set_confirmed(lease_id id, entry& e, clock::time_point confirmed_at) {
  if (confirmed_at == e.confirmed_at) return;
  deadlines_.erase({loss_deadline(e), id});
  e.confirmed_at = confirmed_at;
  deadlines_.emplace(loss_deadline(e), id);
}

void lease_scheduler::schedule(lease_id id, entry& e, clock::time_point next_attempt) {
  e.in_flight.reset();
  e.next_attempt = next_attempt;
  attempts_.emplace(next_attempt, id);
}

std::vector<renewal> lease_scheduler::due(clock::time_point now) {
  expire(now);
  std::vector<renewal> out;
  // Nothing before a lease is actually due: a call made for another reason (an answer just came)
  // would otherwise send a thin slice of leases that reached the window's edge.
  if (attempts_.empty() || attempts_.begin()->first > now) return out;
  const auto horizon = now + batch_window_;
  while (!attempts_.empty() && attempts_.begin()->first <= horizon) {
    const lease_id id = attempts_.begin()->second;
    attempts_.erase(attempts_.begin());
    entry& e = leases_.at(id);
    e.in_flight = now;
    out.push_back(renewal{.id = id, .key = e.key, .sent_at = now});
  }
  std::sort(out.begin(), out.end(), [](const renewal& a, const renewal& b) { return a.id < b.id; });
  return out;
}

std::vector<renewal> lease_scheduler::due_all(clock::time_point now) {
  expire(now);
  std::vector<renewal> out;
  out.reserve(deadlines_.size());
  for (auto& [id, e] : leases_) {  // in id order
    if (e.lost_at) continue;
    if (!e.in_flight) attempts_.erase({e.next_attempt, id});
    e.in_flight = now;
    out.push_back(renewal{.id = id, .key = e.key, .sent_at = now});
  }
  return out;
}

void lease_scheduler::on_result(lease_id id, clock::time_point sent_at, renewal_outcome outcome,
                                clock::time_point now) {
  expire(now);
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.lost_at) return;
  entry& e = it->second;
  const bool answers_in_flight = e.in_flight && *e.in_flight == sent_at;
  switch (outcome) {
    case renewal_outcome::renewed:
      set_confirmed(id, e, std::max(e.confirmed_at, sent_at));
      if (answers_in_flight) schedule(id, e, e.confirmed_at + renew_interval_);
      return;
    case renewal_outcome::not_held:
      mark_lost(id, e, lost_reason::not_held, now);
      return;
    case renewal_outcome::failed:
      if (answers_in_flight) schedule(id, e, now + retry_interval_);
      return;
  }
}

std::vector<lost_lease> lease_scheduler::take_lost(clock::time_point now) {
  expire(now);
  std::vector<lost_lease> out;
  out.reserve(lost_.size());
  for (const lease_id id : lost_) {  // a set: in id order
    const auto it = leases_.find(id);
    out.push_back(lost_lease{.id = id, .reason = it->second.reason});
    leases_.erase(it);
  }
  lost_.clear();
  earliest_lost_at_.reset();
  return out;
}

std::optional<clock::time_point> lease_scheduler::next_wakeup() const {
  std::optional<clock::time_point> earliest = earliest_lost_at_;
  const auto consider = [&earliest](const timeline& t) {
    if (!t.empty() && (!earliest || t.begin()->first < *earliest)) earliest = t.begin()->first;
  };
  consider(deadlines_);
  consider(attempts_);
  return earliest;
}

std::optional<clock::time_point> lease_scheduler::guaranteed_expiry(lease_id id) const {
  const auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  return it->second.confirmed_at + lease_;
}

}  // namespace dlock::lease
