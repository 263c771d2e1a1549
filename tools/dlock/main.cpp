// dlock: the command-line tool. Parses the command line and hands over to one file per
// subcommand: exec.cpp, status.cpp, the demos (smoke, flash-sale, reward, failover).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exec.hpp"
#include "exit_codes.hpp"
#include "failover_demo.hpp"
#include "flash_sale_demo.hpp"
#include "latch.hpp"
#include "redlock_exec.hpp"
#include "redlock_masters.hpp"
#include "redlock_sale_demo.hpp"
#include "reward_demo.hpp"
#include "smoke_demo.hpp"
#include "status.hpp"

namespace {

using namespace dlock::cli;

int ping(const std::string& url) {
  try {
    dlock::client c{client_options_for(url)};
    const auto start = std::chrono::steady_clock::now();
    const std::string pong = c.command({"PING"}).str;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    const bool cluster = c.routing_metrics().deployment == dlock::deployment_kind::cluster;
    const std::string& master = c.options().sentinel.master_name;
    fmt::print("{} in {} us from {}\n", pong, us,
               !master.empty() ? "master '" + master + "' found through Redis Sentinel"
               : cluster       ? c.options().endpoint() + " (a node of a Redis Cluster)"
                               : c.options().endpoint() + " (one server)");
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(e.what());
    return exit_code_for(e);
  }
}

// `dlock metrics`: connects (a PING), then prints this process's client metrics once, in the
// Prometheus text format: the metric names, the connection and the deployment found. A service
// serves client::metrics_text() itself (docs/operating.md).
int metrics(const std::string& url) {
  try {
    dlock::client c{client_options_for(url)};
    c.command({"PING"});
    fmt::print("{}", c.metrics_text());
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(e.what());
    return exit_code_for(e);
  }
}

// `dlock metrics` with several --redis: Redlock over those masters. Waits until every master's
// connection is up (or connect_timeout passed), then prints the redlock's metrics once; exit 69
// when fewer than a majority connected.
int redlock_metrics(const std::vector<std::string>& urls) {
  try {
    connected_masters masters;  // before the redlock, which logs into it
    dlock::redlock_options options;
    options.on_log = masters.handler(verbose_log_handler());
    dlock::redlock rl{urls, options};
    const std::size_t up = masters.wait_for(rl.size(), rl.options().connect_timeout);
    if (up < rl.quorum()) {
      print_error(fmt::format("only {} of the {} Redlock masters answered; {} are needed", up,
                              rl.size(), rl.quorum()));
      return exit_unavailable;
    }
    fmt::print("{}", rl.metrics_text());
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(e.what());
    return exit_code_for(e);
  }
}

// The text of the duration options of `dlock exec`, checked after parsing so that every mistake
// gets one clear message and exit code 64.
struct exec_arguments {
  std::string wait, lease, watchdog, kill_grace = "5";
};

std::optional<exec_options> check_exec(exec_options o, const exec_arguments& a,
                                       std::string& problem) {
  // Everything after NAME is the command's (CLI11's positionals_at_end), "--" first if given:
  // `dlock exec x ls -w 5` runs `ls -w 5` and never waits. Options put after NAME and before
  // "--" are a mistake to name, not part of the command.
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().starts_with("-") &&
             std::find(o.command.begin(), o.command.end(), "--") != o.command.end()) {
    problem = fmt::format(
        "exec: options go before NAME ('{}' follows it); usage: dlock exec [OPTIONS] NAME -- "
        "COMMAND [ARG...]",
        shown(o.command.front(), 40));
    return std::nullopt;
  }
  if (o.command.empty()) {
    problem = "exec: no command given; usage: dlock exec [OPTIONS] NAME -- COMMAND [ARG...]";
    return std::nullopt;
  }
  if (o.nonblock && !a.wait.empty()) {
    problem = "exec: -n/--nonblock (one attempt) and -w/--wait (wait that long) exclude each other";
    return std::nullopt;
  }
  if (!a.lease.empty() && !a.watchdog.empty()) {
    problem =
        "exec: --lease (a fixed lease, never renewed) and --watchdog (a lease renewed while the "
        "command runs) exclude each other";
    return std::nullopt;
  }
  if (o.conflict_exit_code < 0 || o.conflict_exit_code > 255) {
    problem =
        fmt::format("exec: -E/--conflict-exit-code must be 0 to 255, not {}", o.conflict_exit_code);
    return std::nullopt;
  }
  auto parse = [&](const std::string& text, std::string_view option, bool allow_zero,
                   std::optional<std::chrono::milliseconds>& out) {
    if (text.empty()) return true;
    out = parse_seconds(text, option, allow_zero, problem);
    if (!out) problem = "exec: " + problem;
    return out.has_value();
  };
  std::optional<std::chrono::milliseconds> grace;
  if (!parse(a.wait, "-w/--wait", false, o.wait) || !parse(a.lease, "--lease", false, o.lease) ||
      !parse(a.watchdog, "--watchdog", false, o.watchdog) ||
      !parse(a.kill_grace, "--kill-grace", true, grace)) {
    return std::nullopt;
  }
  o.kill_grace = *grace;
  return o;
}

constexpr std::string_view exec_footer = R"(
The command runs with DLOCK_NAME, DLOCK_TOKEN (the fencing token) and DLOCK_OWNER (the lock's
hash field) in its environment, in its own process group (in dlock's when dlock runs in the
foreground of a terminal). SIGINT, SIGTERM and SIGHUP are forwarded
to it; the lock is released once it has exited. If the lock is lost while it runs, it gets
SIGTERM, SIGKILL after --kill-grace, and dlock exits 70. If dlock itself is killed (kill -9, out
of memory), the command gets SIGKILL too, with its process group (in a terminal's foreground:
the command alone).

Exit status: the command's own (128+N if signal N killed it); 75 or -E: the lock was held;
70: the lock was lost; 69: Redis unreachable, authentication refused or a Redis error;
71: a system call failed; 64: usage error; 127: command not found; 126: command not executable;
128+N: signal N arrived while waiting (the command was not run).)";

constexpr std::string_view status_footer = R"(
Exit status: 0: shown (locked or free); 64: usage error, or NAME is a key that holds data (a
string, a hash of other fields), not a lock; 69: Redis unreachable, authentication refused or a
Redis error.)";

constexpr std::string_view unlock_footer = R"(
Exit status: 0: the lock is free (it was released, or was not held); 64: usage error, or NAME is
a key that holds data (a string, a hash of other fields), not a lock: it is left untouched;
69: Redis unreachable, authentication refused or a Redis error.)";

constexpr std::string_view latch_footer = R"(
Exit status: 0: done (wait: the latch is open); 75: wait timed out, or set found a latch; 64:
usage error, or NAME is a key that holds something else; 69: Redis unreachable, authentication
refused or a Redis error.)";

// A count given on the command line (a semaphore's permits, a latch's count): a whole number
// from 0 to dlock::max_count. CLI11's NonNegativeNumber would name 1.8e308 as its bound.
CLI::Validator count_range() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        std::int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc() || at != end || value < 0 || value > dlock::max_count) {
          return fmt::format("must be a whole number from 0 to {}, not '{}'", dlock::max_count,
                             shown(text, 40));
        }
        return {};
      },
      "COUNT", "count");
}

int run(int argc, char** argv) {
  CLI::App app{"dlock: distributed locks on Redis"};
  app.set_version_flag("--version", std::string("dlock ") + DLOCK_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // --redis also after the subcommand
  // Repeated (one URL each time): Redlock over those masters (exec only).
  std::vector<std::string> redis_options;
  app.add_option(
         "--redis", redis_options,
         "Redis URL: redis://[user:password@]host:port[,host2:port2...][/db], rediss://..., "
         "unix:///path "
         "(default: $DLOCK_REDIS_URL, else redis://127.0.0.1:6379). Given several times with exec "
         "or metrics: Redlock over those independent masters")
      ->allow_extra_args(false);
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity,
               "Log connection changes, lost locks and slow acquisitions to stderr (-vv: also "
               "debug records); not for the demos");

  auto* ping_cmd = app.add_subcommand("ping", "Check that Redis answers, and how fast");
  auto* metrics_cmd = app.add_subcommand(
      "metrics",
      "Connect, then print the client's metrics once in the Prometheus text format (several "
      "--redis: the Redlock's)");

  exec_options exec_o;
  exec_arguments exec_a;
  auto* exec_cmd = app.add_subcommand("exec", "Run a command while holding a lock");
  exec_cmd->add_flag("-n,--nonblock", exec_o.nonblock,
                     "Fail at once (exit 75 or -E) if the lock is held");
  exec_cmd->add_flag("--plain", exec_o.plain,
                     "Take the plain lock (a string key set with SET NX PX, as redis-py, redsync "
                     "and node-redlock do) instead of the reentrant one");
  exec_cmd
      ->add_option("--semaphore", exec_o.semaphore_permits,
                   "Hold one permit of the semaphore NAME (Redisson's permit-expirable "
                   "semaphore), created with N permits if it does not exist, instead of a lock")
      ->check(count_range())
      ->excludes("--plain");
  auto* shared_flag = exec_cmd->add_flag(
      "-s,--shared", exec_o.shared,
      "Take a read hold of the read-write lock NAME (many readers at once; Redisson's "
      "RReadWriteLock), as flock -s");
  auto* exclusive_flag = exec_cmd->add_flag(
      "-x,--exclusive", exec_o.exclusive,
      "Take the write lock of the read-write lock NAME (no reader, no other writer), as flock -x");
  shared_flag->excludes(exclusive_flag);
  for (auto* rw_flag : {shared_flag, exclusive_flag})
    rw_flag->excludes("--plain")->excludes("--semaphore");
  exec_cmd
      ->add_flag("--fair", exec_o.fair,
                 "Take the fair lock NAME (Redisson's RFairLock): waiters from every client are "
                 "served in the order they came")
      ->excludes("--plain")
      ->excludes("--semaphore")
      ->excludes(shared_flag)
      ->excludes(exclusive_flag);
  exec_cmd->add_option("-w,--wait", exec_a.wait,
                       "Give up after waiting SECONDS (fractions allowed); default: wait until "
                       "acquired");
  exec_cmd->add_option("--lease", exec_a.lease,
                       "Hold with an explicit lease of SECONDS, never renewed: the command is "
                       "stopped when it runs out");
  exec_cmd->add_option("--watchdog", exec_a.watchdog,
                       "The renewed lease in SECONDS (default 30), renewed every third of it");
  exec_cmd->add_option("-E,--conflict-exit-code", exec_o.conflict_exit_code,
                       "Exit code when the lock could not be acquired (default 75)");
  exec_cmd->add_option("--kill-grace", exec_a.kill_grace,
                       "When the lock is lost: SECONDS between SIGTERM and SIGKILL (default 5; 0: "
                       "SIGKILL at once)");
  exec_cmd->add_option("name", exec_o.name, "Lock name")->required();
  exec_cmd->add_option("command", exec_o.command,
                       "The command and its arguments, after -- (everything after NAME is "
                       "the command's)");
  exec_cmd->positionals_at_end();
  exec_cmd->footer(std::string(exec_footer));

  std::string status_name;
  bool status_json = false;
  auto* status_cmd = app.add_subcommand(
      "status",
      "Show whether a lock is held, by whom, its remaining lease, last fencing token "
      "and waiting clients");
  status_cmd->add_option("name", status_name, "Lock name")->required();
  status_cmd->add_flag("--json", status_json, "Print one JSON object");
  status_cmd->footer(std::string(status_footer));

  std::string unlock_name;
  bool unlock_force = false;
  auto* unlock_cmd = app.add_subcommand(
      "unlock", "Break a lock: delete it whoever holds it and wake its waiters (needs --force)");
  unlock_cmd->add_flag("--force", unlock_force,
                       "Required: the holder is not asked; it learns of the loss at its next "
                       "renewal");
  unlock_cmd->add_option("name", unlock_name, "Lock name")->required();
  unlock_cmd->footer(std::string(unlock_footer));

  std::string latch_name, latch_timeout;
  std::int64_t latch_count = 0;
  auto* latch_cmd = app.add_subcommand(
      "latch", "A count-down latch (Redisson's RCountDownLatch): wait for it, count it down");
  latch_cmd->require_subcommand(1);
  auto* latch_wait = latch_cmd->add_subcommand(
      "wait", "Wait until the latch's count is zero (or it does not exist)");
  latch_wait->add_option("--timeout", latch_timeout,
                         "Give up after SECONDS (fractions allowed; exit 75); default: wait for "
                         "ever");
  latch_wait->add_option("name", latch_name, "Latch name")->required();
  latch_wait->footer(std::string(latch_footer));
  auto* latch_down = latch_cmd->add_subcommand(
      "count-down", "Count the latch down once; at zero its waiters are woken");
  latch_down->add_option("name", latch_name, "Latch name")->required();
  latch_down->footer(std::string(latch_footer));
  auto* latch_set = latch_cmd->add_subcommand(
      "set", "Set the latch's count, only if it does not exist (exit 75 if it does)");
  latch_set->add_option("name", latch_name, "Latch name")->required();
  latch_set->add_option("count", latch_count, "The count")->required()->check(count_range());
  latch_set->footer(std::string(latch_footer));

  auto* demo = app.add_subcommand("demo",
                                  "Runnable scenarios; without --redis they start a "
                                  "private redis-server");
  demo->require_subcommand(1);
  auto* smoke = demo->add_subcommand("smoke",
                                     "Exercise the Redis core: commands, pipelining, "
                                     "Lua, pub/sub");
  flash_sale_options sale_o;
  bool sale_redlock = false;
  auto* flash_sale = demo->add_subcommand(
      "flash-sale", "Buyers oversell a stock without a lock; dlock and fencing tokens fix it");
  flash_sale->add_option("--buyers", sale_o.buyers, "Concurrent buyers (default 40)")
      ->check(CLI::Range(2, 1000));
  flash_sale->add_flag("--redlock", sale_redlock,
                       "Under Redlock over 5 private masters, 2 of them killed mid-sale");
  flash_sale->add_option("--stock", sale_o.stock, "Items in stock (default 10)")
      ->check(CLI::Range(1, 1000000));
  reward_options reward_o;
  auto* reward = demo->add_subcommand(
      "reward", "Family members claim one reward: paid several times without a lock, once with");
  reward->add_option("--members", reward_o.members, "Family members claiming (default 20)")
      ->check(CLI::Range(2, 1000));
  auto* failover = demo->add_subcommand(
      "failover",
      "A lock granted twice across a Sentinel failover; what min_replicas and fencing tokens "
      "change (own servers only)");
  // The processes of the demos' races: this binary run again (see demo_race.hpp). Hidden.
  std::string worker_scenario, worker_mode, worker_prefix;
  int worker_first_id = 1, worker_count = 1;
  auto* worker = demo->add_subcommand("worker", "");
  worker->group("");
  worker->add_option("--scenario", worker_scenario)->required();
  worker->add_option("--mode", worker_mode)->required();
  worker->add_option("--prefix", worker_prefix)->required();
  worker->add_option("--first-id", worker_first_id)->required();
  worker->add_option("--count", worker_count)->required()->check(CLI::Range(1, 1000));

  // dlock's own messages start "dlock: "; CLI11's do too.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string what = e.what();
    // "dlock frobnicate": CLI11 only says that a subcommand is required; name the word instead.
    if (const auto left = a->remaining(true);
        !left.empty() && what.find("subcommand is required") != std::string::npos) {
      what = fmt::format("unknown command '{}'", shown(left.front(), 60));
    }
    return fmt::format("dlock: {}\nRun with --help for more information.\n", what);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }

  const std::string redis_option = redis_options.empty() ? std::string() : redis_options.front();
  if (redis_options.size() > 1 && !exec_cmd->parsed() && !metrics_cmd->parsed()) {
    print_error(
        "--redis may be given more than once only for exec and metrics (Redlock over those "
        "masters)");
    return exit_usage;
  }
  set_verbosity(verbosity);
  const std::string url = resolve_redis_url(redis_option);
  if (ping_cmd->parsed()) return ping(url);
  if (metrics_cmd->parsed() && redis_options.size() > 1) return redlock_metrics(redis_options);
  if (metrics_cmd->parsed()) return metrics(url);
  if (exec_cmd->parsed()) {
    exec_o.redis_url = url;
    std::string problem;
    const std::optional<exec_options> checked = check_exec(exec_o, exec_a, problem);
    if (!checked) {
      print_error(problem);
      return exit_usage;
    }
    if (redis_options.size() > 1) {
      // Redlock has one lock type; these would otherwise be dropped without a word.
      const char* other_kind = checked->shared || checked->exclusive ? "-s/-x (the read-write lock)"
                               : checked->fair                       ? "--fair (the fair lock)"
                               : checked->semaphore_permits          ? "--semaphore"
                                                                     : nullptr;
      if (other_kind != nullptr) {
        print_error(fmt::format("{} takes one Redis deployment, not Redlock", other_kind));
        return exit_usage;
      }
    }
    if (redis_options.size() > 1) return run_redlock_exec(*checked, redis_options);
    return run_exec(*checked);
  }
  if (status_cmd->parsed()) return run_status(url, status_name, status_json);
  if (unlock_cmd->parsed()) {
    if (!unlock_force) {
      print_error(
          "unlock breaks a lock whoever holds it, so it needs --force: dlock unlock --force NAME "
          "(dlock exec releases its own lock when its command ends)");
      return exit_usage;
    }
    return run_force_unlock(url, unlock_name);
  }
  if (latch_wait->parsed()) {
    std::optional<std::chrono::milliseconds> timeout;
    if (!latch_timeout.empty()) {
      std::string problem;
      timeout = parse_seconds(latch_timeout, "--timeout", true, problem);
      if (!timeout) {
        print_error(problem);
        return exit_usage;
      }
    }
    return run_latch_wait(url, latch_name, timeout);
  }
  if (latch_down->parsed()) return run_latch_count_down(url, latch_name);
  if (latch_set->parsed()) return run_latch_set(url, latch_name, latch_count);
  // The demos use a private server unless --redis (not $DLOCK_REDIS_URL) names one.
  if (smoke->parsed()) return run_smoke_demo(redis_option);
  if (flash_sale->parsed()) {
    sale_o.redis_url = redis_option;
    if (sale_redlock) return run_redlock_flash_sale_demo(sale_o);
    return run_flash_sale_demo(sale_o);
  }
  if (reward->parsed()) {
    reward_o.redis_url = redis_option;
    return run_reward_demo(reward_o);
  }
  if (failover->parsed()) return run_failover_demo(redis_option);
  if (worker->parsed()) {
    const participant_fn fn =
        worker_scenario == "flash-sale" ? flash_sale_participant(worker_mode, worker_prefix)
        : worker_scenario == "reward"   ? reward_participant(worker_mode, worker_prefix)
                                        : nullptr;
    if (!fn) {
      print_error("demo worker: unknown --scenario or --mode");
      return exit_usage;
    }
    return run_race_worker(redis_option, worker_first_id, worker_count, fn);
  }
  return exit_usage;
}

}  // namespace

int main(int argc, char** argv) {
  // Every path reports its own errors with its own exit status; this catches what none expected
  // (out of memory, say), so dlock still says why instead of aborting.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    print_error(std::string("unexpected error: ") + e.what());
  } catch (...) {
    print_error("unexpected error");
  }
  return exit_os_error;
}
