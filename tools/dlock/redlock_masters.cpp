#include "redlock_masters.hpp"

namespace dlock::cli {

dlock::log_handler connected_masters::handler(dlock::log_handler inner) {
  return [this, inner = std::move(inner)](const dlock::log_record& r) {
    if (r.message == "connected") {
      for (const dlock::log_field& f : r.fields) {
        if (f.key != "redlock_master") continue;
        {
          const std::lock_guard lock(mutex_);
          connected_.insert(f.value);
        }
        changed_.notify_all();
      }
    }
    if (inner) inner(r);
  };
}

std::size_t connected_masters::wait_for(std::size_t n, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, limit, [&] { return connected_.size() >= n; });
  return connected_.size();
}

std::vector<std::size_t> connected_masters::not_connected(std::size_t masters) {
  const std::lock_guard lock(mutex_);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < masters; ++i) {
    if (connected_.count(std::to_string(i)) == 0) out.push_back(i);
  }
  return out;
}

}  // namespace dlock::cli
