// `dlock status NAME [--json]` and `dlock unlock --force NAME`: look at a lock, or break it.
#pragma once

#include <string>

namespace dlock::cli {

// Prints who holds `name`, its remaining lease, its last fencing token and how many clients wait
// for it; human-readable, or one JSON object with `json`. Returns an exit code (exit_codes.hpp):
// exit_usage, with a message, when the key holds data that is not a lock.
int run_status(const std::string& redis_url, const std::string& name, bool json);

// Deletes the lock whoever holds it and wakes its waiters; says whether there was one. Exit code 0
// either way (the lock is free afterwards), like `rm -f`. A key that holds data, not a lock, is
// left untouched: exit_usage, with the library's explanation.
int run_force_unlock(const std::string& redis_url, const std::string& name);

}  // namespace dlock::cli
