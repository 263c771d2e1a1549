// src/topology/standalone.hpp
//
// One server: every key and every channel lives there.
#pragma once

#include <memory>

#include "topology/topology.hpp"

namespace dlock::topology {

class standalone final : public topology {
 public:
  standalone(asio::io_context& io, const client_options& options,
             std::shared_ptr<asio::ssl::context> tls_context);
  ~standalone() override;

  net::connection& connection_for(std::string_view) override { return *commands_; }
  pubsub::subscriber& subscriber_for(std::string_view) override { return *subscriber_; }
  void stop() override;

 private:
  std::shared_ptr<net::connection> commands_;
  std::shared_ptr<pubsub::subscriber> subscriber_;  // connects on its first listener
};

}  // namespace dlock::topology
