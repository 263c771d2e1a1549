#include "locks/engine/acquisition_machine.hpp"

#include <algorithm>

namespace dlock::locks {

using action = acquisition_machine::action;
using std::chrono::milliseconds;

action acquisition_machine::start(clock::time_point now,
                                  std::optional<std::int64_t> queued_ttl_ms) {
  if (state_ != state::idle) return {};
  if (queued_ttl_ms && now < deadline_) return wait(now, *queued_ttl_ms, false);
  return attempt();
}

action acquisition_machine::start_waiting(clock::time_point now, std::int64_t ttl_ms,
                                          bool attempted) {
  if (state_ != state::idle) return {};
  attempted_ = attempted;
  if (now >= deadline_ && attempted_) return finish(verdict::timed_out);
  return wait(now, ttl_ms, attempted);
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

action acquisition_machine::wait(clock::time_point now, std::int64_t ttl_ms, bool observed) {
  state_ = state::waiting;
  action a;
  a.what = action::kind::wait;
  if (!in_queue_) {
    in_queue_ = true;
    a.join_queue = true;
  }
  if (observed) a.holder_ttl_ms = ttl_ms;
  a.wake_at = deadline_;
  // The holder's lease end (+1 ms: PTTL rounds down) wakes us if no unlock message comes. Compared
  // in milliseconds before converting: Redis accepts TTLs beyond the steady clock's range.
  if (ttl_ms >= 0) {
    const auto left_ms = std::chrono::duration_cast<milliseconds>(deadline_ - now).count();
    if (ttl_ms < left_ms) a.wake_at = now + milliseconds(ttl_ms + 1);
  }
  return a;
}

action acquisition_machine::on_acquired(bool cancel_requested) {
  if (state_ != state::attempting) return {};
  return finish(cancel_requested || cancelled_ ? verdict::cancelled : verdict::acquired);
}

action acquisition_machine::on_held(clock::time_point now, std::int64_t ttl_ms,
                                    bool wake_up_pending, bool cancel_requested) {
  if (state_ != state::attempting) return {};
  // The wake-up this attempt used stood for an unlock someone else won: it is spent.
  used_wake_up_ = false;
  if (cancel_requested || cancelled_) return finish(verdict::cancelled);
  if (now >= deadline_) return finish(verdict::timed_out);
  if (wake_up_pending && in_queue_) {
    // Woken while the attempt was out: try again at once.
    action a = attempt();
    a.holder_ttl_ms = ttl_ms;
    return a;
  }
  return wait(now, ttl_ms, true);
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

action acquisition_machine::on_cancel() {
  if (state_ == state::attempting) {
    cancelled_ = true;  // the reply finishes it (and releases what it got)
    return {};
  }
  if (state_ == state::done) return {};
  return finish(verdict::cancelled);
}

}  // namespace dlock::locks
