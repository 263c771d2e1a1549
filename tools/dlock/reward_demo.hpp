// `dlock demo reward`: the family reward of seed 004. Every member of a family may claim the
// family's one reward, and only one claim may succeed; the claim is a non-atomic check-then-write.
#pragma once

#include <string>

#include "demo_race.hpp"

namespace dlock::cli {

struct reward_options {
  std::string redis_url;  // empty: a private redis-server
  int members = 20;
};

// Runs the claims without a lock and with dlock, prints progress and a verdict. Returns exit_ok
// when the locked run paid the reward exactly once, exit_failure otherwise.
int run_reward_demo(const reward_options& options);

// The member for `dlock demo worker --scenario reward --mode M --prefix P`; nullptr for an
// unknown mode.
participant_fn reward_participant(const std::string& mode, const std::string& prefix);

}  // namespace dlock::cli
