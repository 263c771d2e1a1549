// README: "Locks".
#include <dlock/dlock.hpp>

#include <iostream>
#include <mutex>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::mutex m = redis.get_lock("orders:42");

  {
    std::unique_lock guard{m};  // waits; a watchdog renews the 30 s lease while we hold it
    std::cout << "token " << m.fencing_token() << "\n";
  }  // unlock

  if (m.try_lock_for(std::chrono::milliseconds(200), dlock::lease_time(std::chrono::seconds(10)))) {
    // Explicit 10 s lease, never renewed: if the work outlives it, the lock is gone.
    std::stop_token lost = m.stop_token();
    if (lost.stop_requested()) std::cerr << "lease ran out: stop writing\n";
    m.unlock();
  }
}
