// dlock/subscription.hpp
//
// A listener on a pub/sub channel, returned by client::subscribe(). Move-only; destroying it (or
// calling reset()) removes the listener, and the channel is unsubscribed with its last listener.
#pragma once

#include <memory>

namespace dlock {

class subscription {
 public:
  subscription() noexcept = default;
  // For dlock's internals: `listener` removes the listener when its last copy goes.
  explicit subscription(std::shared_ptr<void> listener) noexcept : listener_(std::move(listener)) {}
  subscription(subscription&&) noexcept = default;
  subscription& operator=(subscription&& other) noexcept {
    subscription(std::move(other)).swap(*this);
    return *this;
  }
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  ~subscription() = default;

  // Removes the listener now. Never throws. A call of the listener already running on the I/O
  // thread may still finish after this returns.
  void reset() noexcept { listener_.reset(); }

  explicit operator bool() const noexcept { return listener_ != nullptr; }

  void swap(subscription& other) noexcept { listener_.swap(other.listener_); }

 private:
  std::shared_ptr<void> listener_;
};

}  // namespace dlock
