// README: "Quick start".
#include <dlock/dlock.hpp>

#include <iostream>

int main(int argc, char** argv) {
  try {
    dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};

    redis.command({"SET", "greeting", "hello"});
    std::cout << redis.command({"GET", "greeting"}).str << "\n";  // hello

    // Lua runs by EVALSHA; dlock falls back to EVAL when the server does not know the script.
    const dlock::script release{
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
        "return 0"};
    redis.command({"SET", "job:nightly", "my-token", "NX", "PX", "30000"});
    std::cout << redis.eval(release, {"job:nightly"}, {"my-token"}).integer << "\n";  // 1
  } catch (const dlock::error& e) {
    // e.code() is a dlock::errc: connect_failed, auth_failed, timeout, server_error, ...
    std::cerr << e.what() << "\n";
    return 1;
  }
}
