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

#include <condition_variable>
#include <mutex>

namespace dlock::route {

class resend_gate {
 public:
  // Before a re-send: false once withdrawn (the request is not sent again). After true,
  // end_resend() must follow once the request is queued.
  bool begin_resend() {
    const std::lock_guard lock(mutex_);
    if (withdrawn_) return false;
    ++resending_;
    return true;
  }
  void end_resend() {
    {
      const std::lock_guard lock(mutex_);
      --resending_;
    }
    queued_.notify_all();
  }

  // No re-send after this returns; waits for one that is being queued. Never call it from inside
  // a re-send (between begin_resend() and end_resend() on this thread).
  void withdraw() {
    std::unique_lock lock(mutex_);
    withdrawn_ = true;
    queued_.wait(lock, [&] { return resending_ == 0; });
  }

  bool withdrawn() {
    const std::lock_guard lock(mutex_);
    return withdrawn_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable queued_;
  bool withdrawn_ = false;
  int resending_ = 0;  // re-sends being queued (a completion run inside one may start another)
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
