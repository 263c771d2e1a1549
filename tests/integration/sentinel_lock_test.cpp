// dlock through Redis Sentinel (tools/redis_process/redis_sentinel_group.hpp: 1 master + 2
// replicas + 3 sentinels): resolving the master, following failovers with held locks and
// waiters, bad configurations, min_replicas. Suites are named Sentinel* (CTest label "sentinel").
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_sentinel_group.hpp"
#include "support/child_process.hpp"
#include "support/delay_proxy.hpp"
#include "support/redis_fixture.hpp"
#include "support/sentinel_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::child_process;
using test::eventually;
using tools::redis_sentinel_group;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;

client_options options_for(const std::string& url, milliseconds lease = 30s) {
  client_options o = client_options::from_url(url);
  o.locks.watchdog_timeout = lease;
  return o;
}

// One group for the tests that leave it as they found it.
class SentinelLock : public test::sentinel_suite<SentinelLock> {};

TEST_F(SentinelLock, TheClientFindsTheMasterThroughTheSentinels) {
  client c{group().sentinel_url()};
  const std::string name = test::unique_key("m");
  mutex m = c.get_lock(name);
  ASSERT_TRUE(m.try_lock());
  EXPECT_EQ(group().cli(group().master_port(), {"EXISTS", name}), "1");
  m.unlock();
  c.command({"SET", test::unique_key("k"), "v"});
}

// Every sentinel answers that it knows no such master: no failover will change that, so calls
// fail at once rather than being retried until their request_timeout (5 s each, 10 s for the
// first lock call, in a hostile try), and destroying the client has nothing to wait for.
TEST_F(SentinelLock, AWrongMasterNameIsAClearErrorAtOnce) {
  client_options o = client_options::from_url(group().sentinel_url());
  o.sentinel.master_name = "no-such-master";
  ASSERT_GT(o.request_timeout, 4 * timing_slack);
  auto c = std::make_unique<client>(o);
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE(call == 0 ? "PING" : "try_lock()");
    const auto asked = steady_clock::now();
    try {
      if (call == 0) {
        c->command({"PING"});
      } else {
        (void)c->get_lock(test::unique_key("m")).try_lock();
      }
      ADD_FAILURE() << "the call went somewhere";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::connect_failed);
      EXPECT_NE(std::string(e.what()).find("no sentinel knows a master named 'no-such-master'"),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(steady_clock::now() - asked, timing_slack) << "retried as if a failover could help";
  }
  const auto destroying = steady_clock::now();
  c.reset();
  EXPECT_LT(steady_clock::now() - destroying, 2 * timing_slack) << "waited for a release";
}

TEST_F(SentinelLock, TwoProcessesOfFourThreadsKeepANonAtomicCountExact) {
  const std::string name = test::unique_key("count"), counter = test::unique_key("counter");
  constexpr int threads = 4, iterations = 25;
  child_process a({DLOCK_TEST_LOCK_WORKER, "count", group().sentinel_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  child_process b({DLOCK_TEST_LOCK_WORKER, "count", group().sentinel_url(), name, counter,
                   std::to_string(threads), std::to_string(iterations)});
  EXPECT_EQ(a.read_line(120s), "tokens_not_increasing 0");
  EXPECT_EQ(b.read_line(120s), "tokens_not_increasing 0");
  client c{group().sentinel_url()};
  EXPECT_EQ(c.command({"GET", counter}).str, std::to_string(2 * threads * iterations));
}

TEST_F(SentinelLock, MinReplicasThroughSentinelFailsCleanlyWhileAReplicaIsCut) {
  client c{group().sentinel_url("min_replicas=2&replica_timeout=100")};
  mutex m = c.get_lock(test::unique_key("confirmed"));
  ASSERT_TRUE(eventually([&] {
    std::error_code ec;
    const bool held = m.try_lock(ec);
    if (held) m.unlock();
    return held;
  })) << "two live replicas never confirmed";
  const std::uint16_t replica = group().replica_ports().front();
  group().pause_node(replica);
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(300ms, ec));
  EXPECT_EQ(ec, errc::replicas_unavailable) << ec.message();
  EXPECT_TRUE(eventually([&] {
    return group().cli(group().master_port(), {"EXISTS", m.name()}) == "0";
  })) << "an unconfirmed hold was left on the master";
  group().resume_node(replica);
  group().wait_ok();
}

// Failovers and dead sentinels change the group: each test has its own.
TEST(SentinelFailover, TheFirstLiveSentinelAnswersWhenOthersAreDown) {
  test::redis_test_sentinel_group g;
  g.kill_node(g.sentinel_ports().at(0));
  g.kill_node(g.sentinel_ports().at(1));
  client c{g.sentinel_url()};
  mutex m = c.get_lock(test::unique_key("m"));
  ASSERT_TRUE(m.try_lock());
  m.unlock();
}

// A port held bound and never listening: a connection to it is refused, as to a killed
// sentinel's, but no server of a test running beside this one can take it over. (Killed
// sentinels' ports were once taken by another group's sentinel, which knew the same master name
// and answered: a PING went through.)
class closed_port {
 public:
  closed_port() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof at;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &size) != 0) {
      throw std::runtime_error("cannot hold a port closed");
    }
    port_ = ntohs(at.sin_port);
  }
  ~closed_port() { ::close(fd_); }
  closed_port(const closed_port&) = delete;
  closed_port& operator=(const closed_port&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

TEST(SentinelFailover, AllSentinelsDownIsAClearError) {
  const closed_port sentinels[3];
  std::string url = "redis-sentinel://";
  for (const closed_port& s : sentinels)
    url += (&s == sentinels ? "" : ",") + std::string("127.0.0.1:") + std::to_string(s.port());
  url += "#mymaster";
  client_options o = client_options::from_url(url);
  o.connect_timeout = 1s;
  o.request_timeout = 1s;  // the client tries the sentinels again until then
  client c{o};
  const auto before = steady_clock::now();
  try {
    c.command({"PING"});
    ADD_FAILURE() << "a PING went somewhere";
  } catch (const error& e) {
    // The last search may still be under way when the request's time is up (a slow machine):
    // then it is a timeout that names the previous search's failure.
    EXPECT_TRUE(e.code() == errc::connect_failed || e.code() == errc::connect_timeout ||
                e.code() == errc::timeout)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("no sentinel answered"), std::string::npos) << e.what();
  }
  EXPECT_LT(steady_clock::now() - before, o.connect_timeout + o.request_timeout + timing_slack);
}

TEST(SentinelFailover, ASentinelThatNamesAReplicaIsNotBelieved) {
  test::redis_test_sentinel_group g;
  // The first sentinel is told to watch a replica under the master's name: it names a server
  // whose ROLE is not master.
  const std::uint16_t liar = g.sentinel_ports().front();
  const std::uint16_t replica = g.replica_ports().front();
  g.cli(liar, {"SENTINEL", "REMOVE", g.master_name()});
  g.cli(liar, {"SENTINEL", "MONITOR", g.master_name(), "127.0.0.1", std::to_string(replica), "2"});
  client c{g.sentinel_url()};
  const std::string key = test::unique_key("k");
  c.command({"SET", key, "v"});  // would fail with READONLY on the replica
  EXPECT_EQ(g.cli(g.master_port_from(g.sentinel_ports().at(1)), {"GET", key}), "v");
}

TEST(SentinelFailover, KillingTheMasterKeepsOrReportsTheHoldAndWaitersGetTheLock) {
  test::redis_test_sentinel_group g;
  std::atomic<int> losses{0};
  client_options o = options_for(g.sentinel_url(), 1s);
  o.locks.on_lock_lost = [&](const lock_loss&) { ++losses; };
  client holder{o};
  client waiter{options_for(g.sentinel_url())};
  const std::string name = test::unique_key("f");
  mutex m = holder.get_lock(name);
  m.lock();
  const std::uint64_t token = m.fencing_token();
  mutex wanted = waiter.get_lock(name);
  auto got = std::async(std::launch::async, [&] {
    const bool ok = wanted.try_lock_for(30s);
    const std::uint64_t t = wanted.fencing_token();
    if (ok) wanted.unlock();
    return std::make_pair(ok, t);
  });
  const std::uint16_t old_master = g.master_port();
  g.kill_node(old_master);
  g.wait_for_failover(old_master);
  // Kept (it had replicated and the promotion came within the lease) or reported lost.
  ASSERT_TRUE(
      eventually([&] { return m.stop_token().stop_requested() || m.status().locked; }, 10s));
  const bool lost = m.stop_token().stop_requested();
  EXPECT_EQ(lost, losses.load() == 1);
  std::printf("[ info     ] after kill -9 of the master the hold was %s\n",
              lost ? "reported lost" : "kept");
  const std::error_code ec = m.unlock_checked();
  EXPECT_TRUE(ec == std::error_code{} || ec == errc::lock_lost) << ec.message();
  const auto [ok, waiter_token] = got.get();
  ASSERT_TRUE(ok) << "the waiter never got the lock on the new master";
  EXPECT_GT(waiter_token, token) << "fencing tokens went back across the failover";
}

TEST(SentinelFailover, AGracefulFailoverKeepsAWatchdogHold) {
  test::redis_test_sentinel_group g;
  client_options o = options_for(g.sentinel_url(), 3s);
  std::mutex switches_mutex;
  std::vector<std::map<std::string, std::string>> switches;  // "master switched" log records
  o.on_log = [&](const log_record& r) {
    if (r.message != "master switched") return;
    std::map<std::string, std::string> fields;
    for (const log_field& f : r.fields)
      fields.emplace(std::string(f.key), f.value);
    std::lock_guard lock(switches_mutex);
    switches.push_back(std::move(fields));
  };
  client c{o};
  const std::string name = test::unique_key("g");
  mutex m = c.get_lock(name);
  m.lock();
  const std::uint16_t old_master = g.master_port();
  const std::uint16_t new_master = g.failover();
  EXPECT_NE(new_master, old_master);
  std::this_thread::sleep_for(6s);  // two more leases must pass: the time is the test
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_FALSE(m.stop_token().stop_requested());
  EXPECT_EQ(g.cli(new_master, {"EXISTS", name}), "1");
  EXPECT_EQ(m.unlock_checked(), std::error_code{});
  // Every sentinel announces the switch; the client follows it once.
  EXPECT_EQ(c.routing_metrics().map_refreshes, 1u) << "a switch not heard, or followed twice";
  std::lock_guard lock(switches_mutex);
  ASSERT_FALSE(switches.empty()) << "the log hook heard no master switch";
  EXPECT_EQ(switches.front().at("master"), g.master_name());
  EXPECT_NE(switches.front().at("switch").find(std::to_string(new_master)), std::string::npos)
      << switches.front().at("switch");
}

// The sentinel listed first hangs (SIGSTOP: its link stays open, so nothing tells the client for
// seconds) and so does the master; the other sentinels promote a replica, and another client
// takes a lock there. The client hears the switch from them (it listens on every sentinel) and
// moves: the old master, resumed, no longer gets its attempts, so it cannot hand the client the
// lock the new master's holder holds (a hostile try saw 7.7 s of two holders when the client
// listened on the first sentinel only).
TEST(SentinelFailover, ASwitchIsHeardFromTheOtherSentinelsWhenTheFirstHangs) {
  test::redis_test_sentinel_group g;
  client x{g.sentinel_url()}, y{g.sentinel_url()};
  (void)x.command({"PING"});
  const std::string name = test::unique_key("split");
  const std::uint16_t old_master = g.master_port();
  const std::uint16_t deaf = g.sentinel_ports().at(0);
  g.pause_node(deaf);
  g.pause_node(old_master);
  const std::uint16_t new_master = g.wait_for_failover(old_master);
  EXPECT_TRUE(eventually([&] { return x.routing_metrics().map_refreshes > 0; }))
      << "the switch was not heard from the sentinels still running";
  mutex held = y.get_lock(name);
  ASSERT_TRUE(held.try_lock());
  EXPECT_EQ(g.cli(new_master, {"EXISTS", name}), "1");
  g.resume_node(old_master);
  mutex wanted = x.get_lock(name);
  EXPECT_FALSE(wanted.try_lock()) << "the client took the lock on the old master";
  g.resume_node(deaf);
  held.unlock();
}

// A client of a sentinel group whose links to the sentinels pass through TCP proxies that the
// test can cut, and another server that the sentinels can be told to name as the master.
class sentinels_behind_proxies {
 public:
  sentinels_behind_proxies() {
    std::string hosts;
    for (const std::uint16_t port : group.sentinel_ports()) {
      proxies_.push_back(std::make_unique<test::delay_proxy>(DLOCK_DELAY_PROXY, "127.0.0.1",
                                                             "127.0.0.1:" + std::to_string(port)));
      hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") +
               std::to_string(proxies_.back()->port());
    }
    options = client_options::from_url("redis-sentinel://" + hosts + "#" + group.master_name());
    options.on_log = [this](const log_record& r) {
      const std::lock_guard lock(records_mutex_);
      records_.emplace_back(r.message);
    };
  }

  // Its link to every sentinel subscribed (CLIENT LIST on each shows a subscriber).
  bool subscribed_everywhere() {
    for (const std::uint16_t s : group.sentinel_ports()) {
      if (group.call(s, {"CLIENT", "LIST"}).str.find(" sub=1 ") == std::string::npos) return false;
    }
    return true;
  }
  void cut() {
    for (const auto& p : proxies_)
      p->cut();
  }
  void mend() {
    for (const auto& p : proxies_)
      p->mend();
  }
  // The first `count` sentinels monitor `elsewhere` under the master's name from now on (no
  // +switch-master is announced).
  void name_elsewhere(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t s = group.sentinel_ports().at(i);
      ASSERT_EQ(group.call(s, {"SENTINEL", "REMOVE", group.master_name()}).str, "OK");
      ASSERT_EQ(group
                    .call(s, {"SENTINEL", "MONITOR", group.master_name(), "127.0.0.1",
                              std::to_string(elsewhere.port()), "2"})
                    .str,
                "OK");
    }
  }
  int records(std::string_view message) {
    const std::lock_guard lock(records_mutex_);
    return static_cast<int>(std::count(records_.begin(), records_.end(), message));
  }
  // The port of the server `c`'s commands reach ("" for a command lost as the client moves).
  static std::string served_by(client& c) {
    try {
      return c.command({"CONFIG", "GET", "port"}).elements.at(1).str;
    } catch (const error&) {
      return "";
    }
  }
  // How long the client's links to the sentinels take to come back and ask them.
  milliseconds back_within() const {
    return options.reconnect_delay_max + options.connect_timeout + timing_slack;
  }

  test::redis_test_sentinel_group group;
  test::redis_server elsewhere;
  client_options options;

 private:
  std::vector<std::unique_ptr<test::delay_proxy>> proxies_;
  std::mutex records_mutex_;
  std::vector<std::string> records_;
};

// A switch announced while the client's links to every sentinel were down (each cut at a TCP
// proxy) is lost. Once the links are back the client asks where the master is and moves, instead
// of staying on the old master until a write is refused: cut off from the sentinels, that master
// is never made a replica and goes on granting locks that the new master's holders hold too.
// Here the sentinels, while the links are cut, are told to monitor another server under the
// master's name (no announcement at all): the old master stays a master, as in that partition.
TEST(SentinelFailover, AMasterNamedAnewWhileEverySentinelLinkWasDownIsFollowedWhenTheyComeBack) {
  sentinels_behind_proxies s;
  client c{s.options};
  const std::string old_master = std::to_string(s.group.master_port());
  ASSERT_EQ(s.served_by(c), old_master);
  ASSERT_TRUE(eventually([&] { return s.subscribed_everywhere(); }));
  s.cut();
  s.name_elsewhere(s.group.sentinel_ports().size());
  EXPECT_EQ(s.served_by(c), old_master) << "moved with every sentinel link cut";
  s.mend();
  EXPECT_TRUE(eventually([&] { return s.served_by(c) == std::to_string(s.elsewhere.port()); },
                         s.back_within()))
      << "the client stayed on the old master";
  EXPECT_GE(s.records("master switch missed"), 1);
  const std::string name = test::unique_key("after");
  mutex m = c.get_lock(name);
  ASSERT_TRUE(m.try_lock());
  EXPECT_EQ(s.elsewhere.cli({"EXISTS", name}), "1") << "the lock is not on the master named now";
  m.unlock();
}

// ...but one sentinel alone that names another master (one that missed a failover names the old
// one, for a while) does not move the client: most of the sentinels must agree.
TEST(SentinelFailover, OneSentinelAloneNamingAnotherMasterDoesNotMoveTheClient) {
  sentinels_behind_proxies s;
  client c{s.options};
  const std::string old_master = std::to_string(s.group.master_port());
  ASSERT_EQ(s.served_by(c), old_master);
  ASSERT_TRUE(eventually([&] { return s.subscribed_everywhere(); }));
  s.cut();
  s.name_elsewhere(1);
  s.mend();
  EXPECT_TRUE(
      eventually([&] { return s.records("master switch not confirmed") >= 1; }, s.back_within()))
      << "the client did not ask the other sentinels";
  EXPECT_EQ(s.records("master switch missed"), 0);
  EXPECT_EQ(s.served_by(c), old_master) << "one sentinel moved the client";
}

}  // namespace
}  // namespace dlock
