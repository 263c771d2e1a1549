#include "locks/engine/line_uses.hpp"

namespace dlock::locks {

void line_uses::begin(const line_key& line) {
  std::lock_guard lock(mutex_);
  ++uses_[line].live;
}

bool line_uses::end(const line_key& line, bool held, bool marked,
                    const std::function<void()>& leave) {
  std::lock_guard lock(mutex_);
  const auto it = uses_.find(line);
  bool last = true;
  bool owed = !held && marked;
  if (it != uses_.end()) {  // (always: every end has its begin)
    use& u = it->second;
    owed = u.owed || owed;
    u.owed = owed;
    last = --u.live == 0;
    if (last) uses_.erase(it);
  }
  if (!last || !owed) return false;
  if (leave) leave();  // under the mutex: see the header
  return true;
}

std::size_t line_uses::lines() const {
  std::lock_guard lock(mutex_);
  return uses_.size();
}

}  // namespace dlock::locks
