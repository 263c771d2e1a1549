// src/quorum/fan_out.hpp
//
// One request sent to several masters at once, and the replies gathered as they come: the caller
// waits until a condition over the replies holds (a majority granted, all answered) or a deadline
// passes, whichever comes first. Late replies are still recorded but nobody waits for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "dlock/client.hpp"

namespace dlock::quorum {

class fan_out : public std::enable_shared_from_this<fan_out> {
 public:
  using clock = std::chrono::steady_clock;
  // What one master said: nullopt until it answers; an error (or a failed request) is stored as
  // an error reply, so "answered" and "said yes" stay distinct.
  using answers = std::vector<std::optional<reply>>;

  explicit fan_out(std::size_t masters) : answers_(masters) {}

  // The completion handler of master `index`'s request. Runs on the thread that reads the reply:
  // that master's I/O thread, or a caller reading the link itself (net::polled_reads).
  reply_handler handler(std::size_t index) {
    return [self = shared_from_this(), index](std::error_code ec, reply r) {
      self->complete(index, ec, std::move(r));
    };
  }

  void complete(std::size_t index, std::error_code ec, reply r) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      if (ec && !r.is_error()) r = reply::make_error(ec.message());
      answers_[index] = std::move(r);
      // Only when the waiter's condition now holds: a Redlock attempt that waits for a majority
      // of 3 is woken once, not by every reply (a thread wake-up is dear on a small machine).
      wake = waiter_ != nullptr && waiter_->satisfied(answers_);
    }
    if (wake) changed_.notify_all();
  }

  // Whether `done(answers)` is true now.
  template <typename Done>
  bool holds(Done&& done) {
    std::lock_guard lock(mutex_);
    return done(answers_);
  }

  // Waits until `done(answers)` is true or `deadline` passes; returns the answers seen by then.
  // `done` is also asked by the threads that complete requests (under the fan-out's mutex), so
  // that they wake the waiter only when it holds. One waiter at a time.
  template <typename Done>
  answers wait(clock::time_point deadline, Done&& done) {
    struct waiting final : condition {
      explicit waiting(Done& d) : done(d) {}
      bool satisfied(const answers& a) override { return done(a); }
      Done& done;
    } w{done};
    std::unique_lock lock(mutex_);
    waiter_ = &w;
    for (;;) {
      if (done(answers_)) break;
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) break;
    }
    waiter_ = nullptr;
    return answers_;
  }

 private:
  struct condition {
    virtual bool satisfied(const answers& a) = 0;

   protected:
    ~condition() = default;
  };
  condition* waiter_ = nullptr;  // the waiting caller's condition (under mutex_)

  std::mutex mutex_;
  std::condition_variable changed_;
  answers answers_;
};

}  // namespace dlock::quorum
