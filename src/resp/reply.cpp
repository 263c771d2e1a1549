// src/resp/reply.cpp
#include "dlock/reply.hpp"

#include <charconv>

namespace dlock {

namespace {

// Non-printable bytes become \xNN and backslashes are doubled so the output is unambiguous;
// quotes are escaped only inside quoted (bulk) strings.
void append_escaped(std::string& out, std::string_view text, bool quoted) {
  static constexpr char hex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f) {
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 0xf];
    } else if (c == '\\' || (quoted && c == '"')) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
}

void append_reply(std::string& out, const reply& r) {
  switch (r.type) {
    case reply_type::nil:
      out += "nil";
      return;
    case reply_type::simple_string:
      out += '+';
      append_escaped(out, r.str, false);
      return;
    case reply_type::error:
      out += '-';
      append_escaped(out, r.str, false);
      return;
    case reply_type::integer: {
      char buf[24];
      buf[0] = ':';
      out.append(buf, std::to_chars(buf + 1, buf + sizeof(buf), r.integer).ptr);
      return;
    }
    case reply_type::bulk_string:
      out += '"';
      append_escaped(out, r.str, true);
      out += '"';
      return;
    case reply_type::array:
      out += '[';
      for (std::size_t i = 0; i < r.elements.size(); ++i) {
        if (i != 0) out += ", ";
        append_reply(out, r.elements[i]);
      }
      out += ']';
      return;
  }
}

}  // namespace

std::string to_string(const reply& r) {
  std::string out;
  append_reply(out, r);
  return out;
}

}  // namespace dlock
