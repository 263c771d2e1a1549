// Links against an installed dlock and checks that it works end to end. Without an argument, with
// no server: a URL is parsed and a connection to a closed port fails with the documented error.
// With a URL (scripts/package-check.sh): the server there must answer PING.
#include <dlock/dlock.hpp>

#include <iostream>

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "redis://127.0.0.1:1";
  try {
    dlock::client c{url};
    c.command({"PING"});
    std::cout << "consumer: PING answered by " << c.options().endpoint() << "\n";
    return 0;
  } catch (const dlock::error& e) {
    if (e.code() == dlock::errc::connect_failed && argc <= 1) {
      std::cout << "consumer: linked dlock::dlock; expected error: " << e.what() << "\n";
      return 0;
    }
    std::cerr << "consumer: unexpected error: " << e.what() << "\n";
    return 1;
  }
}
