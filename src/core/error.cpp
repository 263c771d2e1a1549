#include "dlock/error.hpp"

namespace dlock {
namespace {

class dlock_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::invalid_argument:
        return "invalid argument";
      case errc::connect_failed:
        return "cannot connect to Redis";
      case errc::connect_timeout:
        return "connecting to Redis timed out";
      case errc::tls_failed:
        return "TLS handshake failed";
      case errc::auth_failed:
        return "authentication failed";
      case errc::timeout:
        return "request timed out";
      case errc::connection_lost:
        return "connection lost while the request was in flight";
      case errc::protocol_error:
        return "protocol error";
      case errc::server_error:
        return "server error";
      case errc::client_stopped:
        return "client stopped";
      case errc::not_owner:
        return "not the lock owner";
      case errc::lock_lost:
        return "lock lost";
      case errc::cancelled:
        return "cancelled";
      case errc::would_deadlock:
        return "would deadlock";
      case errc::wrong_type:
        return "wrong type";
      case errc::forked:
        return "client used after fork()";
      case errc::replicas_unavailable:
        return "not confirmed by enough replicas";
    }
    return "unknown dlock error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const dlock_category category;
  return category;
}

}  // namespace dlock
