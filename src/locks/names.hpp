// src/locks/names.hpp
//
// Lock names and the keys derived from them. A lock named N lives in the hash N; its unlock channel
// and its helper keys carry N inside braces, as Redisson does ("redisson_lock__channel:{N}"), so
// Redis Cluster keeps them in N's slot and Redisson clients hear the same channel. When N already
// contains '{' it is used as it is (Redisson's rule): N's own hash tag then decides the slot.
#pragma once

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

// prefix + ":" + "{N}" (or N when it contains '{') + (suffix empty ? "" : ":" + suffix).
std::string derived_key(std::string_view prefix, std::string_view name,
                        std::string_view suffix = {});

// "redisson_lock__channel:{N}": where unlocks of N are announced.
inline std::string unlock_channel(std::string_view name) {
  return derived_key("redisson_lock__channel", name);
}

// The counter that hands out N's fencing tokens. It has no TTL: tokens must never go back.
inline std::string fence_key(std::string_view name) {
  return derived_key("dlock:fence", name);
}

}  // namespace dlock::locks
