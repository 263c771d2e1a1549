// The masters of a Redlock whose connections came up, counted from the library's "connected"
// log records: how `dlock exec` and `dlock metrics` with several --redis tell "a majority of the
// masters cannot be reached" (exit 69, as one unreachable server is) from "the lock is held".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "dlock/log.hpp"

namespace dlock::cli {

class connected_masters {
 public:
  // The handler to give redlock_options::on_log: counts, then passes every record to `inner`
  // (may be empty). This object must outlive the redlock.
  dlock::log_handler handler(dlock::log_handler inner);
  // Waits up to `limit` until at least `n` masters connected; returns how many did.
  std::size_t wait_for(std::size_t n, std::chrono::milliseconds limit);
  // The indexes (0 to masters - 1) of the masters that have not connected.
  std::vector<std::size_t> not_connected(std::size_t masters);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::string> connected_;  // the redlock_master fields of "connected" records
};

}  // namespace dlock::cli
