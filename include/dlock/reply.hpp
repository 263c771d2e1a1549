// dlock/reply.hpp
//
// A decoded RESP2 reply. A plain value type: copyable, movable, comparable, and owning its data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

enum class reply_type : std::uint8_t {
  nil,            // $-1 or *-1
  simple_string,  // +OK
  error,          // -ERR ...
  integer,        // :42
  bulk_string,    // $3 foo
  array,          // *2 ...
};

struct reply {
  reply_type type = reply_type::nil;
  std::string str;              // simple_string, error and bulk_string
  std::int64_t integer = 0;     // integer
  std::vector<reply> elements;  // array

  static reply make_nil() { return {}; }
  static reply make_simple(std::string s) {
    return with_string(reply_type::simple_string, std::move(s));
  }
  static reply make_error(std::string s) { return with_string(reply_type::error, std::move(s)); }
  static reply make_bulk(std::string s) {
    return with_string(reply_type::bulk_string, std::move(s));
  }
  static reply make_integer(std::int64_t i) {
    reply r;
    r.type = reply_type::integer;
    r.integer = i;
    return r;
  }
  static reply make_array(std::vector<reply> e) {
    reply r;
    r.type = reply_type::array;
    r.elements = std::move(e);
    return r;
  }

  bool is_nil() const noexcept { return type == reply_type::nil; }
  bool is_error() const noexcept { return type == reply_type::error; }
  bool is_integer() const noexcept { return type == reply_type::integer; }
  bool is_array() const noexcept { return type == reply_type::array; }
  bool is_string() const noexcept {
    return type == reply_type::simple_string || type == reply_type::bulk_string;
  }

  friend bool operator==(const reply&, const reply&) = default;

 private:
  static reply with_string(reply_type t, std::string s) {
    reply r;
    r.type = t;
    r.str = std::move(s);
    return r;
  }
};

// "nil", "+OK", "-ERR x", ":1", "\"foo\"", "[a, b]": for messages and test output.
std::string to_string(const reply& r);

}  // namespace dlock
