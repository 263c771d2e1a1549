// src/locks/types/rlock_hold.hpp
//
// The hold the reentrant lock and the fair lock share: Redisson's RLock hash (owner field -> hold
// count, the lease as the key's TTL). Both protocols decode their attempt replies and renew or
// check holds the same way, through these.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

// The RLock hash's fields: "<client id>:<holder number>" -> a positive hold count, decimal digits
// only (at most 19). Any other field is someone's data, which status reports and force-unlock
// scripts refuse to delete (force_unlock.lua and fair_force_unlock.lua check the same).
bool is_rlock_owner_field(std::string_view field);
bool is_rlock_count(std::string_view count);

// An attempt's {status, value}: 1 acquired (value: the token), 2 re-entered (value: the count), 0
// held by another (value: its TTL in ms, < 0: none). Empty for any other status, or a token or
// count that is not positive: the caller reports the reply as unexpected. Shared with the
// read-write lock, whose attempts answer the same way.
std::optional<attempt_outcome> decode_hold_status(std::int64_t status, std::int64_t value);

// An attempt's reply: {1, token} acquired, {2, count} re-entered, {0, ttl} held by another
// (ttl < 0: no TTL), {-1, what, name} another kind (thrown as errc::wrong_type naming `kind`).
// Anything else throws errc::protocol_error: "unexpected reply to the <label>lock script: ...".
attempt_outcome read_rlock_attempt(const reply& r, std::string_view kind, std::string_view label);

// renew_leases.lua over `targets` with `lease`; check_rlock_holds() with a lease of "0" checks
// without extending.
script_call renew_rlock_holds(const script& renew_leases, std::span<const renewal_target> targets,
                              std::chrono::milliseconds lease);
script_call check_rlock_holds(const script& renew_leases, std::span<const renewal_target> targets);
// Which targets renew_leases.lua renewed (1) or found gone (0); errors as read_rlock_attempt().
std::vector<bool> read_rlock_renewal(const reply& r, std::size_t targets, std::string_view label);

}  // namespace dlock::locks
