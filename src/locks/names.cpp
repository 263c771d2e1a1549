#include "locks/names.hpp"

#include "dlock/error.hpp"

namespace dlock::locks {

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

std::string derived_key(std::string_view prefix, std::string_view name, std::string_view suffix) {
  std::string key;
  key.reserve(prefix.size() + name.size() + suffix.size() + 4);
  key.append(prefix).append(":");
  if (name.find('{') != std::string_view::npos) {
    key.append(name);
  } else {
    key.append("{").append(name).append("}");
  }
  if (!suffix.empty()) key.append(":").append(suffix);
  return key;
}

}  // namespace dlock::locks
