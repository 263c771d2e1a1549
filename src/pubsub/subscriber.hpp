// src/pubsub/subscriber.hpp
//
// One subscriber connection per server multiplexes every channel the process listens to. Each
// channel is subscribed once, however many listeners it has (reference counting), unsubscribed
// with its last listener, and subscribed again after every reconnect.
//
// Listeners run on the I/O thread and must not block. A listener's on_subscribed runs when the
// server has confirmed the subscription, and again after every reconnect: messages published
// while the link was down are lost, so a listener waiting for an event re-checks state then.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlock/subscription.hpp"
#include "net/connection.hpp"

namespace dlock::pubsub {

struct listener {
  std::function<void(std::string_view payload)> on_message;
  std::function<void()> on_subscribed;
};

class subscriber : public std::enable_shared_from_this<subscriber> {
 public:
  subscriber(asio::io_context& io, const client_options& options,
             std::shared_ptr<asio::ssl::context> tls_context);
  ~subscriber();

  // Adds a listener; returns its id for remove(). Thread-safe. The first listener of a channel
  // sends SUBSCRIBE; a later one of an already confirmed channel gets on_subscribed at once, on
  // the I/O thread.
  std::uint64_t add(const std::string& channel, listener l);

  // Removes a listener; the last one of a channel sends UNSUBSCRIBE. Thread-safe; after it
  // returns, the listener is not called again unless a call is already running on the I/O thread.
  void remove(std::uint64_t id);

  void stop();

 private:
  struct channel_state {
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners;
    std::uint32_t awaiting_confirmations = 0;  // SUBSCRIBE commands sent and not yet confirmed
  };

  void ensure_started();  // with mutex_ held
  void on_link(bool up);
  void on_push(reply message);

  asio::io_context& io_;
  const client_options& options_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::shared_ptr<net::connection> link_;

  mutable std::mutex mutex_;
  bool started_ = false;
  bool stopped_ = false;
  bool link_up_ = false;  // the subscriber connection is ready (set on the I/O thread)
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::string, channel_state> channels_;
  std::unordered_map<std::uint64_t, std::string> channel_of_;
};

// A dlock::subscription that removes listener `id` from `sub` when it goes (never throws).
subscription make_subscription(subscriber& sub, std::uint64_t id);

}  // namespace dlock::pubsub
