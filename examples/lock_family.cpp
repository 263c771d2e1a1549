// README: "The lock family" (details in docs/locks.md: read-write lock, semaphore, latch).
#include <dlock/dlock.hpp>

#include <iostream>
#include <mutex>
#include <shared_mutex>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::shared_mutex catalog = redis.get_read_write_lock("catalog");
  { std::shared_lock reading{catalog}; }  // many readers, or one writer (std::unique_lock)
  dlock::semaphore exports = redis.get_semaphore("exports", 3);
  { std::lock_guard one_of_three{exports}; }  // at most 3 holders in all processes
  dlock::count_down_latch boot = redis.get_count_down_latch("boot");
  boot.try_set_count(1);
  boot.count_down();
  std::cout << "booted: " << boot.wait_for(std::chrono::seconds(1)) << "\n";
}
