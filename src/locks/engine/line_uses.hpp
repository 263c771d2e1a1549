// src/locks/engine/line_uses.hpp
//
// How many of a client's acquisitions are under way per line (a lock type and a lock's name; for
// a type that waits by owner, the owner's own channel), so that the client leaves the server's
// line (lock_protocol::leave_line()) once, when the last of them ends, and only if one that ended
// without the lock may have left a mark there (a place in line, a writer's intent). Leaving
// earlier would take the line from a sibling whose attempt is still out or who waits: the
// server's line and the intents are the client's, not each acquisition's. Thread-safe (blocking
// callers and the I/O thread both begin and end uses).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace dlock::locks {

class line_uses {
 public:
  // `type` tells lock types apart that share names (a read-write lock's two sides).
  using line_key = std::pair<const void*, std::string>;

  // An acquisition of `line` begins (before its first attempt is sent).
  void begin(const line_key& line);
  // It ends: `held` with the lock or not; `marked`: one of its attempts may have left a mark.
  // When this was the last use of `line` and this one or an earlier one that ended meanwhile
  // gave up with a mark, runs `leave` (which queues the departure) before another use of the
  // line can begin, so a new attempt is queued after the departure, never before it; returns
  // whether it did.
  bool end(const line_key& line, bool held, bool marked, const std::function<void()>& leave = {});
  // How many lines have uses under way (for tests).
  std::size_t lines() const;

 private:
  struct use {
    std::size_t live = 0;
    bool owed = false;  // one that ended without the lock left a mark: leave at the last end
  };
  mutable std::mutex mutex_;
  std::map<line_key, use> uses_;
};

}  // namespace dlock::locks
