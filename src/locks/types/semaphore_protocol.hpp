// src/locks/types/semaphore_protocol.hpp
//
// The semaphore (dlock::semaphore), in the layout of Redisson's RPermitExpirableSemaphore, so Java
// and C++ services share permits: the string N counts the available permits, the zset
// suffix_key(N, "timeout") ("{N}:timeout") holds each taken permit (its 16 raw id bytes) scored by
// its expiry in epoch ms, and releases publish the new count on semaphore_channel(N)
// ("redisson_sc:{N}"). Each hold is one permit whose id is derived from its owner (see
// permit_id()); every permit has a lease, renewed by the watchdog or explicit. Permits take no
// fencing tokens (a semaphore excludes nobody in particular): a hold's token reads 0. Not
// reentrant: a second permit needs another owner (a dlock::permit). The scripts are
// src/locks/scripts/semaphore_*.lua.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

class semaphore_protocol final : public lock_protocol {
 public:
  // `initial_permits`: the count a semaphore starts with when it does not exist (its first
  // attempt or count operation creates it). One instance per count, so that the engine's
  // lock_ref (protocol, name) carries it.
  explicit semaphore_protocol(std::int64_t initial_permits);

  std::int64_t initial_permits() const noexcept { return initial_; }

  std::string_view kind() const noexcept override { return "semaphore"; }
  bool reentrant() const noexcept override { return false; }
  std::string wake_channel(std::string_view name) const override;
  // A message is the count of available permits: it wakes that many waiters.
  std::size_t wake_ups(std::string_view payload) const override;
  script_call attempt(const attempt_request& request) const override;
  attempt_outcome read_attempt(const reply& r) const override;
  script_call release(const release_request& request) const override;
  script_call renew(std::span<const renewal_target> targets,
                    std::chrono::milliseconds lease) const override;
  script_call check(std::span<const renewal_target> targets) const override;
  std::vector<bool> read_renewal(const reply& r, std::size_t targets) const override;
  // Gives back every permit, whoever holds it; read_force_release says whether any was held.
  script_call force_release(std::string_view name) const override;
  bool read_force_release(std::string_view name, const reply& r) const override;
  script_call status(std::string_view name) const override;
  lock_status read_status(std::string_view name, const reply& r) const override;
  std::vector<std::string_view> scripts() const override;

  // Releases the permit `id` (32 hex digits) whoever holds it; read_release_by_id() reads the
  // reply: 1 released, 0 not held, 2 released but its lease had run out.
  script_call release_by_id(std::string_view name, std::string_view id) const;
  // Throws errc::wrong_type for a key of another kind, errc::protocol_error for a malformed reply.
  int read_release_by_id(std::string_view name, const reply& r) const;
  // op "available" | "try_set" | "add" (semaphore_permits.lua); returns {done, count}.
  script_call permits(std::string_view name, std::string_view op, std::int64_t n) const;
  std::pair<bool, std::int64_t> read_permits(std::string_view name, const reply& r) const;

 private:
  const std::int64_t initial_;
  const script acquire_;
  const script release_;
  const script renew_;
  const script permits_;
  const script status_;
  const script force_;
};

// The permit id of the owner field "<client id>:<owner key>": the first 16 hex digits of the
// client id, then the owner key as 16 hex digits. Unique per owner (owner keys are never reused in
// a client; client ids are random), 32 lowercase hex digits as Redisson's ids. Throws
// errc::invalid_argument for a field of another shape.
std::string permit_id(std::string_view owner_field);

// Whether `id` is 32 hex digits (any case).
bool is_permit_id(std::string_view id);

}  // namespace dlock::locks
