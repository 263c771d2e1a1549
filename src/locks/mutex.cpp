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

void mutex::async_acquire(const acquire_options& options, lease_handler done) {
  service_->async_acquire(name_, options, std::move(done));
}

std::future<lock_lease> mutex::async_acquire(const acquire_options& options) {
  auto promise = std::make_shared<std::promise<lock_lease>>();
  auto future = promise->get_future();
  async_acquire(options, [promise](std::error_code ec, lock_lease lease) {
    if (ec) {
      promise->set_exception(std::make_exception_ptr(error(ec)));
    } else {
      promise->set_value(std::move(lease));
    }
  });
  return future;
}

std::error_code mutex::unlock_checked() noexcept {
  return service_->release(name_);
}

bool mutex::is_locked() const {
  return service_->is_locked(name_);
}

bool mutex::is_held_by_current_thread() const noexcept {
  return service_->hold_count(name_, core::current_thread_key()) > 0;
}

std::uint64_t mutex::hold_count() const noexcept {
  return service_->hold_count(name_, core::current_thread_key());
}

std::chrono::milliseconds mutex::remaining_ttl() const {
  return service_->remaining_ttl(name_);
}

bool mutex::force_unlock() {
  return service_->force_release(name_);
}

std::uint64_t mutex::fencing_token() const noexcept {
  return service_->fencing_token(name_, core::current_thread_key());
}

lock_status mutex::status() const {
  return service_->status(name_);
}

std::string mutex::owner_id() const {
  return service_->owner_field(core::current_thread_key());
}

std::stop_token mutex::stop_token() const noexcept {
  return service_->stop_token(name_, core::current_thread_key());
}

}  // namespace dlock
