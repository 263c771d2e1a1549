#include "locks/types/semaphore_protocol.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>

#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"

namespace dlock::locks {
namespace {

constexpr std::string_view timeout_suffix = "timeout";  // Redisson's suffixName(N, "timeout")

[[noreturn]] void unexpected(std::string_view what, const reply& r) {
  throw error(errc::protocol_error, "unexpected reply to the semaphore " + std::string(what) +
                                        " script: " + to_string(r));
}

// What a script found instead of a semaphore, named for people: "a hash (a dlock::mutex, ...)".
std::string other_kind(const std::string& what) {
  if (what.starts_with("a hash")) {
    return what +
           " (a reentrant or read-write lock: dlock::mutex, dlock::shared_mutex, Redisson's)";
  }
  if (what.starts_with("a string")) return what + " (a plain lock, or data)";
  return what + " (not a lock)";
}

[[noreturn]] void not_a_semaphore(std::string_view name, const std::string& what) {
  throw error(errc::wrong_type, "the key '" + printable_name(name) + "' holds " + other_kind(what) +
                                    ", not a semaphore");
}

// {-1, what}: a key of another kind (semaphore_*.lua).
void check_kind(std::string_view name, const reply& r) {
  if (r.is_array() && r.elements.size() == 2 && r.elements[0].integer == -1) {
    not_a_semaphore(name, r.elements[1].str);
  }
}

std::vector<std::string> semaphore_keys(std::string_view name) {
  return {std::string(name), suffix_key(name, timeout_suffix), semaphore_channel(name)};
}

}  // namespace

bool is_permit_id(std::string_view id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char ch) {
           return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
         });
}

std::string permit_id(std::string_view owner_field) {
  const std::size_t colon = owner_field.find(':');
  const auto refuse = [&] {
    return error(errc::invalid_argument,
                 "not an owner field of this client: '" + std::string(owner_field) + "'");
  };
  // Checked before any pointer is formed past the colon (npos + 1 would wrap).
  if (colon == std::string_view::npos || colon < 16) throw refuse();
  std::uint64_t key = 0;
  const std::string_view digits = owner_field.substr(colon + 1);
  if (digits.empty() || std::from_chars(digits.data(), digits.data() + digits.size(), key).ptr !=
                            digits.data() + digits.size()) {
    throw refuse();
  }
  char tail[17];
  std::snprintf(tail, sizeof tail, "%016llx", static_cast<unsigned long long>(key));
  std::string id(owner_field.substr(0, 16));
  std::transform(id.begin(), id.end(), id.begin(),
                 [](char ch) { return static_cast<char>(std::tolower(ch)); });
  return id + tail;
}

semaphore_protocol::semaphore_protocol(std::int64_t initial_permits)
    : initial_(initial_permits),
      acquire_(std::string(scripts::semaphore_acquire)),
      release_(std::string(scripts::semaphore_release)),
      renew_(std::string(scripts::semaphore_renew)),
      permits_(std::string(scripts::semaphore_permits)),
      status_(std::string(scripts::semaphore_status)),
      force_(std::string(scripts::semaphore_force_release)) {}

std::string semaphore_protocol::wake_channel(std::string_view name) const {
  return semaphore_channel(name);
}

std::size_t semaphore_protocol::wake_ups(std::string_view payload) const {
  // Redisson's SemaphorePubSub: the message is a count of permits; wake that many.
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), n);
  if (ec != std::errc{} || ptr != payload.data() + payload.size()) return 1;  // not a count
  if (n <= 0) return 0;
  // More wake-ups than waiters are harmless; wake_everyone keeps huge counts cheap.
  return n > 1024 ? wake_everyone : static_cast<std::size_t>(n);
}

script_call semaphore_protocol::attempt(const attempt_request& request) const {
  return {&acquire_,
          semaphore_keys(request.name),
          {permit_id(request.owner), std::to_string(request.lease.count()),
           std::to_string(initial_), "publish"},
          3};
}

attempt_outcome semaphore_protocol::read_attempt(const reply& r) const {
  // {1} acquired, {0, wait} no permit, {-1, what, name} not a semaphore (semaphore_acquire.lua).
  if (!r.is_array() || r.elements.empty()) unexpected("acquire", r);
  attempt_outcome out;
  switch (r.elements[0].integer) {
    case 1:
      out.status = attempt_outcome::kind::acquired;
      out.count = 1;
      out.token = 0;  // permits take no fencing tokens
      return out;
    case 0:
      if (r.elements.size() != 2) unexpected("acquire", r);
      out.status = attempt_outcome::kind::held_by_other;
      out.holder_ttl_ms = r.elements[1].integer < 0 ? -1 : r.elements[1].integer;
      return out;
    case -1:
      if (r.elements.size() == 3) not_a_semaphore(r.elements[2].str, r.elements[1].str);
      break;
    default:
      break;
  }
  unexpected("acquire", r);
}

script_call semaphore_protocol::release(const release_request& request) const {
  // No token to check: the id alone says which permit. A thread's permits share one id; the
  // release queue keeps a retry from following the thread's next attempt
  // (release_queue::supersede).
  return release_by_id(request.name, permit_id(request.owner));
}

script_call semaphore_protocol::release_by_id(std::string_view name, std::string_view id) const {
  std::vector<std::string> keys = semaphore_keys(name);
  return {&release_, {keys[0], keys[1], keys[2]}, {std::string(id), "publish"}, 1};
}

int semaphore_protocol::read_release_by_id(std::string_view name, const reply& r) const {
  (void)name;
  if (!r.is_integer() || r.integer < 0 || r.integer > 2) unexpected("release", r);
  return static_cast<int>(r.integer);
}

script_call semaphore_protocol::renew(std::span<const renewal_target> targets,
                                      std::chrono::milliseconds lease) const {
  script_call call{&renew_, {}, {std::to_string(lease.count())}};
  call.keys.reserve(targets.size());
  call.args.reserve(targets.size() + 1);
  for (const renewal_target& t : targets) {
    call.keys.push_back(suffix_key(t.name, timeout_suffix));
    call.args.push_back(permit_id(t.owner));
  }
  return call;
}

script_call semaphore_protocol::check(std::span<const renewal_target> targets) const {
  script_call call = renew(targets, std::chrono::milliseconds(1));
  call.args.front() = "0";  // semaphore_renew.lua: a lease of "0" checks without extending
  return call;
}

std::vector<bool> semaphore_protocol::read_renewal(const reply& r, std::size_t targets) const {
  if (!r.is_array() || r.elements.size() != targets) unexpected("renewal", r);
  std::vector<bool> renewed(targets);
  for (std::size_t i = 0; i < targets; ++i)
    renewed[i] = r.elements[i].integer == 1;
  return renewed;
}

script_call semaphore_protocol::force_release(std::string_view name) const {
  return {&force_, semaphore_keys(name), {"publish"}, 0};
}

bool semaphore_protocol::read_force_release(std::string_view name, const reply& r) const {
  check_kind(name, r);
  if (!r.is_array() || r.elements.size() != 1 || !r.elements[0].is_integer()) {
    unexpected("force release", r);
  }
  return r.elements[0].integer > 0;
}

script_call semaphore_protocol::permits(std::string_view name, std::string_view op,
                                        std::int64_t n) const {
  return {&permits_,
          semaphore_keys(name),
          {std::string(op), std::to_string(initial_), std::to_string(n), "publish"},
          3};
}

std::pair<bool, std::int64_t> semaphore_protocol::read_permits(std::string_view name,
                                                               const reply& r) const {
  check_kind(name, r);
  if (r.is_array() && r.elements.size() == 2 && r.elements[0].is_integer() &&
      r.elements[0].integer == -2) {
    throw error(errc::invalid_argument,
                "semaphore '" + printable_name(name) + "': " + r.elements[1].str);
  }
  if (!r.is_array() || r.elements.size() != 2 || !r.elements[1].is_integer()) {
    unexpected("permits", r);
  }
  return {r.elements[0].integer == 1, r.elements[1].integer};
}

script_call semaphore_protocol::status(std::string_view name) const {
  std::vector<std::string> keys = semaphore_keys(name);
  return {&status_, {keys[0], keys[1]}, {}};
}

lock_status semaphore_protocol::read_status(std::string_view name, const reply& r) const {
  // {type, count, pttl, {id, ms left, ...}} (semaphore_status.lua).
  if (!r.is_array() || r.elements.size() != 4 || !r.elements[3].is_array() ||
      r.elements[3].elements.size() % 2 != 0) {
    unexpected("status", r);
  }
  const std::string& type = r.elements[0].str;
  if (type != "none" && type != "string") not_a_semaphore(name, "a " + type);
  lock_status s;
  s.remaining_ttl = std::chrono::milliseconds(r.elements[2].integer);
  const std::string& count = r.elements[1].str;
  if (type == "string") {
    const auto [ptr, ec] =
        std::from_chars(count.data(), count.data() + count.size(), s.permits_available);
    if (ec != std::errc{} || ptr != count.data() + count.size()) {
      not_a_semaphore(name, "a string that is not a count");
    }
  } else {
    // Not created yet: the first acquisition creates it with this handle's count.
    s.permits_available = r.elements[3].elements.empty() ? initial_ : 0;
  }
  const auto& entries = r.elements[3].elements;
  for (std::size_t i = 0; i + 1 < entries.size(); i += 2) {
    lock_holder h;
    h.owner = entries[i].str;
    h.count = 1;
    h.lease_left = std::chrono::milliseconds(entries[i + 1].integer);
    s.holders.push_back(std::move(h));
  }
  s.locked = !s.holders.empty();
  s.permits_total = s.permits_available + static_cast<std::int64_t>(s.holders.size());
  return s;
}

std::vector<std::string_view> semaphore_protocol::scripts() const {
  return {scripts::semaphore_acquire, scripts::semaphore_release, scripts::semaphore_renew,
          scripts::semaphore_permits, scripts::semaphore_status,  scripts::semaphore_force_release};
}

}  // namespace dlock::locks
