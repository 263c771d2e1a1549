// dlock::plain_lock: a thin handle on the client's lock engine with the plain protocol.
#include "dlock/plain_lock.hpp"

#include "core/identity.hpp"
#include "locks/handles/handle_state.hpp"

namespace dlock {
namespace {

template <typename F>
auto no_throw(std::error_code& ec, F&& f) noexcept -> decltype(f()) {
  ec.clear();
  try {
    return f();
  } catch (const error& e) {
    ec = e.code();
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  } catch (...) {
    ec = make_error_code(errc::protocol_error);
  }
  return decltype(f())();
}

locks::clock::time_point deadline_for(plain_lock::steady_clock::duration wait) {
  return wait == plain_lock::steady_clock::duration::zero()
             ? plain_lock::steady_clock::time_point::min()
             : locks::deadline_after(wait);
}

}  // namespace

void plain_lock::lock() {
  (void)acquire_for(steady_clock::duration::max(), nullptr);
}

void plain_lock::lock(lease_time lease) {
  const auto explicit_lease = lease.value();
  (void)acquire_for(steady_clock::duration::max(), &explicit_lease);
}

void plain_lock::lock(std::error_code& ec) noexcept {
  (void)acquire_for(steady_clock::duration::max(), nullptr, ec);
}

bool plain_lock::try_lock() {
  return acquire_for(steady_clock::duration::zero(), nullptr);
}

bool plain_lock::try_lock(std::error_code& ec) noexcept {
  return acquire_for(steady_clock::duration::zero(), nullptr, ec);
}

bool plain_lock::acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease) {
  return state_->engine->acquire(state_->lock, core::current_thread_key(), lease,
                                 deadline_for(wait));
}

bool plain_lock::acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease,
                             std::error_code& ec) noexcept {
  std::error_code why;
  const bool held = no_throw(ec, [&] {
    return state_->engine->acquire(state_->lock, core::current_thread_key(), lease,
                                   deadline_for(wait), &why);
  });
  if (!ec && !held) ec = why;  // not acquired for want of replicas: said when asked
  return held;
}

void plain_lock::async_acquire(const acquire_options& options, lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  state_->engine->async_acquire(
      state_->lock, options,
      [done = std::move(done)](std::error_code ec, const std::string&, lock_lease lease) {
        done(ec, std::move(lease));
      });
}

void plain_lock::async_acquire(const acquire_options& options, detailed_lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  state_->engine->async_acquire(state_->lock, options, std::move(done));
}

std::future<lock_lease> plain_lock::async_acquire(const acquire_options& options) {
  auto promise = std::make_shared<std::promise<lock_lease>>();
  auto future = promise->get_future();
  state_->engine->async_acquire(
      state_->lock, options,
      [promise](std::error_code ec, const std::string& detail, lock_lease lease) {
        if (ec) {
          promise->set_exception(std::make_exception_ptr(error(ec, detail)));
        } else {
          promise->set_value(std::move(lease));
        }
      });
  return future;
}

std::error_code plain_lock::unlock_checked() noexcept {
  return state_->engine->release(state_->lock, core::current_thread_key());
}

bool plain_lock::is_locked() const {
  return state_->engine->exists(state_->lock.name);
}

bool plain_lock::is_held_by_current_thread() const noexcept {
  return state_->engine->hold_count(state_->lock, core::current_thread_key()) > 0;
}

std::optional<std::chrono::milliseconds> plain_lock::remaining_lease() const {
  const auto ttl = state_->engine->remaining_ttl(state_->lock.name);
  if (ttl.count() == -2) return std::nullopt;
  if (ttl.count() < 0) return std::chrono::milliseconds::max();
  return ttl;
}

bool plain_lock::force_unlock() {
  return state_->engine->force_release(state_->lock);
}

std::uint64_t plain_lock::fencing_token() const noexcept {
  return state_->engine->fencing_token(state_->lock, core::current_thread_key());
}

std::stop_token plain_lock::stop_token() const noexcept {
  return state_->engine->stop_token(state_->lock, core::current_thread_key());
}

lock_status plain_lock::status() const {
  return state_->engine->status(state_->lock);
}

std::string plain_lock::owner_id() const {
  return state_->engine->owner_field(core::current_thread_key());
}

const std::string& plain_lock::name() const noexcept {
  return state_->lock.name;
}

}  // namespace dlock
