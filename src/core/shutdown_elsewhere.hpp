// src/core/shutdown_elsewhere.hpp
//
// A client or a redlock destroyed on one of its own threads (inside its own callback) cannot wait
// for that thread: its shutdown runs on a detached thread instead. At exit, the process waits a
// while for such shutdowns, before the static objects they use (scripts, protocols) go.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>

namespace dlock::core {

class detached_shutdowns {
 public:
  // Made on first use, so destroyed before the statics that earlier clients made and use.
  static detached_shutdowns& instance() {
    static detached_shutdowns running;
    return running;
  }
  // Runs `shutdown` on a detached thread. False (and `shutdown` not run) when no thread can be
  // made: the caller then leaves its state running rather than hang.
  bool run(std::function<void()> shutdown) noexcept {
    begin();
    try {
      std::thread([this, work = std::move(shutdown)] {
        work();
        end();
      }).detach();
      return true;
    } catch (...) {
      end();
      return false;
    }
  }
  detached_shutdowns(const detached_shutdowns&) = delete;
  detached_shutdowns& operator=(const detached_shutdowns&) = delete;
  ~detached_shutdowns() {
    std::unique_lock lock(mutex_);
    done_.wait_for(lock, exit_wait, [this] { return running_ == 0; });
  }

 private:
  detached_shutdowns() = default;
  void begin() {
    const std::lock_guard lock(mutex_);
    ++running_;
  }
  void end() {
    // Notified under the lock: once it is released, the thread touches nothing here.
    const std::lock_guard lock(mutex_);
    --running_;
    done_.notify_all();
  }

  // A shutdown takes about request_timeout (the releases' drain) plus its threads' ends.
  static constexpr std::chrono::seconds exit_wait{10};
  std::mutex mutex_;
  std::condition_variable done_;
  std::size_t running_ = 0;
};

}  // namespace dlock::core
