#include "latch.hpp"

#include <fmt/core.h>

#include <charconv>

#include "cli_support.hpp"
#include "exit_codes.hpp"
#include "json.hpp"

namespace dlock::cli {

int run_latch_wait(const std::string& redis_url, const std::string& name,
                   std::optional<std::chrono::milliseconds> timeout) {
  try {
    dlock::client redis{client_options_for(redis_url)};
    dlock::count_down_latch latch = redis.get_count_down_latch(name);
    if (!timeout) {
      latch.wait();
      return exit_ok;
    }
    if (latch.wait_for(*timeout)) return exit_ok;
    print_error(fmt::format("latch '{}' still at {} after {}", shown_name(name), latch.count(),
                            format_seconds(*timeout)));
    return exit_conflict;
  } catch (const dlock::error& e) {
    print_error(fmt::format("wait for latch '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

int run_latch_count_down(const std::string& redis_url, const std::string& name) {
  try {
    dlock::client redis{client_options_for(redis_url)};
    const std::int64_t left = redis.get_count_down_latch(name).count_down();
    if (left < 0) {
      fmt::print("latch '{}' does not exist (open); nothing counted\n", shown_name(name));
    } else if (left == 0) {
      fmt::print("latch '{}' reached zero; its waiters were woken\n", shown_name(name));
    } else {
      fmt::print("latch '{}': {} left\n", shown_name(name), left);
    }
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(fmt::format("count down latch '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

int run_latch_set(const std::string& redis_url, const std::string& name, std::int64_t count) {
  try {
    dlock::client redis{client_options_for(redis_url)};
    dlock::count_down_latch latch = redis.get_count_down_latch(name);
    if (latch.try_set_count(count)) {
      fmt::print("latch '{}' set to {}\n", shown_name(name), count);
      return exit_ok;
    }
    print_error(fmt::format("latch '{}' exists already (count {}); left as it is", shown_name(name),
                            latch.count()));
    return exit_conflict;
  } catch (const dlock::error& e) {
    print_error(fmt::format("set latch '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

bool holds_latch(dlock::client& redis, const std::string& name) {
  const reply v = redis.command({"GET", name});
  if (!v.is_string() || v.str.empty()) return false;
  std::int64_t count = 0;
  const char* end = v.str.data() + v.str.size();
  const auto [at, ec] = std::from_chars(v.str.data(), end, count);
  return ec == std::errc{} && at == end;
}

int print_latch_status(dlock::client& redis, const std::string& name, bool json) {
  const latch_status s = redis.get_count_down_latch(name).status();
  if (json) {
    fmt::print(R"({{"name":{},"kind":"latch","count":{},"waiting_clients":{}}})"
               "\n",
               json_quote(name), s.count, s.subscribers);
  } else {
    fmt::print("latch '{}': {}\n", shown_name(name), s.count > 0 ? "closed" : "open");
    fmt::print("  kind                count-down latch (Redisson RCountDownLatch)\n");
    fmt::print("  count               {}\n", s.count);
    fmt::print("  waiting clients     {}\n", s.subscribers);
  }
  return exit_ok;
}

}  // namespace dlock::cli
