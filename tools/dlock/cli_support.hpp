// What several dlock subcommands share: the Redis URL, durations given in seconds, how a
// dlock::error maps to an exit code, and the Redis server the demos run against.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock::tools {
class redis_process;
}

namespace dlock::cli {

// --redis if given, else $DLOCK_REDIS_URL if set and not empty, else redis://127.0.0.1:6379.
std::string resolve_redis_url(const std::string& from_option);

// Parses a duration in seconds ("5", "0.3", "1e-3") for the option `option`, such as "--wait".
// Returns std::nullopt and sets `problem` to a readable message when the text is not a number, not
// finite, negative, zero (unless `allow_zero`), below a millisecond or longer than a year.
std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text,
                                                       std::string_view option, bool allow_zero,
                                                       std::string& problem);

// "0.3 s", "5 s", "1.25 s": for messages.
std::string format_seconds(std::chrono::milliseconds d);

// How many bytes of a lock name messages show (names may have up to 64 KiB).
inline constexpr std::size_t shown_name_bytes = 64;

// `text` for a message: whole when it has at most `limit` bytes, else its first `limit` bytes (cut
// back to the start of a UTF-8 character) and "... (N bytes)". Control bytes appear as \xNN, so
// that what a user typed cannot move the cursor or clear the terminal of whoever reads the message.
std::string shown(std::string_view text, std::size_t limit);
// A lock name (or another user-given word) for a message: shown(name, shown_name_bytes).
inline std::string shown_name(std::string_view name) {
  return shown(name, shown_name_bytes);
}

// The exit code for a failure of the library: exit_usage for errc::invalid_argument (a bad URL or
// name) and errc::wrong_type (the name is a key that holds data, not a lock: the argument is
// wrong, as with a bad name), exit_unavailable for everything Redis-related.
int exit_code_for(std::error_code ec);
inline int exit_code_for(const dlock::error& e) {
  return exit_code_for(e.code());
}

// Prints "dlock: <message>" to stderr.
void print_error(std::string_view message);

// -v / --verbose: how many times it was given. 0: the library is silent; 1: its info, warning
// and error records go to stderr; 2 or more: its debug records too. Set once, before any client.
void set_verbosity(int level);

// client_options::from_url(url) with the log hook -v asks for: each record as one stderr line
// "dlock: <level>: <message> key=value ...", values quoted when they hold spaces, quotes or '='
// and shown() like every user-given word. Throws like from_url.
dlock::client_options client_options_for(const std::string& url);
// The log hook -v asks for, as client_options_for() sets it; empty without -v.
dlock::log_handler verbose_log_handler();

// The server a demo runs against: `redis_url` as given, or a private redis-server on a free
// loopback port in a temporary directory when `redis_url` is empty, stopped (and its directory
// removed) when this object is destroyed.
class demo_server {
 public:
  // Starts the private server if needed and says so on stdout. Throws std::runtime_error when
  // redis-server cannot be started.
  explicit demo_server(const std::string& redis_url);
  ~demo_server();
  demo_server(const demo_server&) = delete;
  demo_server& operator=(const demo_server&) = delete;

  const std::string& url() const { return url_; }
  bool is_private() const { return private_ != nullptr; }

 private:
  std::unique_ptr<tools::redis_process> private_;
  std::string url_;
};

}  // namespace dlock::cli
