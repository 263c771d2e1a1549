// dlock: the command-line tool. So far `dlock demo smoke` and `dlock ping`; running commands
// under a lock (`dlock exec`) arrives with the lock types.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "smoke_demo.hpp"

namespace {

std::string default_redis_url() {
  const char* env = std::getenv("DLOCK_REDIS_URL");
  return env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379";
}

int ping(const std::string& url) {
  try {
    dlock::client c{url};
    const auto start = std::chrono::steady_clock::now();
    const std::string pong = c.command({"PING"}).str;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    fmt::print("{} from {} in {} us\n", pong, c.options().endpoint(), us);
    return dlock::cli::exit_ok;
  } catch (const dlock::error& e) {
    fmt::print(stderr, "dlock: {}\n", e.what());
    return e.code() == dlock::errc::invalid_argument ? dlock::cli::exit_usage
                                                     : dlock::cli::exit_unavailable;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlock: distributed locks on Redis"};
  app.set_version_flag("--version", std::string("dlock ") + DLOCK_VERSION);
  app.require_subcommand(1);
  std::string redis_url;
  app.add_option("--redis", redis_url,
                 "Redis URL: redis://[user:password@]host:port[/db], rediss://..., unix:///path "
                 "(default: $DLOCK_REDIS_URL or redis://127.0.0.1:6379)");

  auto* ping_cmd = app.add_subcommand("ping", "Check that Redis answers, and how fast");
  auto* demo = app.add_subcommand("demo",
                                  "Runnable scenarios; without --redis they start a "
                                  "private redis-server");
  demo->require_subcommand(1);
  auto* smoke = demo->add_subcommand("smoke",
                                     "Exercise the Redis core: commands, pipelining, "
                                     "Lua, pub/sub");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? dlock::cli::exit_ok : dlock::cli::exit_usage;
  }

  if (ping_cmd->parsed()) return ping(redis_url.empty() ? default_redis_url() : redis_url);
  if (smoke->parsed()) return dlock::cli::run_smoke_demo(redis_url);
  return dlock::cli::exit_usage;
}
