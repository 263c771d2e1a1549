// README: "Count-down latch" (docs/locks.md, "Count-down latch").
#include <dlock/dlock.hpp>

#include <iostream>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::count_down_latch ready = redis.get_count_down_latch("boot:ready");
  ready.try_set_count(3);  // false when it exists already: then its count stands
  std::vector<std::thread> services;
  for (int i = 0; i < 3; ++i)
    services.emplace_back([&] { ready.count_down(); });  // each service, once ready
  if (ready.wait_for(std::chrono::seconds(10))) std::cout << "all services ready\n";
  for (auto& s : services)
    s.join();
}
