// src/pubsub/subscriber.hpp
//
// The process's subscriptions: each channel is subscribed once, however many listeners it has
// (reference counting), unsubscribed with its last listener, and subscribed again after every
// reconnect.
//
// Two flavours. Classic: SUBSCRIBE on one connection to one server (on a Redis Cluster any node
// hears every PUBLISH). Sharded: SSUBSCRIBE on a connection to the node that owns the channel's
// slot, one connection per node, as a locator says; when the slot map changes (relocate()), when
// a node refuses with MOVED or drops the channel itself (a server-sent sunsubscribe after the
// slot moved), the channel is subscribed again on its owner.
//
// Listeners run on the I/O thread and must not block. A listener's on_subscribed runs when the
// server has confirmed the subscription, and again after every reconnect or move: messages
// published meanwhile are lost, so a listener waiting for an event re-checks state then.
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

// A server to subscribe on: a key naming it ("host:port") and how to reach it.
struct node_ref {
  std::string key;
  std::shared_ptr<const client_options> options;
  std::vector<std::shared_ptr<const client_options>> alternatives;  // see connection
  net::connection::address_provider provider;  // set: ask it before each connect (Sentinel)
};

class subscriber : public std::enable_shared_from_this<subscriber> {
 public:
  enum class flavour { classic, sharded };
  // Where a channel is subscribed. Called with the subscriber's mutex held: it must not call
  // back into the subscriber.
  using locator = std::function<node_ref(std::string_view channel)>;
  // Told (on the I/O thread) of what a sharded subscription met: a MOVED error (its text), or
  // a channel the server dropped (text empty). The topology refreshes its map and calls
  // relocate().
  using trouble_handler = std::function<void(const std::string& error_text, const node_ref& at)>;

  subscriber(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls_context, flavour f,
             locator locate, trouble_handler on_trouble = {});
  ~subscriber();

  // Adds a listener; returns its id for remove(). Thread-safe. The first listener of a channel
  // sends SUBSCRIBE; a later one of an already confirmed channel gets on_subscribed at once, on
  // the I/O thread.
  std::uint64_t add(const std::string& channel, listener l);

  // Removes a listener; the last one of a channel sends UNSUBSCRIBE. Thread-safe; after it
  // returns, the listener is not called again unless a call is already running on the I/O thread.
  void remove(std::uint64_t id);

  // Asks the locator again for every channel; moves those whose node changed and subscribes
  // again those a server dropped. Thread-safe.
  void relocate();

  // Drops every link and connects again (the server moved: a Sentinel failover). Channels are
  // subscribed again and listeners hear on_subscribed. Thread-safe.
  void reconnect(const std::string& reason);

  void stop();

 private:
  struct channel_state {
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners;
    std::uint32_t awaiting_confirmations = 0;  // SUBSCRIBE commands sent and not yet confirmed
    std::string node;                          // the node it is (to be) subscribed on
    bool dropped = false;                      // the server said it is no longer subscribed there
  };
  struct link {
    std::shared_ptr<net::connection> connection;
    node_ref node;
    bool up = false;
  };

  // All with mutex_ held.
  link& ensure_link(const node_ref& node);
  void send_subscribe(link& l, const std::string& channel, channel_state& state);
  void send_unsubscribe(link& l, const std::string& channel);
  void retire_unused_links();

  void on_link(const std::string& node, bool up);
  void on_push(const std::string& node, reply message);

  asio::io_context& io_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  const flavour flavour_;
  locator locate_;
  trouble_handler on_trouble_;

  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::string, link> links_;
  std::unordered_map<std::string, channel_state> channels_;
  std::unordered_map<std::uint64_t, std::string> channel_of_;
};

// A dlock::subscription that removes listener `id` from `sub` when it goes (never throws).
subscription make_subscription(subscriber& sub, std::uint64_t id);

}  // namespace dlock::pubsub
