#include "locks/names.hpp"

#include <array>
#include <stdexcept>

#include "core/hash_slot.hpp"
#include "dlock/error.hpp"

namespace dlock::locks {
namespace {

// For each slot, the smallest decimal number whose CRC16 lands there. Numbers up to 109757 are
// needed to cover all 16384 slots; 7 bytes hold 6 digits and the terminating zero.
using slot_tag_table = std::array<std::array<char, 7>, core::cluster_slots>;

slot_tag_table make_slot_tags() {
  slot_tag_table table{};
  std::size_t filled = 0;
  for (unsigned number = 0; filled < table.size(); ++number) {
    const std::string text = std::to_string(number);
    auto& entry = table[core::hash_slot(text)];
    if (entry[0] != '\0') continue;
    text.copy(entry.data(), entry.size() - 1);
    ++filled;
  }
  return table;
}

std::string redisson_key(std::string_view prefix, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + name.size() + 3);
  key.append(prefix).append(":");
  if (name.find('{') != std::string_view::npos) {
    key.append(name);
    return key;
  }
  key.append("{").append(name).append("}");
  return key;
}

}  // namespace

void validate_lock_name(std::string_view name) {
  if (name.empty()) throw error(errc::invalid_argument, "empty lock name");
  if (name.size() > max_lock_name_bytes) {
    throw error(errc::invalid_argument,
                "lock name of " + std::to_string(name.size()) + " bytes; the limit is 64 KiB");
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    if (byte < 0x20 || byte == 0x7f) {
      throw error(errc::invalid_argument, "lock name has control byte " + std::to_string(byte) +
                                              " at offset " + std::to_string(i));
    }
  }
}

std::string printable_name(std::string_view name) {
  constexpr std::size_t shown = 64;
  if (name.size() <= shown) return std::string(name);
  return std::string(name.substr(0, shown)) + "... (" + std::to_string(name.size()) + " bytes)";
}

std::string_view slot_tag(std::uint16_t slot) {
  static const slot_tag_table table = make_slot_tags();
  if (slot >= table.size()) {
    throw std::out_of_range("slot " + std::to_string(slot) + " is not a cluster slot");
  }
  return table[slot].data();
}

std::string suffix_key(std::string_view name, std::string_view suffix) {
  const std::uint16_t slot = core::hash_slot(name);
  std::string key;
  key.reserve(name.size() + suffix.size() + 10);
  // Redisson's form, kept whenever it is right: Redisson clients then share the key.
  if (name.find('{') != std::string_view::npos) {
    key.append(name).append(":").append(suffix);
    if (core::hash_slot(key) == slot) return key;
    key.clear();
  }
  if (name.find('}') == std::string_view::npos) {
    key.append("{").append(name).append("}:").append(suffix);
    return key;
  }
  key.append("{").append(slot_tag(slot)).append("}:").append(name).append(":").append(suffix);
  return key;
}

std::string derived_key(std::string_view prefix, std::string_view name, std::string_view suffix) {
  const std::string_view colon_suffix = suffix.empty() ? "" : ":";
  // 1. Redisson's form, kept whenever it is right: Redisson clients then share the channel.
  std::string key = redisson_key(prefix, name);
  key.append(colon_suffix).append(suffix);
  const std::uint16_t slot = core::hash_slot(name);
  if (core::hash_slot(key) == slot) return key;
  key.clear();
  key.append(prefix).append(":{");
  if (!name.empty() && name.find('}') == std::string_view::npos) {
    // 2. N has no '}', so N hashes whole and a {N} tag holds exactly N.
    key.append(name).append("}");
  } else {
    // 3. A '}' in N would end a {N} tag early: tag the slot's number instead.
    key.append(slot_tag(slot)).append("}:").append(name);
  }
  key.append(colon_suffix).append(suffix);
  return key;
}

std::string suffix_base(std::string_view name) {
  const std::uint16_t slot = core::hash_slot(name);
  std::string base;
  if (name.find('{') != std::string_view::npos) {
    base = std::string(name);
  } else {
    base.append("{").append(name).append("}");
  }
  // Compared with a suffix: a base without a tag of its own only routes as N through one.
  if (core::hash_slot(base + ":x") == slot) return base;
  base.clear();
  if (name.find('}') == std::string_view::npos) {
    base.append("{").append(name).append("}");
    return base;
  }
  base.append("{").append(slot_tag(slot)).append("}:").append(name);
  return base;
}

std::string own_key(std::string_view prefix, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + name.size() + 10);
  key.append(prefix).append(":{");
  // Two find()s, one memchr each: find_first_of("{}") calls memchr once per byte of the name.
  if (name.find('{') == std::string_view::npos && name.find('}') == std::string_view::npos) {
    key.append(name).append("}");
    return key;
  }
  key.append(slot_tag(core::hash_slot(name))).append("}:").append(name);
  return key;
}

std::string fence_key(std::string_view name) {
  return own_key("dlock:fence", name);
}

std::string wake_id(std::string_view owner_field) {
  // The client id's first 13 hex digits: 52 bits, so the id is exact as a double and a Long.
  std::uint64_t bits = 0;
  for (const char c : owner_field.substr(0, 13)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) break;
    bits = bits * 16 + static_cast<std::uint64_t>(digit);
  }
  return std::to_string(bits + 2);
}

std::string latch_channel(std::string_view name) {
  constexpr std::string_view prefix = "redisson_countdownlatch__channel__";
  std::string channel;
  channel.reserve(prefix.size() + name.size() + 8);
  channel.append(prefix).append("{").append(name).append("}");
  const std::uint16_t slot = core::hash_slot(name);
  if (core::hash_slot(channel) == slot) return channel;
  channel.resize(prefix.size());
  channel.append("{").append(slot_tag(slot)).append("}:").append(name);
  return channel;
}

}  // namespace dlock::locks
