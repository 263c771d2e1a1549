// README: "Plain lock".
#include <dlock/dlock.hpp>

#include <iostream>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::plain_lock job = redis.get_plain_lock("jobs:nightly");  // the key itself, SET NX PX
  if (job.try_lock_for(std::chrono::seconds(5))) {  // job.lock() here again: would_deadlock
    std::cout << "token " << job.fencing_token() << "\n";
    job.unlock();
  }
}
