// src/locks/types/rw_protocol.hpp
//
// The read-write lock (dlock::shared_mutex) as two protocols on one name, one per side, so the
// engine keeps read and write holds apart (two lock_refs with their own FIFOs sharing one wake
// channel). Data, channel and messages are Redisson's RReadWriteLock (RedissonReadLock,
// RedissonWriteLock): a hash at the name with "mode", reader fields "<client id>:<owner key>",
// the writer field "<client id>:<owner key>:write", one lease key per read hold
// (rwlock_timeout_prefix() + ":<i>"), releases announced on "redisson_rwlock:{N}" with "0" (a
// read unlock: one waiter) or "1" (a write unlock: every waiter). Beyond Redisson: fencing tokens
// for write holds, hold ids for read holds, writer preference (dlock:rwlock_writers:{N}), and no
// upgrade. The scripts are src/locks/scripts/rw_*.lua.
#pragma once

#include <chrono>

#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

// How long a waiting writer's intent holds new readers back without being renewed, and the
// longest a waiting writer sleeps before it renews it by another attempt.
inline constexpr std::chrono::milliseconds writer_intent_lease{10'000};
inline constexpr std::chrono::milliseconds writer_intent_refresh{3'000};

// What both sides share: the wake channel, its messages, force release and status.
class rw_protocol_base : public lock_protocol {
 public:
  rw_protocol_base();

  std::string wake_channel(std::string_view name) const override;
  // "1" (a write unlock, a forced release, a writer giving up) wakes every waiter; "0" one.
  std::size_t wake_ups(std::string_view payload) const override;
  script_call force_release(std::string_view name) const override;
  bool read_force_release(std::string_view name, const reply& r) const override;
  script_call status(std::string_view name) const override;
  // Fills lock_status::mode; holders are the readers ("<client id>:<owner key>") and the writer
  // ("<client id>:<owner key>:write").
  lock_status read_status(std::string_view name, const reply& r) const override;
  std::vector<std::string_view> scripts() const override;

 protected:
  const script read_lock_;
  const script read_unlock_;
  const script read_renew_;
  const script write_lock_;
  const script write_unlock_;
  const script write_renew_;
  const script write_leave_;
  const script force_;
  const script status_;
};

// The read side (kind "read"): shared holds, each with its own lease key; no fencing tokens
// (a hold's token is its id, the server's TIME in microseconds at the owner's first read hold).
class rw_read_protocol final : public rw_protocol_base {
 public:
  std::string_view kind() const noexcept override { return "read"; }
  script_call attempt(const attempt_request& request) const override;
  attempt_outcome read_attempt(const reply& r) const override;
  script_call release(const release_request& request) const override;
  script_call renew(std::span<const renewal_target> targets,
                    std::chrono::milliseconds lease) const override;
  script_call check(std::span<const renewal_target> targets) const override;
  std::vector<bool> read_renewal(const reply& r, std::size_t targets) const override;
};

// The write side (kind "write"): one owner at a time, fencing tokens from the name's counter
// (fence_key(), shared with the reentrant lock).
class rw_write_protocol final : public rw_protocol_base {
 public:
  std::string_view kind() const noexcept override { return "write"; }
  // A client whose last waiting writer gave up withdraws its writers' intents, which would
  // otherwise hold new readers back until their lease ends (writer_intent_lease).
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
};

// The writer's hash field of an owner field: "<owner>:write".
std::string rw_writer_field(std::string_view owner);

}  // namespace dlock::locks
