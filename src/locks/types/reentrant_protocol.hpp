// src/locks/types/reentrant_protocol.hpp
//
// The reentrant lock (dlock::mutex), as Redisson's RLock keeps it: a hash at the lock's name,
// field "<client id>:<owner key>" -> hold count, a PEXPIRE lease, unlock message "0" on
// "redisson_lock__channel:{name}". Beyond Redisson: a fencing token per first hold from the
// counter "dlock:fence:{name}", and a wait line of clients, so that a release wakes one client
// (docs/design/contention.md). The scripts are src/locks/scripts/reentrant_*.lua and
// wait_line.lua, leave_wait_line.lua.
#pragma once

#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

class reentrant_protocol final : public lock_protocol {
 public:
  reentrant_protocol();

  std::string_view kind() const noexcept override { return "reentrant"; }
  std::string wake_channel(std::string_view name) const override;
  bool wakes_by_line() const noexcept override { return true; }
  std::string call_channel(std::string_view name, std::string_view wake_id) const override;
  std::chrono::milliseconds wait_refresh() const override;
  bool leaves_line() const noexcept override { return true; }
  std::optional<script_call> leave_line(std::string_view name,
                                        std::string_view owner) const override;
  script_call attempt(const attempt_request& request) const override;
  attempt_outcome read_attempt(const reply& r) const override;
  script_call release(const release_request& request) const override;
  bool release_was_heard(const reply& r) const override;
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
  const script lock_;
  const script unlock_;
  const script leave_line_;
  const script renew_;
  const script force_;
  const script status_;
};

}  // namespace dlock::locks
