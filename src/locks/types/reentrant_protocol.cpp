#include "locks/types/reentrant_protocol.hpp"

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"
#include "locks/types/kind_refusal.hpp"
#include "locks/types/rlock_hold.hpp"
#include "locks/types/wait_line.hpp"

namespace dlock::locks {
namespace {

// What Redisson publishes on unlock; its waiters and ours both understand it.
constexpr std::string_view unlock_message = "0";

std::string ms_arg(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error,
              "unexpected reply to the " + std::string(what) + " script: " + to_string(r));
}

}  // namespace

reentrant_protocol::reentrant_protocol()
    : lock_(with_wait_line(scripts::reentrant_lock)),
      unlock_(with_wait_line(scripts::reentrant_unlock)),
      leave_line_(with_wait_line(scripts::leave_wait_line)),
      renew_(std::string(scripts::renew_leases)),
      force_(with_wait_line(scripts::force_unlock)),
      status_(std::string(scripts::lock_status)) {}

std::string reentrant_protocol::wake_channel(std::string_view name) const {
  return unlock_channel(name);
}

std::string reentrant_protocol::call_channel(std::string_view name,
                                             std::string_view wake_id) const {
  return locks::call_channel(name, wake_id);
}

std::chrono::milliseconds reentrant_protocol::wait_refresh() const {
  return line_refresh;
}

script_call reentrant_protocol::attempt(const attempt_request& request) const {
  // Built in place (reserved, moved in): an initializer list would copy every string once more.
  script_call call{&lock_, {}, {}};
  call.keys.reserve(7);
  call.keys.emplace_back(request.name);
  call.keys.push_back(fence_key(request.name));
  append_line_keys(call.keys, request.name);
  call.keys.push_back(fair_queue_key(request.name));  // a fair lock's, to refuse mixing
  call.args.reserve(7);
  call.args.push_back(ms_arg(request.lease));
  call.args.emplace_back(request.owner);
  call.args.push_back(std::to_string(request.known_holds));
  append_line_args(call.args, request);
  return call;
}

std::optional<script_call> reentrant_protocol::leave_line(std::string_view name,
                                                          std::string_view owner) const {
  return leave_line_call(leave_line_, name, unlock_channel(name), owner, unlock_message);
}

attempt_outcome reentrant_protocol::read_attempt(const reply& r) const {
  return read_rlock_attempt(r, "a reentrant lock (dlock::mutex)", "");
}

script_call reentrant_protocol::release(const release_request& request) const {
  script_call call{&unlock_, {}, {}, 5};
  call.keys.reserve(6);
  call.keys.push_back(request.name);
  call.keys.push_back(unlock_channel(request.name));
  call.keys.push_back(fence_key(request.name));
  append_line_keys(call.keys, request.name);
  call.args.reserve(8);
  call.args.emplace_back(unlock_message);
  call.args.push_back(ms_arg(request.lease));
  call.args.push_back(request.owner);
  call.args.push_back(std::to_string(request.remaining));
  call.args.push_back(std::to_string(request.token));
  call.args.emplace_back("publish");
  call.args.push_back(ms_arg(reservation_grace));
  call.args.push_back(call_channel_prefix(request.name));
  return call;
}

bool reentrant_protocol::release_was_heard(const reply& r) const {
  return r.is_integer() && r.integer == 2;  // reentrant_unlock.lua
}

script_call reentrant_protocol::renew(std::span<const renewal_target> targets,
                                      std::chrono::milliseconds lease) const {
  return renew_rlock_holds(renew_, targets, lease);
}

script_call reentrant_protocol::check(std::span<const renewal_target> targets) const {
  return check_rlock_holds(renew_, targets);
}

std::vector<bool> reentrant_protocol::read_renewal(const reply& r, std::size_t targets) const {
  return read_rlock_renewal(r, targets, "");
}

script_call reentrant_protocol::force_release(std::string_view name) const {
  script_call call{&force_,
                   {std::string(name), unlock_channel(name)},
                   {std::string(unlock_message), "publish", ms_arg(reservation_grace),
                    call_channel_prefix(name)},
                   1};
  append_line_keys(call.keys, name);
  return call;
}

bool reentrant_protocol::read_force_release(std::string_view name, const reply& r) const {
  // {1} deleted, {0} no key, {-1, what} not a lock (force_unlock.lua).
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
                                          ", not a reentrant lock: refused to delete it");
      }
      break;
  }
  unexpected("force unlock", r);
}

script_call reentrant_protocol::status(std::string_view name) const {
  return {&status_, {std::string(name), fence_key(name)}, {}};
}

lock_status reentrant_protocol::read_status(std::string_view name, const reply& r) const {
  // {type, pttl, last token, {field, count, ...}} (lock_status.lua).
  if (!r.is_array() || r.elements.size() != 4 || !r.elements[3].is_array() ||
      r.elements[3].elements.size() % 2 != 0) {
    unexpected("status", r);
  }
  const std::string& type = r.elements[0].str;
  const auto not_a_lock = [&](const std::string& what) {
    return error(errc::wrong_type,
                 "the key '" + printable_name(name) + "' holds " + what + ", not a reentrant lock");
  };
  if (type != "none" && type != "hash") throw not_a_lock("a " + type);
  lock_status s;
  s.locked = type == "hash";
  s.remaining_ttl = std::chrono::milliseconds(r.elements[1].integer);
  try {
    s.last_fencing_token = std::stoull(r.elements[2].str);
  } catch (const std::logic_error&) {  // stoull: not a number, or out of range
    throw error(errc::protocol_error, "the fencing counter is not a number: " + to_string(r));
  }
  // Anything but a lock's fields is someone's data.
  const auto& fields = r.elements[3].elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& field = fields[i].str;
    const std::string& count = fields[i + 1].str;
    if (!is_rlock_owner_field(field) || !is_rlock_count(count)) {
      throw not_a_lock("a hash that is not a lock (field '" + printable_name(field) + "')");
    }
    s.holders.push_back({field, std::stoull(count)});
  }
  return s;
}

std::vector<std::string_view> reentrant_protocol::scripts() const {
  return {lock_.source(),        unlock_.source(), leave_line_.source(),
          scripts::renew_leases, force_.source(),  scripts::lock_status};
}

}  // namespace dlock::locks
