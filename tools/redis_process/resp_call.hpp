// A blocking, binary-safe one-command Redis client for fixtures: what redis-cli cannot do (NUL
// bytes in arguments, a structured reply) without the dlock library (which tests check, so the
// fixtures must not depend on it). Plain C++20 and POSIX, RESP2 only. Not installed with dlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::tools {

// One RESP2 reply.
struct resp_value {
  enum class kind { simple, error, integer, bulk, nil, array };

  kind type = kind::nil;
  std::string str;                   // simple, error and bulk
  long long integer = 0;             // integer
  std::vector<resp_value> elements;  // array

  bool is_error() const { return type == kind::error; }
  // The value of `field` in a RESP2 map (an array of alternating field names and values), or
  // nullptr when this is not an array or has no such field.
  const resp_value* field(std::string_view name) const;
  // Text of the reply for messages: str, the integer, "(nil)" or "[a, b, ...]".
  std::string to_string() const;
};

// resp_call()
//
// Connects to 127.0.0.1:`port`, sends `args` as one command, reads one reply and closes.
// Error replies are returned (is_error()), not thrown. Throws std::runtime_error when the server
// cannot be reached, closes the connection, sends something that is not RESP2, or does not answer
// within `timeout` (which covers connecting too).
resp_value resp_call(std::uint16_t port, const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

// resp_call_all()
//
// Like resp_call() for several commands sent at once on one connection, so that what one sets on
// the connection holds for the next (ASKING before a command, MULTI ... EXEC). Returns one reply
// per command, in order. Throws like resp_call().
std::vector<resp_value> resp_call_all(std::uint16_t port,
                                      const std::vector<std::vector<std::string>>& commands,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace dlock::tools
