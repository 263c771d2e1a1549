// `dlock --redis URL1 --redis URL2 --redis URL3 exec NAME -- COMMAND`: the command runs under a
// Redlock over those independent masters (dlock::redlock_mutex; docs/redlock.md).
#pragma once

#include <string>
#include <vector>

#include "exec.hpp"

namespace dlock::cli {

// As run_exec(), with the lock taken on a majority of `master_urls` (two or more). The options,
// DLOCK_* environment, signal handling and exit codes are run_exec()'s; a URL list Redlock refuses
// (a duplicate, a cluster URL) exits with exit_usage. Call it before any other thread exists.
int run_redlock_exec(const exec_options& options, const std::vector<std::string>& master_urls);

}  // namespace dlock::cli
