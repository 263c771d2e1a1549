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

bool wait_queues::listen(const lock_ref& lock, const std::string& channel, bool calls) {
  auto [it, fresh] = channels_.try_emplace(channel);
  if (fresh) {
    try {
      it->second.sub = subscribe_(channel);
    } catch (...) {
      channels_.erase(it);
      throw;
    }
  } else if (it->second.locks.empty()) {
    // Idle, still subscribed: taken back into use without a new SUBSCRIBE.
    std::erase_if(idle_, [&](const idle_channel& i) { return i.channel == channel; });
  }
  it->second.calls = calls;
  if (std::find(it->second.locks.begin(), it->second.locks.end(), lock) == it->second.locks.end()) {
    it->second.locks.push_back(lock);
  }
  return fresh;
}

subscription wait_queues::stop_listening(const lock_ref& lock, const std::string& channel) {
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

bool wait_queues::heard_since(const std::string& channel, steady_clock::time_point since) const {
  const auto ch = channels_.find(channel);
  return ch != channels_.end() && ch->second.last_message && *ch->second.last_message >= since;
}

void wait_queues::join(const lock_ref& lock, const std::string& channel, waiter* w,
                       std::optional<std::int64_t> holder_ttl_ms, bool holder_publishes,
                       std::optional<steady_clock::time_point> attempt_sent, bool holder_calls) {
  std::lock_guard guard(mutex_);
  auto [it, new_lock] = locks_.try_emplace(lock);
  lock_waiters& waiters = it->second;
  if (new_lock) {
    waiters.channel = channel;
    if (lock.protocol->wakes_by_line()) {
      waiters.call_channel = lock.protocol->call_channel(lock.name, own_wake_id_);
    }
  }
  // The shared channel too unless the holder seen calls this client on its own channel: a type
  // without a line, a holder that does not call, or none seen yet (this waiter queued behind
  // none without looking). Never dropped here: a blocking caller's observation reaches the I/O
  // thread late, and may be older than what another waiter's attempt saw since.
  const bool shared = waiters.call_channel.empty() || (holder_ttl_ms ? !holder_calls : new_lock) ||
                      waiters.on_shared;
  bool fresh_call = false;
  bool fresh_shared = false;
  try {
    if (!waiters.call_channel.empty()) fresh_call = listen(lock, waiters.call_channel, true);
    if (shared && !waiters.on_shared) {
      fresh_shared = listen(lock, waiters.channel, false);
      waiters.on_shared = true;
    }
  } catch (...) {
    if (new_lock) {
      if (!waiters.call_channel.empty()) park(stop_listening(lock, waiters.call_channel));
      locks_.erase(it);
    }
    throw;
  }
  waiters.queue.push_back(w);
  // In the same critical section, so a newcomer never sees this waiter without the holder.
  if (holder_ttl_ms) waiters.saw_holder(*holder_ttl_ms, holder_publishes);
  // A message heard since the refused attempt left, before this waiter was here to take it: the
  // release may have come after the server refused the attempt. (A new subscription needs no
  // such check: it wakes every waiter, on_subscribed.) A spare attempt at worst.
  const bool heard =
      attempt_sent &&
      ((!waiters.call_channel.empty() && !fresh_call &&
        heard_since(waiters.call_channel, *attempt_sent)) ||
       (waiters.on_shared && !fresh_shared && heard_since(waiters.channel, *attempt_sent)));
  if (heard && !w->wake_up) {
    w->wake_up = true;
    w->wake();
  }
}

bool wait_queues::saw_holder(const lock_ref& lock, std::int64_t ttl_ms, bool holder_publishes,
                             bool holder_calls, waiter* w,
                             std::optional<steady_clock::time_point> attempt_sent) {
  std::lock_guard guard(mutex_);
  const auto it = locks_.find(lock);
  if (it == locks_.end()) return false;
  lock_waiters& waiters = it->second;
  waiters.saw_holder(ttl_ms, holder_publishes);
  if (waiters.call_channel.empty() || waiters.on_shared == !holder_calls) return false;
  if (holder_calls) {
    // Called by the holder's release: the shared channel's messages would wake this client for
    // releases that call others. It goes idle (and is dropped with the idle ones).
    waiters.on_shared = false;
    park(stop_listening(lock, waiters.channel));
    return true;
  }
  // A holder that only announces on the shared channel (a Redisson client). A new subscription's
  // confirmation wakes every waiter, as a join's does; a channel still subscribed (idle, or kept
  // by another lock) may have brought that holder's release before this lock listened there.
  const bool fresh = listen(lock, waiters.channel, false);
  waiters.on_shared = true;
  if (!fresh && w != nullptr && attempt_sent && heard_since(waiters.channel, *attempt_sent) &&
      !w->wake_up) {
    w->wake_up = true;
    w->wake();
  }
  return false;
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
  const lock_waiters waiters = std::move(it->second);
  locks_.erase(it);
  subscription last;
  if (waiters.on_shared) last = stop_listening(lock, waiters.channel);
  if (!waiters.call_channel.empty()) {
    subscription other = stop_listening(lock, waiters.call_channel);
    // Either may have pushed the oldest idle channel out; one goes back now, the other later.
    if (last) {
      park(std::move(other));
    } else {
      last = std::move(other);
    }
  }
  return last;
}

std::vector<subscription> wait_queues::take_idle(steady_clock::time_point idle_since) {
  std::lock_guard guard(mutex_);
  std::vector<subscription> out = std::exchange(parked_, {});
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
  const std::string call = lock.protocol->wakes_by_line()
                               ? lock.protocol->call_channel(lock.name, own_wake_id_)
                               : std::string();
  std::lock_guard guard(mutex_);
  return channels_.count(channel) != 0 || (!call.empty() && channels_.count(call) != 0);
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
  ch->second.last_message = steady_clock::now();  // kept for waiters about to join (join())
  // The message does not say which of the channel's locks it is about: each reads it (a spare
  // attempt at worst, never a missed release). On a call channel every message is one call.
  for (const lock_ref& lock : ch->second.locks) {
    const auto it = locks_.find(lock);
    if (it == locks_.end()) continue;
    const std::size_t n = ch->second.calls ? 1 : lock.protocol->wake_ups(payload);
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
