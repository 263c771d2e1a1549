// src/locks/types/plain_protocol.hpp
//
// The plain lock (dlock::plain_lock), as redis-py's Lock, Go's redsync and node-redlock keep it: a
// string at the lock's name holding its holder's value, set by SET NX PX, released by
// compare-and-delete, so those clients and dlock exclude each other on the same key. dlock's value
// is "<client id>:<owner key>:<fencing token>"; releases are announced with "0" on
// "dlock:plain_unlock:{name}" (foreign clients announce nothing: their waiters re-check, see
// attempt_outcome::holder_publishes). Not reentrant. Waiting dlock clients stand in a wait line,
// as the reentrant lock's (docs/design/contention.md). The scripts are
// src/locks/scripts/plain_*.lua, shared with Redlock (which passes no wait line: keep its
// interface).
#pragma once

#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

class plain_protocol final : public lock_protocol {
 public:
  plain_protocol();

  std::string_view kind() const noexcept override { return "plain"; }
  bool reentrant() const noexcept override { return false; }
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

// The value a dlock holder keeps in a plain lock's key: "<owner>:<token>".
std::string plain_lock_value(std::string_view owner, std::uint64_t token);

// Whether `value` has the form of a dlock holder's value ("<32 hex digits>:<number>:<nonce>",
// the rule plain_lock.lua and plain_force_unlock.lua apply).
bool is_dlock_value(std::string_view value);

}  // namespace dlock::locks
