#include "locks/types/plain_protocol.hpp"

#include <algorithm>
#include <cctype>

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"
#include "locks/types/kind_refusal.hpp"
#include "locks/types/wait_line.hpp"

namespace dlock::locks {
namespace {

std::string ms_arg(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error,
              "unexpected reply to the plain " + std::string(what) + " script: " + to_string(r));
}

}  // namespace

bool is_dlock_value(std::string_view value) {
  // "<32 hex digits>:<digits>:<letters and digits>", as plain_lock.lua tells a dlock holder.
  const auto hex = [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; };
  const auto digit = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
  const auto alnum = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; };
  if (value.size() < 36 || value[32] != ':') return false;
  if (!std::all_of(value.begin(), value.begin() + 32, hex)) return false;
  const std::string_view rest = value.substr(33);
  const std::size_t colon = rest.find(':');
  if (colon == 0 || colon == std::string_view::npos || colon + 1 == rest.size()) return false;
  return std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(colon), digit) &&
         std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(colon) + 1, rest.end(), alnum);
}

std::string plain_lock_value(std::string_view owner, std::uint64_t token) {
  std::string value(owner);
  value += ':';
  value += std::to_string(token);
  return value;
}

plain_protocol::plain_protocol()
    : lock_(with_wait_line(scripts::plain_lock)),
      unlock_(with_wait_line(scripts::plain_unlock)),
      leave_line_(with_wait_line(scripts::leave_wait_line)),
      renew_(std::string(scripts::plain_renew)),
      force_(with_wait_line(scripts::plain_force_unlock)),
      status_(std::string(scripts::plain_status)) {}

std::string plain_protocol::wake_channel(std::string_view name) const {
  return plain_unlock_channel(name);
}

script_call plain_protocol::attempt(const attempt_request& request) const {
  // The nonce is "": the script uses the new fencing token, so the value is never reused and a
  // release carrying the hold's token is exact. Built in place (reserved, moved in): an
  // initializer list would copy every string once more.
  script_call call{&lock_, {}, {}};
  call.keys.reserve(5);
  call.keys.emplace_back(request.name);
  call.keys.push_back(fence_key(request.name));
  append_line_keys(call.keys, request.name);
  call.args.reserve(8);
  call.args.push_back(ms_arg(request.lease));
  call.args.emplace_back(request.owner);
  call.args.emplace_back("");
  call.args.emplace_back(request.known_holds > 0 ? "1" : "0");
  append_line_args(call.args, request);
  return call;
}

std::string plain_protocol::call_channel(std::string_view name, std::string_view wake_id) const {
  return locks::call_channel(name, wake_id);
}

std::chrono::milliseconds plain_protocol::wait_refresh() const {
  return line_refresh;
}

std::optional<script_call> plain_protocol::leave_line(std::string_view name,
                                                      std::string_view owner) const {
  return leave_line_call(leave_line_, name, plain_unlock_channel(name), owner, "0");
}

attempt_outcome plain_protocol::read_attempt(const reply& r) const {
  // {1, token} acquired, {0, pttl, dlock, calls} held by another, {2} held by this owner, {-1,
  // what, name} another kind (plain_lock.lua).
  if (is_kind_refusal(r)) throw_kind_refusal(r, "a plain lock (dlock::plain_lock)");
  if (!r.is_array() || r.elements.empty()) unexpected("lock", r);
  attempt_outcome out;
  switch (r.elements[0].integer) {
    case 1:
      if (r.elements.size() != 2 || r.elements[1].integer <= 0) unexpected("lock", r);
      out.status = attempt_outcome::kind::acquired;
      out.token = static_cast<std::uint64_t>(r.elements[1].integer);
      out.count = 1;
      return out;
    case 0:
      if (r.elements.size() != 4) unexpected("lock", r);
      out.status = attempt_outcome::kind::held_by_other;
      out.holder_ttl_ms = r.elements[1].integer < 0 ? -1 : r.elements[1].integer;
      out.holder_publishes = r.elements[2].integer == 1;
      out.holder_calls = r.elements[3].integer == 1;
      return out;
    case 2:
      // The engine refuses a re-lock before sending it; a reply saying so is the same mistake.
      if (r.elements.size() != 1) unexpected("lock", r);
      throw error(errc::would_deadlock, "a plain lock is not reentrant and this owner holds it");
    default:
      unexpected("lock", r);
  }
}

script_call plain_protocol::release(const release_request& request) const {
  // A token of 0 (an orphan: the attempt's reply, and so its token, was lost) matches no value:
  // that hold ends with its lease.
  script_call call{&unlock_, {}, {}, 1};
  call.keys.reserve(5);
  call.keys.push_back(request.name);
  call.keys.push_back(plain_unlock_channel(request.name));
  append_line_keys(call.keys, request.name);
  call.args.reserve(4);
  call.args.push_back(plain_lock_value(request.owner, request.token));
  call.args.emplace_back("publish");
  call.args.push_back(ms_arg(reservation_grace));
  call.args.push_back(call_channel_prefix(request.name));
  return call;
}

bool plain_protocol::release_was_heard(const reply& r) const {
  return r.is_integer() && r.integer == 2;  // plain_unlock.lua
}

script_call plain_protocol::renew(std::span<const renewal_target> targets,
                                  std::chrono::milliseconds lease) const {
  script_call call{&renew_, {}, {ms_arg(lease)}};
  call.keys.reserve(targets.size());
  call.args.reserve(targets.size() + 1);
  for (const renewal_target& t : targets) {
    call.keys.emplace_back(t.name);
    call.args.push_back(plain_lock_value(t.owner, t.token));
  }
  return call;
}

script_call plain_protocol::check(std::span<const renewal_target> targets) const {
  script_call call = renew(targets, std::chrono::milliseconds(1));
  call.args.front() = "0";  // plain_renew.lua: a lease of "0" checks without extending
  return call;
}

std::vector<bool> plain_protocol::read_renewal(const reply& r, std::size_t targets) const {
  if (!r.is_array() || r.elements.size() != targets) unexpected("renewal", r);
  std::vector<bool> renewed(targets);
  for (std::size_t i = 0; i < targets; ++i)
    renewed[i] = r.elements[i].integer == 1;
  return renewed;
}

script_call plain_protocol::force_release(std::string_view name) const {
  script_call call{&force_,
                   {std::string(name), plain_unlock_channel(name)},
                   {"publish", ms_arg(reservation_grace), call_channel_prefix(name)},
                   0};
  append_line_keys(call.keys, name);
  return call;
}

bool plain_protocol::read_force_release(std::string_view name, const reply& r) const {
  // {1} deleted, {0} no key, {-1, what} not a string (plain_force_unlock.lua).
  if (!r.is_array() || r.elements.empty()) unexpected("force unlock", r);
  switch (r.elements[0].integer) {
    case 1:
      return true;
    case 0:
      return false;
    case -1:
      if (r.elements.size() == 2) {
        throw error(errc::wrong_type, "the key '" + printable_name(name) + "' holds " +
                                          r.elements[1].str +
                                          ", not a plain lock: refused to delete it");
      }
      break;
    default:
      break;
  }
  unexpected("force unlock", r);
}

script_call plain_protocol::status(std::string_view name) const {
  return {&status_, {std::string(name), fence_key(name)}, {}};
}

lock_status plain_protocol::read_status(std::string_view name, const reply& r) const {
  // {type, pttl, last token, value} (plain_status.lua).
  if (!r.is_array() || r.elements.size() != 4) unexpected("status", r);
  const std::string& type = r.elements[0].str;
  if (type != "none" && type != "string") {
    throw error(errc::wrong_type,
                "the key '" + printable_name(name) + "' holds a " + type + ", not a plain lock");
  }
  lock_status s;
  s.locked = type == "string";
  s.remaining_ttl = std::chrono::milliseconds(r.elements[1].integer);
  // The same rule as plain_force_unlock.lua: a string without a TTL is data unless it holds a
  // dlock value (every plain-lock client sets a TTL).
  if (s.locked && s.remaining_ttl.count() < 0 && !is_dlock_value(r.elements[3].str)) {
    throw error(errc::wrong_type, "the key '" + printable_name(name) +
                                      "' holds a string that is not a lock (no TTL)");
  }
  try {
    s.last_fencing_token = std::stoull(r.elements[2].str);
  } catch (const std::logic_error&) {  // stoull: not a number, or out of range
    throw error(errc::protocol_error, "the fencing counter is not a number: " + to_string(r));
  }
  // The holder's value as it is: dlock's "<client id>:<owner key>:<token>", or a foreign
  // client's token (redis-py: a uuid's hex digits; redsync, node-redlock: random text).
  if (s.locked) s.holders.push_back({r.elements[3].str, 1});
  return s;
}

std::vector<std::string_view> plain_protocol::scripts() const {
  return {lock_.source(),       unlock_.source(), leave_line_.source(),
          scripts::plain_renew, force_.source(),  scripts::plain_status};
}

}  // namespace dlock::locks
