// src/core/hash_slot.hpp
//
// Redis Cluster's key-to-slot function (cluster specification, "Keys distribution model"):
// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection, no final xor) of the
// key, modulo 16384. When the key has a hash tag (the bytes between its first '{' and the first
// '}' after it, if there are any), only the tag is hashed; an empty tag ("{}") does not count and
// the whole key is hashed. Pure functions, no state.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock::core {

inline constexpr std::uint16_t cluster_slots = 16384;

// CRC16 XMODEM of `bytes` ("123456789" gives 0x31C3).
std::uint16_t crc16(std::string_view bytes) noexcept;

// The part of `key` that decides its slot: its hash tag, or the whole key.
std::string_view hash_tag_or_key(std::string_view key) noexcept;

// The cluster slot of `key`, in [0, 16384).
inline std::uint16_t hash_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16(hash_tag_or_key(key)) & (cluster_slots - 1));
}

}  // namespace dlock::core
