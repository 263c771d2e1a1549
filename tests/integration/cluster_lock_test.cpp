// dlock on a real Redis Cluster (3 masters + 3 replicas, tools/redis_process/redis_cluster.hpp):
// mode detection, routing by slot, redirections, sharded wake-ups, the watchdog across a slot
// migration and failovers, many processes, the CLI. Suites are named Cluster* so that
// `--gtest_filter=Cluster*` (and the CTest label "cluster") select them.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <future>
#include <mutex>
#include <thread>

#include "core/hash_slot.hpp"
#include "dlock/dlock.hpp"
#include "redis_cluster.hpp"
#include "support/child_process.hpp"
#include "support/cluster_fixture.hpp"
#include "support/line_listeners.hpp"
#include "support/lock_name_cases.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::child_process;
using test::eventually;
using tools::redis_cluster;
using tools::redis_cluster_options;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;
// A watchdog lease short enough that "kept for two more leases" is quick to see.
constexpr auto short_lease = 1000ms;

client_options options_for(const std::string& url, milliseconds lease = 30s) {
  client_options o = client_options::from_url(url);
  o.locks.watchdog_timeout = lease;
  return o;
}

// One cluster for the suite's tests; those that move slots put them back.
class ClusterLock : public test::cluster_suite<ClusterLock> {
 protected:
  // A replica's URL: a seed that serves no slot, so every request must be routed elsewhere.
  static std::string replica_url() {
    const auto masters = cluster().masters();
    return redis_cluster::url(cluster().replicas_of(masters.front()).front());
  }
};

TEST_F(ClusterLock, CommandsRouteByKeyFromAnySeed) {
  client c{replica_url()};
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
  EXPECT_EQ(c.routing_metrics().deployment, deployment_kind::cluster);
  EXPECT_EQ(c.routing_metrics().map_refreshes, 1u);
  for (int i = 0; i < 200; ++i) {
    const std::string key = test::unique_key("k" + std::to_string(i));
    c.command({"SET", key, std::to_string(i)});
    EXPECT_EQ(c.command({"GET", key}).str, std::to_string(i));
    // It really lives on the master of its slot.
    EXPECT_EQ(cluster().call(cluster().master_for_key(key), {"GET", key}).str, std::to_string(i));
  }
  // A script routes by its first key; a tag keeps two keys in one slot.
  const script both{"return redis.call('mset', KEYS[1], ARGV[1], KEYS[2], ARGV[1])"};
  const std::string a = "{" + test::unique_key("t") + "}a", b = "{" + test::unique_key("t") + "}b";
  EXPECT_EQ(c.eval(both, {a, b}, {"v"}).str, "OK");
  EXPECT_EQ(c.command({"MGET", a, b}).elements.at(1).str, "v");
  // The map was right from the start: nothing was redirected.
  EXPECT_EQ(c.routing_metrics().moved, 0u);
  EXPECT_EQ(c.routing_metrics().asked, 0u);
}

// Requests made before the first server has answered wait for its answer, then go straight to
// their slot's master: a fresh client's first burst meets no MOVED.
TEST_F(ClusterLock, AFreshClientsFirstBurstGoesStraightToTheSlotsMasters) {
  client c{replica_url()};
  std::vector<std::future<reply>> replies;
  for (int i = 0; i < 200; ++i) {
    const std::string key = test::unique_key("burst" + std::to_string(i));
    const std::string_view args[] = {"SET", key, "1"};
    replies.push_back(c.async_command(args));
  }
  for (auto& r : replies)
    EXPECT_EQ(r.get().str, "OK");
  EXPECT_EQ(c.routing_metrics().moved, 0u);
  EXPECT_EQ(c.routing_metrics().map_refreshes, 1u);
}

// client_options::on_log hears the slot map load, and metrics_text() shows the deployment.
TEST_F(ClusterLock, TheLogHookAndMetricsTextSeeTheClusterMap) {
  std::mutex m;
  std::condition_variable changed;
  std::vector<std::string> masters_fields;  // of every "cluster map refreshed" record
  client_options o = client_options::from_url(replica_url());
  o.on_log = [&](const log_record& r) {
    if (r.message != "cluster map refreshed") return;
    for (const log_field& f : r.fields) {
      if (f.key != "masters") continue;
      {
        std::lock_guard lock(m);
        masters_fields.push_back(f.value);
      }
      changed.notify_all();
    }
  };
  client c{o};
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(changed.wait_for(lock, 10s, [&] { return !masters_fields.empty(); }))
        << "the slot map load was not logged";
    EXPECT_EQ(masters_fields.front(), "3");
  }
  const std::string text = c.metrics_text();
  EXPECT_NE(text.find("\ndlock_deployment{kind=\"cluster\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ndlock_cluster_map_refreshes_total 1\n"), std::string::npos) << text;
}

TEST_F(ClusterLock, OneServerIsNotACluster) {
  test::redis_server server;
  client c{server.url()};
  c.command({"SET", "a", "1"});
  c.command({"MSET", "a", "1", "b", "2"});  // any keys together, as always on one server
  EXPECT_EQ(c.routing_metrics().deployment, deployment_kind::single);
  EXPECT_EQ(c.routing_metrics().map_refreshes, 0u);
}

TEST_F(ClusterLock, SeveralSeedsTheFirstThatAnswersIsUsed) {
  // The first seed is a closed port.
  const std::string url = "redis://127.0.0.1:1," + replica_url().substr(8);
  client c{url};
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
  c.command({"SET", test::unique_key("s"), "1"});
}

TEST_F(ClusterLock, KeysInDifferentSlotsAreRefusedBeforeAnythingIsSent) {
  client c{cluster().seed_url()};
  c.command({"PING"});  // the deployment is known from the first reply on
  std::string a = "a", b = "b";
  ASSERT_NE(core::hash_slot(a), core::hash_slot(b));
  try {
    c.command({"MSET", a, "1", b, "2"});
    ADD_FAILURE() << "a cross-slot MSET was sent";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("hash slot"), std::string::npos) << e.what();
  }
  const script s{"return 1"};
  EXPECT_THROW(c.eval(s, {a, b}, {}), error);
  EXPECT_TRUE(c.command({"EXISTS", a}).integer == 0) << "the refused MSET wrote something";
}

TEST_F(ClusterLock, LocksInManySlotsAndNamesWithBraces) {
  client c{replica_url()};
  std::vector<std::string> names = test::lock_name_cases();
  for (int i = 0; i < 100; ++i)
    names.push_back(test::unique_key("n" + std::to_string(i)));
  for (const std::string& name : names) {
    mutex m = c.get_lock(name);
    ASSERT_TRUE(m.try_lock()) << name;
    const std::uint64_t token = m.fencing_token();
    EXPECT_GT(token, 0u) << name;
    EXPECT_TRUE(m.is_locked()) << name;
    // The lock hash is where the cluster puts the name.
    EXPECT_EQ(cluster().call(cluster().master_for_key(name), {"EXISTS", name}).integer, 1) << name;
    m.unlock();
    EXPECT_FALSE(m.is_locked()) << name;
    ASSERT_TRUE(m.try_lock()) << name;
    EXPECT_GT(m.fencing_token(), token) << name;
    m.unlock();
  }
}

TEST_F(ClusterLock, AWaiterIsWokenBySpublishOnTheChannelsNode) {
  const std::string name = test::unique_key("wake");
  client holder{options_for(cluster().seed_url())};
  client waiter{options_for(replica_url())};
  mutex held = holder.get_lock(name);
  held.lock();
  mutex wanted = waiter.get_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(20s);
    const auto at = steady_clock::now();
    if (ok) wanted.unlock();
    return std::make_pair(ok, at);
  });
  // The waiter listens with SSUBSCRIBE on its call channel, on the master of the name's slot.
  const std::uint16_t owner = cluster().master_for_key(name);
  ASSERT_TRUE(eventually([&] {
    return test::line_listeners([&](const auto& args) { return cluster().call(owner, args); }, name,
                                true) == 1;
  })) << "no sharded subscription on the slot's master";
  EXPECT_EQ(held.status().subscribers, 1u);
  const auto released = steady_clock::now();
  held.unlock();
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  // Woken by the message, not by the 30 s lease running out or a poll.
  EXPECT_LT(at - released, timing_slack);
}

TEST_F(ClusterLock, TheWatchdogKeepsLocksInManySlotsAndFollowsAnAskAndAMove) {
  client c{options_for(cluster().seed_url(), short_lease)};
  std::vector<mutex> held;
  for (int i = 0; i < 50; ++i) {
    held.push_back(c.get_lock(test::unique_key("w" + std::to_string(i))));
    held.back().lock();
  }
  const std::string name = held.front().name();
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t m : cluster().masters())
    if (m != from) to = m;

  // Half-way: the slot is MIGRATING and the lock hash has moved already: its renewals get ASK.
  cluster().begin_slot_migration(slot, from, to);
  const auto migrated = cluster().call(
      from, {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS", name});
  ASSERT_EQ(migrated.str, "OK") << migrated.str;
  std::this_thread::sleep_for(short_lease * 2);  // two leases must pass: the time is the test
  EXPECT_GT(c.routing_metrics().asked, 0u) << "no renewal met an ASK";
  EXPECT_TRUE(held.front().is_held_by_current_thread());
  cluster().finish_slot_migration(slot, from, to);
  std::this_thread::sleep_for(short_lease * 2);
  EXPECT_GT(c.routing_metrics().moved, 0u) << "no renewal met a MOVED";
  for (mutex& m : held) {
    EXPECT_TRUE(m.is_held_by_current_thread()) << m.name();
    EXPECT_FALSE(m.stop_token().stop_requested()) << m.name();
  }
  EXPECT_EQ(cluster().call(to, {"EXISTS", name}).integer, 1) << "the lock did not move";
  for (mutex& m : held)
    EXPECT_EQ(m.unlock_checked(), std::error_code{}) << m.name();
  // unlock() queues the release; it reaches the new owner soon after.
  EXPECT_TRUE(eventually([&] { return cluster().call(to, {"EXISTS", name}).integer == 0; }));
  // Put the slot back for the other tests.
  cluster().migrate_slot(slot, to, from);
}

// While a slot's keys are moving, Redis refuses every lock script of the slot (ASK from the
// source, then TRYAGAIN from the target, or TRYAGAIN from the source when only some of the
// script's keys are still there), for as long as the migration lasts. A release refused for longer
// than its request_timeout is tried again rather than dropped (the lock stayed held until its
// lease ended), and an acquisition keeps being retried within its request_timeout rather than
// failing with the raw ASK error after five hops (a hostile try's findings).
TEST_F(ClusterLock, AReleaseAndAnAcquisitionOutlastASlotMigration) {
  const std::string name = test::unique_key("migrating");
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t m : cluster().masters())
    if (m != from) to = m;
  const auto end_migration = [&] {  // the slot stays on `from`
    for (const std::uint16_t port : {to, from})
      (void)cluster().call(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"});
  };

  client_options brief = options_for(cluster().seed_url());
  brief.request_timeout = 1000ms;
  client holder{brief};
  mutex held = holder.get_lock(name);
  held.lock();
  cluster().begin_slot_migration(slot, from, to);
  held.unlock();
  // Refused past its first request's timeout: the time is the test.
  std::this_thread::sleep_for(brief.request_timeout * 18 / 10);
  EXPECT_EQ(cluster().call(from, {"EXISTS", name}).integer, 1) << "released during the migration";
  end_migration();
  EXPECT_TRUE(eventually([&] {
    return cluster().call(from, {"EXISTS", name}).integer == 0;
  })) << "the refused release was dropped: the lock stays until its lease ends";

  client_options patient = options_for(cluster().seed_url());
  patient.request_timeout = 3000ms;
  client waiter{patient};
  mutex wanted = waiter.get_lock(name);
  cluster().begin_slot_migration(slot, from, to);
  auto got = std::async(std::launch::async, [&] { return wanted.try_lock_for(10s); });
  EXPECT_EQ(got.wait_for(1200ms), std::future_status::timeout) << "ended during the migration";
  end_migration();
  ASSERT_EQ(got.wait_for(patient.request_timeout), std::future_status::ready);
  EXPECT_TRUE(got.get()) << "the free lock was not taken once the migration ended";
  wanted.unlock();
}

// The thread's next attempt withdraws its release still out (the router would otherwise send it
// again after the attempt, where it could end the hold the attempt took). When that attempt
// then fails without running (refused by the migration past its request_timeout), the release
// must go out again behind it: the lock would otherwise stay held, by nobody, until its lease.
TEST_F(ClusterLock, AReleaseWithdrawnByAnAttemptThatNeverRanIsSentAgain) {
  const std::string name = test::unique_key("withdrawn");
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  std::uint16_t to = 0;
  for (const std::uint16_t m : cluster().masters())
    if (m != from) to = m;
  client_options brief = options_for(cluster().seed_url());
  brief.request_timeout = 1000ms;
  client c{brief};
  mutex m = c.get_lock(name);
  m.lock();
  cluster().begin_slot_migration(slot, from, to);
  m.unlock();  // refused, and retried by the router
  std::error_code refused;
  try {
    EXPECT_FALSE(m.try_lock()) << "acquired during the migration";
  } catch (const error& e) {
    refused = e.code();
  }
  EXPECT_EQ(refused, errc::server_error) << "the attempt did not fail as refused";
  EXPECT_EQ(cluster().call(from, {"EXISTS", name}).integer, 1) << "released during the migration";
  for (const std::uint16_t port : {to, from})  // the slot stays on `from`
    (void)cluster().call(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"});
  EXPECT_TRUE(eventually([&] {
    return cluster().call(from, {"EXISTS", name}).integer == 0;
  })) << "the withdrawn release was not sent again: the lock stays held until its lease ends";
  client other{options_for(cluster().seed_url())};
  mutex theirs = other.get_lock(name);
  EXPECT_TRUE(theirs.try_lock());
  theirs.unlock();
}

// A waiter's sharded subscription follows its slot: the old owner drops it (a server-sent
// sunsubscribe), the client subscribes on the new owner, and the unlock published there wakes it.
TEST_F(ClusterLock, AWaiterFollowsItsChannelWhenTheSlotMoves) {
  const std::string name = test::unique_key("moving");
  client holder{options_for(cluster().seed_url())};
  client waiter{options_for(replica_url())};
  mutex held = holder.get_lock(name);
  held.lock();
  mutex wanted = waiter.get_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(30s);
    const auto at = steady_clock::now();
    if (ok) wanted.unlock();
    return std::make_pair(ok, at);
  });
  const std::uint16_t slot = cluster().key_slot(name);
  const std::uint16_t from = cluster().master_for_slot(slot);
  // Its call channel, named by the wait line that moves with the slot.
  auto subscribed_on = [&](std::uint16_t port) {
    return test::line_listeners([&](const auto& args) { return cluster().call(port, args); }, name,
                                true) == 1;
  };
  ASSERT_TRUE(eventually([&] { return subscribed_on(from); }));
  std::uint16_t to = 0;
  for (const std::uint16_t m : cluster().masters())
    if (m != from) to = m;
  cluster().migrate_slot(slot, from, to);
  ASSERT_TRUE(eventually([&] { return subscribed_on(to); }))
      << "the waiter did not subscribe on the slot's new owner";
  const auto released = steady_clock::now();
  held.unlock();
  const auto [ok, at] = got.get();
  ASSERT_TRUE(ok);
  EXPECT_LT(at - released, timing_slack) << "woken by its 30 s lease, not by the message";
  cluster().migrate_slot(slot, to, from);
}

// min_replicas on a cluster: WAIT follows the lock script on the connection to the slot's master,
// so it counts that master's replicas. With the one replica paused, an acquisition fails cleanly
// and leaves nothing held; resumed, it succeeds.
TEST_F(ClusterLock, MinReplicasConfirmsOnTheSlotsMasterAndAPausedReplicaFailsCleanly) {
  constexpr auto replica_timeout = 100ms;
  client c{replica_url() +
           "?min_replicas=1&replica_timeout=" + std::to_string(replica_timeout.count())};
  ASSERT_EQ(c.options().locks.min_replicas, 1u);
  const std::string name = test::unique_key("confirmed");
  const std::uint16_t owner = cluster().master_for_key(name);
  const std::uint16_t replica = cluster().replicas_of(owner).front();
  mutex m = c.get_lock(name);
  std::error_code ec;
  // A loaded machine (sanitizers, tests side by side) may miss the 100 ms once: try again.
  ASSERT_TRUE(eventually([&] { return m.try_lock(ec); })) << ec.message();
  // READONLY: a cluster replica answers reads of its master's slots instead of redirecting them.
  const auto on_replica = tools::resp_call_all(replica, {{"READONLY"}, {"EXISTS", name}});
  EXPECT_EQ(on_replica.at(1).integer, 1) << "the replica does not have it";
  m.unlock();
  ASSERT_TRUE(eventually([&] { return cluster().call(owner, {"EXISTS", name}).integer == 0; }));

  cluster().node(replica).kill(SIGSTOP);
  const auto before = steady_clock::now();
  EXPECT_FALSE(m.try_lock(ec));
  EXPECT_EQ(ec, errc::replicas_unavailable) << ec.message();
  EXPECT_LT(steady_clock::now() - before, replica_timeout + timing_slack);
  EXPECT_GT(c.lock_metrics().unconfirmed, 0u);
  // The unconfirmed hold was released (asynchronously) on the slot's master.
  EXPECT_TRUE(eventually([&] { return cluster().call(owner, {"EXISTS", name}).integer == 0; }));
  EXPECT_FALSE(m.is_held_by_current_thread());
  cluster().node(replica).kill(SIGCONT);
  ASSERT_TRUE(m.try_lock_for(10s, ec)) << ec.message();
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  // Paused for less than the node timeout: nobody counted it failed, but make sure for the next
  // tests.
  cluster().wait_ok();
}

TEST_F(ClusterLock, TwoProcessesOfFourThreadsKeepANonAtomicCountExact) {
  const std::string name = test::unique_key("count"), counter = test::unique_key("counter");
  constexpr int threads = 4, iterations = 25;
  child_process a({DLOCK_TEST_LOCK_WORKER, "count", cluster().seed_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  child_process b({DLOCK_TEST_LOCK_WORKER, "count", replica_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  EXPECT_EQ(a.read_line(120s), "tokens_not_increasing 0");
  EXPECT_EQ(b.read_line(120s), "tokens_not_increasing 0");
  client c{cluster().seed_url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations));
}

// Failovers change the cluster: each test has its own.
TEST(ClusterFailover, AGracefulFailoverKeepsAWatchdogHold) {
  test::redis_test_cluster cluster;
  client c{options_for(cluster.seed_url(), short_lease)};
  const std::string name = test::unique_key("f");
  mutex m = c.get_lock(name);
  m.lock();
  const std::uint64_t token = m.fencing_token();
  const std::uint16_t owner = cluster.master_for_key(name);
  cluster.failover(cluster.replicas_of(owner).front());
  std::this_thread::sleep_for(short_lease * 2);  // kept for two more leases: the time is the test
  EXPECT_GT(c.routing_metrics().moved + c.routing_metrics().map_refreshes, 1u);
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_FALSE(m.stop_token().stop_requested());
  EXPECT_NE(cluster.master_for_key(name), owner);
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  // New acquisitions work, and tokens keep increasing.
  ASSERT_TRUE(m.try_lock_for(5s));
  EXPECT_GT(m.fencing_token(), token);
  m.unlock();
}

TEST(ClusterFailover, KillingTheMasterOfAHeldLockNeverHangsAndNeverDropsItSilently) {
  test::redis_test_cluster cluster;
  std::atomic<int> losses{0};
  client_options o = options_for(cluster.seed_url(), short_lease);
  o.locks.on_lock_lost = [&](const lock_loss&) { ++losses; };
  client c{o};
  const std::string name = test::unique_key("k");
  mutex m = c.get_lock(name);
  m.lock();
  const std::uint16_t owner = cluster.master_for_key(name);
  cluster.kill_node(owner);
  cluster.wait_ok();  // the replica took over
  // The hold is either kept (the lock had replicated) or reported lost, within a lease.
  ASSERT_TRUE(eventually(
      [&] {
        const bool lost = m.stop_token().stop_requested();
        return lost || m.status().locked;
      },
      10s));
  const bool lost = m.stop_token().stop_requested();
  EXPECT_EQ(lost, losses.load() == 1);
  std::printf("[ info     ] after kill -9 of its master the hold was %s\n",
              lost ? "reported lost" : "kept");
  const auto before = steady_clock::now();
  const std::error_code ec = m.unlock_checked();
  EXPECT_LT(steady_clock::now() - before, c.options().request_timeout + timing_slack);
  EXPECT_TRUE(ec == std::error_code{} || ec == errc::lock_lost) << ec.message();
  // Another client takes the lock on the promoted master.
  client other{cluster.seed_url()};
  mutex m2 = other.get_lock(name);
  ASSERT_TRUE(m2.try_lock_for(10s));
  m2.unlock();
}

TEST(ClusterFailover, ADownClusterGivesAClearErrorWithinTheTimeoutAndRecovers) {
  test::redis_test_cluster cluster;
  client_options o = client_options::from_url(cluster.seed_url());
  o.request_timeout = 1s;
  client c{o};
  const std::string name = test::unique_key("down");
  const std::uint16_t owner = cluster.master_for_key(name);
  const std::vector<std::uint16_t> replicas = cluster.replicas_of(owner);
  // The slot's master and its replica gone: the cluster is down (full coverage is required).
  for (const std::uint16_t r : replicas)
    cluster.kill_node(r);
  cluster.kill_node(owner);
  mutex m = c.get_lock(name);
  std::error_code ec;
  // The client may not have read the dead master's closed socket yet: an attempt written to it
  // fails with connection_lost (it may have run). The next ones cannot reach any node.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto before = steady_clock::now();
    EXPECT_FALSE(m.try_lock(ec));
    const auto took = steady_clock::now() - before;
    EXPECT_TRUE(ec) << "a lock on a dead slot was granted";
    EXPECT_LT(took, o.request_timeout + timing_slack) << ec.message();
    if (ec != errc::connection_lost) break;
  }
  EXPECT_GT(c.routing_metrics().retries, 0u) << ec.message();
  EXPECT_TRUE(ec == errc::connect_failed || ec == errc::connect_timeout || ec == errc::server_error)
      << ec.message();
  std::printf("[ info     ] a lock on a dead slot: %s\n", ec.message().c_str());
  // Back: the same node returns as the slot's master, and locks work again.
  cluster.restart_node(owner);
  for (const std::uint16_t r : replicas)
    cluster.restart_node(r);
  cluster.wait_ok();
  ASSERT_TRUE(m.try_lock_for(10s));
  m.unlock();
}

// A password applies to every node: the seed, each master's connection and the sharded
// subscribers.
TEST(ClusterAuth, APasswordReachesEveryNodeAndAWrongOneIsAClearError) {
  redis_cluster_options options;
  options.password = "s3cret,with@odd:chars";
  test::redis_test_cluster cluster(options);
  const std::string name = test::unique_key("auth");
  client holder{options_for(cluster.seed_url())};
  const auto masters = cluster.masters();
  client waiter{options_for(cluster.node_url(cluster.replicas_of(masters.back()).front()))};
  for (int i = 0; i < 30; ++i) {
    const std::string key = test::unique_key("k" + std::to_string(i));
    holder.command({"SET", key, "1"});
  }
  mutex held = holder.get_lock(name);
  held.lock();
  mutex wanted = waiter.get_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(20s);
    if (ok) wanted.unlock();
    return ok;
  });
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 1; }));
  held.unlock();
  EXPECT_TRUE(got.get());

  client intruder{redis_cluster::url(cluster.ports().front())};  // no password
  try {
    intruder.command({"GET", name});
    ADD_FAILURE() << "a command without the password was served";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::auth_failed) << e.what();
  }
}

#ifdef DLOCK_CLI
TEST_F(ClusterLock, TheCliExecsAndReportsAndBreaksLocks) {
  const std::string name = test::unique_key("cli");
  const std::string url = replica_url();
  const std::string cli = DLOCK_CLI;
  const std::string run = cli + " --redis " + url + " exec " + name + " -- true";
  EXPECT_EQ(std::system(run.c_str()), 0);
  client c{cluster().seed_url()};
  mutex m = c.get_lock(name);
  m.lock();
  const std::string busy = cli + " --redis " + url + " exec -n " + name + " -- true";
  EXPECT_NE(std::system(busy.c_str()), 0) << "exec ran while the lock was held";
  const std::string status = cli + " --redis " + url + " status " + name + " > /dev/null";
  EXPECT_EQ(std::system(status.c_str()), 0);
  const std::string force = cli + " --redis " + url + " unlock --force " + name + " > /dev/null";
  EXPECT_EQ(std::system(force.c_str()), 0);
  EXPECT_FALSE(m.is_locked());
}
#endif

}  // namespace
}  // namespace dlock
