#include "net/transport.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "dlock/error.hpp"

namespace dlock::net {

std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& tls) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  std::error_code ec;
  if (!tls.ca_file.empty()) {
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec)
      throw error(errc::invalid_argument,
                  "cannot load TLS CA file " + tls.ca_file + ": " + ec.message());
  } else {
    ctx->set_default_verify_paths(ec);
  }
  if (!tls.cert_file.empty()) {
    ctx->use_certificate_chain_file(tls.cert_file, ec);
    if (ec)
      throw error(errc::invalid_argument,
                  "cannot load TLS certificate " + tls.cert_file + ": " + ec.message());
    ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec);
    if (ec)
      throw error(errc::invalid_argument,
                  "cannot load TLS key " + tls.key_file + ": " + ec.message());
  }
  ctx->set_verify_mode(tls.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none);
  return ctx;
}

transport::transport(asio::io_context& io, const client_options& options,
                     std::shared_ptr<asio::ssl::context> tls_context)
    : io_(io),
      options_(options),
      tls_context_(std::move(tls_context)),
      resolver_(io),
      stream_(std::in_place_index<0>, io) {
  if (!options_.unix_path.empty()) {
    stream_.emplace<unix_socket>(io_);
  } else if (options_.tls.enabled) {
    stream_.emplace<std::unique_ptr<tls_stream>>(std::make_unique<tls_stream>(io_, *tls_context_));
  }
}

transport::~transport() {
  if (detached_ >= 0) ::close(detached_);  // the Asio socket no longer owns it
}

transport::tcp::socket& transport::tcp_socket() {
  if (auto* s = std::get_if<tcp::socket>(&stream_)) return *s;
  return std::get<std::unique_ptr<tls_stream>>(stream_)->next_layer();
}

namespace {
// Asio opens sockets without SOCK_CLOEXEC: a program that starts other programs (the dlock
// command does) would hand them its Redis connections, which then outlive it.
void set_close_on_exec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) (void)::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}
}  // namespace

void transport::async_connect(connect_handler done) {
  if (auto* s = std::get_if<unix_socket>(&stream_)) {
    s->async_connect(asio::local::stream_protocol::endpoint(options_.unix_path),
                     [s, done = std::move(done)](std::error_code ec) {
                       if (ec) return done(make_error_code(errc::connect_failed), ec.message());
                       set_close_on_exec(s->native_handle());
                       done({}, {});
                     });
    return;
  }
  resolver_.async_resolve(
      options_.host, std::to_string(options_.port),
      [this, done = std::move(done)](std::error_code ec,
                                     const tcp::resolver::results_type& results) mutable {
        if (ec)
          return done(make_error_code(errc::connect_failed), "cannot resolve: " + ec.message());
        asio::async_connect(
            tcp_socket(), results,
            [this, done = std::move(done)](std::error_code ec2, const tcp::endpoint&) mutable {
              if (ec2) return done(make_error_code(errc::connect_failed), ec2.message());
              set_close_on_exec(tcp_socket().native_handle());
              tcp_socket().set_option(tcp::no_delay(true), ec2);
              auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_);
              if (!tls) return done({}, {});
              const std::string& name =
                  options_.tls.server_name.empty() ? options_.host : options_.tls.server_name;
              // SNI, and the name the certificate must carry (IP addresses match IP SANs).
              SSL_ctrl((*tls)->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME,
                       TLSEXT_NAMETYPE_host_name, const_cast<char*>(name.c_str()));
              if (options_.tls.verify_peer)
                (*tls)->set_verify_callback(asio::ssl::host_name_verification(name));
              (*tls)->async_handshake(
                  asio::ssl::stream_base::client, [done = std::move(done)](std::error_code ec3) {
                    if (ec3) return done(make_error_code(errc::tls_failed), ec3.message());
                    done({}, {});
                  });
            });
      });
}

void transport::async_read_some(asio::mutable_buffer buffer, handler done) {
  rejoin_reactor();
  std::visit(
      [&](auto& s) {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::unique_ptr<tls_stream>>) {
          s->async_read_some(buffer, std::move(done));
        } else {
          s.async_read_some(buffer, std::move(done));
        }
      },
      stream_);
}

void transport::async_write(asio::const_buffer buffer, handler done) {
  rejoin_reactor();
  std::visit(
      [&](auto& s) {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, std::unique_ptr<tls_stream>>) {
          asio::async_write(*s, buffer, std::move(done));
        } else {
          asio::async_write(s, buffer, std::move(done));
        }
      },
      stream_);
}

bool transport::plain() const noexcept {
  return !std::holds_alternative<std::unique_ptr<tls_stream>>(stream_);
}

int transport::native_handle() {
  if (detached_ >= 0) return detached_;
  if (auto* s = std::get_if<unix_socket>(&stream_)) return s->native_handle();
  return tcp_socket().native_handle();
}

void transport::async_wait_readable(std::function<void(std::error_code)> done) {
  rejoin_reactor();
  if (auto* s = std::get_if<unix_socket>(&stream_)) {
    s->async_wait(asio::socket_base::wait_read, std::move(done));
  } else {
    tcp_socket().async_wait(asio::socket_base::wait_read, std::move(done));
  }
}

void transport::leave_reactor() {
  if (detached_ >= 0 || !plain()) return;
  std::error_code ec;
  if (auto* s = std::get_if<unix_socket>(&stream_)) {
    if (!s->is_open()) return;
    detached_ = s->release(ec);
  } else {
    auto& t = tcp_socket();
    if (!t.is_open()) return;
    if (!v6_) {
      const auto local = t.local_endpoint(ec);
      if (ec) return;
      v6_ = local.address().is_v6();
    }
    detached_ = t.release(ec);
  }
  if (ec) detached_ = -1;
}

void transport::rejoin_reactor() {
  if (detached_ < 0) return;
  const int fd = std::exchange(detached_, -1);
  std::error_code ec;
  if (auto* s = std::get_if<unix_socket>(&stream_)) {
    s->assign(asio::local::stream_protocol(), fd, ec);
  } else {
    tcp_socket().assign(v6_.value_or(false) ? tcp::v6() : tcp::v4(), fd, ec);
  }
  if (ec) {
    ::close(fd);  // the operation that follows fails on the closed socket: the link is lost
  }
}

void transport::close() noexcept {
  if (detached_ >= 0) ::close(std::exchange(detached_, -1));
  std::error_code ignored;
  resolver_.cancel();
  if (auto* s = std::get_if<unix_socket>(&stream_)) {
    s->close(ignored);
  } else {
    tcp_socket().close(ignored);
  }
}

}  // namespace dlock::net
