// Reading CLIENT LIST in tests.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace dlock::test {

// The ids of the connections in `client_list` (CLIENT LIST's text) made to local port `port`
// (laddr is the address a client connected to). Ids, not a count: a connection of an earlier
// test may still be listed before and gone after, keeping a count level.
inline std::set<std::string> client_ids_on_port(const std::string& client_list,
                                                std::uint16_t port) {
  const std::string laddr = "laddr=127.0.0.1:" + std::to_string(port) + " ";
  std::set<std::string> ids;
  std::size_t line_start = 0;
  while (line_start < client_list.size()) {
    std::size_t line_end = client_list.find('\n', line_start);
    if (line_end == std::string::npos) line_end = client_list.size();
    const std::string line = client_list.substr(line_start, line_end - line_start);
    if (line.find(laddr) != std::string::npos) ids.insert(line.substr(0, line.find(' ')));
    line_start = line_end + 1;
  }
  return ids;
}

// Whether `after` holds an id that `before` does not: a new connection.
inline bool has_new_id(const std::set<std::string>& before, const std::set<std::string>& after) {
  for (const std::string& id : after)
    if (before.count(id) == 0) return true;
  return false;
}

}  // namespace dlock::test
