// dlock::shared_mutex: a thin handle on the client's lock engine with the read-write protocols,
// one lock_ref per side.
#include "dlock/shared_mutex.hpp"

#include "core/identity.hpp"
#include "locks/handles/handle_state.hpp"
#include "locks/names.hpp"

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

void start(locks::lock_engine& engine, const locks::lock_ref& lock, const acquire_options& options,
           lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  engine.async_acquire(lock, options,
                       [done = std::move(done)](std::error_code ec, const std::string&,
                                                lock_lease lease) { done(ec, std::move(lease)); });
}

std::future<lock_lease> start(locks::lock_engine& engine, const locks::lock_ref& lock,
                              const acquire_options& options) {
  auto promise = std::make_shared<std::promise<lock_lease>>();
  auto future = promise->get_future();
  engine.async_acquire(lock, options,
                       [promise](std::error_code ec, const std::string& detail, lock_lease lease) {
                         if (ec) {
                           promise->set_exception(std::make_exception_ptr(error(ec, detail)));
                         } else {
                           promise->set_value(std::move(lease));
                         }
                       });
  return future;
}

}  // namespace

void shared_mutex::async_acquire(const acquire_options& options, lease_handler done) {
  start(*state_->engine, state_->write, options, std::move(done));
}

std::future<lock_lease> shared_mutex::async_acquire(const acquire_options& options) {
  return start(*state_->engine, state_->write, options);
}

void shared_mutex::async_acquire_shared(const acquire_options& options, lease_handler done) {
  start(*state_->engine, state_->read, options, std::move(done));
}

std::future<lock_lease> shared_mutex::async_acquire_shared(const acquire_options& options) {
  return start(*state_->engine, state_->read, options);
}

void shared_mutex::lock() {
  (void)acquire_for(false, steady_clock::duration::max(), nullptr);
}

void shared_mutex::lock(lease_time lease) {
  const auto explicit_lease = lease.value();
  (void)acquire_for(false, steady_clock::duration::max(), &explicit_lease);
}

void shared_mutex::lock(std::error_code& ec) noexcept {
  (void)acquire_for(false, steady_clock::duration::max(), nullptr, ec);
}

bool shared_mutex::try_lock() {
  return acquire_for(false, steady_clock::duration::zero(), nullptr);
}

bool shared_mutex::try_lock(std::error_code& ec) noexcept {
  return acquire_for(false, steady_clock::duration::zero(), nullptr, ec);
}

void shared_mutex::lock_shared() {
  (void)acquire_for(true, steady_clock::duration::max(), nullptr);
}

void shared_mutex::lock_shared(lease_time lease) {
  const auto explicit_lease = lease.value();
  (void)acquire_for(true, steady_clock::duration::max(), &explicit_lease);
}

void shared_mutex::lock_shared(std::error_code& ec) noexcept {
  (void)acquire_for(true, steady_clock::duration::max(), nullptr, ec);
}

bool shared_mutex::try_lock_shared() {
  return acquire_for(true, steady_clock::duration::zero(), nullptr);
}

bool shared_mutex::try_lock_shared(std::error_code& ec) noexcept {
  return acquire_for(true, steady_clock::duration::zero(), nullptr, ec);
}

bool shared_mutex::acquire_for(bool shared, steady_clock::duration wait,
                               const std::chrono::milliseconds* lease) {
  const std::uint64_t owner = core::current_thread_key();
  if (!shared && state_->engine->hold_count(state_->write, owner) == 0 &&
      state_->engine->hold_count(state_->read, owner) != 0) {
    // The script refuses it too ({-2}); here nothing is sent.
    throw error(errc::would_deadlock,
                "this thread holds a read lock of '" + locks::printable_name(state_->read.name) +
                    "' and asks for the write lock: it would wait for itself (a read-write lock "
                    "is not upgradable; unlock_shared() first)");
  }
  const auto deadline = wait == steady_clock::duration::zero() ? steady_clock::time_point::min()
                                                               : locks::deadline_after(wait);
  return state_->engine->acquire(shared ? state_->read : state_->write, owner, lease, deadline);
}

bool shared_mutex::acquire_for(bool shared, steady_clock::duration wait,
                               const std::chrono::milliseconds* lease,
                               std::error_code& ec) noexcept {
  return no_throw(ec, [&] { return acquire_for(shared, wait, lease); });
}

std::error_code shared_mutex::unlock_checked() noexcept {
  return state_->engine->release(state_->write, core::current_thread_key());
}

std::error_code shared_mutex::unlock_shared_checked() noexcept {
  return state_->engine->release(state_->read, core::current_thread_key());
}

std::uint64_t shared_mutex::hold_count() const noexcept {
  return state_->engine->hold_count(state_->write, core::current_thread_key());
}

std::uint64_t shared_mutex::shared_hold_count() const noexcept {
  return state_->engine->hold_count(state_->read, core::current_thread_key());
}

std::uint64_t shared_mutex::fencing_token() const noexcept {
  return state_->engine->fencing_token(state_->write, core::current_thread_key());
}

std::stop_token shared_mutex::stop_token() const noexcept {
  return state_->engine->stop_token(state_->write, core::current_thread_key());
}

std::stop_token shared_mutex::shared_stop_token() const noexcept {
  return state_->engine->stop_token(state_->read, core::current_thread_key());
}

bool shared_mutex::is_locked() const {
  return state_->engine->exists(state_->write.name);
}

std::optional<std::chrono::milliseconds> shared_mutex::remaining_lease() const {
  const auto ttl = state_->engine->remaining_ttl(state_->write.name);
  if (ttl.count() == -2) return std::nullopt;
  if (ttl.count() < 0) return std::chrono::milliseconds::max();
  return ttl;
}

bool shared_mutex::force_unlock() {
  return state_->engine->force_release(state_->write);
}

lock_status shared_mutex::status() const {
  return state_->engine->status(state_->write);
}

std::string shared_mutex::owner_id() const {
  return state_->engine->owner_field(core::current_thread_key());
}

const std::string& shared_mutex::name() const noexcept {
  return state_->write.name;
}

}  // namespace dlock
