#include "topology/standalone.hpp"

namespace dlock::topology {

standalone::standalone(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context,
                       std::vector<std::string_view> preload_scripts)
    : commands_(std::make_shared<net::connection>(io, options, tls_context)),
      subscriber_(std::make_shared<pubsub::subscriber>(io, options, std::move(tls_context))) {
  commands_->set_preload_scripts(std::move(preload_scripts));
  // The connection is stopped before this topology goes (stop()), so `this` outlives the handler.
  commands_->set_link_handler([this](bool up) {
    if (link_listener_) link_listener_(0, up);
  });
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
