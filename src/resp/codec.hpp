// src/resp/codec.hpp
//
// RESP2 encoding and decoding, sans I/O: no sockets, no clocks, no threads. The connection layer
// hands bytes in and takes replies out; everything here is unit-tested by feeding bytes.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"

namespace dlock::resp {

// Appends the command `args` (a RESP array of bulk strings) to `out`. Arguments may hold any
// bytes, including CR, LF and NUL.
void append_command(std::string& out, std::span<const std::string_view> args);
void append_command(std::string& out, std::initializer_list<std::string_view> args);

// Bounds on what a peer may make the parser hold. Exceeding one is a protocol error, detected as
// soon as the offending header is read (before the payload arrives).
struct parser_limits {
  std::size_t max_bulk_length = 512 * 1024 * 1024;  // Redis' own proto-max-bulk-len default
  std::size_t max_array_length = 16 * 1024 * 1024;  // elements in one array
  std::size_t max_depth = 32;                       // nesting of arrays
  std::size_t max_line_length = 64 * 1024;          // a simple string, error or integer line
};

// An incremental RESP2 reply parser.
//
// parser::parse(data) consumes a prefix of `data` and returns its length. It consumes whole
// elements only and never copies partial input, so the caller keeps the unconsumed tail and
// calls again when more bytes arrive (with the tail first). Nested arrays that are partly built
// persist in the parser between calls. After a call:
//   - done(): a complete reply is ready; take() moves it out and readies the parser for the next;
//   - failed(): the input was malformed or broke a limit; error_message() says how. The parser
//     stays failed until reset(); the connection must be dropped.
//   - neither: more input is needed.
// parse() stops after one complete reply, so call it in a loop while it consumes bytes.
class parser {
 public:
  explicit parser(parser_limits limits = {});

  std::size_t parse(std::string_view data);

  bool done() const noexcept;
  bool failed() const noexcept;
  const std::string& error_message() const noexcept;
  reply take();
  void reset();

 private:
  struct frame {
    reply array;           // the array being filled
    std::size_t expected;  // its declared length
  };
  // Attaches a finished element to the innermost open array or makes it the result.
  void finish(reply r);
  std::size_t fail(std::string message);

  parser_limits limits_;
  std::vector<frame> stack_;
  reply result_;
  bool done_ = false;
  bool failed_ = false;
  std::string error_;
};

}  // namespace dlock::resp
