// src/topology/standalone.hpp
//
// One server: every key and every channel lives there.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "topology/topology.hpp"

namespace dlock::topology {

class standalone final : public topology {
 public:
  // `preload_scripts`: Lua sources every command connection loads when it connects.
  standalone(asio::io_context& io, const client_options& options,
             std::shared_ptr<asio::ssl::context> tls_context,
             std::vector<std::string_view> preload_scripts = {});
  ~standalone() override;

  net::connection& master_for(std::string_view) override { return *commands_; }
  net::connection& any_master() override { return *commands_; }
  pubsub::subscriber& subscriber_for(std::string_view) override { return *subscriber_; }
  std::uint32_t shard_of(std::string_view) const override { return 0; }
  void set_link_listener(link_listener listener) override { link_listener_ = std::move(listener); }
  void stop() override;

 private:
  std::shared_ptr<net::connection> commands_;
  std::shared_ptr<pubsub::subscriber> subscriber_;  // connects on its first listener
  link_listener link_listener_;                     // I/O thread only
};

}  // namespace dlock::topology
