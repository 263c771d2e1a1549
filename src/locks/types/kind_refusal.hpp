#pragma once
// The lock scripts' refusal of a key of another kind, {-1, what, name} (reentrant_lock.lua,
// plain_lock.lua, rw_read_lock.lua, rw_write_lock.lua): `what` names the kind found for people
// ("a semaphore or a latch (a string count)"), `name` is the key. Turned into errc::wrong_type
// naming both kinds, so mixing kinds on one name is never a raw server error or a silent wait.

#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "locks/names.hpp"

namespace dlock::locks {

// Whether `r` is such a refusal.
inline bool is_kind_refusal(const reply& r) {
  return r.is_array() && r.elements.size() == 3 && r.elements[0].is_integer() &&
         r.elements[0].integer == -1;
}

// Throws errc::wrong_type: "the name 'jobs' holds a semaphore or a latch (a string count), not a
// reentrant lock (dlock::mutex)". `wanted` is the caller's kind.
[[noreturn]] inline void throw_kind_refusal(const reply& r, std::string_view wanted) {
  throw error(errc::wrong_type, "the name '" + printable_name(r.elements[2].str) + "' holds " +
                                    r.elements[1].str + ", not " + std::string(wanted));
}

}  // namespace dlock::locks
