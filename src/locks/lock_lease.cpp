// dlock::lock_lease: a hold owned by an object instead of a thread.
#include "dlock/lock_lease.hpp"

#include "dlock/error.hpp"
#include "locks/lock_service.hpp"

namespace dlock {

lock_lease::lock_lease(lock_lease&& other) noexcept
    : service_(std::move(other.service_)),
      name_(std::move(other.name_)),
      owner_(std::move(other.owner_)),
      key_(std::exchange(other.key_, 0)),
      token_(std::exchange(other.token_, 0)),
      stop_(std::move(other.stop_)) {
  other.service_.reset();
}

lock_lease& lock_lease::operator=(lock_lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    service_ = std::move(other.service_);
    other.service_.reset();
    name_ = std::move(other.name_);
    owner_ = std::move(other.owner_);
    key_ = std::exchange(other.key_, 0);
    token_ = std::exchange(other.token_, 0);
    stop_ = std::move(other.stop_);
  }
  return *this;
}

lock_lease::~lock_lease() {
  (void)release();
}

std::error_code lock_lease::release() noexcept {
  if (!service_) return make_error_code(errc::not_owner);
  const auto service = std::move(service_);
  service_.reset();
  const std::error_code result = service->release(name_, key_);
  name_.clear();
  owner_.clear();
  key_ = 0;
  token_ = 0;
  stop_ = {};
  return result;
}

}  // namespace dlock
