// lock_options::min_replicas against a real master and replica (tools/redis_process): every first
// acquisition is confirmed by WAIT, pipelined behind the lock script; too few acknowledgements
// undo it and count as a failed attempt.
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;
// How long WAIT gives the replica: long where it must confirm (a loaded machine can leave the
// replica unscheduled for a while), short where it must not.
constexpr auto confirm_in_time = 2000ms;
constexpr auto refuse_quickly = 100ms;

// A master and one replica that has finished its first sync.
struct replicated_pair {
  // A replica's first sync would otherwise wait 5 s for more replicas to share it.
  redis_server master{[] {
    tools::redis_process_options o;
    o.extra_args = {"--repl-diskless-sync-delay", "0"};
    return o;
  }()};
  redis_server replica{[this] {
    tools::redis_process_options o;
    o.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())};
    return o;
  }()};

  replicated_pair() {
    // Ready when the replica acknowledges writes (INFO's state=online can come a little earlier).
    const bool synced = eventually(
        [&] {
          master.cli({"SET", "replicated-pair:probe", "1"});
          return master.cli({"WAIT", "1", "100"}) == "1";
        },
        10s);
    if (!synced) throw std::runtime_error("the replica did not sync");
  }
};

client_options confirming(const std::string& url, std::uint32_t replicas,
                          std::chrono::milliseconds timeout) {
  client_options o = client_options::from_url(url);
  o.locks.min_replicas = replicas;
  o.locks.replica_timeout = timeout;
  return o;
}

TEST(MinReplicas, AnAcquisitionConfirmedByTheReplicaIsHeld) {
  replicated_pair servers;
  client c{confirming(servers.master.url(), 1, confirm_in_time)};
  mutex m = c.get_lock(unique_key("m"));
  std::error_code ec;
  ASSERT_TRUE(m.try_lock(ec)) << ec.message();
  EXPECT_GT(m.fencing_token(), 0u);
  EXPECT_EQ(servers.replica.cli({"EXISTS", m.name()}), "1") << "the replica does not have it";
  m.unlock();
  EXPECT_EQ(c.lock_metrics().unconfirmed, 0u);
}

TEST(MinReplicas, APausedReplicaFailsTheAttemptCleanlyUntilItResumes) {
  replicated_pair servers;
  client c{confirming(servers.master.url(), 1, refuse_quickly)};
  mutex m = c.get_lock(unique_key("m"));
  servers.replica.kill(SIGSTOP);
  std::error_code ec;
  const auto before = steady_clock::now();
  EXPECT_FALSE(m.try_lock_for(300ms, ec));
  EXPECT_EQ(ec, errc::replicas_unavailable) << ec.message();
  EXPECT_LT(steady_clock::now() - before, 300ms + refuse_quickly + timing_slack);
  EXPECT_FALSE(m.try_lock()) << "the throwing form returns false";
  EXPECT_GT(c.lock_metrics().unconfirmed, 0u);
  // Nothing is left held on the master: each unconfirmed hold was released (asynchronously).
  EXPECT_TRUE(eventually([&] { return servers.master.cli({"EXISTS", m.name()}) == "0"; }));
  EXPECT_FALSE(m.is_held_by_current_thread());

  // lock() keeps trying, and succeeds once the replica is back.
  auto locked = std::async(std::launch::async, [&] {
    m.lock();
    const std::uint64_t token = m.fencing_token();
    m.unlock();
    return token;
  });
  EXPECT_EQ(locked.wait_for(300ms), std::future_status::timeout) << "lock() gave up";
  servers.replica.kill(SIGCONT);
  ASSERT_EQ(locked.wait_for(10s), std::future_status::ready);
  EXPECT_GT(locked.get(), 0u);
}

TEST(MinReplicas, MoreReplicasThanThereAreNeverConfirms) {
  replicated_pair servers;
  client c{confirming(servers.master.url(), 2, refuse_quickly)};
  mutex m = c.get_lock(unique_key("m"));
  std::error_code ec;
  EXPECT_FALSE(m.try_lock(ec));
  EXPECT_EQ(ec, errc::replicas_unavailable);
  // The asynchronous form says why in its error.
  std::future<lock_lease> lease = m.async_try_lock_for(200ms);
  try {
    (void)lease.get();
    ADD_FAILURE() << "an unconfirmed asynchronous acquisition succeeded";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::replicas_unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("of 2 replicas"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(eventually([&] { return servers.master.cli({"EXISTS", m.name()}) == "0"; }));
}

TEST(MinReplicas, AReentryNeedsNoConfirmationAndATimeoutOfZeroIsRefused) {
  replicated_pair servers;
  client c{confirming(servers.master.url(), 1, confirm_in_time)};
  mutex m = c.get_lock(unique_key("m"));
  ASSERT_TRUE(m.try_lock());
  servers.replica.kill(SIGSTOP);
  // WAIT follows every attempt, but a re-entry never fails for it: a lost first hold would show.
  EXPECT_TRUE(m.try_lock()) << "a re-entry was refused for want of replicas";
  m.unlock();
  m.unlock();
  servers.replica.kill(SIGCONT);

  client_options bad = confirming(servers.master.url(), 1, confirm_in_time);
  bad.locks.replica_timeout = 0ms;
  EXPECT_THROW(client{bad}, error);
}

}  // namespace
}  // namespace dlock
