// dlock::mutex: a thin handle that forwards to the client's lock_service.
#include "dlock/mutex.hpp"

#include "core/identity.hpp"
#include "locks/lock_service.hpp"

namespace dlock {

void mutex::lock() {
  (void)acquire_until(steady_clock::time_point::max(), nullptr);
}

void mutex::lock(std::chrono::milliseconds lease) {
  (void)acquire_until(steady_clock::time_point::max(), &lease);
}

bool mutex::try_lock() {
  return acquire_until(steady_clock::time_point::min(), nullptr);
}

bool mutex::acquire_until(steady_clock::time_point deadline,
                          const std::chrono::milliseconds* lease) {
  return service_->acquire(name_, lease, deadline);
}

std::error_code mutex::unlock_checked() noexcept {
  return service_->release(name_);
}

bool mutex::is_locked() const {
  return service_->is_locked(name_);
}

bool mutex::is_held_by_current_thread() const noexcept {
  return service_->hold_count(name_) > 0;
}

std::uint64_t mutex::hold_count() const noexcept {
  return service_->hold_count(name_);
}

std::chrono::milliseconds mutex::remaining_ttl() const {
  return service_->remaining_ttl(name_);
}

bool mutex::force_unlock() {
  return service_->force_release(name_);
}

std::uint64_t mutex::fencing_token() const noexcept {
  return service_->fencing_token(name_);
}

lock_status mutex::status() const {
  return service_->status(name_);
}

std::string mutex::owner_id() const {
  return service_->owner_field(core::current_thread_key());
}

std::stop_token mutex::stop_token() const noexcept {
  return service_->stop_token(name_);
}

}  // namespace dlock
