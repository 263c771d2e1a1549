// `dlock latch wait|count-down|set NAME` and the latch view of `dlock status NAME`: Redisson's
// RCountDownLatch from a shell (scripts waiting for services to report ready).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "dlock/client.hpp"

namespace dlock::cli {

// Waits until the latch's count is zero (or it does not exist): exit 0; after `timeout` (none:
// for ever) exit_conflict with a message. Exit codes: exit_codes.hpp.
int run_latch_wait(const std::string& redis_url, const std::string& name,
                   std::optional<std::chrono::milliseconds> timeout);

// Counts the latch down once and prints the count left; exit 0.
int run_latch_count_down(const std::string& redis_url, const std::string& name);

// Sets the count when the latch does not exist (exit 0), else says so and exits exit_conflict.
int run_latch_set(const std::string& redis_url, const std::string& name, std::int64_t count);

// Whether the key `name` holds a latch's count (a string that is a whole number); no error when
// it does not.
bool holds_latch(dlock::client& redis, const std::string& name);

// Prints the latch `name` as `dlock status` does for locks (text, or one JSON object). Returns
// an exit code.
int print_latch_status(dlock::client& redis, const std::string& name, bool json);

}  // namespace dlock::cli
