#include "locks/types/rlock_hold.hpp"

#include <string>

#include "dlock/error.hpp"
#include "locks/types/kind_refusal.hpp"

namespace dlock::locks {

bool is_rlock_owner_field(std::string_view field) {
  const std::size_t colon = field.rfind(':');
  return colon != std::string_view::npos && colon > 0 && colon + 1 < field.size() &&
         field.find_first_not_of("0123456789", colon + 1) == std::string_view::npos;
}

bool is_rlock_count(std::string_view count) {
  return !count.empty() && count.size() <= 19 &&
         count.find_first_not_of("0123456789") == std::string_view::npos &&
         count.find_first_not_of('0') != std::string_view::npos;  // positive
}

namespace {

[[noreturn]] void unexpected(std::string_view label, std::string_view what, const reply& r) {
  throw error(errc::protocol_error, "unexpected reply to the " + std::string(label) +
                                        std::string(what) + " script: " + to_string(r));
}

}  // namespace

std::optional<attempt_outcome> decode_hold_status(std::int64_t status, std::int64_t value) {
  attempt_outcome out;
  switch (status) {
    case 1:
      if (value <= 0) return std::nullopt;
      out.status = attempt_outcome::kind::acquired;
      out.token = static_cast<std::uint64_t>(value);
      out.count = 1;
      return out;
    case 2:
      if (value <= 0) return std::nullopt;
      out.status = attempt_outcome::kind::reentered;
      out.count = static_cast<std::uint64_t>(value);
      return out;
    case 0:
      out.status = attempt_outcome::kind::held_by_other;
      out.holder_ttl_ms = value < 0 ? -1 : value;
      return out;
    default:
      return std::nullopt;
  }
}

attempt_outcome read_rlock_attempt(const reply& r, std::string_view kind, std::string_view label) {
  if (is_kind_refusal(r)) throw_kind_refusal(r, kind);
  // {status, value}, and for a refusal with a wait line {0, pttl, calls} (reentrant_lock.lua).
  if (!r.is_array() || r.elements.size() < 2 || r.elements.size() > 3) unexpected(label, "lock", r);
  if (auto out = decode_hold_status(r.elements[0].integer, r.elements[1].integer)) {
    if (r.elements.size() == 3) {
      if (out->status != attempt_outcome::kind::held_by_other) unexpected(label, "lock", r);
      out->holder_calls = r.elements[2].integer == 1;
    }
    return *out;
  }
  unexpected(label, "lock", r);
}

script_call renew_rlock_holds(const script& renew_leases, std::span<const renewal_target> targets,
                              std::chrono::milliseconds lease) {
  script_call call{&renew_leases, {}, {std::to_string(lease.count())}};
  call.keys.reserve(targets.size());
  call.args.reserve(targets.size() + 1);
  for (const renewal_target& t : targets) {
    call.keys.emplace_back(t.name);
    call.args.emplace_back(t.owner);
  }
  return call;
}

script_call check_rlock_holds(const script& renew_leases, std::span<const renewal_target> targets) {
  script_call call = renew_rlock_holds(renew_leases, targets, std::chrono::milliseconds(1));
  call.args.front() = "0";  // renew_leases.lua: a lease of "0" checks without extending
  return call;
}

std::vector<bool> read_rlock_renewal(const reply& r, std::size_t targets, std::string_view label) {
  if (!r.is_array() || r.elements.size() != targets) unexpected(label, "renewal", r);
  std::vector<bool> renewed(targets);
  for (std::size_t i = 0; i < targets; ++i)
    renewed[i] = r.elements[i].integer == 1;
  return renewed;
}

}  // namespace dlock::locks
