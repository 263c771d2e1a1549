// src/topology/sentinel.hpp
//
// A master found through Redis Sentinel: the URL's hosts are sentinels, asked in order
// (SENTINEL GET-MASTER-ADDR-BY-NAME) before every connection attempt to the master, so every
// reconnect goes wherever the master is now. A master is trusted only after its own ROLE says
// "master" (a sentinel's stale answer must not leave the client writing to a replica). When a
// sentinel announces +switch-master (the client listens on each), or the master answers
// READONLY (the router then asks for refresh_soon()), the command and subscriber links reconnect
// to the new master: subscriptions are renewed (waiters re-check) and the lock engine re-checks
// every hold (kept when the new master has it, reported lost when not). An announcement made
// while the client's link to a sentinel was down is lost; once that link subscribes again, the
// client asks the sentinel where the master is and, when it names another one, asks the others:
// it moves if most of the sentinels name that one (a sentinel that missed a failover must not
// move it back).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlock/subscription.hpp"
#include "topology/topology.hpp"

namespace dlock::topology {

class sentinel final : public topology {
 public:
  // `options.sentinel.master_name` must be set; host/port and more_hosts are the sentinels.
  // `options` must outlive the topology.
  sentinel(asio::io_context& io, const client_options& options,
           std::shared_ptr<asio::ssl::context> tls_context,
           std::vector<std::string_view> preload_scripts = {});
  ~sentinel() override;

  enum mode mode() const noexcept override { return mode::single; }
  bool follows_failovers() const noexcept override { return true; }
  bool connect_may_succeed_soon() const noexcept override {
    return !nobody_knows_master_.load(std::memory_order_relaxed);
  }
  net::connection& master_for(std::string_view) override { return *master_; }
  net::connection& any_master() override { return *master_; }
  net::connection& node(const server_address&) override { return *master_; }
  void moved(const redirection&) override {}
  void refresh_soon() override;
  pubsub::subscriber& subscriber_for(std::string_view) override { return *subscriber_; }
  pubsub::subscriber& wake_subscriber() override { return *subscriber_; }
  std::string_view publish_command() const noexcept override { return "publish"; }
  std::uint32_t shard_of(std::string_view) const override { return 0; }
  void set_link_listener(link_listener listener) override { link_listener_ = std::move(listener); }
  std::uint64_t map_refreshes() const noexcept override {
    return switches_seen_.load(std::memory_order_relaxed);
  }
  void stop() override;

 private:
  struct resolution;
  // The connection's address provider: asks the sentinels, in order (I/O thread).
  void resolve(net::connection::address_callback done);
  void ask(const std::shared_ptr<resolution>& r);
  void on_switch_message(std::string_view payload);
  // Asks sentinel `index` where the master is (again after a failure, `tries_left` in all): its
  // link subscribed again, so an announcement may have been missed. When it names another
  // master than the master link's, confirm_master() (I/O thread).
  struct master_check;
  void check_master(std::size_t index, int tries_left);
  // Follows the master `check` names if most of the sentinels name it (I/O thread).
  void confirm_master(const std::shared_ptr<master_check>& check);
  // Whether the master link uses the address a +switch-master announces (I/O thread).
  bool master_is_at(std::string_view payload) const;
  void follow(const std::string& why);

  asio::io_context& io_;
  const client_options& options_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::vector<std::shared_ptr<const client_options>> sentinel_options_;
  std::vector<std::shared_ptr<net::connection>> sentinels_;
  std::shared_ptr<net::connection> master_;
  std::shared_ptr<pubsub::subscriber> subscriber_;  // follows the master
  // +switch-master, on each sentinel.
  std::vector<std::shared_ptr<pubsub::subscriber>> announcements_;
  std::vector<subscription> switch_subscriptions_;
  // The last switch followed ("<name> <old ip> <old port> <new ip> <new port>") and when: every
  // sentinel announces it (I/O thread).
  std::string last_switch_;
  std::chrono::steady_clock::time_point last_switch_at_{};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> follow_pending_{false};
  std::atomic<std::uint64_t> switches_seen_{0};
  // The last search for the master: every sentinel answered, none knows the master's name (a
  // wrong name in the URL, or sentinels not yet told to monitor it).
  std::atomic<bool> nobody_knows_master_{false};
  // The sentinel asked first; moves on when the server a sentinel named is not a master, so a
  // sentinel with a stale view cannot keep the client from the master (I/O thread).
  std::size_t first_asked_ = 0;
  bool resolved_ = false;  // a sentinel has named the master once (I/O thread)
  std::size_t last_answered_ = 0;
  link_listener link_listener_;  // I/O thread only
};

}  // namespace dlock::topology
