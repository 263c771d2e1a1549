#include "locks/engine/engine_io.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace dlock::locks {

void engine_io::eval(const script_call& call, net::completion done,
                     const route::send_options& options) {
  // The views live on the stack when they fit (every lock script's do): no allocation per call.
  constexpr std::size_t on_stack = 16;
  std::array<std::string_view, on_stack> stack_views;
  std::vector<std::string_view> heap_views;
  std::span<std::string_view> views(stack_views.data(), call.keys.size() + call.args.size());
  if (views.size() > on_stack) {
    heap_views.resize(views.size());
    views = heap_views;
  }
  std::copy(call.keys.begin(), call.keys.end(), views.begin());
  std::copy(call.args.begin(), call.args.end(), views.begin() + std::ssize(call.keys));
  const std::span<const std::string_view> keys = views.first(call.keys.size());
  const std::span<std::string_view> args = views.subspan(call.keys.size());
  use([&](route::router& router) {
    if (call.publish_command_arg < args.size()) {
      args[call.publish_command_arg] = router.publish_command();
    }
    const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
    // A lock script that meets a key of another type fails with Redis's WRONGTYPE: for a lock
    // that means "not a lock of this kind", which callers should be able to tell apart.
    router.eval(
        to, *call.code, keys, args, request_timeout_,
        [done = std::move(done)](std::error_code ec, reply r) {
          if (ec == errc::server_error && r.str.starts_with("WRONGTYPE")) {
            ec = make_error_code(errc::wrong_type);
          }
          if (done) done(ec, std::move(r));
        },
        options);
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
