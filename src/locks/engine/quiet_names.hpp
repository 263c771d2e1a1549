// src/locks/engine/quiet_names.hpp
//
// Which lock names' latest release reached no listener, and when. A release of such a name may
// ride with its holder's next request on the same connection (one write and one server wake-up
// per lock-unlock cycle instead of two): nobody was seen to wait for it. A name whose latest
// release reached a waiting client (here or in another process), or that was not released within
// `lasts`, is not quiet: its release goes out at once, so a waiter elsewhere is not kept waiting
// for the holder's next request. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace dlock::locks {

// How long a release that reached no listener says that nobody waits for its name: long against
// a lock-unlock loop's cycle (tens to hundreds of microseconds), short against a waiter's
// patience, since one that began to wait after that release hears the next one up to the
// deferral's flush delay (1 ms) late. A holder that keeps the lock longer writes its release at
// once, as it would without deferring: riding with the next request pays only in a tight loop.
inline constexpr std::chrono::milliseconds quiet_release_lasts{2};

class quiet_names {
 public:
  using clock = std::chrono::steady_clock;

  explicit quiet_names(clock::duration lasts) : lasts_(lasts) {}

  // Whether `name`'s latest release was answered within `lasts` before `now` and reached nobody.
  bool is_quiet(std::string_view name, clock::time_point now) const;
  // Records the answer to a release of `name`, received at `now`.
  void record(std::string_view name, bool heard, clock::time_point now);

  // A client that releases more names than this forgets them all and starts over (each name's
  // next release goes out at once): the record stays small whatever names come and go.
  static constexpr std::size_t max_names = 1024;

 private:
  const clock::duration lasts_;
  mutable std::mutex mutex_;
  // The time of the name's latest release that reached nobody; absent after one that was heard.
  std::map<std::string, clock::time_point, std::less<>> quiet_since_;
};

}  // namespace dlock::locks
