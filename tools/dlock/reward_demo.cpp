#include "reward_demo.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;

// The work between checking the claim record and writing it (seed 004 inserts a database row):
// it widens the race window.
constexpr auto check_to_write_pause = 10ms;

struct reward_keys {
  explicit reward_keys(const std::string& prefix)
      : lock(prefix + "lock"), claimed_by(prefix + "claimed-by"), payouts(prefix + "payouts") {}
  std::string lock;        // the dlock lock of the family's reward
  std::string claimed_by;  // the claim record: who got the reward
  std::string payouts;     // one entry per reward paid out
};

// Seed 004's claim, not atomic: if nobody has claimed yet, record this member as the claimant and
// pay out. Two members between the check and the write are both paid.
void try_to_claim(dlock::client& redis, const reward_keys& k, int id) {
  if (!redis.command({"GET", k.claimed_by}).is_nil()) return;  // already claimed
  std::this_thread::sleep_for(check_to_write_pause);
  const std::string member = "member-" + std::to_string(id);
  redis.command({"SET", k.claimed_by, member});
  redis.command({"RPUSH", k.payouts, member});
}

void claim(dlock::client& redis, const reward_keys& k, bool locked, int id) {
  if (!locked) return try_to_claim(redis, k, id);
  dlock::mutex m = redis.get_lock(k.lock);
  std::unique_lock hold{m};
  try_to_claim(redis, k, id);
}

struct claim_result {
  long long payouts = 0;
  double seconds = 0;
};

}  // namespace

participant_fn reward_participant(const std::string& mode, const std::string& prefix) {
  if (mode != "none" && mode != "lock") return nullptr;
  return [locked = mode == "lock", keys = reward_keys(prefix)](dlock::client& redis, int id) {
    claim(redis, keys, locked, id);
  };
}

int run_reward_demo(const reward_options& o) {
  fmt::print(
      "Family reward (seed 004): {} members of one family claim the family's reward at the same\n"
      "moment. Each checks that nobody has claimed it yet, works for {} ms, then records itself\n"
      "as the claimant and is paid: a check-then-write that is not atomic. One payout is "
      "right.\n\n",
      o.members, check_to_write_pause.count());
  try {
    const demo_server server(o.redis_url);
    fmt::print("Redis: {}\n\n", server.url());
    const std::string prefix = fmt::format("dlock-demo:reward:{}:family-7:", ::getpid());
    const reward_keys keys(prefix);
    dlock::client redis{server.url()};
    // Leave nothing behind on a server that is not ours, whichever way this ends.
    struct cleanup {
      dlock::client& redis;
      const reward_keys& keys;
      ~cleanup() {
        try {
          redis.command(
              {"DEL", keys.lock, keys.claimed_by, keys.payouts, "dlock:fence:{" + keys.lock + "}"});
        } catch (const dlock::error&) {
          // Redis went away: nothing to clean.
        }
      }
    } clean_up{redis, keys};
    const race_split split = split_participants(o.members);

    auto run = [&](bool locked) {
      redis.command({"DEL", keys.claimed_by, keys.payouts});
      fmt::print("  {} members ({}) claim at once...\n", o.members, describe(split));
      std::fflush(stdout);
      const std::vector<std::string> worker_args{
          "--scenario", "reward", "--mode", locked ? "lock" : "none", "--prefix", prefix};
      claim_result r;
      r.seconds = run_race(server.url(), redis, split, worker_args, [&](dlock::client& c, int id) {
                    claim(c, keys, locked, id);
                  }).count();
      r.payouts = redis.command({"LLEN", keys.payouts}).integer;
      fmt::print("  done in {:.2f} s: the reward was paid {} time{} (claim record: {})\n\n",
                 r.seconds, r.payouts, r.payouts == 1 ? "" : "s",
                 redis.command({"GET", keys.claimed_by}).str);
      std::fflush(stdout);
      return r;
    };
    fmt::print("[1/2] Without a lock\n");
    const claim_result unlocked = run(false);
    fmt::print(
        "[2/2] With dlock: each member holds the family's lock while it checks and claims\n");
    const claim_result locked = run(true);

    const bool ok = locked.payouts == 1;
    fmt::print("Verdict\n");
    if (unlocked.payouts > 1) {
      fmt::print("  [ ok ] without a lock the reward was paid {} times\n", unlocked.payouts);
    } else {
      fmt::print(
          "  [info] without a lock it was paid once this time: the race depends on timing\n");
    }
    fmt::print("  [{}] with dlock it was paid {} time{}\n\n", ok ? " ok " : "FAIL", locked.payouts,
               locked.payouts == 1 ? "" : "s");
    fmt::print("result: members={} unlocked_payouts={} locked_payouts={} verdict={}\n", o.members,
               unlocked.payouts, locked.payouts, ok ? "pass" : "fail");
    return ok ? exit_ok : exit_failure;
  } catch (const dlock::error& e) {
    print_error(fmt::format("reward demo: {}", e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(fmt::format("reward demo: {}", e.what()));
    return exit_failure;
  }
}

}  // namespace dlock::cli
