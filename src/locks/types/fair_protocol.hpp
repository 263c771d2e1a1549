// src/locks/types/fair_protocol.hpp
//
// The fair lock (dlock::fair_mutex), as Redisson's RFairLock keeps it: RLock's hash at the name
// (field "<client id>:<owner key>" -> hold count, PEXPIRE lease), the waiting fields in arrival
// order in fair_queue_key(N) ("redisson_lock_queue:{N}", a list) and their deadlines in
// fair_timeout_key(N) ("redisson_lock_timeout:{N}", a sorted set of epoch ms). A free lock is
// kept for the head of the list; the last unlock wakes the head alone, on its own channel
// unlock_channel(N) + ":" + field with the message "0". A waiter at the head that does not take
// the free lock within the thread wait time W is dropped (a dead waiter blocks the line for at
// most W). Beyond Redisson: fencing tokens (as the reentrant lock), deadlines on the server's
// clock, live waiters' deadlines kept ahead by their attempts (every W/3 at least), a give-up
// that wakes the next head, and a try_lock() that never joins the list. The scripts are
// src/locks/scripts/fair_*.lua, and renew_leases.lua for the watchdog.
#pragma once

#include <chrono>

#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

class fair_protocol final : public lock_protocol {
 public:
  // `thread_wait`: W (lock_options::fair_wait_timeout). One instance per W, so that the engine's
  // lock_ref (protocol, name) carries it.
  explicit fair_protocol(std::chrono::milliseconds thread_wait);

  std::chrono::milliseconds thread_wait() const noexcept { return wait_; }

  std::string_view kind() const noexcept override { return "fair"; }
  std::string wake_channel(std::string_view name) const override;
  bool waits_by_owner() const noexcept override { return true; }
  std::string owner_wake_channel(std::string_view name, std::string_view owner) const override;
  std::chrono::milliseconds wait_refresh() const override;
  bool leaves_line() const noexcept override { return true; }
  std::optional<script_call> leave_line(std::string_view name,
                                        std::string_view owner) const override;
  script_call attempt(const attempt_request& request) const override;
  attempt_outcome read_attempt(const reply& r) const override;
  script_call release(const release_request& request) const override;
  script_call renew(std::span<const renewal_target> targets,
                    std::chrono::milliseconds lease) const override;
  script_call check(std::span<const renewal_target> targets) const override;
  std::vector<bool> read_renewal(const reply& r, std::size_t targets) const override;
  script_call force_release(std::string_view name) const override;
  bool read_force_release(std::string_view name, const reply& r) const override;
  script_call status(std::string_view name) const override;
  lock_status read_status(std::string_view name, const reply& r) const override;
  std::vector<std::string_view> scripts() const override;

 private:
  const std::chrono::milliseconds wait_;
  const script lock_;
  const script unlock_;
  const script leave_;
  const script renew_;
  const script force_;
  const script status_;
};

}  // namespace dlock::locks
