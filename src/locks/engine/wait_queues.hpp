// src/locks/engine/wait_queues.hpp
//
// This client's waiters, one FIFO per lock (not per channel: two locks may announce their
// releases on one channel, as `q` and `{q}` do under Redisson's naming), and one subscription per
// wake channel however many locks and waiters listen on it.
//   - A message on a channel gives each lock listening there as many wake-ups as its protocol
//     reads in it (lock_protocol::wake_ups; one for an unlock message): each to the first waiter
//     of that lock that has none pending. The others sleep on.
//   - A type with a wait line (lock_protocol::wakes_by_line()) is called on this client's own
//     call channel (lock_protocol::call_channel with `own_wake_id`): each message there is one
//     wake-up. Its waiters listen on the shared wake channel too only while the holder they saw
//     does not call (attempt_outcome::holder_calls: a Redisson holder), so that a release heard
//     by one waiting client does not reach every waiting process.
//   - A (re)subscription gives every waiter on the channel a wake-up: messages sent while
//     unsubscribed are lost, so everyone re-checks.
//   - A waiter that joins an already subscribed channel after a message arrived there since its
//     refused attempt was sent gets a wake-up at once: that message may be the release the
//     attempt just missed, sent while nobody of this client was queued to hear it.
//   - A waiter that leaves with an unused wake-up passes it to the next waiter of its lock.
//   - A newcomer queues behind the lock's waiters that saw the holder, instead of making an
//     attempt that would fail (first come, first served among this client's waiters).
// Thread-safe. `wake` callbacks run with the internal mutex held and must only post work.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/subscription.hpp"
#include "locks/engine/hold_registry.hpp"

namespace dlock::locks {

class wait_queues {
 public:
  // A waiting acquisition, as the queue sees it. Owned by the acquisition; it must leave() before
  // it is destroyed.
  struct waiter {
    std::function<void()> wake;  // posts the wake-up to the acquisition
    bool wake_up = false;        // a wake-up is pending (guarded by the queues' mutex)
  };
  // Subscribes a channel for the queues: returns the subscription, whose listener calls
  // on_message() and on_subscribed(). Called with the mutex held; must not call back in.
  using subscribe_fn = std::function<subscription(const std::string& channel)>;

  wait_queues(subscribe_fn subscribe, std::string own_wake_id)
      : subscribe_(std::move(subscribe)), own_wake_id_(std::move(own_wake_id)) {}

  // Queues `w` for `lock`, whose releases are announced on `channel`; the first waiter of a
  // channel subscribes it (and throws what subscribing throws). `holder_ttl_ms`: the holder's
  // lease left as the waiter's failed attempt saw it (-1: no TTL); nullopt if it made none.
  // `holder_publishes`: whether that holder announces its release (see attempt_outcome).
  // `attempt_sent`: when that failed attempt was sent (nullopt: none). `holder_calls`: whether
  // that holder's release calls this client on its call channel (a type with a wait line only).
  // A join never lets a channel go: only a later attempt's saw_holder() does (a blocking
  // caller's observation reaches the queues late, and may be older than one recorded meanwhile).
  void join(const lock_ref& lock, const std::string& channel, waiter* w,
            std::optional<std::int64_t> holder_ttl_ms, bool holder_publishes = true,
            std::optional<std::chrono::steady_clock::time_point> attempt_sent = std::nullopt,
            bool holder_calls = false);
  // A waiter's later attempt, sent at `attempt_sent`, saw the holder with `ttl_ms` left. A type
  // with a wait line starts or stops listening on the shared channel as `holder_calls` says (and
  // throws what subscribing throws); when it starts on a channel still subscribed, a message
  // heard there since the attempt wakes `w`, as join() does. Returns whether a channel went
  // idle (the caller drops idle ones later: take_idle()).
  bool saw_holder(const lock_ref& lock, std::int64_t ttl_ms, bool holder_publishes = true,
                  bool holder_calls = false, waiter* w = nullptr,
                  std::optional<std::chrono::steady_clock::time_point> attempt_sent = std::nullopt);
  // If this client has waiters for `lock` that saw its holder, and that holder announces its
  // release: the holder's lease left as they last saw it (-1: no TTL). Cheap when nobody waits
  // at all (the uncontended path).
  std::optional<std::int64_t> queued_ttl(const lock_ref& lock);
  // Takes `w`'s pending wake-up; returns whether it had one.
  bool take_wake_up(waiter* w);
  bool has_wake_up(waiter* w);
  // Removes `w` (passing an unused wake-up on, and a `give_back` one too). A channel whose last
  // listener left stays subscribed, idle, for a while; returns a subscription that is idle no
  // longer wanted: the caller drops it where that is safe.
  // `last_of_lock`, when given, is set to whether `w` was the lock's last waiter here.
  subscription leave(const lock_ref& lock, waiter* w, bool give_back, bool* last_of_lock = nullptr);

  // The idle subscriptions idle since `idle_since` or earlier (time_point::max(): all), and those
  // let go while a lock's waiters changed channels, for the caller to drop; and when the next
  // one will have been idle for idle_channel_linger.
  std::vector<subscription> take_idle(std::chrono::steady_clock::time_point idle_since);
  std::optional<std::chrono::steady_clock::time_point> next_idle_expiry();

  // At most this many channels stay subscribed without waiters, each for idle_channel_linger.
  static constexpr std::size_t idle_channels_kept = 16;
  static constexpr std::chrono::milliseconds idle_channel_linger{1000};

  // How many waiters this client has for `lock`.
  std::size_t waiting(const lock_ref& lock);
  // Whether this client listens for releases of `lock`: its waiters wait there now, or did
  // within idle_channel_linger. Then others likely wait too. Cheap when it listens nowhere.
  bool listens(const lock_ref& lock);
  // Whether `w` is the first of `lock`'s waiters here.
  bool is_first(const lock_ref& lock, const waiter* w);
  // Gives one wake-up to `lock`'s first waiter other than `except` that has none pending.
  void nudge(const lock_ref& lock, const waiter* except = nullptr);

  // Every waiter of every lock re-checks now (the connection to the server was lost: an attempt
  // tells at once whether the server is back or unreachable).
  void wake_all();

  void on_message(const std::string& channel, std::string_view payload);
  void on_subscribed(const std::string& channel);

 private:
  struct lock_waiters {
    std::string channel;       // the shared wake channel
    std::string call_channel;  // this client's call channel (a type with a wait line), else ""
    bool on_shared = false;    // listens on `channel`
    std::deque<waiter*> queue;
    // When the holder's lease ends, as the latest failed attempt saw it (nullopt: no TTL); only
    // meaningful once `holder_seen`.
    bool holder_seen = false;
    bool holder_publishes = true;
    std::optional<std::chrono::steady_clock::time_point> holder_lease_end;
    void saw_holder(std::int64_t ttl_ms, bool publishes);
  };
  struct channel_listeners {
    subscription sub;
    std::vector<lock_ref> locks;
    // When the last message that could wake this client's waiters arrived (see join()).
    std::optional<std::chrono::steady_clock::time_point> last_message;
    bool calls = false;  // this client's call channel: every message is one wake-up
  };

  // Adds `lock` to the listeners of `channel`, subscribing it (or taking it back from the idle
  // ones) as needed; returns whether the subscription is new. Throws what subscribing throws.
  bool listen(const lock_ref& lock, const std::string& channel, bool calls);
  // Removes `lock` from the listeners of `channel`; a channel left without any goes idle, and
  // one idle beyond idle_channels_kept is returned for the caller to drop.
  subscription stop_listening(const lock_ref& lock, const std::string& channel);
  // Whether a message was heard on `channel` (already subscribed) at or after `since`.
  bool heard_since(const std::string& channel, std::chrono::steady_clock::time_point since) const;
  static void give_wake_up(lock_waiters& waiters);
  static void wake_every_waiter(lock_waiters& waiters);

  subscribe_fn subscribe_;
  const std::string own_wake_id_;
  std::mutex mutex_;
  std::map<lock_ref, lock_waiters> locks_;
  std::map<std::string, channel_listeners> channels_;
  struct idle_channel {
    std::string channel;
    std::chrono::steady_clock::time_point since;
  };
  std::deque<idle_channel> idle_;  // subscribed channels without listeners, oldest first
  // Subscriptions no longer wanted, dropped by the caller with the idle ones (take_idle()): they
  // were let go where dropping them (I/O) was not safe.
  std::vector<subscription> parked_;
  void park(subscription s) {
    if (s) parked_.push_back(std::move(s));
  }
};

}  // namespace dlock::locks
