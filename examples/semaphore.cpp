// docs/locks.md: "Semaphore" (and the README section the lead merges).
#include <dlock/dlock.hpp>

#include <iostream>
#include <mutex>
#include <thread>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::semaphore exports = redis.get_semaphore("exports", 3);  // at most 3 at once, everywhere
  {
    std::lock_guard guard{exports};  // acquire() ... release(), a watchdog lease
    std::cout << "exporting with permit " << exports.permit_id() << "\n";
  }
  // A permit owned by an object: released by whichever thread (or process, by id) is done.
  dlock::permit p = exports.acquire_permit();
  std::thread worker([p = std::move(p)]() mutable { (void)p.release(); });
  worker.join();
  std::cout << exports.available_permits() << " permits free\n";
}
