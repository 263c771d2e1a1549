#include "failover_demo.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <utility>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "redis_sentinel_group.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using tools::redis_sentinel_group;
using tools::redis_sentinel_group_options;

// How long client A may take to hear that its hold is gone, counted from B's grant. Its client
// reconnects with a backoff of up to reconnect_delay_max (2 s) and re-checks its holds at once.
constexpr auto told_limit = 10s;
// A's attempt with min_replicas while the replica is cut off: each try waits replica_timeout
// (100 ms) for WAIT, is undone and tried again until this runs out.
constexpr auto refused_wait = 300ms;
// A's attempt once the replica is back: it reconnects and catches up within milliseconds.
constexpr auto confirmed_wait = 10s;
// The promotion: down-after 1 s, then a vote and REPLICAOF NO ONE, about 3 s in all; generous
// for a loaded machine.
constexpr auto failover_limit = 30s;
// How often the demo looks whether A's stop_token has fired.
constexpr auto poll_interval = 10ms;
constexpr std::string_view confirming_query = "min_replicas=1&replica_timeout=100";

// The README's fenced write ("Fencing tokens"): the resource accepts a write only with a token at
// least as new as the newest it has seen.
const dlock::script fenced_write{R"lua(
local highest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
)lua"};

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string address(std::uint16_t port) {
  return fmt::format("127.0.0.1:{}", port);
}

// When a hold's stop_token fired, if it has.
class loss_clock {
 public:
  explicit loss_clock(std::stop_token token)
      : callback_(std::move(token),
                  [this] { at_.store(clock_type::now().time_since_epoch().count()); }) {}
  loss_clock(const loss_clock&) = delete;
  loss_clock& operator=(const loss_clock&) = delete;

  std::optional<clock_type::time_point> at() const {
    const clock_type::rep at = at_.load();
    if (at == 0) return std::nullopt;
    return clock_type::time_point(clock_type::duration(at));
  }
  // Whether it has fired by `deadline`.
  bool wait_until(clock_type::time_point deadline) const {
    while (!at() && clock_type::now() < deadline)
      std::this_thread::sleep_for(poll_interval);
    return at().has_value();
  }

 private:
  std::atomic<clock_type::rep> at_{0};
  std::stop_callback<std::function<void()>> callback_;
};

// One row of the table.
struct run_result {
  const char* name = "";
  bool granted_twice = false;
  std::string told = "-";     // when the stale holder heard of its loss, after the kill
  std::string refused = "-";  // whether the stale holder's write was refused
  double seconds = 0;
  bool ok = false;      // the row shows what it should
  std::string verdict;  // what the row shows, in a few words
};

redis_sentinel_group_options group_options() {
  redis_sentinel_group_options o;
  o.replicas = 1;  // the replica that misses the write is then the one promoted
  o.sentinels = 3;
  return o;
}

class failover_stage {
 public:
  failover_stage() : group_(group_options()), prefix_("failover-demo:") {}

  const redis_sentinel_group& group() const { return group_; }

  // 1 and 3: client A takes a lock that the replica never gets, the master dies, the replica is
  // promoted, client B asks for the same lock. With `fencing`, B and then A write to a resource
  // through the fenced-write script.
  run_result without_min_replicas(bool fencing) {
    run_result r;
    r.name = fencing ? "fencing tokens" : "without min_replicas";
    const auto [master, replica] = ready();
    const auto started = clock_type::now();
    const std::string name = prefix_ + (fencing ? "3" : "1");

    client a{group_.sentinel_url()};
    a.command({"PING"});  // connected to the master before anything happens
    cut(master, replica);
    mutex ma = a.get_lock(name);
    ma.lock();
    const std::uint64_t token_a = ma.fencing_token();
    const loss_clock a_told(ma.stop_token());
    fmt::print("  client A takes lock '{}': granted, token {} (watchdog lease)\n", name, token_a);
    std::fflush(stdout);

    const failover_times failover = kill_master(master, replica);
    client b{group_.sentinel_url()};
    mutex mb = b.get_lock(name);
    std::error_code ec;
    const bool granted = mb.try_lock(ec);
    if (ec) throw dlock::error(ec, "client B's attempt");
    const auto granted_at = clock_type::now();
    const std::uint64_t token_b = granted ? mb.fencing_token() : 0;
    r.granted_twice = granted;
    if (granted) {
      fmt::print("  client B asks for the same lock: GRANTED, token {}: a second grant\n", token_b);
    } else {
      fmt::print(
          "  client B asks for the same lock: refused (the promoted replica had A's lock)\n");
    }
    std::fflush(stdout);

    if (a_told.wait_until(granted_at + told_limit)) {
      const clock_type::time_point told_at = *a_told.at();
      r.told = fmt::format("{:.1f} s after kill", seconds_between(failover.killed, told_at));
      const double vs_grant = seconds_between(granted_at, told_at);
      fmt::print(
          "  A's stop_token fired {:.2f} s after the kill, {:.2f} s after the promotion ({:.2f} s\n"
          "  {} B's grant): its client reached the new master and found the lock gone. Until then\n"
          "  A believed it held a lock that no server had any more.\n",
          seconds_between(failover.killed, told_at), seconds_between(failover.promoted, told_at),
          std::abs(vs_grant), vs_grant < 0 ? "before" : "after");
    } else {
      r.told = "not told";
      fmt::print("  A's stop_token did not fire within {} s of B's grant\n", told_limit.count());
    }

    bool refused = false;
    if (fencing && granted) {
      const std::string resource = prefix_ + "resource";
      const std::string highest = resource + ":highest-token";
      const bool b_wrote = write(b, resource, highest, token_b, "written by B");
      fmt::print("  B writes the resource (fenced write) with token {}: {}\n", token_b,
                 b_wrote ? "accepted" : "REFUSED");
      // A has not looked at its stop_token (or was paused across the failover) and finishes
      // the work it started under its lock.
      const bool a_wrote = write(a, resource, highest, token_a, "written by A");
      fmt::print(
          "  A, which started its work under the lock, writes its result with token {}:\n"
          "  {}\n",
          token_a,
          a_wrote ? "ACCEPTED: a stale write went through"
                  : fmt::format("REFUSED, the resource has seen token {}", token_b));
      refused = b_wrote && !a_wrote;
      r.refused = refused ? "yes" : "no";
    }
    mb.unlock();
    ma.unlock();  // the hold was lost: this changes nothing on the server
    r.seconds = seconds_between(started, clock_type::now());
    r.ok = fencing ? granted && refused : granted && token_b > token_a;
    if (!granted) {
      r.verdict = "the lock was NOT granted twice: the promoted replica had it";
    } else if (!fencing) {
      r.verdict = token_b > token_a ? "without min_replicas the lock was granted twice"
                                    : "the lock was granted twice, but B's token is not above A's";
    } else {
      r.verdict = refused ? "with fencing tokens the stale holder's write was refused"
                          : "with fencing tokens the stale holder's write was NOT refused";
    }
    fmt::print("  done in {:.2f} s\n\n", r.seconds);
    std::fflush(stdout);
    return r;
  }

  // 2: the same with min_replicas=1: A is refused while the replica is cut off, gets the lock
  // once the replica is back, and keeps it across the failover; B is refused.
  run_result with_min_replicas() {
    run_result r;
    r.name = "min_replicas=1";
    const auto [master, replica] = ready();
    const auto started = clock_type::now();
    const std::string name = prefix_ + "2";

    client a{group_.sentinel_url(confirming_query)};
    a.command({"PING"});
    cut(master, replica);
    mutex ma = a.get_lock(name);
    std::error_code ec;
    auto asked = clock_type::now();
    bool held = ma.try_lock_for(refused_wait, ec);
    const bool refused = !held && ec == errc::replicas_unavailable;
    if (held) {
      fmt::print(
          "  client A (?{}) asks for lock '{}': granted, token {},\n"
          "  although the replica is cut off\n",
          confirming_query, name, ma.fencing_token());
    } else {
      fmt::print(
          "  client A (?{}) asks for lock '{}':\n"
          "  refused after {:.2f} s ({}):\n"
          "  no replica acknowledged, and each unconfirmed hold was undone\n",
          confirming_query, name, seconds_between(asked, clock_type::now()),
          ec ? ec.message() : std::string("the lock is held"));
    }
    std::fflush(stdout);

    group_.resume_node(replica);
    asked = clock_type::now();
    if (!held) held = ma.try_lock_for(confirmed_wait, ec);
    if (!held) throw dlock::error(ec ? ec : make_error_code(errc::timeout), "client A's attempt");
    const std::uint64_t token_a = ma.fencing_token();
    const loss_clock a_told(ma.stop_token());
    fmt::print(
        "  the replica is resumed and catches up; A asks again: granted after {:.2f} s,\n"
        "  token {}, acknowledged by the replica\n",
        seconds_between(asked, clock_type::now()), token_a);
    std::fflush(stdout);

    kill_master(master, replica);
    client b{group_.sentinel_url()};
    mutex mb = b.get_lock(name);
    const bool granted = mb.try_lock(ec);
    if (ec) throw dlock::error(ec, "client B's attempt");
    r.granted_twice = granted;
    fmt::print("  client B asks for the same lock: {}\n",
               granted
                   ? fmt::format("GRANTED, token {}: the lock is held twice", mb.fencing_token())
                   : std::string("refused, the new master has A's lock"));
    // Through A's client, which follows the failover: the new master records A's hold.
    const lock_status seen = ma.status();
    const bool recorded =
        std::any_of(seen.holders.begin(), seen.holders.end(),
                    [owner = ma.owner_id()](const lock_holder& h) { return h.owner == owner; });
    const bool kept = recorded && !a_told.at();
    fmt::print("  A {}\n", kept ? "still holds it: the new master records its hold, and its "
                                  "stop_token has not fired"
                                : "lost its hold in the failover");
    r.told = kept ? "no stale holder" : "A lost it";
    if (granted) mb.unlock();
    ma.unlock();
    r.seconds = seconds_between(started, clock_type::now());
    r.ok = refused && !granted && kept;
    r.verdict = r.ok ? "with min_replicas=1 no second grant: A was refused while the replica was "
                       "cut off, then kept its lock"
                     : fmt::format(
                           "with min_replicas=1: A {} while the replica was cut off; B {}; "
                           "A {} its lock",
                           refused ? "was refused" : "was NOT refused",
                           granted ? "got the lock AGAIN" : "was refused", kept ? "kept" : "LOST");
    fmt::print("  done in {:.2f} s\n\n", r.seconds);
    std::fflush(stdout);
    return r;
  }

 private:
  // The master and its replica as the sentinels see them, once a master killed by the previous
  // run is back: it restarts empty and the sentinels make it a replica of the new master.
  std::pair<std::uint16_t, std::uint16_t> ready() {
    for (const std::uint16_t port : group_.data_ports()) {
      if (group_.node(port).running()) continue;
      const auto began = clock_type::now();
      group_.restart_node(port);
      group_.wait_ok();
      fmt::print("  (the former master {} restarted empty and rejoined as a replica in {:.2f} s)\n",
                 address(port), seconds_between(began, clock_type::now()));
    }
    return {group_.master_port(), group_.replica_ports().front()};
  }

  void cut(std::uint16_t master, std::uint16_t replica) {
    group_.cut_replica(replica);
    fmt::print(
        "  replica {} is cut off from master {} (SIGSTOP, link closed):\n"
        "  it will not get the next write\n",
        address(replica), address(master));
    std::fflush(stdout);
  }

  // When the master was killed and when its replica reported role master.
  struct failover_times {
    clock_type::time_point killed, promoted;
  };

  // kill -9 of the master; a paused replica is resumed so that the sentinels can promote it (it
  // comes back without what the master wrote after the cut: its link is gone). Returns once the
  // replica is the master and every sentinel says so.
  failover_times kill_master(std::uint16_t master, std::uint16_t replica) {
    failover_times t;
    t.killed = clock_type::now();
    group_.kill_node(master);
    const bool was_paused = group_.paused(replica);
    if (was_paused) group_.resume_node(replica);
    fmt::print("  kill -9 of master {}{}\n", address(master),
               was_paused ? "; the replica is resumed, without what it missed" : "");
    std::fflush(stdout);
    // The moment of the promotion, which the fixture's wait (every sentinel agreeing, their view
    // of the replicas refreshed) only confirms later.
    const auto deadline = t.killed + failover_limit;
    while (!is_master(replica) && clock_type::now() < deadline)
      std::this_thread::sleep_for(poll_interval);
    t.promoted = clock_type::now();
    const std::uint16_t agreed = group_.wait_for_failover(master, failover_limit);
    if (agreed != replica) {
      throw std::runtime_error(fmt::format("the sentinels promoted {}, not the replica {}",
                                           address(agreed), address(replica)));
    }
    fmt::print(
        "  the sentinels promote replica {}: master {:.2f} s after the kill, every sentinel\n"
        "  agreeing {:.2f} s after it\n",
        address(replica), seconds_between(t.killed, t.promoted),
        seconds_between(t.killed, clock_type::now()));
    std::fflush(stdout);
    return t;
  }

  bool is_master(std::uint16_t port) const {
    try {
      const tools::resp_value role = group_.call(port, {"ROLE"}, 1s);
      return !role.elements.empty() && role.elements.front().str == "master";
    } catch (const std::runtime_error&) {
      return false;  // busy, or not answering yet: ask again
    }
  }

  static bool write(client& c, const std::string& resource, const std::string& highest,
                    std::uint64_t token, const std::string& value) {
    return c.eval(fenced_write, {resource, highest}, {std::to_string(token), value}).integer == 1;
  }

  redis_sentinel_group group_;
  // The names of the locks and the resource (the servers are the demo's own).
  const std::string prefix_;
};

std::string verdict_line(bool ok, const std::string& text) {
  return fmt::format("  [{}] {}\n", ok ? " ok " : "FAIL", text);
}

}  // namespace

int run_failover_demo(const std::string& redis_url) {
  if (!redis_url.empty()) {
    print_error(
        "demo failover: --redis is not supported: the demo kills masters, so it starts its own "
        "(a master, a replica and 3 sentinels on loopback)");
    return exit_usage;
  }
  fmt::print(
      "Failover (seeds 002 and 004): Redis replicates asynchronously, so a master can grant a "
      "lock\n"
      "and die before its replica has the write; Sentinel then promotes the replica, which never\n"
      "saw the lock. Each run cuts the replica off just before client A asks for a lock (so that\n"
      "this happens every time, not by luck), kills the master with kill -9, lets the sentinels\n"
      "promote the replica, and has client B ask for the same lock.\n\n");
  try {
    fmt::print(
        "Starting a private Sentinel group (1 master, 1 replica, 3 sentinels) on loopback...\n");
    std::fflush(stdout);
    const auto began = clock_type::now();
    failover_stage stage;
    const redis_sentinel_group& g = stage.group();
    fmt::print("  master {}, replica {}, down-after {} ms; ready in {:.2f} s\n",
               address(g.master_port()), address(g.replica_ports().front()),
               g.options().down_after.count(), seconds_between(began, clock_type::now()));
    fmt::print("  clients connect with {}\n\n", g.sentinel_url());

    fmt::print("[1/3] Without min_replicas\n");
    std::fflush(stdout);
    const run_result plain = stage.without_min_replicas(false);
    fmt::print("[2/3] With min_replicas=1: an acquisition counts once a replica acknowledged it\n");
    std::fflush(stdout);
    const run_result confirmed = stage.with_min_replicas();
    fmt::print(
        "[3/3] Without min_replicas, with fencing tokens: writes go through the fenced "
        "write\n");
    std::fflush(stdout);
    const run_result fenced = stage.without_min_replicas(true);

    fmt::print("  {:<22} {:>14} {:>19} {:>20} {:>8}\n", "run", "granted twice", "stale holder told",
               "stale write refused", "time");
    for (const run_result* r : {&plain, &confirmed, &fenced}) {
      fmt::print("  {:<22} {:>14} {:>19} {:>20} {:>6.2f} s\n", r->name,
                 r->granted_twice ? "yes" : "no", r->told, r->refused, r->seconds);
    }
    fmt::print("\n");

    std::string verdict;
    for (const run_result* r : {&plain, &confirmed, &fenced})
      verdict += verdict_line(r->ok, r->verdict);
    fmt::print("Verdict\n{}\n", verdict);
    fmt::print(
        "Without min_replicas the master acknowledged A's lock before its replica had it; the\n"
        "promoted replica never saw it and granted it again to B. A's stop_token fires once its\n"
        "client reaches the new master and finds the lock gone: a holder that checks it stops,\n"
        "but one in the middle of a write, or paused, goes on into B's hold.\n"
        "With min_replicas=1 a lock counts only once a replica has acknowledged it (WAIT): while\n"
        "the replica was cut off A was refused (replicas_unavailable), so nothing was granted "
        "that\n"
        "the failover could lose; once the replica was back A got the lock, and kept it across "
        "the\n"
        "kill. It is not consensus: with several replicas Sentinel may promote one that did not\n"
        "acknowledge, and renewals are not confirmed.\n"
        "With fencing tokens the second grant still happens, but B's token is higher (the larger\n"
        "of the last token + 1 and the server's clock in microseconds: the new master never saw\n"
        "A's token, but its clock is later), so the resource refuses A's late write.\n\n");
    const bool ok = plain.ok && confirmed.ok && fenced.ok;
    // One line for scripts and tests.
    fmt::print(
        "result: granted_twice_without_min_replicas={} granted_twice_with_min_replicas={} "
        "stale_write_refused={} verdict={}\n",
        plain.granted_twice ? "yes" : "no", confirmed.granted_twice ? "yes" : "no", fenced.refused,
        ok ? "pass" : "fail");
    return ok ? exit_ok : exit_failure;
  } catch (const dlock::error& e) {
    print_error(fmt::format("failover demo: {}", e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(fmt::format("failover demo: {}", e.what()));
    return exit_failure;
  }
}

}  // namespace dlock::cli
