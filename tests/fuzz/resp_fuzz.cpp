// tests/fuzz/resp_fuzz.cpp
//
// libFuzzer target for the RESP2 parser (src/resp/codec.hpp), built by -DDLOCK_BUILD_FUZZERS=ON
// with clang. Beyond "no crash, no sanitizer report", it checks the parser's contract: the same
// bytes give the same replies (or the same failure) whether they arrive at once or in pieces of
// any size, because the connection hands the parser whatever each read returned.
//
// The first input byte chooses the piece size (1-16); the rest is the stream. Small limits make
// the limit paths reachable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "resp/codec.hpp"

namespace {

// Every reply the stream yields (as to_string), then "failed: <why>" if the parser failed.
std::vector<std::string> parse_in_pieces(std::string_view stream, std::size_t piece) {
  const dlock::resp::parser_limits limits{.max_bulk_length = 1 << 12,
                                          .max_array_length = 1 << 8,
                                          .max_depth = 6,
                                          .max_line_length = 1 << 8};
  dlock::resp::parser p(limits);
  std::vector<std::string> out;
  std::string buffer;
  for (std::size_t at = 0; at < stream.size(); at += piece) {
    buffer.append(stream.substr(at, piece));
    for (;;) {
      const std::size_t used = p.parse(buffer);
      if (used > buffer.size()) std::abort();  // consumed more than it was given
      buffer.erase(0, used);
      if (p.failed()) {
        // The message quotes the bytes it saw, which depend on how they arrived: compare the
        // reason without the quote.
        const std::string& why = p.error_message();
        out.push_back("failed: " + why.substr(0, why.find('"')));
        return out;
      }
      if (p.done()) {
        out.push_back(dlock::to_string(p.take()));
        continue;
      }
      if (used == 0) break;  // needs more bytes
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 16;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto whole = parse_in_pieces(stream, stream.empty() ? 1 : stream.size());
  const auto pieces = parse_in_pieces(stream, piece);
  if (whole != pieces) std::abort();  // the result depends on how the bytes arrived
  return 0;
}
