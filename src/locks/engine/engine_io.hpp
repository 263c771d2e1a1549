// src/locks/engine/engine_io.hpp
//
// The lock engine's one way out to Redis and to the I/O thread, and its lifetime: handles and
// leases may outlive their client, so after stop() nothing reaches the router or the io_context
// again and every use throws errc::client_stopped. use() is shared among callers and exclusive
// with stop().
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <shared_mutex>
#include <string>
#include <thread>

#include "core/process.hpp"
#include "dlock/error.hpp"
#include "dlock/subscription.hpp"
#include "locks/engine/lock_protocol.hpp"
#include "route/router.hpp"

namespace dlock::locks {

class engine_io {
 public:
  engine_io(asio::io_context& io, route::router& router, std::chrono::milliseconds request_timeout)
      : io_(io), router_(router), request_timeout_(request_timeout) {}

  // Runs `f(router)` unless stopped (then throws errc::client_stopped) or in a forked child
  // (errc::forked, before any lock is taken: one may have been held at the fork).
  template <typename F>
  auto use(F&& f) {
    core::check_same_process(generation_);
    std::shared_lock lifetime(lifetime_);
    if (stopped_) throw error(errc::client_stopped, "the client of this lock was destroyed");
    return f(router_);
  }

  // Runs `call` on the master that serves its first key, as `options` say (see
  // route::router::eval; with a caller other than `leaves`, `done` must be free to run on any
  // thread).
  void eval(const script_call& call, net::completion done, const route::send_options& options = {});
  // Posts `f` to the I/O thread.
  void post(std::function<void()> f);
  asio::io_context& io() noexcept { return io_; }
  std::chrono::milliseconds request_timeout() const noexcept { return request_timeout_; }

  // The client's I/O thread, where blocking lock calls are refused (they would wait for
  // themselves): throws errc::would_deadlock there.
  void set_io_thread(std::thread::id id) noexcept { io_thread_ = id; }
  void check_not_io_thread() const;
  bool on_io_thread() const noexcept { return std::this_thread::get_id() == io_thread_.load(); }

  // Whether this is a child forked after the client was made (see core/process.hpp): then
  // nothing may be locked, sent or waited for.
  bool forked() const noexcept { return generation_ != core::fork_generation(); }
  void check_same_process() const { core::check_same_process(generation_); }

  // From now on every use() throws. Waits for uses in progress.
  void stop();
  bool stopped();

 private:
  asio::io_context& io_;
  route::router& router_;
  const std::chrono::milliseconds request_timeout_;
  const std::uint64_t generation_ = core::fork_generation();
  std::atomic<std::thread::id> io_thread_{};
  std::shared_mutex lifetime_;
  bool stopped_ = false;  // guarded by lifetime_
};

}  // namespace dlock::locks
