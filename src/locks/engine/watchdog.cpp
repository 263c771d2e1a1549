#include "locks/engine/watchdog.hpp"

#include <map>
#include <utility>

namespace dlock::locks {

watchdog::watchdog(engine_io& io, hold_book& holds, lock_counters& counters,
                   std::function<void(const losses&)> fire)
    : io_(io), holds_(holds), counters_(counters), fire_(std::move(fire)), timer_(io.io()) {}

void watchdog::wake() noexcept {
  try {
    io_.post([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->tick();
    });
  } catch (...) {
    // Stopped: no watchdog any more; the client reported every hold lost.
  }
}

void watchdog::stop() {
  timer_.reset();
}

void watchdog::tick() {
  if (!timer_) return;
  losses lost;
  std::optional<clock::time_point> next;
  {
    std::lock_guard lock(holds_.mutex);
    const auto now = clock::now();
    const std::vector<lease::renewal> due = holds_.registry.due_renewals(now);
    if (!due.empty()) {
      try {
        send_renewals(due, false);
      } catch (const error&) {
        return;  // stopped: the client reports the remaining holds
      }
    }
    holds_.registry.take_expired(now, lost);
    next = holds_.registry.next_wakeup();
    holds_.timer_at = next;
    holds_.expect_wakeup(next);
  }
  fire_(lost);  // outside the mutex: stop callbacks are user code
  if (!next) return;
  timer_->expires_at(*next);
  timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->tick();
  });
}

void watchdog::recheck_all() {
  if (!timer_) return;
  {
    std::lock_guard lock(holds_.mutex);
    const auto now = clock::now();
    try {
      send_renewals(holds_.registry.renew_all(now), true);
      send_checks(holds_.registry.explicit_holds());
    } catch (const error&) {
      return;  // stopped: the client reports the remaining holds
    }
  }
  tick();  // re-arms the timer: the leases just sent are in flight
}

void watchdog::send_checks(std::vector<hold_registry::hold_check> checks) {
  // One script per lock type and shard, as renewals.
  using group_key = std::pair<const lock_protocol*, std::uint32_t>;
  std::map<group_key, std::vector<hold_registry::hold_check>> groups;
  io_.use([&](route::router& router) {
    for (auto& c : checks)
      groups[{c.key.lock.protocol, router.shard_of(c.key.lock.name)}].push_back(std::move(c));
  });
  for (auto& [key, all] : groups) {
    const lock_protocol& protocol = *key.first;
    for (std::size_t begin = 0; begin < all.size(); begin += max_renewals_per_script) {
      const std::size_t end = std::min(all.size(), begin + max_renewals_per_script);
      std::vector<hold_registry::hold_check> batch(all.begin() + static_cast<std::ptrdiff_t>(begin),
                                                   all.begin() + static_cast<std::ptrdiff_t>(end));
      std::vector<renewal_target> targets;
      targets.reserve(batch.size());
      for (const auto& c : batch)
        targets.push_back({c.key.lock.name, c.owner_field});
      io_.eval(
          protocol.check(targets),
          [weak = weak_from_this(), batch, &protocol](std::error_code ec, reply r) mutable {
            auto self = weak.lock();
            if (!self) return;
            try {
              self->io_.post([weak, batch = std::move(batch), &protocol, ec, r = std::move(r)] {
                if (auto dog = weak.lock()) dog->on_checked(batch, protocol, ec, r);
              });
            } catch (...) {
              // Stopped: the client reported every hold.
            }
          },
          true);
    }
  }
}

void watchdog::on_checked(const std::vector<hold_registry::hold_check>& batch,
                          const lock_protocol& protocol, std::error_code ec, const reply& r) {
  if (ec) return;  // unknown: the explicit lease still ends on time
  std::vector<bool> held;
  try {
    held = protocol.read_renewal(r, batch.size());
  } catch (const error&) {
    return;
  }
  losses lost;
  {
    std::lock_guard lock(holds_.mutex);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!held[i]) holds_.registry.on_check_failed(batch[i], lost);
    }
  }
  fire_(lost);
}

void watchdog::send_renewals(const std::vector<lease::renewal>& due, bool urgent) {
  // Group by (lock type, shard): one script touches one shard only.
  using group_key = std::pair<const lock_protocol*, std::uint32_t>;
  std::map<group_key, std::vector<lease::renewal>> groups;
  io_.use([&](route::router& router) {
    for (const lease::renewal& r : due) {
      const hold_key* holder = holds_.registry.holder_of(r.id);
      if (holder == nullptr) continue;
      groups[{holder->lock.protocol, router.shard_of(r.key->name)}].push_back(r);
    }
  });
  const auto lease = holds_.registry.watchdog_lease();
  for (auto& [key, renewals] : groups) {
    const lock_protocol& protocol = *key.first;
    for (std::size_t begin = 0; begin < renewals.size(); begin += max_renewals_per_script) {
      const std::size_t end = std::min(renewals.size(), begin + max_renewals_per_script);
      std::vector<lease::renewal> batch(renewals.begin() + static_cast<std::ptrdiff_t>(begin),
                                        renewals.begin() + static_cast<std::ptrdiff_t>(end));
      std::vector<renewal_target> targets;
      targets.reserve(batch.size());
      for (const auto& r : batch)
        targets.push_back({r.key->name, r.key->owner_field});
      ++counters_.renewal_scripts;
      io_.eval(
          protocol.renew(targets, lease),
          [weak = weak_from_this(), batch, &protocol](std::error_code ec, reply r) mutable {
            auto self = weak.lock();
            if (!self) return;
            // Posted: on a stopped connection this runs at once, under the holds' mutex.
            try {
              self->io_.post([weak, batch = std::move(batch), &protocol, ec, r = std::move(r)] {
                if (auto dog = weak.lock()) dog->on_renewed(batch, protocol, ec, r);
              });
            } catch (...) {
              // Stopped: nobody renews any more.
            }
          },
          urgent);
    }
  }
}

void watchdog::on_renewed(const std::vector<lease::renewal>& batch, const lock_protocol& protocol,
                          std::error_code ec, const reply& r) {
  {
    std::lock_guard lock(holds_.mutex);
    const auto now = clock::now();
    std::vector<bool> renewed;
    if (!ec) {
      try {
        renewed = protocol.read_renewal(r, batch.size());
      } catch (const error&) {
        // A malformed answer confirms nothing: retried like a failed one.
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      lease::renewal_outcome outcome = lease::renewal_outcome::failed;
      if (!renewed.empty()) {
        outcome = renewed[i] ? lease::renewal_outcome::renewed : lease::renewal_outcome::not_held;
      }
      holds_.registry.on_renewal(batch[i], outcome, now);
    }
  }
  tick();
}

}  // namespace dlock::locks
