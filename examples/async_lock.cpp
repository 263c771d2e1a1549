// README: "Asynchronous acquisition".
#include <dlock/dlock.hpp>

#include <future>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  dlock::client_options options =
      dlock::client_options::from_url(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
  options.locks.on_lock_lost = [](const dlock::lock_loss& loss) {
    std::cerr << "lost " << loss.name << " (reason " << static_cast<int>(loss.reason) << ")\n";
  };
  dlock::client redis{options};
  dlock::mutex m = redis.get_lock("reports:nightly");

  // A future: the lease is a move-only object, not tied to the thread that asked.
  std::future<dlock::lock_lease> pending = m.async_try_lock_for(std::chrono::seconds(5));
  dlock::lock_lease lease = pending.get();  // throws dlock::error if Redis failed
  if (!lease) {
    std::cout << "someone else is running the report\n";
    return 0;
  }
  std::thread worker([lease = std::move(lease)]() mutable {
    std::cout << "token " << lease.fencing_token() << " owner " << lease.owner_id() << "\n";
    if (lease.lost()) return;  // the destructor releases; a lost hold changes nothing
    lease.release();           // from any thread
  });
  worker.join();

  // A callback, on the client's I/O thread (do not block there). Stopping `give_up` would end
  // the wait with errc::cancelled.
  std::stop_source give_up;
  std::promise<void> finished;
  m.async_acquire({.wait = std::chrono::seconds(30), .cancel = give_up.get_token()},
                  [&finished](std::error_code ec, dlock::lock_lease held) {
                    if (ec) std::cerr << "not acquired: " << ec.message() << "\n";
                    if (held) std::cout << "token " << held.fencing_token() << "\n";
                    finished.set_value();  // `held` is released when it goes out of scope
                  });
  finished.get_future().wait();

  dlock::lock_metrics counters = redis.lock_metrics();
  std::cout << counters.acquired << " acquired, " << counters.lost << " lost\n";
}
