#include "status.hpp"

#include <fmt/core.h>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "json.hpp"

namespace dlock::cli {
namespace {

std::string describe_ttl(std::chrono::milliseconds ttl) {
  if (ttl.count() == -1) return "none (the key never expires: not set by dlock or Redisson)";
  return format_seconds(ttl);
}

std::string to_json(const std::string& name, const lock_status& s) {
  std::string holders;
  for (const lock_holder& h : s.holders) {
    if (!holders.empty()) holders += ",";
    holders += fmt::format(R"({{"owner":{},"count":{}}})", json_quote(h.owner), h.count);
  }
  return fmt::format(
      R"({{"name":{},"locked":{},"holders":[{}],"remaining_ttl_ms":{},"last_fencing_token":{},)"
      R"("waiting_clients":{}}})",
      json_quote(name), s.locked, holders, s.remaining_ttl.count(), s.last_fencing_token,
      s.subscribers);
}

std::string to_text(const std::string& name, const lock_status& s) {
  std::string out = fmt::format("lock '{}': {}\n", shown_name(name), s.locked ? "locked" : "free");
  for (const lock_holder& h : s.holders) {
    out += fmt::format("  holder              {} ({} hold{})\n", h.owner, h.count,
                       h.count == 1 ? "" : "s");
  }
  if (s.locked) out += fmt::format("  remaining lease     {}\n", describe_ttl(s.remaining_ttl));
  out += fmt::format("  last fencing token  {}\n", s.last_fencing_token == 0
                                                       ? std::string("none yet")
                                                       : std::to_string(s.last_fencing_token));
  out += fmt::format("  waiting clients     {}\n", s.subscribers);
  return out;
}

}  // namespace

int run_status(const std::string& redis_url, const std::string& name, bool json) {
  try {
    dlock::client redis{redis_url};
    const lock_status s = redis.get_lock(name).status();
    fmt::print("{}", json ? to_json(name, s) + "\n" : to_text(name, s));
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(fmt::format("status of lock '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

int run_force_unlock(const std::string& redis_url, const std::string& name) {
  try {
    dlock::client redis{redis_url};
    if (redis.get_lock(name).force_unlock()) {
      fmt::print("lock '{}' released; its waiters were woken\n", shown_name(name));
    } else {
      fmt::print("lock '{}' was not held; nothing to release\n", shown_name(name));
    }
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(fmt::format("unlock of lock '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

}  // namespace dlock::cli
