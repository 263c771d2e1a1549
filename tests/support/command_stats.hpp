// Reading INFO commandstats in tests: how often the server ran a command since the last CONFIG
// RESETSTAT (or its start).
#pragma once

#include <cstdint>
#include <string>

namespace dlock::test {

// The calls of `command` (lowercase, as INFO names it: "evalsha", "client|setname") in
// `commandstats` (INFO commandstats' text); 0 when it never ran.
inline std::int64_t command_calls(const std::string& commandstats, const std::string& command) {
  const std::string tag = "cmdstat_" + command + ":calls=";
  const auto at = commandstats.find(tag);
  return at == std::string::npos ? 0 : std::stoll(commandstats.substr(at + tag.size()));
}

// The scripts the server ran (EVALSHA and EVAL): every lock attempt and release is one.
inline std::int64_t script_calls(const std::string& commandstats) {
  return command_calls(commandstats, "evalsha") + command_calls(commandstats, "eval");
}

}  // namespace dlock::test
