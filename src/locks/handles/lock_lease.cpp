// dlock::lock_lease: a hold owned by an object instead of a thread.
#include "dlock/lock_lease.hpp"

#include "dlock/error.hpp"
#include "locks/handles/handle_state.hpp"

namespace dlock {
namespace {
const std::string no_string;
}

lock_lease::lock_lease() noexcept = default;
lock_lease::lock_lease(std::unique_ptr<impl> state) noexcept : state_(std::move(state)) {}
lock_lease::lock_lease(lock_lease&& other) noexcept = default;

lock_lease& lock_lease::operator=(lock_lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    state_ = std::move(other.state_);
  }
  return *this;
}

lock_lease::~lock_lease() {
  (void)release();
}

std::error_code lock_lease::release() noexcept {
  if (!state_) return make_error_code(errc::not_owner);
  const std::unique_ptr<impl> state = std::move(state_);
  return state->engine->release(state->lock, state->owner);
}

std::stop_token lock_lease::stop_token() const noexcept {
  if (!state_) return {};
  // A lease that ran out while nobody looked (the process was stopped) is reported now.
  if (!state_->stop.stop_requested()) state_->engine->expire_due_holds();
  return state_->stop;
}

std::uint64_t lock_lease::fencing_token() const noexcept {
  return state_ ? state_->token : 0;
}

const std::string& lock_lease::owner_id() const noexcept {
  return state_ ? state_->owner_field : no_string;
}

const std::string& lock_lease::name() const noexcept {
  return state_ ? state_->lock.name : no_string;
}

namespace locks {

lock_lease make_lock_lease(std::shared_ptr<lock_engine> engine, const lock_ref& lock,
                           std::uint64_t owner, std::string owner_field, std::uint64_t token,
                           std::stop_token stop) {
  auto state = std::make_unique<lock_lease::impl>();
  state->engine = std::move(engine);
  state->lock = lock;
  state->owner = owner;
  state->owner_field = std::move(owner_field);
  state->token = token;
  state->stop = std::move(stop);
  return lock_lease(std::move(state));
}

}  // namespace locks
}  // namespace dlock
