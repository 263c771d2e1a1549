// README "Redlock": one lock over several independent masters, held while a majority agrees.
//   ./example_redlock redis://10.0.0.1 redis://10.0.0.2 redis://10.0.0.3
#include <dlock/dlock.hpp>

#include <iostream>
#include <mutex>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> urls(argv + 1, argv + argc);
  if (urls.empty()) urls = {"redis://127.0.0.1:6379"};
  try {
    dlock::redlock rl{urls};  // N independent masters (an odd N)
    dlock::redlock_mutex m = rl.get_lock("jobs:nightly");
    std::unique_lock guard{m};  // held on a majority; the watchdog renews it on all N
    std::cout << "token " << m.fencing_token() << ", valid " << m.validity().count() << " ms\n";
  } catch (const dlock::error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
