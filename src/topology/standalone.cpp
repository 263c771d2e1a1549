#include "topology/standalone.hpp"

namespace dlock::topology {

standalone::standalone(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context,
                       std::vector<std::string_view> preload_scripts)
    : commands_(std::make_shared<net::connection>(io, options, tls_context)),
      subscriber_(std::make_shared<pubsub::subscriber>(io, options, std::move(tls_context))) {
  commands_->set_preload_scripts(std::move(preload_scripts));
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
