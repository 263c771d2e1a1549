#include "locks/engine/watchdog.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

namespace dlock::locks {

namespace {

// Groups `items` by what one script may touch (one lock type, one shard), cuts each group into
// batches of at most watchdog::max_renewals_per_script, and hands each to send(protocol, batch).
// Items whose lock `lock_of` cannot name (nullptr) are dropped.
template <typename Item, typename LockOf, typename Send>
void in_batches(engine_io& io, std::vector<Item> items, LockOf lock_of, Send send) {
  using group_key = std::pair<const lock_protocol*, std::uint32_t>;
  std::map<group_key, std::vector<Item>> groups;
  io.use([&](route::router& router) {
    for (Item& item : items) {
      const lock_ref* lock = lock_of(item);
      if (lock != nullptr)
        groups[{lock->protocol, router.shard_of(lock->name)}].push_back(std::move(item));
    }
  });
  constexpr std::size_t most = watchdog::max_renewals_per_script;
  for (auto& [key, all] : groups) {
    for (std::size_t begin = 0; begin < all.size(); begin += most) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(begin);
      const auto last =
          all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), begin + most));
      send(*key.first,
           std::vector<Item>(std::make_move_iterator(first), std::make_move_iterator(last)));
    }
  }
}

// The completion of a batch's script: hands the reply to `handle` (a watchdog member) through the
// I/O thread's queue, since on a stopped connection a completion runs at once, under the holds'
// mutex.
template <typename Item, typename Handle>
net::completion back_on_io(std::weak_ptr<watchdog> weak, engine_io& io, std::vector<Item> batch,
                           const lock_protocol& protocol, Handle handle) {
  return [weak = std::move(weak), &io, batch = std::move(batch), &protocol, handle](
             std::error_code ec, reply r) mutable {
    if (weak.expired()) return;
    try {
      io.post([weak, batch = std::move(batch), &protocol, handle, ec, r = std::move(r)] {
        if (auto dog = weak.lock()) ((*dog).*handle)(batch, protocol, ec, r);
      });
    } catch (...) {
      // Stopped: nobody renews or checks any more; the client reported every hold.
    }
  };
}

}  // namespace

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
    std::vector<lease::renewal> due = holds_.registry.due_renewals(now);
    if (!due.empty()) {
      try {
        send_renewals(std::move(due), false);
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
  in_batches(
      io_, std::move(checks), [](const hold_registry::hold_check& c) { return &c.key.lock; },
      [this](const lock_protocol& protocol, std::vector<hold_registry::hold_check> batch) {
        std::vector<renewal_target> targets;
        targets.reserve(batch.size());
        for (const auto& c : batch)
          targets.push_back({c.key.lock.name, c.owner_field, c.token});
        io_.eval(
            protocol.check(targets),
            back_on_io(weak_from_this(), io_, std::move(batch), protocol, &watchdog::on_checked),
            {.urgent = true});
      });
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

void watchdog::send_renewals(std::vector<lease::renewal> due, bool urgent) {
  const auto lease = holds_.registry.watchdog_lease();
  in_batches(
      io_, std::move(due),
      [this](const lease::renewal& r) {
        const hold_key* holder = holds_.registry.holder_of(r.id);
        return holder == nullptr ? nullptr : &holder->lock;
      },
      [&](const lock_protocol& protocol, std::vector<lease::renewal> batch) {
        std::vector<renewal_target> targets;
        targets.reserve(batch.size());
        for (const auto& r : batch) {
          // Under the holds' mutex (see tick()): the hold's token is part of a plain lock's value.
          const hold_key* holder = holds_.registry.holder_of(r.id);
          const std::uint64_t token = holder == nullptr ? 0 : holds_.registry.token(*holder);
          targets.push_back({r.key->name, r.key->owner_field, token});
        }
        ++counters_.renewal_scripts;
        io_.eval(
            protocol.renew(targets, lease),
            back_on_io(weak_from_this(), io_, std::move(batch), protocol, &watchdog::on_renewed),
            {.urgent = urgent});
      });
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
