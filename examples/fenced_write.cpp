// README: "Fencing tokens".
#include <dlock/dlock.hpp>

#include <iostream>
#include <string>

// Writes `value` to `resource` only if `token` is at least the highest token the resource has
// seen, and records it. A holder whose lease ran out (its token is older than the next holder's)
// is refused instead of overwriting newer work.
const dlock::script fenced_write{R"lua(
local highest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
)lua"};

int main(int argc, char** argv) {
  dlock::client redis{argc > 1 ? argv[1] : "redis://127.0.0.1:6379"};
  dlock::mutex m = redis.get_lock("stock:sku-1");
  std::unique_lock guard{m};
  const std::string token = std::to_string(m.fencing_token());
  const bool written =
      redis.eval(fenced_write, {"stock:sku-1:count", "stock:sku-1:fence"}, {token, "99"}).integer;
  std::cout << (written ? "written" : "refused: a newer holder wrote first") << "\n";
}
