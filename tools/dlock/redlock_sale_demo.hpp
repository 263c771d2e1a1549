// `dlock demo flash-sale --redlock`: seed 004's oversell scenario under Redlock over 5 private
// masters, two of which are killed in the middle of the sale.
#pragma once

#include "flash_sale_demo.hpp"

namespace dlock::cli {

// Starts 5 private masters and a private stock server, runs the sale without a lock and under
// Redlock (killing 2 masters mid-sale), prints a table with how many masters held the lock at each
// sale. Returns exit_ok when the Redlock run sold exactly the stock, exit_failure otherwise,
// exit_usage when options.redis_url is set (the demo needs servers it may kill).
int run_redlock_flash_sale_demo(const flash_sale_options& options);

}  // namespace dlock::cli
