#include "locks/engine/engine_io.hpp"

#include <vector>

namespace dlock::locks {

void engine_io::eval(const script_call& call, net::completion done, bool urgent) {
  std::vector<std::string_view> keys(call.keys.begin(), call.keys.end());
  std::vector<std::string_view> args(call.args.begin(), call.args.end());
  use([&](route::router& router) {
    const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
    router.eval(to, *call.code, keys, args, request_timeout_, std::move(done), urgent);
  });
}

void engine_io::post(std::function<void()> f) {
  use([&](route::router&) { asio::post(io_, std::move(f)); });
}

void engine_io::check_not_io_thread() const {
  if (on_io_thread()) {
    throw error(errc::would_deadlock,
                "a blocking lock call from a dlock callback would wait for itself; use the "
                "asynchronous API there");
  }
}

void engine_io::stop() {
  std::unique_lock lifetime(lifetime_);
  stopped_ = true;
}

bool engine_io::stopped() {
  std::shared_lock lifetime(lifetime_);
  return stopped_;
}

}  // namespace dlock::locks
