// src/locks/names.hpp
//
// Lock names and the keys derived from them. A lock named N lives in the hash N; its unlock channel
// and its fencing counter must hash to N's Redis Cluster slot, or a script touching N and them is
// refused with CROSSSLOT and a waiter would listen on another node than the one that publishes.
//
// The derived key of N for a prefix P is the first of these that lands in N's slot:
//
//   1. Redisson's form (`RedissonObject.prefixName`): P:{N}, or P:N when N contains '{'. Every
//      ordinary name lands here ("orders:42" -> P:{orders:42}, "{tenant7}:orders" ->
//      P:{tenant7}:orders, "a{b}c" -> P:a{b}c), so Redisson clients hear the same channel.
//   2. When N has no '}': P:{N}. Redisson's P:N is wrong for "a{b" or "{": with no '}' after the
//      '{' the whole, longer key is hashed; P:{N} makes N itself the tag.
//   3. Otherwise: P:{T}:N, where T = slot_tag(hash_slot(N)), a short decimal number whose slot is
//      N's. Redisson's form is wrong for "{}x", "foo{}{bar}" (an empty tag hashes the whole key),
//      "a}b" (P:{a}b} has the tag "a") or "}{"; P:{N} would end its tag at N's first '}'.
//
// P must contain no braces, so the first '{' of every derived key is the one put there here. The
// rule is part of the wire format (every client must derive the same keys): never change it.
// The fencing counter has its own, one-to-one rule (fence_key() below).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::locks {

inline constexpr std::size_t max_lock_name_bytes = 64 * 1024;

// Throws dlock::error(errc::invalid_argument) for an empty name, a name over 64 KiB, or one with
// control bytes (0x00-0x1F, 0x7F): those are almost always a bug, and they would make keys and
// channel names unreadable in every Redis tool. UTF-8 is fine.
void validate_lock_name(std::string_view name);

// `name` as error messages show it: whole when short, else its start and its length in bytes.
std::string printable_name(std::string_view name);

// slot_tag()
//
// The smallest non-negative decimal number (as text, no braces, at most 6 digits) whose cluster
// slot is `slot`; every slot in [0, 16384) has one. Throws std::out_of_range for slot >= 16384.
// The table behind it is built once, on first use (under a millisecond); thread-safe.
std::string_view slot_tag(std::uint16_t slot);

// derived_key()
//
// The key derived from the lock name `name` for `prefix` (see the rule at the top of this file),
// followed by ":" + suffix when suffix is not empty. Its hash slot is always hash_slot(name).
// `prefix` and `suffix` must contain no braces; `name` should be a valid lock name (not empty).
std::string derived_key(std::string_view prefix, std::string_view name,
                        std::string_view suffix = {});

// "redisson_lock__channel:{N}" for ordinary names: where unlocks of N are announced.
inline std::string unlock_channel(std::string_view name) {
  return derived_key("redisson_lock__channel", name);
}

// A fair lock's waiting fields in arrival order (a list) and their deadlines (a sorted set):
// "redisson_lock_queue:{N}" and "redisson_lock_timeout:{N}" for ordinary names, as Redisson's
// RFairLock. Each waiter hears its turn on unlock_channel(N) + ":" + its field.
inline std::string fair_queue_key(std::string_view name) {
  return derived_key("redisson_lock_queue", name);
}
inline std::string fair_timeout_key(std::string_view name) {
  return derived_key("redisson_lock_timeout", name);
}

// "dlock:plain_unlock:{N}" for ordinary names: where releases of the plain lock N (and of a
// Redlock named N, on each master) are announced, with the message "0".
inline std::string plain_unlock_channel(std::string_view name) {
  return derived_key("dlock:plain_unlock", name);
}

// suffix_key()
//
// Redisson's `suffixName(N, S)`, "{N}:S" (or "N:S" when N contains '{'), when that lands in N's
// slot; else "{N}:S" for a name without '}'; else "{T}:N:S" with T = slot_tag(hash_slot(N)). The
// same "first form in N's slot" rule as derived_key(). `suffix` must contain no braces.
std::string suffix_key(std::string_view name, std::string_view suffix);

// "redisson_sc:{N}" for ordinary names: where a semaphore's count is announced when permits come
// back (Redisson's RSemaphore and RPermitExpirableSemaphore), with the count as the message.
inline std::string semaphore_channel(std::string_view name) {
  return derived_key("redisson_sc", name);
}

// latch_channel()
//
// Where a count-down latch N announces "0" (reached zero) and "1" (new count, or deleted):
// Redisson's "redisson_countdownlatch__channel__{N}" (always braces, no colon) when that lands in
// N's slot, which it does for every name without '}'; else
// "redisson_countdownlatch__channel__{T}:N" with T = slot_tag(hash_slot(N)). Redisson keeps its
// form for such names and then publishes outside N's slot (docs/locks.md, "Count-down latch").
std::string latch_channel(std::string_view name);

// "redisson_rwlock:{N}" for ordinary names: where releases of the read-write lock N are announced
// ("0" by a read unlock, "1" by a write unlock, as Redisson's RReadWriteLock).
inline std::string rwlock_channel(std::string_view name) {
  return derived_key("redisson_rwlock", name);
}

// "dlock:rwlock_writers:{N}" for ordinary names: the waiting dlock writers of the read-write lock
// N (a sorted set), which new dlock readers let go first (see rw_write_lock.lua).
inline std::string rwlock_writers_key(std::string_view name) {
  return derived_key("dlock:rwlock_writers", name);
}

// suffix_base()
//
// The start of the keys Redisson derives from N with `suffixName(N, S)` = base + ":" + S: "{N}",
// or N itself when N contains '{' (RedissonObject.suffixName), kept when it lands in N's slot;
// else "{N}" for a name without '}', else "{T}:N" (T = slot_tag(hash_slot(N))), as derived_key().
std::string suffix_base(std::string_view name);

// "{N}:<reader field>:rwlock_timeout" for ordinary names: the prefix of a reader's per-hold lease
// keys (":1", ":2", ... one per hold), as Redisson's RedissonReadLock names them.
inline std::string rwlock_timeout_prefix(std::string_view name, std::string_view reader_field) {
  std::string prefix = suffix_base(name);
  prefix.append(":").append(reader_field).append(":rwlock_timeout");
  return prefix;
}

// fence_key()
//
// The counter that hands out N's fencing tokens: "dlock:fence:{N}" when N has no brace, else
// "dlock:fence:{T}:N" with T = slot_tag(hash_slot(N)). Unlike derived_key() this is one-to-one:
// a release checks its hold's token against this counter (reentrant_unlock.lua), so two names
// must never share it, as "q" and "{q}" share Redisson's channel. Both forms land in N's slot and
// cannot meet: a brace-free N never yields "T}:M". Earlier builds used derived_key() here; tokens
// follow the server clock, so they keep increasing across that change.
std::string fence_key(std::string_view name);

// own_key()
//
// fence_key()'s one-to-one rule for any brace-free prefix: "<prefix>:{N}" or "<prefix>:{T}:N".
// For the keys that must belong to one name alone (fencing counter, wait line, reservation).
std::string own_key(std::string_view prefix, std::string_view name);

// The keys of N's wait line of clients (docs/design/contention.md): who waits in which order, until
// when each stays in line without a new attempt, and for whom a freed lock is held back.
inline std::string wait_line_key(std::string_view name) {
  return own_key("dlock:line", name);
}
inline std::string wait_line_deadlines_key(std::string_view name) {
  return own_key("dlock:line_deadline", name);
}
inline std::string reservation_key(std::string_view name) {
  return own_key("dlock:reserved", name);
}

// call_channel()
//
// "dlock:call:{N}:<wake id>" for ordinary names: where a release of N that reserves the lock for
// the first client in N's wait line calls that client, and only it (docs/design/contention.md).
// own_key()'s form, whose hash tag is always the first one: what follows it (the id) cannot move
// the channel out of N's slot. call_channel_prefix(N) + id == call_channel(N, id): the scripts
// build the channel of the client they call from the prefix.
inline std::string call_channel_prefix(std::string_view name) {
  std::string prefix = own_key("dlock:call", name);
  prefix.append(":");
  return prefix;
}
inline std::string call_channel(std::string_view name, std::string_view wake_id) {
  std::string channel = call_channel_prefix(name);
  channel.append(wake_id);
  return channel;
}

// wake_id()
//
// The decimal number, >= 2 and below 2^52 + 2, that stands for the client whose owner fields
// start with `owner_field`'s client id (its first 13 hex digits) in a wait line and in the wake
// message that calls it. Redisson's waiters read every message as a Long and act only on 0 and 1,
// so they ignore it.
std::string wake_id(std::string_view owner_field);

// Whether a message on an unlock channel is a wake id (a decimal number other than 0 and 1).
inline bool is_wake_id(std::string_view payload) {
  return !payload.empty() && payload.size() <= 20 &&
         payload.find_first_not_of("0123456789") == std::string_view::npos && payload != "0" &&
         payload != "1";
}

}  // namespace dlock::locks
