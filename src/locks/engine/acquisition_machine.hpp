// src/locks/engine/acquisition_machine.hpp
//
// The decisions of one acquisition that may wait, sans I/O: when to send an attempt, when to join
// the lock's wait queue, how long to sleep, when to give up. The driver (acquisition.cpp) feeds
// it events with the time and carries out the action each returns; both blocking lock() (after
// its first attempt on the caller's thread) and the asynchronous API run it on the I/O thread.
//
//   state      | event                        | action / next state
//   -----------+------------------------------+------------------------------------------------
//   idle       | start, no earlier waiters    | attempt -> attempting
//              | start, earlier waiters saw   | wait (join queue behind them) -> waiting
//              |   the holder (queue behind)  |
//   attempting | acquired                     | finish acquired (cancelled if a cancel came)
//              | held (ttl), deadline passed  | finish timed_out
//              | held (ttl), wake-up pending  | attempt -> attempting   (no unlock is lost)
//              | held (ttl)                   | wait until min(deadline, now + ttl) -> waiting
//              | failed                       | finish failed
//              | wake-up / timer / cancel     | none (the reply decides; a cancel is kept)
//   waiting    | wake-up or timer             | attempt -> attempting (at the deadline too:
//              |                              |   its reply decides, as try_lock would)
//              | cancel                       | finish cancelled
//   done       | anything                     | none
//
// A holder that does not publish its release (a foreign client on a plain lock, see
// attempt_outcome::holder_publishes) wakes nobody: while the attempts see such a holder, a wait
// also ends after a re-check delay, foreign_recheck_first doubling up to foreign_recheck_max
// (never past the holder's lease end or the deadline), so its release is noticed within
// foreign_recheck_max plus one round trip.
//
// A type with a wait line (lock_protocol::wait_refresh()) keeps its place by attempting at least
// every `refresh` while it waits: a wait then also ends after `refresh`, but only the client's
// first waiter attempts (on_timer(now, first)); the others sleep on for another `refresh`.
//
// A wake-up stands for an unlock message. An attempt that used one and then failed hands it back
// (finish.pass_wake_up), and the wait queue passes a waiter's unused wake-up on when it leaves, so
// the unlock it announced reaches another waiter of this client.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace dlock::locks {

class acquisition_machine {
 public:
  using clock = std::chrono::steady_clock;

  // Re-check delays while the holder does not publish its release (see the top of this file).
  static constexpr std::chrono::milliseconds foreign_recheck_first{10};
  static constexpr std::chrono::milliseconds foreign_recheck_max{100};

  enum class verdict { acquired, timed_out, cancelled, failed };

  struct action {
    enum class kind { none, attempt, wait, finish };
    kind what = kind::none;
    // wait: join the lock's wait queue first (the first wait only), recording the holder's TTL
    // this machine saw (nullopt: it queued behind others without looking).
    bool join_queue = false;
    std::optional<std::int64_t> holder_ttl_ms;
    bool holder_publishes = true;      // with holder_ttl_ms: whether that holder publishes
    clock::time_point wake_at{};       // wait: when the timer fires
    verdict result = verdict::failed;  // finish
    bool pass_wake_up = false;         // finish: the failed attempt's wake-up goes back
  };

  // `deadline`: when waiting ends (time_point::max(): never; a past one: one attempt).
  // `refresh`: see the top of this file (zero: none).
  explicit acquisition_machine(clock::time_point deadline,
                               std::chrono::milliseconds refresh = std::chrono::milliseconds(0))
      : deadline_(deadline), refresh_(refresh) {}

  // An acquisition that makes its own first attempt, unless this client already has waiters
  // for the lock that saw its holder with `queued_ttl_ms` left: then it queues behind them.
  action start(clock::time_point now, std::optional<std::int64_t> queued_ttl_ms);
  // A blocking caller's attempt found the lock held with `ttl_ms` left (`attempted`; by a holder
  // that announces its release or not, `holder_publishes`), or the caller queued behind earlier
  // waiters that saw that much left.
  action start_waiting(clock::time_point now, std::int64_t ttl_ms, bool attempted,
                       bool holder_publishes = true);

  // The driver sent the attempt an `attempt` action asked for; `used_wake_up`: it consumed one.
  void attempt_sent(bool used_wake_up);

  // The attempt's reply. `cancel_requested`: the caller's cancel token stopped meanwhile.
  action on_acquired(bool cancel_requested);
  action on_held(clock::time_point now, std::int64_t ttl_ms, bool wake_up_pending,
                 bool cancel_requested, bool holder_publishes = true);
  action on_failed();

  action on_wake_up();  // the lock's queue gave this waiter a wake-up
  action on_timer();
  // The timer fired for a waiter that is (`first`) or is not its client's first waiter.
  action on_timer(clock::time_point now, bool first);
  action on_cancel();

  bool attempting() const noexcept { return state_ == state::attempting; }
  bool done() const noexcept { return state_ == state::done; }

 private:
  enum class state { idle, attempting, waiting, done };

  action attempt();
  action finish(verdict v, bool pass_wake_up = false);
  action wait(clock::time_point now, std::int64_t ttl_ms, bool observed, bool holder_publishes);
  // `a` with its wake-up time: the lease's, or the next refresh when that comes first.
  action refreshed(clock::time_point now, action a);

  const clock::time_point deadline_;
  const std::chrono::milliseconds refresh_;
  clock::time_point lease_wake_{};  // waiting: when the wait ends without a refresh
  bool refresh_wake_ = false;       // waiting: the timer is set for a refresh
  state state_ = state::idle;
  bool attempted_ = false;     // an attempt was made (by this machine or by the blocking caller)
  bool in_queue_ = false;      // joined the lock's wait queue
  bool used_wake_up_ = false;  // the attempt in flight consumed a wake-up
  bool cancelled_ = false;     // a cancel arrived while an attempt was in flight
  // The next re-check delay while the holder does not publish (zero: it does).
  std::chrono::milliseconds recheck_{0};
};

}  // namespace dlock::locks
