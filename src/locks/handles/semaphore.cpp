// dlock::semaphore: a thin handle on the client's lock engine with the semaphore protocol.
#include "dlock/semaphore.hpp"

#include <cctype>
#include <future>

#include "core/identity.hpp"
#include "locks/handles/handle_state.hpp"
#include "locks/names.hpp"

namespace dlock {
namespace {

locks::clock::time_point deadline_for(semaphore::steady_clock::duration wait) {
  return wait == semaphore::steady_clock::duration::zero()
             ? semaphore::steady_clock::time_point::min()
             : locks::deadline_after(wait);
}

}  // namespace

permit::permit(lock_lease lease) {
  id_ = id_of(lease);
  lease_ = std::move(lease);
}

std::string permit::id_of(const lock_lease& lease) {
  return lease ? locks::permit_id(lease.owner_id()) : std::string();
}

void semaphore::acquire() {
  (void)acquire_for(steady_clock::duration::max(), nullptr);
}

void semaphore::acquire(lease_time lease) {
  const auto explicit_lease = lease.value();
  (void)acquire_for(steady_clock::duration::max(), &explicit_lease);
}

bool semaphore::try_acquire() {
  return acquire_for(steady_clock::duration::zero(), nullptr);
}

bool semaphore::acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease) {
  return state_->engine->acquire(state_->lock, core::current_thread_key(), lease,
                                 deadline_for(wait));
}

std::error_code semaphore::release_checked() noexcept {
  return state_->engine->release(state_->lock, core::current_thread_key());
}

bool semaphore::is_held_by_current_thread() const noexcept {
  return state_->engine->hold_count(state_->lock, core::current_thread_key()) > 0;
}

std::stop_token semaphore::stop_token() const noexcept {
  return state_->engine->stop_token(state_->lock, core::current_thread_key());
}

std::string semaphore::permit_id() const {
  if (!is_held_by_current_thread()) return {};
  return locks::permit_id(state_->engine->owner_field(core::current_thread_key()));
}

permit semaphore::acquire_permit() {
  return permit_for(steady_clock::duration::max(), nullptr);
}

permit semaphore::acquire_permit(lease_time lease) {
  const auto explicit_lease = lease.value();
  return permit_for(steady_clock::duration::max(), &explicit_lease);
}

permit semaphore::try_acquire_permit() {
  return permit_for(steady_clock::duration::zero(), nullptr);
}

permit semaphore::permit_for(steady_clock::duration wait, const std::chrono::milliseconds* lease) {
  // Waiting here from the I/O thread would wait for itself.
  state_->engine->io().check_not_io_thread();
  acquire_options options;
  if (wait != steady_clock::duration::max()) {
    options.wait = std::chrono::ceil<std::chrono::milliseconds>(wait);
  }
  if (lease != nullptr) options.lease = *lease;
  return permit(async_acquire(options).get());
}

std::future<lock_lease> semaphore::async_acquire(const acquire_options& options) {
  // Each acquisition is its own owner, so one thread may hold many permits this way.
  auto promise = std::make_shared<std::promise<lock_lease>>();
  auto future = promise->get_future();
  state_->engine->async_acquire(
      state_->lock, options,
      [promise](std::error_code ec, const std::string& detail, lock_lease got) {
        if (ec) {
          promise->set_exception(std::make_exception_ptr(error(ec, detail)));
        } else {
          promise->set_value(std::move(got));
        }
      });
  return future;
}

void semaphore::async_acquire(const acquire_options& options, lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  state_->engine->async_acquire(
      state_->lock, options,
      [done = std::move(done)](std::error_code ec, const std::string&, lock_lease got) {
        done(ec, std::move(got));
      });
}

void semaphore::release(std::string_view id) {
  if (!locks::is_permit_id(id)) {
    throw error(errc::invalid_argument,
                "a permit id is 32 hex digits, not '" + locks::printable_name(id) + "'");
  }
  std::string lower(id);
  for (char& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const reply r =
      state_->engine->run_script(state_->protocol.release_by_id(state_->lock.name, lower));
  switch (state_->protocol.read_release_by_id(state_->lock.name, r)) {
    case 1:
      return;
    case 2:
      throw error(errc::lock_lost, "the permit " + lower + " of '" +
                                       locks::printable_name(state_->lock.name) +
                                       "' was held but its lease had run out; it is back now");
    default:
      throw error(errc::not_owner, "no permit " + lower + " of '" +
                                       locks::printable_name(state_->lock.name) + "' is held");
  }
}

std::int64_t semaphore::available_permits() {
  const reply r =
      state_->engine->run_script(state_->protocol.permits(state_->lock.name, "available", 0));
  return state_->protocol.read_permits(state_->lock.name, r).second;
}

bool semaphore::try_set_permits(std::int64_t n) {
  if (n < 0 || n > max_count) {
    throw error(errc::invalid_argument,
                "a semaphore's permits must be 0 to 2^53 - 1: " + std::to_string(n));
  }
  const reply r =
      state_->engine->run_script(state_->protocol.permits(state_->lock.name, "try_set", n));
  return state_->protocol.read_permits(state_->lock.name, r).first;
}

std::int64_t semaphore::add_permits(std::int64_t delta) {
  if (delta < -max_count || delta > max_count) {
    throw error(
        errc::invalid_argument,
        "a change of a semaphore's permits must be within +-(2^53 - 1): " + std::to_string(delta));
  }
  const reply r =
      state_->engine->run_script(state_->protocol.permits(state_->lock.name, "add", delta));
  return state_->protocol.read_permits(state_->lock.name, r).second;
}

bool semaphore::force_release() {
  return state_->engine->force_release(state_->lock);
}

lock_status semaphore::status() const {
  return state_->engine->status(state_->lock);
}

const std::string& semaphore::name() const noexcept {
  return state_->lock.name;
}

std::int64_t semaphore::initial_permits() const noexcept {
  return state_->protocol.initial_permits();
}

}  // namespace dlock
