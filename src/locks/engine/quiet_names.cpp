#include "locks/engine/quiet_names.hpp"

namespace dlock::locks {

bool quiet_names::is_quiet(std::string_view name, clock::time_point now) const {
  std::lock_guard lock(mutex_);
  const auto it = quiet_since_.find(name);
  return it != quiet_since_.end() && now - it->second < lasts_;
}

void quiet_names::record(std::string_view name, bool heard, clock::time_point now) {
  std::lock_guard lock(mutex_);
  const auto it = quiet_since_.find(name);
  if (heard) {
    if (it != quiet_since_.end()) quiet_since_.erase(it);
    return;
  }
  if (it != quiet_since_.end()) {
    it->second = now;
    return;
  }
  if (quiet_since_.size() >= max_names) quiet_since_.clear();
  quiet_since_.emplace(std::string(name), now);
}

}  // namespace dlock::locks
