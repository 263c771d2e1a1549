#include "locks/types/fair_protocol.hpp"

#include <algorithm>

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"
#include "locks/types/kind_refusal.hpp"
#include "locks/types/rlock_hold.hpp"

namespace dlock::locks {
namespace {

// What Redisson publishes on unlock; its waiters and ours both understand it.
constexpr std::string_view unlock_message = "0";

std::string ms_arg(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error, "unexpected reply to the fair lock's " + std::string(what) +
                                        " script: " + to_string(r));
}

}  // namespace

fair_protocol::fair_protocol(std::chrono::milliseconds thread_wait)
    : wait_(std::max(thread_wait, std::chrono::milliseconds(1))),
      lock_(std::string(scripts::fair_lock)),
      unlock_(std::string(scripts::fair_unlock)),
      leave_(std::string(scripts::fair_leave)),
      renew_(std::string(scripts::renew_leases)),
      force_(std::string(scripts::fair_force_unlock)),
      status_(std::string(scripts::fair_status)) {}

std::string fair_protocol::wake_channel(std::string_view name) const {
  return unlock_channel(name);
}

std::string fair_protocol::owner_wake_channel(std::string_view name, std::string_view owner) const {
  std::string channel = unlock_channel(name);
  channel.append(":").append(owner);
  return channel;
}

std::chrono::milliseconds fair_protocol::wait_refresh() const {
  // Three attempts per W at least: a live waiter's deadline never comes near.
  return std::max(wait_ / 3, std::chrono::milliseconds(1));
}

script_call fair_protocol::attempt(const attempt_request& request) const {
  return {&lock_,
          {std::string(request.name), fair_queue_key(request.name), fair_timeout_key(request.name),
           fence_key(request.name)},
          {ms_arg(request.lease), std::string(request.owner), std::to_string(request.known_holds),
           ms_arg(wait_), request.may_wait ? "1" : "0"}};
}

std::optional<script_call> fair_protocol::leave_line(std::string_view name,
                                                     std::string_view owner) const {
  return script_call{
      &leave_,
      {fair_queue_key(name), fair_timeout_key(name), std::string(name), unlock_channel(name)},
      {std::string(owner), ms_arg(wait_), std::string(unlock_message), "publish"},
      3};
}

attempt_outcome fair_protocol::read_attempt(const reply& r) const {
  return read_rlock_attempt(r, "a fair lock (dlock::fair_mutex)", "fair lock's ");
}

script_call fair_protocol::release(const release_request& request) const {
  return {&unlock_,
          {request.name, fair_queue_key(request.name), fair_timeout_key(request.name),
           unlock_channel(request.name), fence_key(request.name)},
          {std::string(unlock_message), ms_arg(request.lease), request.owner,
           std::to_string(request.remaining), std::to_string(request.token), "publish"},
          5};
}

script_call fair_protocol::renew(std::span<const renewal_target> targets,
                                 std::chrono::milliseconds lease) const {
  return renew_rlock_holds(renew_, targets, lease);
}

script_call fair_protocol::check(std::span<const renewal_target> targets) const {
  return check_rlock_holds(renew_, targets);
}

std::vector<bool> fair_protocol::read_renewal(const reply& r, std::size_t targets) const {
  return read_rlock_renewal(r, targets, "fair lock's ");
}

script_call fair_protocol::force_release(std::string_view name) const {
  return {&force_,
          {std::string(name), fair_queue_key(name), fair_timeout_key(name), unlock_channel(name)},
          {std::string(unlock_message), "publish"},
          1};
}

bool fair_protocol::read_force_release(std::string_view name, const reply& r) const {
  // {1} deleted, {0} no key, {-1, what} not a lock (fair_force_unlock.lua).
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
                                          ", not a fair lock: refused to delete it");
      }
      break;
  }
  unexpected("force unlock", r);
}

script_call fair_protocol::status(std::string_view name) const {
  return {&status_,
          {std::string(name), fence_key(name), fair_queue_key(name), fair_timeout_key(name)},
          {}};
}

lock_status fair_protocol::read_status(std::string_view name, const reply& r) const {
  // {type, pttl, last token, {field, count, ...}, {field, deadline left, ...}, waiters}
  // (fair_status.lua).
  if (!r.is_array() || r.elements.size() != 6 || !r.elements[3].is_array() ||
      r.elements[3].elements.size() % 2 != 0 || !r.elements[4].is_array() ||
      r.elements[4].elements.size() % 2 != 0) {
    unexpected("status", r);
  }
  const std::string& type = r.elements[0].str;
  const auto not_a_lock = [&](const std::string& what) {
    return error(errc::wrong_type,
                 "the key '" + printable_name(name) + "' holds " + what + ", not a fair lock");
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
  const auto& fields = r.elements[3].elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& field = fields[i].str;
    if (field == "mode") throw not_a_lock("a read-write lock (dlock::shared_mutex)");
    if (!is_rlock_owner_field(field) || !is_rlock_count(fields[i + 1].str)) {
      throw not_a_lock("a hash that is not a lock (field '" + printable_name(field) + "')");
    }
    s.holders.push_back({field, std::stoull(fields[i + 1].str)});
  }
  const auto& queue = r.elements[4].elements;
  for (std::size_t i = 0; i + 1 < queue.size(); i += 2) {
    lock_waiter w;
    w.owner = queue[i].str;
    const std::string& left = queue[i + 1].str;
    if (!left.empty()) {
      try {
        w.deadline_left = std::chrono::milliseconds(std::stoll(left));
        w.has_deadline = true;
      } catch (const std::logic_error&) {
        unexpected("status", r);
      }
    }
    s.queue.push_back(std::move(w));
  }
  s.queue_length = static_cast<std::uint64_t>(std::max<std::int64_t>(r.elements[5].integer, 0));
  return s;
}

std::vector<std::string_view> fair_protocol::scripts() const {
  return {scripts::fair_lock,    scripts::fair_unlock,       scripts::fair_leave,
          scripts::renew_leases, scripts::fair_force_unlock, scripts::fair_status};
}

}  // namespace dlock::locks
