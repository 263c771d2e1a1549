// src/net/sync_call.hpp
//
// Blocks a caller until its request completes: the caller sleeps on a one_shot_event (a futex
// word), which the completion sets with at most one system call. The state is shared with the
// completion, so the caller may return and drop its share while the completion still wakes it.
#pragma once

#include <memory>

#include "core/one_shot_event.hpp"
#include "dlock/error.hpp"
#include "net/request_queue.hpp"

namespace dlock::net {

class sync_call {
 public:
  net::completion handler() {
    return [state = state_](std::error_code ec, reply r) {
      state->ec = ec;
      state->result = std::move(r);
      state->done.set();  // publishes the two above to the waiter
    };
  }

  // The reply; throws dlock::error with the failure's code and detail.
  reply wait() {
    state_->done.wait();
    if (state_->ec) throw error(state_->ec, state_->result.str);
    return std::move(state_->result);
  }

 private:
  struct state {
    core::one_shot_event done;
    std::error_code ec;
    reply result;
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace dlock::net
