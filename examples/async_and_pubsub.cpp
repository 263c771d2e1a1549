// README: "Asynchronous calls and pub/sub".
#include <dlock/dlock.hpp>

#include <future>
#include <iostream>

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};

  // A future...
  std::future<dlock::reply> pong = redis.async_command({"PING"});
  std::cout << pong.get().str << "\n";

  // ...or a callback, which runs on the client's I/O thread and must not block.
  std::promise<void> done;
  redis.async_command({"INCR", "visits"}, [&](std::error_code ec, dlock::reply r) {
    if (ec) {
      std::cerr << "INCR failed: " << ec.message() << ": " << r.str << "\n";
    } else {
      std::cout << "visits: " << r.integer << "\n";
    }
    done.set_value();
  });
  done.get_future().wait();

  // One subscriber connection serves every channel; the subscription ends with its handle.
  std::promise<void> subscribed, received;
  dlock::subscription sub = redis.subscribe(
      "news",
      [&](std::string_view payload) {
        std::cout << "news: " << payload << "\n";
        received.set_value();
      },
      [&] { subscribed.set_value(); });
  subscribed.get_future().wait();
  redis.command({"PUBLISH", "news", "dlock is up"});
  received.get_future().wait();
}
