#include "pubsub/subscriber.hpp"

#include <charconv>
#include <optional>

#include "core/hash_slot.hpp"
#include "core/process.hpp"

namespace dlock::pubsub {
namespace {

struct words {
  std::string_view subscribe, unsubscribe, subscribed, unsubscribed, message;
};

constexpr words classic_words{"SUBSCRIBE", "UNSUBSCRIBE", "subscribe", "unsubscribe", "message"};
constexpr words sharded_words{"SSUBSCRIBE", "SUNSUBSCRIBE", "ssubscribe", "sunsubscribe",
                              "smessage"};

// The slot of a "MOVED <slot> ..." or "ASK <slot> ..." error.
std::optional<std::uint16_t> slot_in_error(std::string_view text) {
  for (const std::string_view prefix : {"MOVED ", "ASK "}) {
    if (!text.starts_with(prefix)) continue;
    text.remove_prefix(prefix.size());
    unsigned slot = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), slot);
    if (ec == std::errc{} && slot < core::cluster_slots) return static_cast<std::uint16_t>(slot);
  }
  return std::nullopt;
}

}  // namespace

subscriber::subscriber(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls_context,
                       flavour f, locator locate, trouble_handler on_trouble)
    : io_(io),
      tls_context_(std::move(tls_context)),
      flavour_(f),
      locate_(std::move(locate)),
      on_trouble_(std::move(on_trouble)) {}

subscriber::~subscriber() {
  stop();
}

subscriber::link& subscriber::ensure_link(const node_ref& node) {
  const auto found = links_.find(node.key);
  if (found != links_.end()) return found->second;
  link& l = links_[node.key];
  l.node = node;
  l.connection = std::make_shared<net::connection>(io_, *node.options, tls_context_,
                                                   net::connection::mode::push);
  l.connection->set_alternatives(node.alternatives);
  if (node.provider) l.connection->set_address_provider(node.provider);
  // The connection lives as long as the subscriber: weak references avoid a cycle.
  std::weak_ptr<subscriber> weak = weak_from_this();
  l.connection->set_link_handler([weak, key = node.key](bool up) {
    if (auto self = weak.lock()) self->on_link(key, up);
  });
  l.connection->set_push_handler([weak, key = node.key](reply message) {
    if (auto self = weak.lock()) self->on_push(key, std::move(message));
  });
  l.connection->start();
  return l;
}

void subscriber::send_subscribe(link& l, const std::string& channel, channel_state& state) {
  const words& w = flavour_ == flavour::classic ? classic_words : sharded_words;
  const std::string_view args[] = {w.subscribe, channel};
  l.connection->send_unmatched(args);
  ++state.awaiting_confirmations;
}

void subscriber::send_unsubscribe(link& l, const std::string& channel) {
  const words& w = flavour_ == flavour::classic ? classic_words : sharded_words;
  const std::string_view args[] = {w.unsubscribe, channel};
  l.connection->send_unmatched(args);
}

std::uint64_t subscriber::add(const std::string& channel, listener l) {
  auto shared = std::make_shared<listener>(std::move(l));
  bool already_confirmed = false;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_id_++;
    if (stopped_) return id;
    channel_state& state = channels_[channel];
    const bool first_listener = state.listeners.empty();
    if (first_listener) {
      node_ref node = locate_(channel);
      state.node = node.key;
      state.dropped = false;
      link& to = ensure_link(node);
      // While the link is down, on_link(true) subscribes every channel; sending now would
      // subscribe twice.
      if (to.up) send_subscribe(to, channel, state);
    } else {
      const auto to = links_.find(state.node);
      already_confirmed = to != links_.end() && to->second.up &&
                          state.awaiting_confirmations == 0 && !state.dropped;
    }
    state.listeners.emplace(id, shared);
    channel_of_.emplace(id, channel);
  }
  if (already_confirmed && shared->on_subscribed) {
    asio::post(io_, [shared] { shared->on_subscribed(); });
  }
  return id;
}

void subscriber::remove(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  const auto it = channel_of_.find(id);
  if (it == channel_of_.end()) return;
  const std::string channel = std::move(it->second);
  channel_of_.erase(it);
  auto state = channels_.find(channel);
  state->second.listeners.erase(id);
  if (!state->second.listeners.empty() || stopped_) return;
  const std::string node = state->second.node;
  // Keep the entry while a SUBSCRIBE is unconfirmed, so its late confirmation is counted.
  if (state->second.awaiting_confirmations == 0) channels_.erase(state);
  const auto to = links_.find(node);
  if (to != links_.end() && to->second.up) send_unsubscribe(to->second, channel);
}

void subscriber::relocate() {
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  for (auto& [channel, state] : channels_) {
    if (state.listeners.empty()) continue;
    node_ref node = locate_(channel);
    if (node.key == state.node && !state.dropped) continue;
    if (node.key != state.node && !state.dropped) {
      const auto old = links_.find(state.node);
      if (old != links_.end() && old->second.up) send_unsubscribe(old->second, channel);
    }
    state.node = node.key;
    state.dropped = false;
    state.awaiting_confirmations = 0;
    link& to = ensure_link(node);
    if (to.up) send_subscribe(to, channel, state);
  }
  retire_unused_links();
}

void subscriber::reconnect(const std::string& reason) {
  std::lock_guard lock(mutex_);
  for (auto& [key, l] : links_)
    l.connection->reconnect(reason);
}

void subscriber::retire_unused_links() {
  for (auto it = links_.begin(); it != links_.end();) {
    bool used = false;
    for (const auto& [channel, state] : channels_) {
      if (state.node == it->first) {
        used = true;
        break;
      }
    }
    if (used || flavour_ == flavour::classic) {
      ++it;
      continue;
    }
    it->second.connection->stop();
    it = links_.erase(it);
  }
}

void subscriber::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  for (auto& [key, l] : links_)
    l.connection->stop();
}

void subscriber::on_link(const std::string& node, bool up) {
  std::lock_guard lock(mutex_);
  const auto l = links_.find(node);
  if (l == links_.end()) return;  // retired
  l->second.up = up;
  std::vector<std::string_view> names;
  for (auto it = channels_.begin(); it != channels_.end();) {
    channel_state& state = it->second;
    if (state.node != node) {
      ++it;
      continue;
    }
    state.awaiting_confirmations = 0;
    if (state.listeners.empty()) {
      it = channels_.erase(it);
      continue;
    }
    if (up) {
      state.dropped = false;
      if (flavour_ == flavour::sharded) {
        // One SSUBSCRIBE per channel: channels of different slots may not share one.
        send_subscribe(l->second, it->first, state);
      } else {
        state.awaiting_confirmations = 1;
        names.push_back(it->first);
      }
    }
    ++it;
  }
  if (names.empty()) return;
  std::vector<std::string_view> args{classic_words.subscribe};
  args.insert(args.end(), names.begin(), names.end());
  l->second.connection->send_unmatched(args);
}

void subscriber::on_push(const std::string& node, reply message) {
  if (message.is_error()) {
    // A sharded subscription refused (MOVED after a slot moved, CLUSTERDOWN...): those
    // channels are not subscribed here; the topology finds their owner and relocates them.
    node_ref at;
    {
      std::lock_guard lock(mutex_);
      const auto l = links_.find(node);
      if (l == links_.end() || stopped_) return;
      at = l->second.node;
      // "MOVED <slot> <host:port>" names the slot; other errors may concern any channel here.
      const auto slot = slot_in_error(message.str);
      for (auto& [channel, state] : channels_) {
        if (state.node == node && (!slot || core::hash_slot(channel) == *slot)) {
          state.dropped = true;
        }
      }
    }
    if (on_trouble_) on_trouble_(message.str, at);
    return;
  }
  // RESP2 pub/sub messages: [kind, channel, payload-or-count]. Anything else (a PONG) is ignored.
  if (!message.is_array() || message.elements.size() < 3) return;
  const words& w = flavour_ == flavour::classic ? classic_words : sharded_words;
  const std::string& kind = message.elements[0].str;
  const std::string& channel = message.elements[1].str;
  std::vector<std::shared_ptr<listener>> targets;
  node_ref dropped_at;
  {
    std::lock_guard lock(mutex_);
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    channel_state& state = it->second;
    if (kind == w.subscribed) {
      if (state.node != node) return;  // moved since: that confirmation is stale
      // Only the confirmation of the last SUBSCRIBE sent means "subscribed from now on".
      if (state.awaiting_confirmations == 0 || --state.awaiting_confirmations > 0) return;
      if (state.listeners.empty()) {
        channels_.erase(it);
        return;
      }
    } else if (kind == w.unsubscribed) {
      // We never unsubscribe a channel that has listeners on its node: the server dropped it
      // (its slot moved away).
      if (flavour_ == flavour::classic || state.node != node || state.listeners.empty() ||
          state.awaiting_confirmations > 0) {
        return;
      }
      state.dropped = true;
      const auto l = links_.find(node);
      if (l != links_.end()) dropped_at = l->second.node;
    } else if (kind != w.message) {
      return;
    }
    if (kind != w.unsubscribed) {
      for (const auto& [id, l] : state.listeners)
        targets.push_back(l);
    }
  }
  if (kind == w.unsubscribed) {
    if (on_trouble_) on_trouble_({}, dropped_at);
  } else if (kind == w.subscribed) {
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
