#include "locks/engine/line_uses.hpp"

namespace dlock::locks {

void line_uses::begin(const std::string& line) {
  std::lock_guard lock(mutex_);
  ++uses_[line].live;
}

bool line_uses::end(const std::string& line, bool held, bool marked) {
  std::lock_guard lock(mutex_);
  const auto it = uses_.find(line);
  if (it == uses_.end()) return !held && marked;  // not begun (cannot happen): leave if marked
  use& u = it->second;
  u.owed = u.owed || (!held && marked);
  if (--u.live != 0) return false;
  const bool leave = u.owed;
  uses_.erase(it);
  return leave;
}

std::size_t line_uses::lines() const {
  std::lock_guard lock(mutex_);
  return uses_.size();
}

}  // namespace dlock::locks
