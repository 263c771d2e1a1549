// dlock/options.hpp
//
// How a client reaches and talks to a Redis server. Build it field by field, or parse a URL:
//   redis://[[user]:password@]host[:port][,host2[:port2]...][/db]
//                                 plain TCP (port 6379 by default)
//   rediss://...                  the same over TLS, verifying the servers against the system's
//                                 CA store or tls.ca_file
//   unix:///path/to/redis.sock[?db=N]    a unix socket
//   redis-sentinel://[[user]:password@]host1[:port1][,host2[:port2]...][/db][?query]#master_name
//                                 the hosts are Redis Sentinels (port 26379 by default); they
//                                 name the master, and the client follows its failovers
//   rediss-sentinel://...         the same with TLS to the data nodes and to the sentinels
// Query parameters: db=N; min_replicas=N and replica_timeout=MS (lock_options); sentinel_password=
// (the sentinels' own password, if they have one).
// User and password may be percent-encoded. IPv6 hosts go in brackets: redis://[::1]:6379.
// Several hosts name one deployment (the nodes of a Redis Cluster, say): the first that answers
// is used, and every setting (TLS, user, password) applies to each. Whether the deployment is one
// server or a Redis Cluster is asked of the server, not configured.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_options.hpp"
#include "dlock/log.hpp"

namespace dlock {

struct tls_options {
  bool enabled = false;
  bool verify_peer = true;  // check the server certificate and its name
  std::string ca_file;      // PEM CA bundle; empty: the system's default verify paths
  std::string cert_file;    // client certificate (PEM) for servers that demand one
  std::string key_file;     // its private key (PEM)
  std::string server_name;  // SNI and the name to verify; empty: the host
};

struct server_address {
  std::string host;
  std::uint16_t port = 6379;

  friend bool operator==(const server_address&, const server_address&) = default;
};

// Set when the hosts of client_options are Redis Sentinels rather than the data nodes.
struct sentinel_options {
  std::string master_name;  // not empty: ask the sentinels for this master
  std::string username;     // the sentinels' ACL user and password (empty: no AUTH to them)
  std::string password;
};

struct client_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // More addresses of the same deployment, tried in order when host:port does not answer (on a
  // Redis Cluster, any node is a seed: the others are learnt from it). Not with unix_path.
  std::vector<server_address> more_hosts;
  std::string unix_path;  // when not empty, connect to this socket instead of host:port
  tls_options tls;

  // Redis Sentinel: when sentinel.master_name is set, host/port and more_hosts are the sentinels.
  sentinel_options sentinel;

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
  //
  // The durations above are checked when a client is made (errc::invalid_argument naming the
  // setting): every one at most a day; the timeouts and reconnect_delay_min at least 1 ms,
  // health_check_interval 0 or more, reconnect_delay_max not below reconnect_delay_min.
  std::chrono::milliseconds reconnect_delay_min{50};
  std::chrono::milliseconds reconnect_delay_max{2000};

  // The settings of this client's locks: watchdog lease, loss callback (dlock/lock_options.hpp).
  lock_options locks;

  // Operational events (connection lost and recovered, topology changes, lost holds, slow
  // acquisitions) as structured records; see dlock/log.hpp. Empty (the default): silent.
  log_handler on_log;
  // An acquisition that takes at least this long to get its lock is logged as "slow acquisition"
  // (also counted in the dlock_lock_wait_seconds histogram). Zero: never logged.
  std::chrono::milliseconds slow_acquisition{1000};

  // Deprecated: the milestone-1 names of locks.watchdog_timeout and locks.on_lock_lost, kept so
  // old code compiles. When set (non-zero, non-empty) they override `locks`; client::options()
  // shows the settings in effect under both names. (Not marked
  // [[deprecated]]: compilers would then warn on every copy of client_options.)
  std::chrono::milliseconds lock_watchdog_timeout{0};
  std::function<void(const lock_loss&)> on_lock_lost;

  // Parses one of the URL forms above. Throws dlock::error(errc::invalid_argument) naming what is
  // wrong with the URL (the password is never echoed).
  static client_options from_url(std::string_view url);

  // "127.0.0.1:6379" or "unix:/path": for messages.
  std::string endpoint() const;
  // Every TCP address in order: host:port, then more_hosts.
  std::vector<server_address> addresses() const;
};

}  // namespace dlock
