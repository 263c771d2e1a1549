// dlock::lock_lease: a hold owned by an object instead of a thread.
#include "dlock/lock_lease.hpp"

#include "dlock/error.hpp"
#include "locks/lock_service.hpp"

namespace dlock {

lock_lease::lock_lease(lock_lease&& other) noexcept {
  take(other);
}

lock_lease& lock_lease::operator=(lock_lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    take(other);
  }
  return *this;
}

lock_lease::~lock_lease() {
  (void)release();
}

std::error_code lock_lease::release() noexcept {
  if (!service_) return make_error_code(errc::not_owner);
  const std::error_code result = service_->release(name_, key_);
  clear();
  return result;
}

void lock_lease::take(lock_lease& other) noexcept {
  service_ = std::move(other.service_);
  name_ = std::move(other.name_);
  owner_ = std::move(other.owner_);
  key_ = other.key_;
  token_ = other.token_;
  stop_ = std::move(other.stop_);
  other.clear();
}

void lock_lease::clear() noexcept {
  service_.reset();
  name_.clear();
  owner_.clear();
  key_ = 0;
  token_ = 0;
  stop_ = {};
}

}  // namespace dlock
