#include "cli_support.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "exit_codes.hpp"
#include "redis_process.hpp"

namespace dlock::cli {

std::string resolve_redis_url(const std::string& from_option) {
  if (!from_option.empty()) return from_option;
  const char* env = std::getenv("DLOCK_REDIS_URL");
  return env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379";
}

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text,
                                                       std::string_view option, bool allow_zero,
                                                       std::string& problem) {
  // A year is far beyond any sensible wait or lease, and keeps the millisecond count (and the
  // library's deadline arithmetic) far from overflow.
  constexpr double max_seconds = 365.0 * 24 * 3600;
  double seconds = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, seconds);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(seconds)) {
    problem = fmt::format("{} expects a number of seconds such as 5 or 0.25, not '{}'", option,
                          shown_name(text));
    return std::nullopt;
  }
  if (seconds < 0 || (seconds == 0 && !allow_zero)) {
    problem = fmt::format("{} must be {} seconds, not {}", option,
                          allow_zero ? "zero or more" : "more than zero", shown_name(text));
    return std::nullopt;
  }
  if (seconds > max_seconds) {
    problem = fmt::format("{} {} is more than a year", option, shown_name(text));
    return std::nullopt;
  }
  const auto ms = std::llround(seconds * 1000);
  if (ms == 0 && seconds != 0) {
    problem = fmt::format("{} {} is shorter than a millisecond, the smallest step", option,
                          shown_name(text));
    return std::nullopt;
  }
  return std::chrono::milliseconds(ms);
}

std::string format_seconds(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
  std::string text = fmt::format("{:.3f}", static_cast<double>(ms) / 1000);
  while (text.back() == '0')
    text.pop_back();
  return text + " s";
}

std::string shown(std::string_view text, std::size_t limit) {
  std::size_t end = text.size();
  if (end > limit) {
    end = limit;
    // Not in the middle of a UTF-8 character: back off over continuation bytes (10xxxxxx) to the
    // byte that starts the character, which is then left out too.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
      --end;
  }
  std::string out;
  out.reserve(end + 32);
  for (const char c : text.substr(0, end)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  if (end < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

int exit_code_for(std::error_code ec) {
  return ec == errc::invalid_argument || ec == errc::wrong_type ? exit_usage : exit_unavailable;
}

void print_error(std::string_view message) {
  // One write, so that lines of concurrent dlock processes sharing a terminal do not interleave.
  const std::string line = fmt::format("dlock: {}\n", message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

namespace {
int verbosity = 0;

std::string log_value(std::string_view value) {
  std::string v = shown(value, 256);
  if (!v.empty() && v.find_first_of(" \"=") == std::string::npos) return v;
  std::string quoted = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}
}  // namespace

void set_verbosity(int level) {
  verbosity = level;
}

dlock::log_handler verbose_log_handler() {
  if (verbosity <= 0) return {};
  const log_level least = verbosity >= 2 ? log_level::debug : log_level::info;
  return [least](const log_record& r) {
    if (r.level < least) return;
    std::string line = fmt::format("{}: {}", to_string(r.level), r.message);
    for (const log_field& f : r.fields)
      line += fmt::format(" {}={}", f.key, log_value(f.value));
    print_error(line);
  };
}

dlock::client_options client_options_for(const std::string& url) {
  dlock::client_options o = dlock::client_options::from_url(url);
  o.on_log = verbose_log_handler();
  return o;
}

demo_server::demo_server(const std::string& redis_url) : url_(redis_url) {
  if (!url_.empty()) return;
  fmt::print("Starting a private redis-server on a free loopback port...\n");
  std::fflush(stdout);
  private_ = std::make_unique<tools::redis_process>();
  url_ = private_->url();
}

demo_server::~demo_server() = default;

}  // namespace dlock::cli
