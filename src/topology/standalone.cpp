#include "topology/standalone.hpp"

namespace dlock::topology {

standalone::standalone(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context)
    : commands_(std::make_shared<net::connection>(io, options, tls_context)),
      subscriber_(std::make_shared<pubsub::subscriber>(io, options, std::move(tls_context))) {
  commands_->start();
}

standalone::~standalone() {
  stop();
}

void standalone::stop() {
  commands_->stop();
  subscriber_->stop();
}

}  // namespace dlock::topology
