// src/core/sync_call.hpp
//
// Blocks a caller until its request completes. The completion notifies while holding the mutex,
// so the waiter cannot return (and destroy this object) before the completion is done with it.
#pragma once

#include <condition_variable>
#include <mutex>

#include "dlock/error.hpp"
#include "net/request_queue.hpp"

namespace dlock::core {

class sync_call {
 public:
  net::completion handler() {
    return [this](std::error_code ec, reply r) {
      std::lock_guard lock(mutex_);
      ec_ = ec;
      result_ = std::move(r);
      done_ = true;
      cv_.notify_one();
    };
  }

  // The reply; throws dlock::error with the failure's code and detail.
  reply wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
    if (ec_) throw error(ec_, result_.str);
    return std::move(result_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::error_code ec_;
  reply result_;
};

}  // namespace dlock::core
