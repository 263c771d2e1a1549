// src/locks/types/wait_line.hpp
//
// What the lock types with a wait line of clients share (docs/design/contention.md): its timing
// and its Lua functions (src/locks/scripts/wait_line.lua), put in front of each script that
// uses them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/embedded_scripts.hpp"
#include "locks/engine/lock_protocol.hpp"
#include "locks/names.hpp"

namespace dlock::locks {

// A client stays in line this long after its latest attempt.
inline constexpr std::chrono::milliseconds line_lifetime{3000};
// While it waits without a wake-up, a client's first waiter attempts this often to keep its place.
inline constexpr std::chrono::milliseconds line_refresh{1000};
// A freed lock is held back this long for the client it calls.
inline constexpr std::chrono::milliseconds reservation_grace{200};

// The source of a script that uses the line: wait_line.lua's functions, then `body`.
inline std::string with_wait_line(std::string_view body) {
  std::string source(scripts::wait_line);
  source.append("\n").append(body);
  return source;
}

// The line's keys of `name`, in the order its scripts take them after their own: the line, its
// deadlines, the reservation.
inline void append_line_keys(std::vector<std::string>& keys, std::string_view name) {
  keys.push_back(wait_line_key(name));
  keys.push_back(wait_line_deadlines_key(name));
  keys.push_back(reservation_key(name));
}

// An attempt's line arguments: the client's wake id, whether it waits, what it does in line after
// taking the lock ("r" back to the tail, "l" leave, "" not in line), its time in line.
inline void append_line_args(std::vector<std::string>& args, const attempt_request& request) {
  args.push_back(wake_id(request.owner));
  args.emplace_back(request.may_wait ? "1" : "0");
  args.emplace_back(request.others_waiting ? "r" : request.in_line ? "l" : "");
  args.push_back(std::to_string(line_lifetime.count()));
}

// leave_wait_line.lua for the lock `name`, whose releases are announced on `channel` with
// `unlock_message`.
inline script_call leave_line_call(const script& leave, std::string_view name, std::string channel,
                                   std::string_view owner, std::string_view unlock_message) {
  script_call call{&leave, {std::string(name), std::move(channel)}, {}, 1};
  append_line_keys(call.keys, name);
  call.args = {wake_id(owner), "publish", std::to_string(reservation_grace.count()),
               std::string(unlock_message), call_channel_prefix(name)};
  return call;
}

}  // namespace dlock::locks
