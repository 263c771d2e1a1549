// dlock::plain_lock against the clients it shares its protocol with, run as real processes on one
// key: redis-py's Lock (Debian's python3-redis) and node-redlock 5 (bench/baselines, installed by
// `npm ci --prefix bench/baselines`). Each excludes dlock and dlock excludes each; a dlock waiter
// notices a foreign release, which announces nothing, by re-checking (measured here).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <iostream>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "support/child_process.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::child_process;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 300ms;
// How long after a foreign holder's release a dlock waiter re-checks at the latest
// (acquisition_machine::foreign_recheck_max, documented in dlock/plain_lock.hpp).
constexpr auto foreign_recheck_bound = 100ms;
// A foreign peer process starting (node takes a few hundred ms) and taking a free lock.
constexpr auto peer_start_limit = 15s;
constexpr auto foreign_lease_ms = "30000";

const std::string source_dir = DLOCK_SOURCE_DIR;
const std::string node_modules = source_dir + "/bench/baselines/node_modules";

struct peer {
  std::string label;
  // The command line up to its mode; the mode and HOST PORT KEY TTL_MS follow.
  std::vector<std::string> prefix;
  // Why it cannot run here (empty: it can).
  std::string missing;
};

peer redis_py() {
  peer p{
      "redis-py", {"/usr/bin/python3", source_dir + "/tests/support/interop/redis_py_peer.py"}, {}};
  const tools::command_result r =
      tools::run_command({"/usr/bin/python3", "-c", "import redis"}, 20s);
  if (r.exit_code != 0) {
    p.missing =
        "redis-py is not installed for /usr/bin/python3 (apt-get install python3-redis, "
        "or bash scripts/install-deps.sh)";
  }
  return p;
}

peer node_redlock() {
  peer p{
      "node-redlock",
      {"/usr/bin/node", source_dir + "/tests/support/interop/node_redlock_peer.cjs", node_modules},
      {}};
  if (!std::filesystem::exists(node_modules + "/redlock") ||
      !std::filesystem::exists(node_modules + "/ioredis")) {
    p.missing =
        "node-redlock is not installed: run `npm ci --prefix bench/baselines` (scripts/"
        "test.sh does)";
  } else if (!std::filesystem::exists("/usr/bin/node")) {
    p.missing = "no /usr/bin/node";
  }
  return p;
}

std::vector<std::string> peer_args(const peer& p, const std::string& mode, const redis_server& s,
                                   const std::string& key) {
  std::vector<std::string> args = p.prefix;
  for (const std::string& a : {mode, std::string("127.0.0.1"), std::to_string(s.port()), key,
                               std::string(foreign_lease_ms)})
    args.push_back(a);
  return args;
}

class PlainInterop : public ::testing::TestWithParam<peer (*)()> {
 protected:
  void SetUp() override {
    foreign = GetParam()();
    if (!foreign.missing.empty()) GTEST_SKIP() << foreign.label << ": " << foreign.missing;
  }
  // One attempt by the foreign client: "acquired" or "busy".
  std::string foreign_try(const std::string& key) {
    const tools::command_result r = tools::run_command(peer_args(foreign, "try", server, key), 30s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  peer foreign;
  redis_server server;
};

TEST_P(PlainInterop, AForeignHolderExcludesDlockAndItsReleaseIsNoticedWithinTheBound) {
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  // The re-checks run 10, 30, 70, 150, 250, 350 ... ms after the first attempt: releasing at
  // 600 ms + round x 10 ms puts each release at another point of the 100 ms re-check period.
  constexpr int rounds = 10;
  std::vector<std::chrono::microseconds> delays;
  for (int round = 0; round < rounds; ++round) {
    child_process holder(peer_args(foreign, "hold", server, name));
    const std::string line = holder.read_line(peer_start_limit);
    ASSERT_EQ(line.rfind("locked ", 0), 0u) << foreign.label << " did not lock: '" << line << "'";
    const std::string value = line.substr(7);
    EXPECT_EQ(c.command({"GET", name}).str, value) << "not the SET NX PX layout";
    EXPECT_FALSE(p.try_lock()) << "dlock took a lock " << foreign.label << " holds";
    // `dlock status` shows the foreign holder's value.
    const lock_status s = p.status();
    ASSERT_EQ(s.holders.size(), 1u);
    EXPECT_EQ(s.holders[0].owner, value);
    // The waiting thread owns the hold: it also has the foreign client try while it holds it.
    struct outcome {
      bool ok = false;
      steady_clock::time_point at;
      std::string foreign_try;
    };
    auto acquired = std::async(std::launch::async, [&] {
      outcome o;
      o.ok = p.try_lock_for(20s);
      o.at = steady_clock::now();
      if (o.ok) {
        o.foreign_try = foreign_try(name);
        p.unlock();
      }
      return o;
    });
    // Long enough for the re-check backoff to reach its maximum (10, 20, 40, 80, 100 ms).
    ASSERT_EQ(acquired.wait_for(600ms + round * 10ms), std::future_status::timeout)
        << "dlock acquired while " << foreign.label << " held the lock";
    // From the signal (sent before the peer deletes the key) to dlock holding the lock: an upper
    // bound of the delay from the release itself.
    const auto signalled_at = steady_clock::now();
    holder.kill(SIGUSR2);
    ASSERT_EQ(acquired.wait_for(30s), std::future_status::ready) << "the release went unnoticed";
    const outcome o = acquired.get();
    ASSERT_TRUE(o.ok);
    delays.push_back(std::chrono::duration_cast<std::chrono::microseconds>(o.at - signalled_at));
    EXPECT_EQ(holder.read_line(5s), "released");
    EXPECT_LT(o.at - signalled_at, foreign_recheck_bound + timing_slack)
        << "the release of " << foreign.label << " was noticed late";
    // While dlock held it, the foreign client was refused.
    EXPECT_EQ(o.foreign_try, "busy\n");
    EXPECT_EQ(c.command({"EXISTS", name}).integer, 0) << "dlock's release did not delete the key";
  }
  std::sort(delays.begin(), delays.end());
  std::string figures;
  for (const auto d : delays)
    figures += std::to_string(d.count() / 1000.0).substr(0, 5) + " ";
  std::cout << "[ measured ] " << foreign.label
            << " release -> dlock waiter holds, ms (sorted): " << figures << "\n";
  RecordProperty("release_to_dlock_hold_ms_max", std::to_string(delays.back().count() / 1000.0));
}

TEST_P(PlainInterop, DlockExcludesTheForeignClientUntilItReleases) {
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  p.lock();
  EXPECT_EQ(foreign_try(name), "busy\n");
  p.unlock();
  // unlock() is queued; a command on the same client afterwards runs after it.
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_EQ(foreign_try(name), "acquired\n");
  // An asynchronous lease with an explicit lease excludes it too.
  lock_lease lease = p.async_acquire({.lease = 10s}).get();
  ASSERT_TRUE(lease);
  EXPECT_EQ(foreign_try(name), "busy\n");
  EXPECT_EQ(lease.release(), std::error_code{});
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_EQ(foreign_try(name), "acquired\n");
}

INSTANTIATE_TEST_SUITE_P(Peers, PlainInterop, ::testing::Values(&redis_py, &node_redlock),
                         [](const ::testing::TestParamInfo<peer (*)()>& param) {
                           return param.index == 0 ? std::string("RedisPy")
                                                   : std::string("NodeRedlock");
                         });

}  // namespace
}  // namespace dlock
