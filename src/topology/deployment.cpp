#include "topology/deployment.hpp"

#include <algorithm>

#include "core/hash_slot.hpp"
#include "core/log_sink.hpp"
#include "dlock/error.hpp"

namespace dlock::topology {
namespace {

using std::chrono::milliseconds;

// Refreshes of the map start at least this far apart; after failed ones the spacing doubles up
// to the cap (a cluster that is down is not asked a hundred times a second).
constexpr milliseconds refresh_spacing{100};
constexpr milliseconds refresh_spacing_cap{2000};

std::string key_of(const server_address& a) {
  if (a.host.find(':') != std::string::npos) return "[" + a.host + "]:" + std::to_string(a.port);
  return a.host + ":" + std::to_string(a.port);
}

// The client's options aimed at one address.
std::shared_ptr<const client_options> options_for(const client_options& base,
                                                  const server_address& address) {
  auto o = std::make_shared<client_options>(base);
  o->host = address.host;
  o->port = address.port;
  o->more_hosts.clear();
  o->unix_path.clear();
  return o;
}

bool says_cluster_disabled(const reply& r) {
  return r.is_error() && r.str.find("cluster support disabled") != std::string::npos;
}

}  // namespace

deployment::deployment(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context,
                       std::vector<std::string_view> preload_scripts)
    : io_(io),
      options_(options),
      tls_context_(std::move(tls_context)),
      preload_scripts_(std::move(preload_scripts)),
      refresh_timer_(io),
      deferred_timer_(io) {
  for (const server_address& a : options.more_hosts)
    seed_alternatives_.push_back(options_for(options, a));
  seed_ = std::make_shared<net::connection>(io, options, tls_context_);
  seed_->set_alternatives(seed_alternatives_);
  seed_->set_preload_scripts(preload_scripts_);
  seed_->set_handshake_probe({"CLUSTER", "SHARDS"}, [this](const reply& r) {
    on_probe(r);
    return std::string();
  });
  // Requests held until the first server answers meet its connection's error instead.
  seed_->set_attempt_failed_handler([this] {
    if (mode() == mode::unknown) resume_deferred();
  });
  // Connections are stopped before this deployment goes (stop()), so `this` outlives handlers.
  seed_->set_link_handler([this](bool up) {
    if (mode() != mode::cluster) on_link(false, up);
  });

  // The seed's options, not owned: the client owns them and outlives every subscriber link.
  const std::shared_ptr<const client_options> seed_options(std::shared_ptr<void>(), &options_);
  classic_ = std::make_shared<pubsub::subscriber>(
      io, tls_context_, pubsub::subscriber::flavour::classic,
      [seed = pubsub::node_ref{"seed", seed_options, seed_alternatives_, {}}](std::string_view) {
        return seed;
      });
  sharded_ = std::make_shared<pubsub::subscriber>(
      io, tls_context_, pubsub::subscriber::flavour::sharded,
      [this](std::string_view channel) { return node_ref_for(channel); },
      [this](const std::string& error_text, const pubsub::node_ref& at) {
        const server_address asked{at.options->host, at.options->port};
        if (const auto r = parse_redirection(error_text, asked);
            r && r->type == redirection::kind::moved) {
          moved(*r);  // relocates the subscriptions
        } else {
          refresh_soon();
        }
      });
  seed_->start();
}

deployment::~deployment() {
  stop();
}

void deployment::stop() {
  if (stopped_.exchange(true)) return;
  // Requests held for the first server's answer go out now, to meet the stopped connections:
  // each completes (client_stopped) instead of never.
  asio::post(io_, [this] {
    deferred_timer_.cancel();
    resume_deferred();
  });
  seed_->stop();
  classic_->stop();
  sharded_->stop();
  std::shared_lock lock(mutex_);
  for (auto& [key, n] : nodes_)
    n.commands->stop();
  asio::post(io_, [this] { refresh_timer_.cancel(); });
}

// --- routing -----------------------------------------------------------------------------------

net::connection& deployment::master_for(std::string_view key) {
  if (mode() != mode::cluster) return *seed_;
  const std::uint16_t slot = core::hash_slot(key);
  {
    std::shared_lock lock(mutex_);
    const std::int32_t owner = map_.owner_of(slot);
    if (owner != slot_map::no_owner) return *masters_[static_cast<std::size_t>(owner)];
  }
  // Nobody serves the slot as far as we know: any node answers with MOVED or CLUSTERDOWN.
  refresh_soon();
  return any_master();
}

net::connection& deployment::any_master() {
  if (mode() != mode::cluster) return *seed_;
  std::shared_lock lock(mutex_);
  return masters_.empty() ? *seed_ : *masters_.front();
}

net::connection& deployment::node(const server_address& address) {
  std::unique_lock lock(mutex_);
  return *ensure_node(address).commands;
}

deployment::node_entry& deployment::ensure_node(const server_address& address) {
  const std::string key = key_of(address);
  const auto found = nodes_.find(key);
  if (found != nodes_.end()) return found->second;
  node_entry& n = nodes_[key];
  n.options = options_for(options_, address);
  n.commands = std::make_shared<net::connection>(io_, *n.options, tls_context_);
  n.commands->set_preload_scripts(preload_scripts_);
  n.commands->set_link_handler([this](bool up) { on_link(true, up); });
  if (stopped_) {
    n.commands->stop();
  } else {
    n.commands->start();
  }
  return n;
}

pubsub::subscriber& deployment::wake_subscriber() {
  return mode() == mode::cluster ? *sharded_ : *classic_;
}

std::string_view deployment::publish_command() const noexcept {
  return mode() == mode::cluster ? "spublish" : "publish";
}

std::uint32_t deployment::shard_of(std::string_view key) const {
  return mode() == mode::single ? 0 : core::hash_slot(key);
}

pubsub::node_ref deployment::node_ref_for(std::string_view channel) {
  const std::uint16_t slot = core::hash_slot(channel);
  std::unique_lock lock(mutex_);
  const std::int32_t owner = map_.owner_of(slot);
  if (owner == slot_map::no_owner) {
    const std::shared_ptr<const client_options> seed_options(std::shared_ptr<void>(), &options_);
    return {"seed", seed_options, seed_alternatives_, {}};
  }
  const server_address& address = map_.masters()[static_cast<std::size_t>(owner)];
  return {key_of(address), ensure_node(address).options, {}, {}};
}

slot_map deployment::current_map() const {
  std::shared_lock lock(mutex_);
  return map_;
}

bool deployment::defer_until_known(std::function<void()> resume) {
  if (mode() != mode::unknown && !holding_.load(std::memory_order_acquire)) return false;
  bool arm = false;
  {
    std::lock_guard lock(deferred_mutex_);
    // Checked again under the lock: resume_deferred() empties the list after the kind is set,
    // and requests keep queueing behind those still held, so that they leave in issue order.
    if ((mode() != mode::unknown && !holding_) || stopped_) return false;
    deferred_.push_back(std::move(resume));
    holding_.store(true, std::memory_order_release);
    if (mode() == mode::unknown) arm = !std::exchange(deferred_timer_armed_, true);
  }
  if (arm) {
    asio::post(io_, [this] {
      deferred_timer_.expires_after(options_.connect_timeout);
      deferred_timer_.async_wait([this](std::error_code ec) {
        if (!ec) resume_deferred();
      });
    });
  }
  return true;
}

void deployment::resume_deferred() {
  // Until the list is empty: requests that arrive meanwhile queue behind the ones sent here.
  for (;;) {
    std::vector<std::function<void()>> ready;
    {
      std::lock_guard lock(deferred_mutex_);
      deferred_timer_armed_ = false;
      if (deferred_.empty()) {
        holding_.store(false, std::memory_order_release);
        return;
      }
      ready.swap(deferred_);
    }
    for (auto& resume : ready)
      resume();
  }
}

// --- learning the map --------------------------------------------------------------------------

void deployment::on_probe(const reply& r) {
  if (says_cluster_disabled(r)) {
    enum mode expected = mode::unknown;
    mode_.compare_exchange_strong(expected, mode::single);
    resume_deferred();
    return;
  }
  const net::connection& seed = *seed_;
  const server_address asked{seed.current_address().host, seed.current_address().port};
  if (!r.is_error()) {
    try {
      slot_map map = slot_map::from_shards(r, asked, options_.tls.enabled);
      if (map.covered_slots() > 0) {
        apply(std::move(map));
        return;
      }
    } catch (const error&) {
      // Not a shard list after all: ask again below, the slow way.
    }
  }
  // A server before 7 (no CLUSTER SHARDS), an empty map, or a refusal: CLUSTER SLOTS decides.
  ask_for_map({seed_}, 0, true);
}

void deployment::apply(slot_map map) {
  std::size_t master_count = 0;
  {
    std::unique_lock lock(mutex_);
    if (stopped_) return;
    std::vector<std::shared_ptr<net::connection>> masters;
    for (const server_address& a : map.masters())
      masters.push_back(ensure_node(a).commands);
    map_ = std::move(map);
    masters_ = std::move(masters);
    master_count = masters_.size();
    map_loads_.fetch_add(1, std::memory_order_relaxed);
    mode_.store(mode::cluster, std::memory_order_release);
  }
  if (options_.on_log) {
    core::log_sink(options_.on_log)
        .emit(log_level::info, "cluster map refreshed",
              {{"masters", std::to_string(master_count)}});
  }
  resume_deferred();
  sharded_->relocate();
}

void deployment::moved(const redirection& r) {
  {
    std::unique_lock lock(mutex_);
    map_.assign(r.slot, r.target);
    if (map_.masters().size() > masters_.size()) {
      masters_.push_back(ensure_node(map_.masters().back()).commands);
    }
  }
  refresh_soon();
  sharded_->relocate();
}

void deployment::refresh_soon() {
  if (stopped_ || refresh_requested_.exchange(true)) return;
  asio::post(io_, [this] {
    refresh_requested_ = false;
    start_refresh();
  });
}

void deployment::start_refresh() {
  if (stopped_) return;
  if (refresh_running_) {
    refresh_again_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const milliseconds spacing =
      std::min(refresh_spacing * (1 << std::min(refresh_failures_, 5)), refresh_spacing_cap);
  if (now < last_refresh_ + spacing) {
    if (refresh_timer_armed_) return;
    refresh_timer_armed_ = true;
    refresh_timer_.expires_at(last_refresh_ + spacing);
    refresh_timer_.async_wait([this](std::error_code ec) {
      refresh_timer_armed_ = false;
      if (!ec) start_refresh();
    });
    return;
  }
  refresh_running_ = true;
  last_refresh_ = now;
  std::vector<std::shared_ptr<net::connection>> candidates;
  {
    std::shared_lock lock(mutex_);
    candidates = masters_;
  }
  candidates.push_back(seed_);
  ask_for_map(std::move(candidates), 0, false);
}

void deployment::ask_for_map(std::vector<std::shared_ptr<net::connection>> candidates,
                             std::size_t next, bool use_slots) {
  if (stopped_) return;
  if (next >= candidates.size()) {
    ++refresh_failures_;
    finish_refresh();
    return;
  }
  refresh_running_ = true;
  const std::shared_ptr<net::connection> link = candidates[next];
  const std::string_view args[] = {"CLUSTER", use_slots ? "SLOTS" : "SHARDS"};
  link->send(
      args,
      [this, link, candidates = std::move(candidates), next, use_slots](std::error_code ec,
                                                                        const reply& r) mutable {
        if (stopped_) return;
        if (says_cluster_disabled(r)) {
          enum mode expected = mode::unknown;
          mode_.compare_exchange_strong(expected, mode::single);
          resume_deferred();
          finish_refresh();
          return;
        }
        if (ec == errc::server_error && !use_slots) {
          // No CLUSTER SHARDS here (before Redis 7): the same node, the old way.
          return ask_for_map(std::move(candidates), next, true);
        }
        if (!ec) {
          const server_address asked{link->current_address().host, link->current_address().port};
          try {
            slot_map map = use_slots ? slot_map::from_slots(r, asked)
                                     : slot_map::from_shards(r, asked, options_.tls.enabled);
            if (map.covered_slots() > 0) {
              refresh_failures_ = 0;
              apply(std::move(map));
              finish_refresh();
              return;
            }
          } catch (const error&) {
            // A malformed map: ask another node.
          }
        }
        ask_for_map(std::move(candidates), next + 1, false);
      },
      options_.request_timeout);
}

void deployment::finish_refresh() {
  refresh_running_ = false;
  if (refresh_again_) {
    refresh_again_ = false;
    start_refresh();
  }
}

void deployment::on_link(bool master_link, bool up) {
  // A master gone quiet may have failed over: its slots may have a new owner.
  if (master_link && !up) refresh_soon();
  if (link_listener_) link_listener_(up);
}

}  // namespace dlock::topology
