// dlock/options.hpp
//
// How a client reaches and talks to a Redis server. Build it field by field, or parse a URL:
//   redis://[[user]:password@]host[:port][/db]     plain TCP (port 6379 by default)
//   rediss://[[user]:password@]host[:port][/db]    TLS, verifying the server against the system's
//                                                  CA store or tls.ca_file
//   unix:///path/to/redis.sock[?db=N]              a unix socket
// User and password may be percent-encoded. IPv6 hosts go in brackets: redis://[::1]:6379.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dlock {

struct tls_options {
  bool enabled = false;
  bool verify_peer = true;  // check the server certificate and its name
  std::string ca_file;      // PEM CA bundle; empty: the system's default verify paths
  std::string cert_file;    // client certificate (PEM) for servers that demand one
  std::string key_file;     // its private key (PEM)
  std::string server_name;  // SNI and the name to verify; empty: the host
};

// Why a hold was lost (see client_options::on_lock_lost).
enum class lock_loss_reason {
  not_held,        // renewal (or a re-lock) found the lock gone or held by someone else
  unconfirmed,     // no renewal could be confirmed before the lease would end (Redis unreachable)
  lease_expired,   // an explicit lease ran out before the holder released it
  client_stopped,  // the client was destroyed while the hold lasted: nobody renews it any more
  thread_exited,   // the holding thread ended without unlocking: nobody renews it any more
};

struct lock_loss {
  std::string name;   // the lock
  std::string owner;  // the hold's field: mutex::owner_id() or lock_lease::owner_id()
  lock_loss_reason reason = lock_loss_reason::not_held;
};

struct client_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string unix_path;  // when not empty, connect to this socket instead of host:port
  tls_options tls;

  std::string username;  // ACL user; empty: AUTH with the password alone (the "default" user)
  std::string password;  // empty: no AUTH
  int database = 0;      // SELECT after connecting when not 0
  std::string client_name = "dlock";  // CLIENT SETNAME after connecting when not empty

  // A TCP connect, TLS handshake and AUTH/SELECT/SETNAME together must finish within this.
  std::chrono::milliseconds connect_timeout{2000};
  // A request that gets no reply within this fails with errc::timeout. The connection is kept:
  // the late reply is read and dropped, so later replies stay matched to their requests.
  std::chrono::milliseconds request_timeout{5000};
  // When nothing arrives for this long a PING is sent; when nothing arrives for another such
  // period the connection is taken as dead and re-established. Zero disables the check.
  std::chrono::milliseconds health_check_interval{5000};
  // Reconnect delays grow from the first to the cap, doubling, with jitter.
  std::chrono::milliseconds reconnect_delay_min{50};
  std::chrono::milliseconds reconnect_delay_max{2000};

  // The lease of locks taken without an explicit one; renewed every third of it while held.
  std::chrono::milliseconds lock_watchdog_timeout{30000};
  // Told of every lost hold, after the hold's stop_token was stopped: for logs and alerts. Runs on
  // the thread that noticed the loss (usually the I/O thread) and must not block or throw
  // (exceptions are dropped).
  std::function<void(const lock_loss&)> on_lock_lost;

  // Parses one of the URL forms above. Throws dlock::error(errc::invalid_argument) naming what is
  // wrong with the URL (the password is never echoed).
  static client_options from_url(std::string_view url);

  // "127.0.0.1:6379" or "unix:/path": for messages.
  std::string endpoint() const;
};

}  // namespace dlock
