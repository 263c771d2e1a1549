// dlock/error.hpp
//
// The error model. Every failure dlock reports carries a `dlock::errc` value in the `dlock`
// error category, so callers can branch on `ec == dlock::errc::timeout` whether they use the
// throwing API (which throws `dlock::error`, a `std::system_error`) or the callback API (which
// passes a `std::error_code`). Ordinary contention is not an error: `try_lock` returns false.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace dlock {

enum class errc {
  // 0 is reserved for success, as for every std::error_code enum.
  invalid_argument = 1,  // a bad name, duration, URL or option; detected before any I/O
  connect_failed,        // the server could not be reached (refused, unreachable, DNS)
  connect_timeout,       // the TCP/TLS connect or handshake did not finish in connect_timeout
  tls_failed,            // the TLS handshake or certificate verification failed
  auth_failed,           // AUTH was refused (wrong password, unknown ACL user) or SELECT failed
  timeout,               // a request got no reply within its request timeout
  connection_lost,       // the connection died while the request was in flight
  protocol_error,        // the server sent bytes that are not valid RESP, or exceeded a limit
  server_error,          // the server answered with an error reply (the message is the reply)
  client_stopped,        // the client was destroyed or stopped before the request completed
  not_owner,             // an unlock by someone who does not hold the lock
  lock_lost,             // a held lock expired or was taken while its holder still held it
  cancelled,             // the caller gave up an asynchronous acquisition (its stop_token)
  would_deadlock,        // a blocking call on the client's own I/O thread (from a callback),
                         // or a thread locking a non-reentrant lock (plain_lock) it holds
  wrong_type,            // the key holds something that is not a lock of the kind asked for
  forked,                // a client made before fork(), used in the child process
  replicas_unavailable,  // an acquisition was not confirmed by lock_options::min_replicas
                         // replicas within replica_timeout (it was undone)
};

// The category of `errc`; its name() is "dlock".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// The one exception type of the throwing API. `code()` is a `dlock::errc`; `what()` reads
// "<what went wrong>: <detail>", e.g. "authentication failed: WRONGPASS invalid username-password
// pair or user is disabled."; `detail()` is the second part alone: the server's or the system's
// own text (empty when there is none). Copying never throws.
class error : public std::system_error {
 public:
  explicit error(std::error_code ec) : error(ec, std::string()) {}
  error(std::error_code ec, const std::string& detail)
      : std::system_error(ec),
        message_(detail.empty() ? ec.message() : ec.message() + ": " + detail),
        detail_offset_(detail.empty() ? ec.message().size() : ec.message().size() + 2) {}
  error(errc e, const std::string& detail) : error(make_error_code(e), detail) {}

  const char* what() const noexcept override { return message_.what(); }
  // The server's or the system's message, without the code's description.
  const char* detail() const noexcept { return message_.what() + detail_offset_; }

 private:
  std::runtime_error message_;  // a reference-counted string: copies cannot throw
  std::size_t detail_offset_;
};

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
