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
        send_renewals(due);
      } catch (const error&) {
        return;  // stopped: the client reports the remaining holds
      }
    }
    holds_.registry.take_expired(now, lost);
    next = holds_.registry.next_wakeup();
    holds_.timer_at = next;
  }
  fire_(lost);  // outside the mutex: stop callbacks are user code
  if (!next) return;
  timer_->expires_at(*next);
  timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->tick();
  });
}

void watchdog::send_renewals(const std::vector<lease::renewal>& due) {
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
      io_.eval(protocol.renew(targets, lease), [weak = weak_from_this(), batch, &protocol](
                                                   std::error_code ec, reply r) mutable {
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
      });
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
