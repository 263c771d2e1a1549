// dlock_fault_worker: one worker process of the fault suite (see fault_suite.cpp). In a loop it
// takes a dlock::mutex with a short watchdog lease, records the interval it believes it holds,
// does a fenced write to the resource server with the hold's token, and releases. Records go to
// its own append-only file (format in fault_records.hpp). It prints "ready <client id>" once both
// servers answered, and ends its loop on SIGTERM.
//
//   dlock_fault_worker --lock URL --resource URL --name NAME --worker N --life L
//                      --records FILE [--lease-ms MS] [--hold-us US] [--no-lock] [--parent PID]
//                      [--netns /var/run/netns/NAME]
//
// --no-lock does the same without taking the lock (the token then comes from INCR on the lock
// server): the checker must see overlaps then.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stop_token>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "dlock/dlock.hpp"
#include "fault_records.hpp"
#include "worker_support.hpp"

namespace {

using dlock::fault::one_line;
using dlock::fault::record_file;

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigterm(int /*signal*/) {
  stop_requested.store(true);
}

struct worker_options {
  std::string lock_url;
  std::string resource_url;
  std::string name = "fault:lock";
  int worker = 0;
  int life = 0;
  std::string records;
  int lease_ms = 1000;
  int hold_us = 200;
  int idle_us = 0;
  int wait_ms = 250;
  bool no_lock = false;
  int parent = 0;
  std::string netns;
};

int run(const worker_options& o) {
  const record_file records(o.records);

  dlock::client_options lock_options = dlock::client_options::from_url(o.lock_url);
  lock_options.locks.watchdog_timeout = std::chrono::milliseconds(o.lease_ms);
  lock_options.client_name = "fault-worker-" + std::to_string(o.worker);
  lock_options.connect_timeout = std::chrono::milliseconds(1000);
  lock_options.request_timeout = std::chrono::milliseconds(3000);
  dlock::client lock_server{lock_options};
  dlock::client_options resource_options = dlock::client_options::from_url(o.resource_url);
  resource_options.client_name = "fault-resource-" + std::to_string(o.worker);
  dlock::client resource{resource_options};
  const dlock::script fenced_write{std::string(dlock::fault::fenced_write_lua)};

  dlock::mutex m = lock_server.get_lock(o.name);
  const std::string owner = m.owner_id();
  const std::string client_id = owner.substr(0, owner.find(':'));

  // Both servers answer before the driver counts this worker as started (retried briefly: the
  // lock server may be in the middle of a fault).
  for (int attempt = 0;; ++attempt) {
    try {
      lock_server.command({"PING"});
      resource.command({"PING"});
      break;
    } catch (const dlock::error& e) {
      if (attempt >= 50 || stop_requested.load()) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // retry pacing
    }
  }
  records.line("W " + std::to_string(o.worker) + " " + std::to_string(o.life) + " " +
               std::to_string(::getpid()) + " " + client_id);
  std::printf("ready %s\n", client_id.c_str());
  std::fflush(stdout);

  const std::string worker_text = std::to_string(o.worker);
  while (!stop_requested.load()) {
    std::uint64_t token = 0;
    if (o.no_lock) {
      try {
        token =
            static_cast<std::uint64_t>(lock_server.command({"INCR", "fault:nolock:token"}).integer);
      } catch (const dlock::error& e) {
        records.line("E " + std::to_string(dlock::fault::now_ns()) + " " + one_line(e.what()));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // retry pacing
        continue;
      }
    } else {
      std::error_code ec;
      const bool held = m.try_lock_for(std::chrono::milliseconds(o.wait_ms), ec);
      if (ec) {
        records.line("E " + std::to_string(dlock::fault::now_ns()) + " " + one_line(ec.message()));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // retry pacing
        continue;
      }
      if (!held) continue;  // the wait ran out: look at stop_requested again
      token = m.fencing_token();
    }
    const std::int64_t acquired = dlock::fault::now_ns();
    records.line("A " + std::to_string(acquired) + " " + std::to_string(token));

    std::atomic<std::int64_t> lost{0};
    int write = -1;
    std::int64_t end = 0;
    int unlock = 0;
    {
      // Runs at once if the hold is already lost; otherwise on the thread that notices.
      const std::stop_callback on_loss(m.stop_token(),
                                       [&lost] { lost.store(dlock::fault::now_ns()); });
      // The work under the lock.
      if (o.hold_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.hold_us));
      const std::string token_text = std::to_string(token);
      const std::string time_text = std::to_string(acquired);
      try {
        const std::string_view keys[] = {dlock::fault::resource_highest_key,
                                         dlock::fault::resource_list_key,
                                         dlock::fault::resource_refused_key};
        const std::string_view args[] = {token_text, worker_text, time_text};
        write = resource.eval(fenced_write, keys, args).integer == 1 ? 1 : 0;
      } catch (const dlock::error& e) {
        records.line("E " + std::to_string(dlock::fault::now_ns()) +
                     " write: " + one_line(e.what()));
      }
      end = dlock::fault::now_ns();
      records.line("U " + std::to_string(acquired) + " " + std::to_string(end));
      if (!o.no_lock) unlock = m.unlock_checked().value();
    }
    records.line("R " + std::to_string(acquired) + " " + std::to_string(end) + " " +
                 std::to_string(lost.load()) + " " + std::to_string(token) + " " +
                 std::to_string(write) + " " + std::to_string(unlock));
    // Think time: without it the releasing worker takes the lock again before any waiter has
    // heard of the release, and the lock seldom changes hands.
    if (o.idle_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.idle_us));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  worker_options o;
  CLI::App app{"dlock_fault_worker: one worker process of dlock_fault_suite", "dlock_fault_worker"};
  app.add_option("--lock", o.lock_url, "Lock server URL")->required();
  app.add_option("--resource", o.resource_url, "Resource server URL")->required();
  app.add_option("--name", o.name, "Lock name");
  app.add_option("--worker", o.worker, "Worker number")->required();
  app.add_option("--life", o.life, "How many times this worker was started before");
  app.add_option("--records", o.records, "Record file (appended)")->required();
  app.add_option("--lease-ms", o.lease_ms, "Watchdog lease")->check(CLI::Range(10, 600'000));
  app.add_option("--hold-us", o.hold_us, "Work under the lock")->check(CLI::Range(0, 10'000'000));
  app.add_option("--idle-us", o.idle_us, "Time between a release and the next lock call")
      ->check(CLI::Range(0, 10'000'000));
  app.add_option("--wait-ms", o.wait_ms, "How long one lock call waits (default 250)")
      ->check(CLI::Range(1, 600'000));
  app.add_flag("--no-lock", o.no_lock, "Do not take the lock (the checker must fail)");
  app.add_option("--parent", o.parent, "Exit if this process is not the parent");
  app.add_option("--netns", o.netns, "Enter this network namespace first (/var/run/netns/NAME)");
  CLI11_PARSE(app, argc, argv);

  // Die with the driver: a crashed driver leaves no worker behind.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return 70;
  if (o.parent != 0 && ::getppid() != o.parent) return 70;

  struct sigaction action {};
  action.sa_handler = on_sigterm;
  action.sa_flags = SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  try {
    if (!o.netns.empty()) dlock::fault::enter_netns(o.netns);
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_worker %d: %s\n", o.worker, e.what());
    return 1;
  }
}
