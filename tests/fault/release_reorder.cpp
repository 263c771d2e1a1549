// dlock_fault_release_reorder: the reproduction of a failure the cluster fault suite found
// (docs/reliability.md, "Found on a cluster: a release re-sent after the next acquisition").
//
// One client holds a lock on a private Redis Cluster (tools/redis_process); the master of the
// lock's slot is killed; the holder calls unlock(), whose release cannot be written (the master is
// dead) and waits in the client's retry loop; the replica is promoted (CLUSTER FAILOVER TAKEOVER)
// and the same thread locks again. If the release reaches the new master after that acquisition,
// it would delete the new hold if it carried no fencing token (as first tries did until the fix):
// a second client then takes the lock while the first still believes it holds it.
//
//   dlock_fault_release_reorder [--rounds N] [--delay-ms MS]
//
// Prints one line per round, and for a round with two holders the lock scripts the new master ran
// (its SLOWLOG, every command logged). Exit status: 0 no round had two holders, 1 some round did,
// 3 the run failed. The ctest fault_release_reorder runs 5 rounds.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

int run(int rounds, std::chrono::milliseconds delay) {
  dlock::tools::redis_cluster cluster;
  std::string url = "redis://";
  for (const std::uint16_t port : cluster.ports())
    url += (url.size() > 8 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(port);
  dlock::client_options options = dlock::client_options::from_url(url);
  options.locks.watchdog_timeout = 10s;  // the new hold outlives the round by far
  options.request_timeout = 5s;          // longer than the promotion: the release waits for it
  options.connect_timeout = 500ms;
  const std::string name = "fault:lock";
  int two_holders = 0;
  for (int round = 0; round < rounds; ++round) {
    cluster.wait_ok();
    dlock::client first{options};
    dlock::client second{options};
    dlock::mutex held = first.get_lock(name);
    dlock::mutex other = second.get_lock(name);
    held.lock();
    const std::uint64_t old_token = held.fencing_token();
    std::this_thread::sleep_for(50ms);  // the grant reaches the replica (asynchronous)
    const std::uint16_t master = cluster.master_for_key(name);
    const std::uint16_t replica = cluster.replicas_of(master).at(0);
    for (const char* setting : {"slowlog-log-slower-than 0", "slowlog-max-len 1000"}) {
      const std::string text = setting;
      const auto space = text.find(' ');
      cluster.call(replica, {"CONFIG", "SET", text.substr(0, space), text.substr(space + 1)});
    }
    cluster.call(replica, {"SLOWLOG", "RESET"});
    cluster.kill_node(master);
    const auto killed = clock_type::now();
    held.unlock();  // the release cannot be written: the master is dead
    std::this_thread::sleep_for(delay);
    std::thread promote([&] { cluster.failover(replica, dlock::tools::failover_mode::takeover); });
    std::error_code ec;
    const bool relocked = held.try_lock_for(8s, ec);
    const double relocked_ms = ms_since(killed);
    const std::uint64_t new_token = relocked ? held.fencing_token() : 0;
    promote.join();
    std::this_thread::sleep_for(700ms);  // a release still on its way lands meanwhile
    const bool believes = relocked && held.is_held_by_current_thread();
    std::error_code other_ec;
    const bool taken = other.try_lock_for(10ms, other_ec);
    const bool both = believes && taken;
    std::printf(
        "round %d: %s %.0f ms after the kill (token %llu, the released hold's %llu); "
        "700 ms later the holder believes it holds: %s, another client takes the lock: "
        "%s%s\n",
        round, relocked ? "locked again" : ("lock failed: " + ec.message()).c_str(), relocked_ms,
        static_cast<unsigned long long>(new_token), static_cast<unsigned long long>(old_token),
        believes ? "yes" : "no", taken ? "yes" : "no", both ? "  <== TWO HOLDERS" : "");
    if (both) {
      ++two_holders;
      // SLOWLOG GET: [id, unix time, duration, [args...], client address, client name], newest
      // first.
      const dlock::tools::resp_value log = cluster.call(replica, {"SLOWLOG", "GET", "1000"});
      for (auto it = log.elements.rbegin(); it != log.elements.rend(); ++it) {
        if (it->elements.size() < 5) continue;
        std::string command;
        for (const dlock::tools::resp_value& arg : it->elements[3].elements)
          command += arg.str.substr(0, 48) + " ";
        if (command.rfind("EVALSHA", 0) != 0 && command.rfind("EVAL ", 0) != 0) continue;
        std::printf("    the new master ran, from %s: %s\n", it->elements[4].str.c_str(),
                    command.c_str());
      }
    }
    if (taken) other.unlock();
    if (relocked) held.unlock();
    cluster.restart_node(master);
  }
  std::printf("%d of %d rounds had two holders\n", two_holders, rounds);
  return two_holders > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 10;
  int delay_ms = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--rounds") {
      rounds = std::atoi(argv[i + 1]);
    } else if (option == "--delay-ms") {
      delay_ms = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: dlock_fault_release_reorder [--rounds N] [--delay-ms MS]\n");
      return 2;
    }
  }
  try {
    return run(rounds, std::chrono::milliseconds(delay_ms));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_release_reorder: %s\n", e.what());
    return 3;
  }
}
