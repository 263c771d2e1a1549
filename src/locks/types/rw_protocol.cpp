#include "locks/types/rw_protocol.hpp"

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"
#include "locks/types/kind_refusal.hpp"
#include "locks/types/rlock_hold.hpp"

namespace dlock::locks {
namespace {

std::string ms_arg(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error, "unexpected reply to the read-write lock's " +
                                        std::string(what) + " script: " + to_string(r));
}

[[noreturn]] void wrong_kind(std::string_view name, const std::string& what) {
  throw error(errc::wrong_type, "the name '" + printable_name(name) + "' holds " + what +
                                    ", not a read-write lock (dlock::shared_mutex)");
}

// {1, token or id}, {2, count}, {0, ttl}, {-1, what, name}, {-2} (rw_read_lock.lua,
// rw_write_lock.lua).
attempt_outcome read_lock_reply(std::string_view side, const reply& r) {
  if (!r.is_array() || r.elements.empty()) unexpected(side, r);
  const std::int64_t status = r.elements[0].integer;
  if (status == -2) {
    throw error(errc::would_deadlock,
                "this thread holds a read lock and asks for the write lock: it would wait for "
                "itself (a read-write lock is not upgradable; unlock_shared() first)");
  }
  if (is_kind_refusal(r)) throw_kind_refusal(r, "a read-write lock (dlock::shared_mutex)");
  if (r.elements.size() != 2) unexpected(side, r);
  if (auto out = decode_hold_status(status, r.elements[1].integer)) return *out;
  unexpected(side, r);
}

std::vector<bool> renewal_reply(const reply& r, std::size_t targets) {
  if (!r.is_array() || r.elements.size() != targets) unexpected("renewal", r);
  std::vector<bool> renewed(targets);
  for (std::size_t i = 0; i < targets; ++i)
    renewed[i] = r.elements[i].integer == 1;
  return renewed;
}

}  // namespace

std::string rw_writer_field(std::string_view owner) {
  return std::string(owner) + ":write";
}

rw_protocol_base::rw_protocol_base()
    : read_lock_(std::string(scripts::rw_read_lock)),
      read_unlock_(std::string(scripts::rw_read_unlock)),
      read_renew_(std::string(scripts::rw_read_renew)),
      write_lock_(std::string(scripts::rw_write_lock)),
      write_unlock_(std::string(scripts::rw_write_unlock)),
      write_renew_(std::string(scripts::rw_write_renew)),
      write_leave_(std::string(scripts::rw_write_leave)),
      force_(std::string(scripts::rw_force_unlock)),
      status_(std::string(scripts::rw_status)) {}

std::string rw_protocol_base::wake_channel(std::string_view name) const {
  return rwlock_channel(name);
}

std::size_t rw_protocol_base::wake_ups(std::string_view payload) const {
  return payload == "1" ? wake_everyone : 1;
}

script_call rw_protocol_base::force_release(std::string_view name) const {
  return {&force_, {std::string(name), rwlock_channel(name)}, {"publish"}, 0};
}

bool rw_protocol_base::read_force_release(std::string_view name, const reply& r) const {
  // {1} deleted, {0} no key, {-1, what} not a read-write lock (rw_force_unlock.lua).
  if (!r.is_array() || r.elements.empty()) unexpected("force unlock", r);
  switch (r.elements[0].integer) {
    case 1:
      return true;
    case 0:
      return false;
    case -1:
      if (r.elements.size() == 2) wrong_kind(name, r.elements[1].str + ": refused to delete it");
      break;
    default:
      break;
  }
  unexpected("force unlock", r);
}

script_call rw_protocol_base::status(std::string_view name) const {
  return {&status_, {std::string(name), fence_key(name), rwlock_writers_key(name)}, {}};
}

lock_status rw_protocol_base::read_status(std::string_view name, const reply& r) const {
  // {type, pttl, last token, {field, count, ...}, waiting writers} (rw_status.lua).
  if (!r.is_array() || r.elements.size() != 5 || !r.elements[3].is_array() ||
      r.elements[3].elements.size() % 2 != 0) {
    unexpected("status", r);
  }
  const std::string& type = r.elements[0].str;
  if (type != "none" && type != "hash") wrong_kind(name, "a " + type);
  lock_status s;
  s.locked = type == "hash";
  s.remaining_ttl = std::chrono::milliseconds(r.elements[1].integer);
  try {
    s.last_fencing_token = std::stoull(r.elements[2].str);
  } catch (const std::logic_error&) {  // stoull: not a number, or out of range
    throw error(errc::protocol_error, "the fencing counter is not a number: " + to_string(r));
  }
  s.waiting_writers = static_cast<std::uint64_t>(r.elements[4].integer);
  const auto& fields = r.elements[3].elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& field = fields[i].str;
    const std::string& value = fields[i + 1].str;
    if (field == "mode") {
      s.mode = value;
      continue;
    }
    const bool count_ok = !value.empty() && value.size() <= 19 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
    if (!count_ok) wrong_kind(name, "a hash that is not a lock (field '" + field + "')");
    s.holders.push_back({field, std::stoull(value)});
  }
  if (s.locked && s.mode != "read" && s.mode != "write") {
    wrong_kind(name, "a reentrant lock (dlock::mutex, Redisson RLock)");
  }
  return s;
}

std::vector<std::string_view> rw_protocol_base::scripts() const {
  return {scripts::rw_read_lock,   scripts::rw_read_unlock,  scripts::rw_read_renew,
          scripts::rw_write_lock,  scripts::rw_write_unlock, scripts::rw_write_renew,
          scripts::rw_write_leave, scripts::rw_force_unlock, scripts::rw_status};
}

// --- read side ---------------------------------------------------------------------------------

script_call rw_read_protocol::attempt(const attempt_request& request) const {
  return {&read_lock_,
          {std::string(request.name), rwlock_timeout_prefix(request.name, request.owner),
           rwlock_writers_key(request.name)},
          {ms_arg(request.lease), std::string(request.owner), rw_writer_field(request.owner),
           std::to_string(request.known_holds)}};
}

attempt_outcome rw_read_protocol::read_attempt(const reply& r) const {
  return read_lock_reply("read lock", r);
}

script_call rw_read_protocol::release(const release_request& request) const {
  return {&read_unlock_,
          {request.name, rwlock_channel(request.name),
           rwlock_timeout_prefix(request.name, request.owner), suffix_base(request.name)},
          {ms_arg(request.lease), request.owner, std::to_string(request.remaining),
           std::to_string(request.token), "publish"},
          4};
}

script_call rw_read_protocol::renew(std::span<const renewal_target> targets,
                                    std::chrono::milliseconds lease) const {
  script_call call{&read_renew_, {}, {ms_arg(lease)}};
  call.keys.reserve(2 * targets.size());
  call.args.reserve(2 * targets.size() + 1);
  for (const renewal_target& t : targets) {
    call.keys.emplace_back(t.name);
    call.keys.push_back(rwlock_timeout_prefix(t.name, t.owner));
    call.args.emplace_back(t.owner);
    call.args.push_back(std::to_string(t.token));
  }
  return call;
}

script_call rw_read_protocol::check(std::span<const renewal_target> targets) const {
  script_call call = renew(targets, std::chrono::milliseconds(1));
  call.args.front() = "0";  // rw_read_renew.lua: a lease of "0" checks without extending
  return call;
}

std::vector<bool> rw_read_protocol::read_renewal(const reply& r, std::size_t targets) const {
  return renewal_reply(r, targets);
}

// --- write side --------------------------------------------------------------------------------

script_call rw_write_protocol::attempt(const attempt_request& request) const {
  return {&write_lock_,
          {std::string(request.name), fence_key(request.name), rwlock_writers_key(request.name),
           suffix_base(request.name), rwlock_channel(request.name)},
          {ms_arg(request.lease), rw_writer_field(request.owner), std::string(request.owner),
           std::to_string(request.known_holds), request.may_wait ? "1" : "0",
           ms_arg(writer_intent_lease), ms_arg(writer_intent_refresh), "publish"},
          7};
}

std::optional<script_call> rw_write_protocol::leave_line(std::string_view name,
                                                         std::string_view owner) const {
  // `owner` is one of the client's owner fields, "<client id>:<owner key>": every intent of the
  // client goes (rw_write_leave.lua).
  const std::string_view client_prefix = owner.substr(0, owner.rfind(':') + 1);
  return script_call{&write_leave_,
                     {std::string(name), rwlock_writers_key(name), rwlock_channel(name)},
                     {std::string(client_prefix), "publish"},
                     1};
}

attempt_outcome rw_write_protocol::read_attempt(const reply& r) const {
  return read_lock_reply("write lock", r);
}

script_call rw_write_protocol::release(const release_request& request) const {
  return {&write_unlock_,
          {request.name, rwlock_channel(request.name), fence_key(request.name)},
          {ms_arg(request.lease), rw_writer_field(request.owner), std::to_string(request.remaining),
           std::to_string(request.token), "publish"},
          4};
}

script_call rw_write_protocol::renew(std::span<const renewal_target> targets,
                                     std::chrono::milliseconds lease) const {
  script_call call{&write_renew_, {}, {ms_arg(lease)}};
  call.keys.reserve(targets.size());
  call.args.reserve(targets.size() + 1);
  for (const renewal_target& t : targets) {
    call.keys.emplace_back(t.name);
    call.args.push_back(rw_writer_field(t.owner));
  }
  return call;
}

script_call rw_write_protocol::check(std::span<const renewal_target> targets) const {
  script_call call = renew(targets, std::chrono::milliseconds(1));
  call.args.front() = "0";  // rw_write_renew.lua: a lease of "0" checks without extending
  return call;
}

std::vector<bool> rw_write_protocol::read_renewal(const reply& r, std::size_t targets) const {
  return renewal_reply(r, targets);
}

}  // namespace dlock::locks
