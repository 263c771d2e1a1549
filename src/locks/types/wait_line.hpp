// src/locks/types/wait_line.hpp
//
// What the lock types with a wait line of clients share (docs/design/contention.md): its timing
// and its Lua functions (src/locks/scripts/wait_line.lua), put in front of each script that
// uses them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/embedded_scripts.hpp"

namespace dlock::locks {

// A client stays in line this long after its latest attempt.
inline constexpr std::chrono::milliseconds line_lifetime{3000};
// While it waits without a wake-up, a client's first waiter attempts this often to keep its place.
inline constexpr std::chrono::milliseconds line_refresh{1000};
// A freed lock is held back this long for the client it calls.
inline constexpr std::chrono::milliseconds reservation_grace{200};

// The source of a script that uses the line: wait_line.lua's functions, then `body`.
inline std::string with_wait_line(std::string_view body) {
  return std::string(scripts::wait_line).append("\n").append(body);
}

}  // namespace dlock::locks
