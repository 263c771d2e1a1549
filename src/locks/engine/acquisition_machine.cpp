#include "locks/engine/acquisition_machine.hpp"

#include <algorithm>

namespace dlock::locks {

using action = acquisition_machine::action;
using std::chrono::milliseconds;

action acquisition_machine::start(clock::time_point now,
                                  std::optional<std::int64_t> queued_ttl_ms) {
  if (state_ != state::idle) return {};
  if (queued_ttl_ms && now < deadline_) return wait(now, *queued_ttl_ms, false, true);
  return attempt();
}

action acquisition_machine::start_waiting(clock::time_point now, std::int64_t ttl_ms,
                                          bool attempted, bool holder_publishes) {
  if (state_ != state::idle) return {};
  attempted_ = attempted;
  if (now >= deadline_ && attempted_) return finish(verdict::timed_out);
  return wait(now, ttl_ms, attempted, holder_publishes);
}

action acquisition_machine::attempt() {
  state_ = state::attempting;
  attempted_ = true;
  action a;
  a.what = action::kind::attempt;
  return a;
}

void acquisition_machine::attempt_sent(bool used_wake_up) {
  used_wake_up_ = used_wake_up;
}

action acquisition_machine::finish(verdict v, bool pass_wake_up) {
  state_ = state::done;
  action a;
  a.what = action::kind::finish;
  a.result = v;
  a.pass_wake_up = pass_wake_up;
  return a;
}

action acquisition_machine::wait(clock::time_point now, std::int64_t ttl_ms, bool observed,
                                 bool holder_publishes) {
  state_ = state::waiting;
  action a;
  a.what = action::kind::wait;
  if (!in_queue_) {
    in_queue_ = true;
    a.join_queue = true;
  }
  if (observed) {
    a.holder_ttl_ms = ttl_ms;
    a.holder_publishes = holder_publishes;
    // A holder that announces nothing is re-checked, sooner at first (a short critical section
    // is the common case), then every foreign_recheck_max.
    recheck_ = holder_publishes              ? milliseconds(0)
               : recheck_ == milliseconds(0) ? foreign_recheck_first
                                             : std::min(recheck_ * 2, foreign_recheck_max);
  }
  a.wake_at = deadline_;
  // The holder's lease end (+1 ms: PTTL rounds down) wakes us if no unlock message comes. Compared
  // in milliseconds before converting: Redis accepts TTLs beyond the steady clock's range.
  const auto left_ms = std::chrono::duration_cast<milliseconds>(deadline_ - now).count();
  std::int64_t sleep_ms = ttl_ms >= 0 ? ttl_ms + 1 : -1;
  if (recheck_ > milliseconds(0) && (sleep_ms < 0 || recheck_.count() < sleep_ms)) {
    sleep_ms = recheck_.count();
  }
  if (sleep_ms >= 0 && sleep_ms < left_ms) a.wake_at = now + milliseconds(sleep_ms);
  lease_wake_ = a.wake_at;
  refresh_wake_ = false;
  return refreshed(now, a);
}

action acquisition_machine::refreshed(clock::time_point now, action a) {
  if (refresh_ > milliseconds(0) && refresh_ < lease_wake_ - now) {
    a.wake_at = now + refresh_;
    refresh_wake_ = true;
  } else {
    a.wake_at = lease_wake_;
    refresh_wake_ = false;
  }
  return a;
}

action acquisition_machine::on_acquired(bool cancel_requested) {
  if (state_ != state::attempting) return {};
  return finish(cancel_requested || cancelled_ ? verdict::cancelled : verdict::acquired);
}

action acquisition_machine::on_held(clock::time_point now, std::int64_t ttl_ms,
                                    bool wake_up_pending, bool cancel_requested,
                                    bool holder_publishes) {
  if (state_ != state::attempting) return {};
  // The wake-up this attempt used stood for an unlock someone else won: it is spent.
  used_wake_up_ = false;
  if (cancel_requested || cancelled_) return finish(verdict::cancelled);
  if (now >= deadline_) return finish(verdict::timed_out);
  if (wake_up_pending && in_queue_) {
    // Woken while the attempt was out: try again at once.
    action a = attempt();
    a.holder_ttl_ms = ttl_ms;
    a.holder_publishes = holder_publishes;
    return a;
  }
  return wait(now, ttl_ms, true, holder_publishes);
}

action acquisition_machine::on_failed() {
  if (state_ != state::attempting) return {};
  return finish(verdict::failed, used_wake_up_);
}

action acquisition_machine::on_wake_up() {
  if (state_ != state::waiting) return {};
  return attempt();
}

action acquisition_machine::on_timer() {
  // At the holder's lease end, or at the deadline: one more attempt either way (its reply
  // decides whether the wait is over).
  if (state_ != state::waiting) return {};
  return attempt();
}

action acquisition_machine::on_timer(clock::time_point now, bool first) {
  if (state_ != state::waiting) return {};
  if (!refresh_wake_ || first) return attempt();
  // Another waiter of this client keeps its place in line: sleep on.
  action a;
  a.what = action::kind::wait;
  return refreshed(now, a);
}

action acquisition_machine::on_cancel() {
  if (state_ == state::attempting) {
    cancelled_ = true;  // the reply finishes it (and releases what it got)
    return {};
  }
  if (state_ == state::done) return {};
  return finish(verdict::cancelled);
}

}  // namespace dlock::locks
