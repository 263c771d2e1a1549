// src/net/sync_call.hpp
//
// Blocks a caller until its request completes. The completion notifies after releasing the
// mutex: notifying while holding it would wake the caller only to block it again on that mutex
// (one more futex round trip and context switch per call). The state is shared with the
// completion, so the caller may return and drop its share while the completion still notifies.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "dlock/error.hpp"
#include "net/request_queue.hpp"

namespace dlock::net {

class sync_call {
 public:
  net::completion handler() {
    return [state = state_](std::error_code ec, reply r) {
      {
        std::lock_guard lock(state->mutex);
        state->ec = ec;
        state->result = std::move(r);
        state->done = true;
      }
      state->cv.notify_one();
    };
  }

  // The reply; throws dlock::error with the failure's code and detail.
  reply wait() {
    std::unique_lock lock(state_->mutex);
    state_->cv.wait(lock, [this] { return state_->done; });
    if (state_->ec) throw error(state_->ec, state_->result.str);
    return std::move(state_->result);
  }

 private:
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    reply result;
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace dlock::net
