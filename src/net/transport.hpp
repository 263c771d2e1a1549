// src/net/transport.hpp
//
// The byte stream under a connection: TCP, TLS over TCP, or a unix socket, behind one set of
// asynchronous operations. Which one is decided by client_options; the connection above never
// asks. Everything here runs on the client's I/O thread.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "dlock/options.hpp"

namespace dlock::net {

// Makes the TLS context for `tls` (CA file or system paths, client certificate, verification).
// Throws dlock::error(errc::invalid_argument) when a file cannot be loaded.
std::shared_ptr<asio::ssl::context> make_tls_context(const tls_options& tls);

class transport {
 public:
  using handler = std::function<void(std::error_code, std::size_t)>;
  using connect_handler = std::function<void(std::error_code ec, std::string detail)>;

  transport(asio::io_context& io, const client_options& options,
            std::shared_ptr<asio::ssl::context> tls_context);
  ~transport();
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  // Resolves, connects and (for TLS) handshakes. On failure `ec` is errc::connect_failed or
  // errc::tls_failed and `detail` says why.
  void async_connect(connect_handler done);

  void async_read_some(asio::mutable_buffer buffer, handler done);
  void async_write(asio::const_buffer buffer, handler done);

  // Plain sockets (TCP, unix) only, once connected: the descriptor, which threads other than the
  // I/O thread may use with their own system calls (see connection: the caller's own I/O), and a
  // wait for it to become readable (the reading itself is the caller's).
  bool plain() const noexcept;
  int native_handle();
  void async_wait_readable(std::function<void(std::error_code)> done);
  // Plain sockets with no operation pending: takes the socket out of the I/O thread's reactor,
  // so that bytes arriving for a caller who reads them itself do not wake the I/O thread (its
  // epoll holds sockets edge-triggered for every event, whether or not it waits for one). The
  // next operation puts it back; if that fails (epoll_ctl: out of memory), the descriptor is
  // closed and the operation fails: the link is lost and made again. The descriptor stays open.
  void leave_reactor();

  // Closes the socket; pending operations complete with asio::error::operation_aborted.
  void close() noexcept;

 private:
  using tcp = asio::ip::tcp;
  using tls_stream = asio::ssl::stream<tcp::socket>;
  using unix_socket = asio::local::stream_protocol::socket;

  tcp::socket& tcp_socket();
  void rejoin_reactor();

  int detached_ = -1;       // the descriptor, while out of the reactor (leave_reactor)
  std::optional<bool> v6_;  // a TCP socket's address family, asked once (leave_reactor)

  asio::io_context& io_;
  const client_options& options_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  tcp::resolver resolver_;
  std::variant<tcp::socket, std::unique_ptr<tls_stream>, unix_socket> stream_;
};

}  // namespace dlock::net
