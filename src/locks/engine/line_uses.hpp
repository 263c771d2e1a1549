// src/locks/engine/line_uses.hpp
//
// How many of a client's acquisitions are under way per line (a lock's name; for a type that
// waits by owner, the owner's own channel), so that the client leaves the server's line
// (lock_protocol::leave_line()) once, when the last of them ends, and only if one that ended
// without the lock may have left a mark there (a place in line, a writer's intent). Leaving
// earlier would take the line from a sibling whose attempt is still out or who waits: the
// server's line and the intents are the client's, not each acquisition's. Thread-safe (blocking
// callers and the I/O thread both begin and end uses).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace dlock::locks {

class line_uses {
 public:
  // An acquisition of `line` begins (before its first attempt is sent).
  void begin(const std::string& line);
  // It ends: `held` with the lock or not; `marked`: one of its attempts may have left a mark.
  // Returns whether the client leaves the line now: this was the last use of `line`, and this
  // one or an earlier one that ended meanwhile gave up with a mark.
  bool end(const std::string& line, bool held, bool marked);
  // How many lines have uses under way (for tests).
  std::size_t lines() const;

 private:
  struct use {
    std::size_t live = 0;
    bool owed = false;  // one that ended without the lock left a mark: leave at the last end
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, use> uses_;
};

}  // namespace dlock::locks
