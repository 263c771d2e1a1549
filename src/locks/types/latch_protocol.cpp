#include "locks/types/latch_protocol.hpp"

#include <charconv>

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "dlock/lock_options.hpp"
#include "locks/names.hpp"

namespace dlock::locks {
namespace {

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error,
              "unexpected reply to the latch's " + std::string(what) + ": " + to_string(r));
}

// The scripts' refusal {-1, what}: `what` is the key's Redis type.
[[noreturn]] void not_a_latch(std::string_view name, const reply& r, std::string_view action) {
  const std::string& type = r.elements[1].str;
  const std::string holds = type == "hash" ? "a hash (a reentrant, fair or read-write lock)"
                            : type == "string"
                                ? "a string that is not a count (a plain lock, or data)"
                                : "a " + type;
  throw error(errc::wrong_type, "the key '" + printable_name(name) + "' holds " + holds +
                                    ", not a count-down latch: refused to " + std::string(action) +
                                    " it");
}

// {status, ...}; throws for a refusal or a malformed reply.
const reply& checked(std::string_view name, const reply& r, std::string_view action,
                     std::size_t size) {
  if (!r.is_array() || r.elements.empty()) unexpected(action, r);
  if (r.elements[0].integer == -1 && r.elements.size() == 2) not_a_latch(name, r, action);
  if (r.elements.size() != size) unexpected(action, r);
  return r;
}

std::int64_t parse_count(std::string_view text, const reply& r) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) unexpected("count", r);
  return value;
}

}  // namespace

latch_protocol::latch_protocol()
    : count_down_(std::string(scripts::latch_count_down)),
      try_set_count_(std::string(scripts::latch_try_set_count)),
      remove_(std::string(scripts::latch_delete)),
      count_(std::string(scripts::latch_count)) {}

script_call latch_protocol::count_down(std::string_view name) const {
  return {&count_down_, {std::string(name), latch_channel(name)}, {"publish"}, 0};
}

script_call latch_protocol::try_set_count(std::string_view name, std::int64_t count) const {
  if (count < 0 || count > max_count) {
    throw error(errc::invalid_argument, "a count-down latch's count must be 0 to 2^53 - 1 (got " +
                                            std::to_string(count) + ")");
  }
  return {&try_set_count_,
          {std::string(name), latch_channel(name)},
          {std::to_string(count), "publish"},
          1};
}

script_call latch_protocol::remove(std::string_view name) const {
  return {&remove_, {std::string(name), latch_channel(name)}, {"publish"}, 0};
}

script_call latch_protocol::count(std::string_view name) const {
  return {&count_, {std::string(name)}, {}};
}

std::int64_t latch_protocol::read_count_down(std::string_view name, const reply& r) const {
  return checked(name, r, "count down", 2).elements[1].integer;
}

bool latch_protocol::read_try_set_count(std::string_view name, const reply& r) const {
  return checked(name, r, "set the count of", 1).elements[0].integer == 1;
}

bool latch_protocol::read_remove(std::string_view name, const reply& r) const {
  return checked(name, r, "delete", 1).elements[0].integer == 1;
}

latch_protocol::count_read latch_protocol::read_count(std::string_view name, const reply& r) const {
  // {1, 0, 0} for a missing latch, {1, "<count>", 1} otherwise.
  const reply& ok = checked(name, r, "read the count of", 3);
  if (ok.elements[2].integer == 0) return {};
  if (!ok.elements[1].is_string()) unexpected("count", r);
  return {parse_count(ok.elements[1].str, r), true};
}

std::vector<std::string_view> latch_protocol::scripts() const {
  return {scripts::latch_count_down, scripts::latch_try_set_count, scripts::latch_delete,
          scripts::latch_count};
}

}  // namespace dlock::locks
