// `dlock demo smoke`: exercises the Redis core against a server and prints what it saw.
#pragma once

#include <string>

namespace dlock::cli {

// Runs the smoke demo against `redis_url`, or against a private redis-server started for the
// run when `redis_url` is empty. Returns a process exit code (see exit_codes.hpp).
int run_smoke_demo(const std::string& redis_url);

}  // namespace dlock::cli
