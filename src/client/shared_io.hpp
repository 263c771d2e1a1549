// src/client/shared_io.hpp
//
// One I/O thread for several clients (Redlock's N masters): a client built on a shared_io runs
// its connections, timers and callbacks on this thread instead of one of its own, so that the N
// replies of one Redlock attempt wake one thread, once per batch of ready sockets. A client on a
// shared_io cannot join the thread when it is destroyed: it stops its work and hands its state
// to keep(), which drops it after the thread ended (handlers still queued for it run first).
// The shared_io must outlive its clients; stop() (or the destructor) ends the thread. In a child
// forked after it was made, the thread does not exist: the destructor then leaves it all alone,
// as a client does.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/process.hpp"

namespace dlock::detail {

class shared_io {
 public:
  shared_io()
      : work_(asio::make_work_guard(*io_)),
        thread_(std::make_unique<std::thread>([this] { io_->run(); })) {}
  ~shared_io() {
    if (made_in_ != core::fork_generation()) {
      (void)io_.release();      // its sockets are the parent's
      (void)thread_.release();  // not joined: it is the parent's thread
      return;
    }
    stop();
  }
  shared_io(const shared_io&) = delete;
  shared_io& operator=(const shared_io&) = delete;

  asio::io_context& io() noexcept { return *io_; }
  std::thread::id thread_id() const noexcept { return thread_id_; }

  // Keeps a stopped client's state until the thread has ended.
  void keep(std::shared_ptr<void> remains) {
    const std::lock_guard lock(mutex_);
    kept_.push_back(std::move(remains));
  }

  // Lets the thread finish the queued handlers and end, then drops what was kept. Not from the
  // I/O thread itself. Idempotent. Does nothing in a forked child.
  void stop() noexcept {
    if (made_in_ != core::fork_generation()) return;
    work_.reset();
    if (thread_->joinable()) thread_->join();
    std::vector<std::shared_ptr<void>> kept;
    {
      const std::lock_guard lock(mutex_);
      kept.swap(kept_);
    }
    kept.clear();
  }

 private:
  const std::uint64_t made_in_ = core::fork_generation();
  std::unique_ptr<asio::io_context> io_ = std::make_unique<asio::io_context>(1);
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> kept_;
  std::unique_ptr<std::thread> thread_;  // last: starts once the rest exists
  const std::thread::id thread_id_ = thread_->get_id();
};

}  // namespace dlock::detail
