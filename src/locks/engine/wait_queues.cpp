#include "locks/engine/wait_queues.hpp"

#include "locks/names.hpp"

#include <algorithm>
#include <utility>

namespace dlock::locks {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void wait_queues::lock_waiters::saw_holder(std::int64_t ttl_ms, bool publishes) {
  holder_seen = true;
  holder_publishes = publishes;
  // A TTL beyond a century (Redis accepts them) would overflow the clock: treat it as none.
  constexpr std::int64_t century_ms =
      std::chrono::milliseconds(std::chrono::hours(24 * 365 * 100)).count();
  holder_lease_end = ttl_ms >= 0 && ttl_ms < century_ms
                         ? std::optional(steady_clock::now() + milliseconds(ttl_ms))
                         : std::nullopt;
}

void wait_queues::join(const lock_ref& lock, const std::string& channel, waiter* w,
                       std::optional<std::int64_t> holder_ttl_ms, bool holder_publishes,
                       std::optional<steady_clock::time_point> attempt_sent) {
  std::lock_guard guard(mutex_);
  auto [channel_it, new_channel] = channels_.try_emplace(channel);
  if (!new_channel && channel_it->second.locks.empty()) {
    // Idle, still subscribed: taken back into use without a new SUBSCRIBE.
    std::erase_if(idle_, [&](const idle_channel& i) { return i.channel == channel; });
  }
  if (new_channel) {
    try {
      channel_it->second.sub = subscribe_(channel);
    } catch (...) {
      channels_.erase(channel_it);
      throw;
    }
  }
  auto [it, new_lock] = locks_.try_emplace(lock);
  if (new_lock) {
    it->second.channel = channel;
    channel_it->second.locks.push_back(lock);
  }
  channel_it->second.by_line = channel_it->second.by_line || lock.protocol->wakes_by_line();
  it->second.queue.push_back(w);
  // In the same critical section, so a newcomer never sees this waiter without the holder.
  if (holder_ttl_ms) it->second.saw_holder(*holder_ttl_ms, holder_publishes);
  // A message heard since the refused attempt left, before this waiter was here to take it: the
  // release may have come after the server refused the attempt. (A new channel needs no such
  // check: its subscription wakes every waiter, on_subscribed.) A spare attempt at worst.
  const auto& heard = channel_it->second.last_message;
  if (!new_channel && attempt_sent && heard && *heard >= *attempt_sent && !w->wake_up) {
    w->wake_up = true;
    w->wake();
  }
}

void wait_queues::saw_holder(const lock_ref& lock, std::int64_t ttl_ms, bool holder_publishes) {
  std::lock_guard guard(mutex_);
  const auto it = locks_.find(lock);
  if (it != locks_.end()) it->second.saw_holder(ttl_ms, holder_publishes);
}

std::optional<std::int64_t> wait_queues::queued_ttl(const lock_ref& lock) {
  std::lock_guard guard(mutex_);
  if (locks_.empty()) return std::nullopt;
  const auto it = locks_.find(lock);
  // Behind a holder that announces nothing a newcomer would sleep until its lease end: it makes
  // its own attempt instead, and re-checks as the waiters before it do.
  if (it == locks_.end() || it->second.queue.empty() || !it->second.holder_seen ||
      !it->second.holder_publishes) {
    return std::nullopt;
  }
  const auto& end = it->second.holder_lease_end;
  if (!end) return -1;
  const auto left = std::chrono::ceil<milliseconds>(*end - steady_clock::now());
  return std::max<std::int64_t>(left.count(), 0);
}

bool wait_queues::take_wake_up(waiter* w) {
  std::lock_guard guard(mutex_);
  return std::exchange(w->wake_up, false);
}

bool wait_queues::has_wake_up(waiter* w) {
  std::lock_guard guard(mutex_);
  return w->wake_up;
}

subscription wait_queues::leave(const lock_ref& lock, waiter* w, bool give_back,
                                bool* last_of_lock) {
  std::lock_guard guard(mutex_);
  if (last_of_lock != nullptr) *last_of_lock = false;
  const auto it = locks_.find(lock);
  if (it == locks_.end()) return {};
  auto& queue = it->second.queue;
  queue.erase(std::remove(queue.begin(), queue.end(), w), queue.end());
  // A waiter that leaves (timed out, or failed) with an unused wake-up passes it on: the unlock
  // it stands for is still there for someone else to take.
  if (std::exchange(w->wake_up, false) || give_back) give_wake_up(it->second);
  if (!queue.empty()) return {};
  if (last_of_lock != nullptr) *last_of_lock = true;
  const std::string channel = it->second.channel;
  locks_.erase(it);
  const auto ch = channels_.find(channel);
  if (ch == channels_.end()) return {};
  auto& locks = ch->second.locks;
  locks.erase(std::remove(locks.begin(), locks.end(), lock), locks.end());
  if (!locks.empty()) return {};
  // The channel's last listener: it stays subscribed for a while, since the next lock() of the
  // same name (a loop, a busy lock) would subscribe again, and a fresh subscription wakes every
  // waiter (on_subscribed). Beyond idle_channels_kept, the oldest idle one goes now.
  idle_.push_back({channel, steady_clock::now()});
  if (idle_.size() <= idle_channels_kept) return {};
  const auto oldest = channels_.find(idle_.front().channel);
  idle_.pop_front();
  if (oldest == channels_.end()) return {};
  subscription last = std::move(oldest->second.sub);
  channels_.erase(oldest);
  return last;
}

std::vector<subscription> wait_queues::take_idle(steady_clock::time_point idle_since) {
  std::lock_guard guard(mutex_);
  std::vector<subscription> out;
  while (!idle_.empty() && idle_.front().since <= idle_since) {
    const auto ch = channels_.find(idle_.front().channel);
    idle_.pop_front();
    if (ch == channels_.end()) continue;
    out.push_back(std::move(ch->second.sub));
    channels_.erase(ch);
  }
  return out;
}

std::optional<steady_clock::time_point> wait_queues::next_idle_expiry() {
  std::lock_guard guard(mutex_);
  if (idle_.empty()) return std::nullopt;
  return idle_.front().since + idle_channel_linger;
}

std::size_t wait_queues::waiting(const lock_ref& lock) {
  std::lock_guard guard(mutex_);
  const auto it = locks_.find(lock);
  return it == locks_.end() ? 0 : it->second.queue.size();
}

bool wait_queues::listens(const lock_ref& lock) {
  {
    std::lock_guard guard(mutex_);
    if (channels_.empty()) return false;
  }
  const std::string channel = lock.protocol->wake_channel(lock.name);
  std::lock_guard guard(mutex_);
  return channels_.count(channel) != 0;
}

bool wait_queues::is_first(const lock_ref& lock, const waiter* w) {
  std::lock_guard guard(mutex_);
  const auto it = locks_.find(lock);
  return it != locks_.end() && !it->second.queue.empty() && it->second.queue.front() == w;
}

void wait_queues::nudge(const lock_ref& lock, const waiter* except) {
  std::lock_guard guard(mutex_);
  const auto it = locks_.find(lock);
  if (it == locks_.end()) return;
  for (waiter* w : it->second.queue) {
    if (w == except || w->wake_up) continue;
    w->wake_up = true;
    w->wake();
    return;
  }
}

void wait_queues::give_wake_up(lock_waiters& waiters) {
  // One message, one waiter: the first that has no wake-up pending; it keeps its place in line.
  for (waiter* w : waiters.queue) {
    if (w->wake_up) continue;
    w->wake_up = true;
    w->wake();
    return;
  }
}

void wait_queues::on_message(const std::string& channel, std::string_view payload) {
  std::lock_guard guard(mutex_);
  const auto ch = channels_.find(channel);
  if (ch == channels_.end()) return;
  const bool wake_id = is_wake_id(payload);
  const bool after_wake_id = std::exchange(ch->second.after_wake_id, wake_id);
  // Kept for waiters about to join (join()); on a wait line's channel another client's wake id
  // can wake none of ours (elsewhere a number is a count of permits, say).
  if (!(ch->second.by_line && wake_id && payload != own_wake_id_)) {
    ch->second.last_message = steady_clock::now();
  }
  // The message does not say which of the channel's locks it is about: each reads it (a spare
  // attempt at worst, never a missed release).
  for (const lock_ref& lock : ch->second.locks) {
    const auto it = locks_.find(lock);
    if (it == locks_.end()) continue;
    // A wait line's wake id wakes its own client only, and the unlock message right after an id
    // woke the client the id named; every other message counts as the protocol reads it.
    const bool by_line = lock.protocol->wakes_by_line();
    std::size_t n = 0;
    if (by_line && wake_id) {
      n = payload == own_wake_id_ ? 1 : 0;
    } else if (!by_line || !(after_wake_id && payload == "0")) {
      n = lock.protocol->wake_ups(payload);
    }
    if (n == lock_protocol::wake_everyone) {
      wake_every_waiter(it->second);
      continue;
    }
    for (std::size_t i = 0; i < n; ++i)
      give_wake_up(it->second);
  }
}

void wait_queues::on_subscribed(const std::string& channel) {
  // Subscribed (again): what was published before is lost, so every waiter re-checks.
  std::lock_guard guard(mutex_);
  const auto ch = channels_.find(channel);
  if (ch == channels_.end()) return;
  ch->second.after_wake_id = false;
  for (const lock_ref& lock : ch->second.locks) {
    const auto it = locks_.find(lock);
    if (it != locks_.end()) wake_every_waiter(it->second);
  }
}

void wait_queues::wake_all() {
  std::lock_guard guard(mutex_);
  for (auto& [lock, waiters] : locks_)
    wake_every_waiter(waiters);
}

void wait_queues::wake_every_waiter(lock_waiters& waiters) {
  for (waiter* w : waiters.queue) {
    w->wake_up = true;
    w->wake();
  }
}

}  // namespace dlock::locks
