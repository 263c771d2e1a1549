#include "pubsub/subscriber.hpp"

#include "core/process.hpp"

namespace dlock::pubsub {

subscriber::subscriber(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context)
    : io_(io), options_(options), tls_context_(std::move(tls_context)) {}

subscriber::~subscriber() {
  stop();
}

void subscriber::ensure_started() {
  if (started_) return;
  started_ = true;
  link_ =
      std::make_shared<net::connection>(io_, options_, tls_context_, net::connection::mode::push);
  // The connection lives as long as the subscriber: weak references avoid a cycle.
  std::weak_ptr<subscriber> weak = weak_from_this();
  link_->set_link_handler([weak](bool up) {
    if (auto self = weak.lock()) self->on_link(up);
  });
  link_->set_push_handler([weak](reply message) {
    if (auto self = weak.lock()) self->on_push(std::move(message));
  });
  link_->start();
}

std::uint64_t subscriber::add(const std::string& channel, listener l) {
  auto shared = std::make_shared<listener>(std::move(l));
  std::shared_ptr<net::connection> link;
  bool send_subscribe = false;
  bool already_confirmed = false;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    if (stopped_) return id;
    ensure_started();
    link = link_;
    channel_state& state = channels_[channel];
    const bool first_listener = state.listeners.empty();
    // While the link is down, on_link(true) subscribes every channel; sending now would
    // subscribe twice.
    send_subscribe = first_listener && link_up_;
    already_confirmed = !first_listener && link_up_ && state.awaiting_confirmations == 0;
    if (send_subscribe) ++state.awaiting_confirmations;
    state.listeners.emplace(id, shared);
    channel_of_.emplace(id, channel);
  }
  if (send_subscribe) {
    const std::string_view args[] = {"SUBSCRIBE", channel};
    link->send_unmatched(args);
  } else if (already_confirmed && shared->on_subscribed) {
    asio::post(io_, [shared] { shared->on_subscribed(); });
  }
  return id;
}

void subscriber::remove(std::uint64_t id) {
  std::shared_ptr<net::connection> link;
  std::string channel;
  {
    std::lock_guard lock(mutex_);
    const auto it = channel_of_.find(id);
    if (it == channel_of_.end()) return;
    channel = std::move(it->second);
    channel_of_.erase(it);
    auto state = channels_.find(channel);
    state->second.listeners.erase(id);
    if (!state->second.listeners.empty() || stopped_) return;
    // Keep the entry while a SUBSCRIBE is unconfirmed, so its late confirmation is counted.
    if (state->second.awaiting_confirmations == 0) channels_.erase(state);
    if (!link_up_) return;  // nothing to undo on the server
    link = link_;
  }
  const std::string_view args[] = {"UNSUBSCRIBE", channel};
  link->send_unmatched(args);
}

void subscriber::stop() {
  std::shared_ptr<net::connection> link;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    link = link_;
  }
  if (link) link->stop();
}

void subscriber::on_link(bool up) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mutex_);
    link_up_ = up;
    for (auto it = channels_.begin(); it != channels_.end();) {
      it->second.awaiting_confirmations = 0;
      if (it->second.listeners.empty()) {
        it = channels_.erase(it);
        continue;
      }
      if (up) {
        it->second.awaiting_confirmations = 1;
        names.push_back(it->first);
      }
      ++it;
    }
  }
  if (names.empty()) return;
  std::vector<std::string_view> args{"SUBSCRIBE"};
  args.insert(args.end(), names.begin(), names.end());
  link_->send_unmatched(args);
}

void subscriber::on_push(reply message) {
  // RESP2 pub/sub messages: [kind, channel, payload-or-count]. Anything else (a PONG) is ignored.
  if (!message.is_array() || message.elements.size() < 3) return;
  const std::string& kind = message.elements[0].str;
  const std::string& channel = message.elements[1].str;
  std::vector<std::shared_ptr<listener>> targets;
  {
    std::lock_guard lock(mutex_);
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    channel_state& state = it->second;
    if (kind == "subscribe") {
      // Only the confirmation of the last SUBSCRIBE sent means "subscribed from now on".
      if (state.awaiting_confirmations == 0 || --state.awaiting_confirmations > 0) return;
      if (state.listeners.empty()) {
        channels_.erase(it);
        return;
      }
    } else if (kind != "message") {
      return;
    }
    for (const auto& [id, l] : state.listeners)
      targets.push_back(l);
  }
  if (kind == "subscribe") {
    for (const auto& l : targets) {
      if (l->on_subscribed) l->on_subscribed();
    }
  } else {
    const std::string& payload = message.elements[2].str;
    for (const auto& l : targets) {
      if (l->on_message) l->on_message(payload);
    }
  }
}

subscription make_subscription(subscriber& sub, std::uint64_t id) {
  // The token's deleter removes the listener; it keeps the subscriber alive until then.
  return subscription(std::shared_ptr<void>(
      static_cast<void*>(&sub),
      [owner = sub.shared_from_this(), id, made_in = core::fork_generation()](void*) noexcept {
        // A forked child must not touch the parent's
        // connection (see core/process.hpp).
        if (made_in != core::fork_generation()) return;
        try {
          owner->remove(id);
        } catch (...) {
          // remove() only allocates: out of memory here
          // must not escape a destructor.
        }
      }));
}

}  // namespace dlock::pubsub
