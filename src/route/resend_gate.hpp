// src/route/resend_gate.hpp
//
// A request's sender's say over the re-sends that the router makes on its own (after TRYAGAIN,
// CLUSTERDOWN, READONLY, a redirection, NOSCRIPT or a failed connect): once withdraw() has
// returned, none goes out any more, and one being handed to a link meanwhile was waited for, so
// that it is queued before anything the sender queues next. The lock engine withdraws a release
// when the same owner's next attempt on the lock goes out (see locks::release_queue::supersede):
// a re-send after that attempt could end the hold it took.
//
// Thread-safe. A re-send holds the gate only while it queues the request on its link.
#pragma once

#include <atomic>

namespace dlock::route {

class resend_gate {
 public:
  // Before a re-send: false once withdrawn (the request is not sent again). After true,
  // end_resend() must follow once the request is queued.
  bool begin_resend() noexcept {
    unsigned s = state_.load(std::memory_order_acquire);
    do {
      if ((s & withdrawn_bit) != 0) return false;
    } while (!state_.compare_exchange_weak(s, s + one_resend, std::memory_order_acq_rel));
    return true;
  }
  void end_resend() noexcept {
    const unsigned before = state_.fetch_sub(one_resend, std::memory_order_acq_rel);
    if (before == (withdrawn_bit | one_resend)) state_.notify_all();  // the last, and waited for
  }

  // No re-send after this returns; waits for one that is being queued. Never call it from inside
  // a re-send (between begin_resend() and end_resend() on this thread). One atomic operation
  // when none is being queued (the lock engine calls it before most attempts).
  void withdraw() noexcept {
    unsigned s = state_.fetch_or(withdrawn_bit, std::memory_order_acq_rel) | withdrawn_bit;
    while (s != withdrawn_bit) {
      state_.wait(s, std::memory_order_acquire);
      s = state_.load(std::memory_order_acquire);
    }
  }

  bool withdrawn() const noexcept {
    return (state_.load(std::memory_order_acquire) & withdrawn_bit) != 0;
  }

 private:
  static constexpr unsigned withdrawn_bit = 1;
  static constexpr unsigned one_resend = 2;  // re-sends being queued count in the other bits (a
                                             // completion run inside one may start another)
  std::atomic<unsigned> state_{0};
};

// begin_resend() for a scope: `allowed` says whether the re-send may go out.
class resend_turn {
 public:
  explicit resend_turn(resend_gate* gate) : gate_(gate), allowed_(!gate || gate->begin_resend()) {}
  resend_turn(const resend_turn&) = delete;
  resend_turn& operator=(const resend_turn&) = delete;
  ~resend_turn() {
    if (gate_ && allowed_) gate_->end_resend();
  }
  bool allowed() const noexcept { return allowed_; }

 private:
  resend_gate* gate_;
  bool allowed_;
};

}  // namespace dlock::route
