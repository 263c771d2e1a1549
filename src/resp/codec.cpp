// src/resp/codec.cpp
#include "resp/codec.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

namespace dlock::resp {

namespace {

// Longest valid integer or length line: "-9223372036854775808". Anything longer is junk, so
// headers are bounded tightly no matter how large max_line_length is.
constexpr std::size_t max_number_length = 20;
// Smallest encoded element ("+\r\n"); bounds how much an array header may make us reserve.
constexpr std::size_t min_element_size = 3;
// How much offending input an error message quotes.
constexpr std::size_t max_excerpt_length = 32;

std::string excerpt(std::string_view bytes) {
  return to_string(reply::make_bulk(std::string(bytes.substr(0, max_excerpt_length))));
}

// Writes a header (type byte, up to 20 digits, CRLF) at `at`; returns the end.
char* put_header(char* at, char type, std::size_t n) {
  *at++ = type;
  at = std::to_chars(at, at + max_number_length, n).ptr;
  *at++ = '\r';
  *at++ = '\n';
  return at;
}

enum class scan { found, incomplete, malformed, too_long };

struct line_scan {
  scan status;
  std::string_view content;  // without the CRLF
  std::size_t size = 0;      // content plus CRLF
};

// Finds the CRLF that ends the line at the start of `data` (which follows the type byte). A
// line whose content exceeds `max_length` fails as soon as that many bytes have arrived without
// a terminator, so a peer cannot make the caller buffer without bound.
line_scan scan_line(std::string_view data, std::size_t max_length) {
  // Written so that a huge max_length cannot overflow.
  const bool clipped = max_length < data.size() && data.size() - max_length >= 2;
  const std::size_t window = clipped ? max_length + 2 : data.size();
  const void* lf = window == 0 ? nullptr : std::memchr(data.data(), '\n', window);
  if (lf == nullptr) return {clipped ? scan::too_long : scan::incomplete, {}};
  const auto lf_at = static_cast<std::size_t>(static_cast<const char*>(lf) - data.data());
  if (lf_at == 0 || data[lf_at - 1] != '\r') return {scan::malformed, {}};
  const std::string_view content = data.substr(0, lf_at - 1);
  // A CR inside a line means the peer and we disagree about framing.
  if (std::memchr(content.data(), '\r', content.size()) != nullptr) return {scan::malformed, {}};
  return {scan::found, content, lf_at + 1};
}

// A signed 64-bit decimal with an optional '-', nothing else.
std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

void append_command(std::string& out, std::span<const std::string_view> args) {
  // A server answers "*0" with nothing, which would silently shift every later reply onto the
  // wrong request of a pipeline.
  if (args.empty()) throw std::invalid_argument("dlock::resp::append_command: empty command");
  std::size_t needed = max_number_length + 3;
  for (const std::string_view arg : args)
    needed += arg.size() + max_number_length + 5;
  // Grow geometrically ourselves: libc++'s reserve() is exact, which would make appending many
  // commands to one pipeline buffer quadratic.
  const std::size_t start = out.size();
  if (out.capacity() - start < needed) {
    out.reserve(std::max(start + needed, 2 * out.capacity()));
  }
  // Written in place, then trimmed: one bound check for the command, not two appends per part.
  out.resize(start + needed);
  char* at = put_header(out.data() + start, '*', args.size());
  for (const std::string_view arg : args) {
    at = put_header(at, '$', arg.size());
    if (!arg.empty()) std::memcpy(at, arg.data(), arg.size());
    at += arg.size();
    *at++ = '\r';
    *at++ = '\n';
  }
  out.resize(static_cast<std::size_t>(at - out.data()));
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  append_command(out, std::span<const std::string_view>(args.begin(), args.size()));
}

parser::parser(parser_limits limits) : limits_(limits) {}

std::size_t parser::parse(std::string_view data) {
  std::size_t pos = 0;
  while (!done_ && !failed_ && pos < data.size()) {
    const std::string_view rest = data.substr(pos);
    const char type = rest[0];
    std::size_t max_length = 0;
    switch (type) {
      case '+':
      case '-':
        max_length = limits_.max_line_length;
        break;
      case ':':
        max_length = std::min(limits_.max_line_length, max_number_length);
        break;
      case '$':
      case '*':
        max_length = max_number_length;
        break;
      default:
        return fail("unexpected type byte " + excerpt(rest.substr(0, 1)));
    }

    const line_scan line = scan_line(rest.substr(1), max_length);
    switch (line.status) {
      case scan::found:
        break;
      case scan::incomplete:
        return pos;
      case scan::malformed:
        return fail("line not terminated by CRLF: " + excerpt(rest));
      case scan::too_long:
        return fail("no CRLF within " + std::to_string(max_length) + " bytes: " + excerpt(rest));
    }
    const std::size_t line_end = 1 + line.size;

    if (type == '+' || type == '-') {
      std::string text(line.content);
      finish(type == '+' ? reply::make_simple(std::move(text))
                         : reply::make_error(std::move(text)));
      pos += line_end;
      continue;
    }

    const std::optional<std::int64_t> number = parse_integer(line.content);
    if (!number) return fail("invalid number " + excerpt(line.content));
    if (type == ':') {
      finish(reply::make_integer(*number));
      pos += line_end;
      continue;
    }
    if (*number == -1) {
      finish(reply::make_nil());
      pos += line_end;
      continue;
    }
    if (*number < 0) return fail("invalid length " + excerpt(line.content));
    // Compared before narrowing so that a 32-bit size_t cannot truncate the length.
    const auto length64 = static_cast<std::uint64_t>(*number);

    if (type == '$') {
      if (length64 > limits_.max_bulk_length) {
        return fail("bulk string of " + std::to_string(length64) + " bytes exceeds the limit of " +
                    std::to_string(limits_.max_bulk_length));
      }
      const auto length = static_cast<std::size_t>(length64);
      const std::size_t available = rest.size() - line_end;
      // The header is consumed only together with its payload.
      if (available < 2 || available - 2 < length) return pos;
      if (rest[line_end + length] != '\r' || rest[line_end + length + 1] != '\n') {
        return fail("bulk string of " + std::to_string(length) + " bytes not followed by CRLF");
      }
      finish(reply::make_bulk(std::string(rest.substr(line_end, length))));
      pos += line_end + length + 2;
      continue;
    }

    if (length64 > limits_.max_array_length) {
      return fail("array of " + std::to_string(length64) + " elements exceeds the limit of " +
                  std::to_string(limits_.max_array_length));
    }
    if (stack_.size() >= limits_.max_depth) {
      return fail("arrays nested deeper than " + std::to_string(limits_.max_depth));
    }
    const auto length = static_cast<std::size_t>(length64);
    pos += line_end;
    if (length == 0) {
      finish(reply::make_array({}));
      continue;
    }
    stack_.push_back({reply::make_array({}), length});
    // Reserve only what the bytes at hand can fill: the declared length is the peer's word.
    stack_.back().array.elements.reserve(std::min(length, (data.size() - pos) / min_element_size));
  }
  return pos;
}

bool parser::done() const noexcept {
  return done_;
}

bool parser::failed() const noexcept {
  return failed_;
}

const std::string& parser::error_message() const noexcept {
  return error_;
}

reply parser::take() {
  done_ = false;
  return std::exchange(result_, reply{});
}

void parser::reset() {
  stack_.clear();
  result_ = reply{};
  done_ = false;
  failed_ = false;
  error_.clear();
}

void parser::finish(reply r) {
  while (!stack_.empty()) {
    frame& top = stack_.back();
    top.array.elements.push_back(std::move(r));
    if (top.array.elements.size() < top.expected) return;
    r = std::move(top.array);
    stack_.pop_back();
  }
  result_ = std::move(r);
  done_ = true;
}

// Returns 0 so that parse() can `return fail(...)`: the connection is dropped, so how much of
// the input was consumed no longer matters.
std::size_t parser::fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  return 0;
}

}  // namespace dlock::resp
