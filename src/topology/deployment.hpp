// src/topology/deployment.hpp
//
// The servers behind one URL: a single server or a Redis Cluster, as the first server that
// answers says. The seed connection (the URL's host, then its other hosts) asks CLUSTER SHARDS in
// its handshake, before any request is written: "cluster support disabled" means one server,
// and everything uses the seed connection as before; a shard list means a cluster.
//
// On a cluster: one auto-pipelined command connection per master, made on first use; a key goes
// to the master of its slot as the slot map says. The map is refreshed (CLUSTER SHARDS, or
// CLUSTER SLOTS on servers before 7) in the background, one refresh at a time and at most one per
// refresh_spacing, when a reply says MOVED, when a master's link drops or a request finds the
// cluster down. Lock wake-ups use a sharded subscriber (SSUBSCRIBE on the channel's master),
// which is moved when the map changes. Connections are never destroyed before the deployment: a
// reference taken by a request stays usable, and a node that left the map is simply not asked.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "topology/slot_map.hpp"
#include "topology/topology.hpp"

namespace dlock::topology {

class deployment final : public topology {
 public:
  // `preload_scripts`: Lua sources every command connection loads when it connects. `options`
  // must outlive the deployment.
  deployment(asio::io_context& io, const client_options& options,
             std::shared_ptr<asio::ssl::context> tls_context,
             std::vector<std::string_view> preload_scripts = {});
  ~deployment() override;

  enum mode mode() const noexcept override { return mode_.load(std::memory_order_acquire); }
  net::connection& master_for(std::string_view key) override;
  net::connection& any_master() override;
  net::connection& node(const server_address& address) override;
  void moved(const redirection& r) override;
  void refresh_soon() override;
  pubsub::subscriber& subscriber_for(std::string_view) override { return *classic_; }
  pubsub::subscriber& wake_subscriber() override;
  std::string_view publish_command() const noexcept override;
  std::uint32_t shard_of(std::string_view key) const override;
  void set_link_listener(link_listener listener) override { link_listener_ = std::move(listener); }
  void stop() override;
  bool defer_until_known(std::function<void()> resume) override;
  bool holding() const noexcept override { return holding_.load(std::memory_order_acquire); }
  std::uint64_t map_refreshes() const noexcept override {
    return map_loads_.load(std::memory_order_relaxed);
  }

  // The slot map in use (empty unless a cluster). Thread-safe; for tests and `dlock status`.
  slot_map current_map() const;

 private:
  struct node_entry {
    std::shared_ptr<const client_options> options;
    std::shared_ptr<net::connection> commands;
  };

  node_entry& ensure_node(const server_address& address);  // exclusive lock held
  void on_probe(const reply& r);                           // I/O thread
  void start_refresh();                                    // I/O thread
  void ask_for_map(std::vector<std::shared_ptr<net::connection>> candidates, std::size_t next,
                   bool use_slots);
  void finish_refresh();  // I/O thread
  void apply(slot_map map);
  void on_link(bool master_link, bool up);
  pubsub::node_ref node_ref_for(std::string_view channel);  // locator of the sharded subscriber

  asio::io_context& io_;
  const client_options& options_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::vector<std::string_view> preload_scripts_;
  std::vector<std::shared_ptr<const client_options>> seed_alternatives_;
  std::shared_ptr<net::connection> seed_;
  std::shared_ptr<pubsub::subscriber> classic_;
  std::shared_ptr<pubsub::subscriber> sharded_;
  std::atomic<enum mode> mode_{mode::unknown};
  std::atomic<bool> stopped_{false};
  std::atomic<std::uint64_t> map_loads_{0};

  mutable std::shared_mutex mutex_;  // guards map_, nodes_, masters_
  slot_map map_;
  std::unordered_map<std::string, node_entry> nodes_;      // by "host:port"
  std::vector<std::shared_ptr<net::connection>> masters_;  // index as in map_.masters()

  // Refreshing, I/O thread only.
  bool refresh_running_ = false;
  bool refresh_again_ = false;
  bool refresh_timer_armed_ = false;
  int refresh_failures_ = 0;  // in a row
  std::chrono::steady_clock::time_point last_refresh_{};
  asio::steady_timer refresh_timer_;
  std::atomic<bool> refresh_requested_{false};
  link_listener link_listener_;  // I/O thread only

  void resume_deferred();                        // any thread
  std::mutex deferred_mutex_;                    // guards deferred_ and deferred_timer_armed_
  std::vector<std::function<void()>> deferred_;  // requests waiting for the kind
  bool deferred_timer_armed_ = false;
  std::atomic<bool> holding_{false};  // requests wait in deferred_ (or are being sent from it)
  asio::steady_timer deferred_timer_;
};

}  // namespace dlock::topology
