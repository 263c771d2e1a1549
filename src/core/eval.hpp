// src/core/eval.hpp
//
// Running a Lua script on one connection: EVALSHA first, EVAL with the source when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH); EVAL also caches it for the next EVALSHA.
#pragma once

#include <chrono>
#include <span>
#include <string_view>

#include "dlock/script.hpp"
#include "net/connection.hpp"

namespace dlock::core {

// Queues `s` with `keys` and `args` on `link`; `done` runs once as for connection::send. The
// NOSCRIPT fallback goes out after commands queued meanwhile: callers that need a script ordered
// before later commands must not rely on the fallback for that.
void eval_on(net::connection& link, const script& s, std::span<const std::string_view> keys,
             std::span<const std::string_view> args, std::chrono::milliseconds timeout,
             net::completion done, bool urgent = false);

}  // namespace dlock::core
