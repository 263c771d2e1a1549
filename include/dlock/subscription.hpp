// dlock/subscription.hpp
//
// A listener on a pub/sub channel, returned by client::subscribe(). Move-only; destroying it (or
// calling reset()) removes the listener, and the channel is unsubscribed with its last listener.
#pragma once

#include <cstdint>
#include <memory>

namespace dlock {
namespace pubsub {
class subscriber;
}

class subscription {
 public:
  subscription() noexcept = default;
  subscription(std::shared_ptr<pubsub::subscriber> owner, std::uint64_t id) noexcept
      : owner_(std::move(owner)), id_(id) {}
  subscription(subscription&& other) noexcept { swap(other); }
  subscription& operator=(subscription&& other) noexcept {
    subscription(std::move(other)).swap(*this);
    return *this;
  }
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  ~subscription() { reset(); }

  // Removes the listener now. Never throws. A call of the listener already running on the I/O
  // thread may still finish after this returns.
  void reset() noexcept;

  explicit operator bool() const noexcept { return owner_ != nullptr; }

  void swap(subscription& other) noexcept {
    owner_.swap(other.owner_);
    std::swap(id_, other.id_);
  }

 private:
  std::shared_ptr<pubsub::subscriber> owner_;
  std::uint64_t id_ = 0;
};

}  // namespace dlock
