// `dlock demo flash-sale`: the oversell scenario of seed 004. Buyers run a non-atomic
// read-check-write on a stock kept in Redis: without a lock, with dlock, and with dlock plus
// fencing tokens while one buyer stalls past its lease.
#pragma once

#include <string>

#include "demo_race.hpp"

namespace dlock::cli {

struct flash_sale_options {
  std::string redis_url;  // empty: a private redis-server
  int buyers = 40;
  int stock = 10;
};

// Runs the three rounds, prints progress, a table and a verdict. Returns exit_ok when the locked
// rounds sold exactly what they should, exit_failure otherwise (or another exit code on errors).
int run_flash_sale_demo(const flash_sale_options& options);

// The buyer for `dlock demo worker --scenario flash-sale --mode M --prefix P`; nullptr for an
// unknown mode.
participant_fn flash_sale_participant(const std::string& mode, const std::string& prefix);

}  // namespace dlock::cli
