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

// The position of `id` in a vector of entries sorted by id, or end().
template <class Entries>
auto position(Entries& leases, lease_id id) {
  const auto it = std::lower_bound(leases.begin(), leases.end(), id,
                                   [](const auto& e, lease_id v) { return e.id < v; });
  return it != leases.end() && it->id == id ? it : leases.end();
}

}  // namespace

lease_scheduler::lease_scheduler(duration lease, duration safety_margin)
    : lease_(lease),
      safety_margin_(safety_margin),
      renew_interval_(renew_interval_for(lease)),
      retry_interval_(retry_interval_for(lease)) {
  if (lease < duration{1}) throw std::invalid_argument("lease_scheduler: lease must be >= 1 ms");
  if (safety_margin < duration{0})
    throw std::invalid_argument("lease_scheduler: safety_margin must be >= 0");
  if (safety_margin + renew_interval_ >= lease)
    throw std::invalid_argument(
        "lease_scheduler: safety_margin + lease/3 must be less than the lease, or every hold is "
        "lost before its first renewal");
}

lease_id lease_scheduler::add(lease_key key, clock::time_point sent_at) {
  const lease_id id = next_id_++;
  leases_.push_back(entry{.id = id,
                          .key = std::make_shared<const lease_key>(std::move(key)),
                          .confirmed_at = sent_at,
                          .next_attempt = sent_at + renew_interval_,
                          .in_flight = std::nullopt,
                          .lost_at = std::nullopt});
  return id;
}

bool lease_scheduler::remove(lease_id id) {
  const auto it = position(leases_, id);
  if (it == leases_.end()) return false;
  leases_.erase(it);
  return true;
}

bool lease_scheduler::check_expired(entry& e, clock::time_point now) const noexcept {
  if (e.lost_at) return true;
  if (now < loss_deadline(e)) return false;
  e.lost_at = now;
  e.reason = lost_reason::expired_unconfirmed;
  return true;
}

std::vector<renewal> lease_scheduler::due(clock::time_point now) {
  // Two passes so that the result is allocated once, at its exact size.
  std::size_t count = 0;
  for (auto& e : leases_) {
    if (check_expired(e, now)) continue;
    if (!e.in_flight && e.next_attempt <= now) ++count;
  }
  std::vector<renewal> out;
  if (count == 0) return out;
  out.reserve(count);
  for (auto& e : leases_) {
    if (e.lost_at || e.in_flight || e.next_attempt > now) continue;
    e.in_flight = now;
    out.push_back(renewal{.id = e.id, .key = e.key, .sent_at = now});
  }
  return out;
}

void lease_scheduler::on_result(lease_id id, clock::time_point sent_at, renewal_outcome outcome,
                                clock::time_point now) {
  entry* e = find(id);
  if (e == nullptr || check_expired(*e, now)) return;
  const bool answers_in_flight = e->in_flight && *e->in_flight == sent_at;
  switch (outcome) {
    case renewal_outcome::renewed:
      e->confirmed_at = std::max(e->confirmed_at, sent_at);
      if (answers_in_flight) {
        e->in_flight.reset();
        e->next_attempt = e->confirmed_at + renew_interval_;
      }
      return;
    case renewal_outcome::not_held:
      e->lost_at = now;
      e->reason = lost_reason::not_held;
      e->in_flight.reset();
      return;
    case renewal_outcome::failed:
      if (answers_in_flight) {
        e->in_flight.reset();
        e->next_attempt = now + retry_interval_;
      }
      return;
  }
}

std::vector<lost_lease> lease_scheduler::take_lost(clock::time_point now) {
  std::vector<lost_lease> out;
  for (auto& e : leases_) {
    if (check_expired(e, now)) out.push_back(lost_lease{.id = e.id, .reason = e.reason});
  }
  if (!out.empty()) {
    std::erase_if(leases_, [](const entry& e) { return e.lost_at.has_value(); });
  }
  return out;
}

std::optional<clock::time_point> lease_scheduler::next_wakeup() const {
  std::optional<clock::time_point> earliest;
  const auto consider = [&earliest](clock::time_point t) {
    if (!earliest || t < *earliest) earliest = t;
  };
  for (const auto& e : leases_) {
    if (e.lost_at) {
      consider(*e.lost_at);
      continue;
    }
    consider(loss_deadline(e));
    if (!e.in_flight) consider(e.next_attempt);
  }
  return earliest;
}

std::optional<clock::time_point> lease_scheduler::guaranteed_expiry(lease_id id) const {
  const entry* e = find(id);
  if (e == nullptr) return std::nullopt;
  return e->confirmed_at + lease_;
}

lease_scheduler::entry* lease_scheduler::find(lease_id id) noexcept {
  const auto it = position(leases_, id);
  return it == leases_.end() ? nullptr : &*it;
}

const lease_scheduler::entry* lease_scheduler::find(lease_id id) const noexcept {
  const auto it = position(leases_, id);
  return it == leases_.end() ? nullptr : &*it;
}

}  // namespace dlock::lease
