#include "dlock/client.hpp"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "client/metrics_text.hpp"
#include "client/shared_io.hpp"
#include "core/log_sink.hpp"
#include "core/process.hpp"
#include "core/setting_range.hpp"
#include "core/shutdown_elsewhere.hpp"
#include "locks/engine/lock_engine.hpp"
#include "locks/handles/handle_state.hpp"
#include "locks/handles/latch_state.hpp"
#include "locks/names.hpp"
#include "locks/types/fair_protocol.hpp"
#include "locks/types/latch_protocol.hpp"
#include "locks/types/plain_protocol.hpp"
#include "locks/types/reentrant_protocol.hpp"
#include "locks/types/rw_protocol.hpp"
#include "locks/types/semaphore_protocol.hpp"
#include "net/sync_call.hpp"
#include "net/transport.hpp"
#include "pubsub/subscriber.hpp"
#include "route/router.hpp"
#include "topology/deployment.hpp"
#include "topology/sentinel.hpp"

namespace dlock {
namespace {

reply_handler promise_handler(std::promise<reply>& promise) {
  return
      [p = std::make_shared<std::promise<reply>>(std::move(promise))](std::error_code ec, reply r) {
        if (ec) {
          p->set_exception(std::make_exception_ptr(error(ec, r.str)));
        } else {
          p->set_value(std::move(r));
        }
      };
}

void check_command(std::span<const std::string_view> args) {
  if (args.empty() || args.front().empty()) throw error(errc::invalid_argument, "empty command");
}

// The target a command is routed by: its first key (see route::keys_of); a command without
// one goes to any master.
route::target target_of(std::span<const std::string_view> args) {
  const std::vector<std::string_view> keys = route::keys_of(args);
  return keys.empty() ? route::target::any_master() : route::target::key(keys.front());
}

// The options as the client uses them: the milestone-1 lock fields, when a program still sets
// them, take precedence, and both spellings then read the same through client::options().
client_options effective(client_options o) {
  if (o.lock_watchdog_timeout.count() != 0) o.locks.watchdog_timeout = o.lock_watchdog_timeout;
  if (o.on_lock_lost) o.locks.on_lock_lost = o.on_lock_lost;
  o.lock_watchdog_timeout = o.locks.watchdog_timeout;
  o.on_lock_lost = o.locks.on_lock_lost;
  return o;
}

// The protocols of the lock types; stateless, shared by every client.
const locks::reentrant_protocol& reentrant() {
  static const locks::reentrant_protocol protocol;
  return protocol;
}

const locks::plain_protocol& plain() {
  static const locks::plain_protocol protocol;
  return protocol;
}

// A semaphore protocol carries the count a semaphore starts with, so there is one per count
// in use, shared by every client and kept for the process's life (the engines hold pointers).
const locks::semaphore_protocol& semaphore_for(std::int64_t initial_permits) {
  static std::mutex mutex;
  static std::map<std::int64_t, std::unique_ptr<locks::semaphore_protocol>> protocols;
  std::lock_guard guard(mutex);
  auto& protocol = protocols[initial_permits];
  if (!protocol) protocol = std::make_unique<locks::semaphore_protocol>(initial_permits);
  return *protocol;
}

// A fair lock protocol carries its thread wait time W (lock_options::fair_wait_timeout): one per
// W in use, kept for the process's lifetime.
const locks::fair_protocol& fair_for(std::chrono::milliseconds thread_wait) {
  static std::mutex mutex;
  static std::map<std::int64_t, std::unique_ptr<locks::fair_protocol>> protocols;
  std::lock_guard guard(mutex);
  auto& protocol = protocols[thread_wait.count()];
  if (!protocol) protocol = std::make_unique<locks::fair_protocol>(thread_wait);
  return *protocol;
}

const locks::latch_protocol& latch() {
  static const locks::latch_protocol protocol;
  return protocol;
}

const locks::rw_read_protocol& rw_read() {
  static const locks::rw_read_protocol protocol;
  return protocol;
}

const locks::rw_write_protocol& rw_write() {
  static const locks::rw_write_protocol protocol;
  return protocol;
}

// The scripts every command connection loads when it connects: those of every lock type.
std::vector<std::string_view> lock_scripts() {
  std::vector<std::string_view> all = reentrant().scripts();
  for (std::string_view s : plain().scripts())
    all.push_back(s);
  for (std::string_view s : semaphore_for(0).scripts())
    all.push_back(s);
  for (std::string_view s : latch().scripts())
    all.push_back(s);
  for (std::string_view s : rw_write().scripts())  // both sides share their scripts
    all.push_back(s);
  for (std::string_view s : fair_for(lock_options{}.fair_wait_timeout).scripts())
    all.push_back(s);  // the same sources for every W
  return all;
}

// One server or a cluster (asked of the server), or a master found through Sentinel.
std::unique_ptr<topology::topology> make_topology(asio::io_context& io,
                                                  const client_options& options,
                                                  std::shared_ptr<asio::ssl::context> tls) {
  if (!options.sentinel.master_name.empty()) {
    return std::make_unique<topology::sentinel>(io, options, std::move(tls), lock_scripts());
  }
  return std::make_unique<topology::deployment>(io, options, std::move(tls), lock_scripts());
}

// Throws errc::invalid_argument for options a client cannot work with.
void check_options(const client_options& options) {
  using std::chrono::milliseconds;
  core::check_setting(options.connect_timeout, milliseconds(1), "connect_timeout");
  core::check_setting(options.request_timeout, milliseconds(1), "request_timeout");
  core::check_setting(options.health_check_interval, milliseconds(0),
                      "health_check_interval (0: no check)");
  // Zero delays would retry a refused connection in a busy loop.
  core::check_setting(options.reconnect_delay_min, milliseconds(1), "reconnect_delay_min");
  core::check_setting(options.reconnect_delay_max, options.reconnect_delay_min,
                      "reconnect_delay_max (not below reconnect_delay_min)");
  if (options.unix_path.empty() && options.host.empty()) {
    throw error(errc::invalid_argument, "no host and no unix socket path");
  }
  // WAIT 0 would wait for ever.
  core::check_setting(options.locks.replica_timeout,
                      milliseconds(options.locks.min_replicas > 0 ? 1 : 0),
                      "locks.replica_timeout");
  core::check_setting(options.locks.fair_wait_timeout, milliseconds(1), "locks.fair_wait_timeout");
  core::check_setting(options.slow_acquisition, milliseconds(0), "slow_acquisition (0: no log)");
  const milliseconds watchdog = options.lock_watchdog_timeout.count() != 0
                                    ? options.lock_watchdog_timeout
                                    : options.locks.watchdog_timeout;
  if (watchdog.count() <= 0 || watchdog > max_lock_lease) {
    throw error(errc::invalid_argument,
                "locks.watchdog_timeout must be positive and at most max_lock_lease; got " +
                    std::to_string(watchdog.count()) + " ms");
  }
  for (const server_address& a : options.more_hosts) {
    if (a.host.empty() || a.port == 0)
      throw error(errc::invalid_argument, "an empty host or port 0 in more_hosts");
  }
}

}  // namespace

struct client::impl {
  // `shared`: run on that I/O thread; null: on a thread of this client's own.
  impl(client_options o, detail::shared_io* shared)
      : options(effective(std::move(o))),
        tls_context(options.tls.enabled ? net::make_tls_context(options.tls) : nullptr),
        own_io(shared != nullptr ? nullptr : std::make_unique<asio::io_context>(1)),
        io(shared != nullptr ? shared->io() : *own_io),
        shared_io(shared),
        work(asio::make_work_guard(io)),
        router(io, make_topology(io, options, tls_context)),
        locks(locks::lock_engine::create(io, router, options.locks, options.request_timeout,
                                         core::log_sink(options.on_log), options.slow_acquisition)),
        io_thread(shared != nullptr ? std::thread() : std::thread([this] { io.run(); })),
        io_thread_id(shared != nullptr ? shared->thread_id() : io_thread.get_id()) {
    locks->io().set_io_thread(io_thread_id);
    // Every lock type shows in metrics_text() from the start, with zeros.
    (void)locks->counters().of(reentrant().kind());
    (void)locks->counters().of(plain().kind());
    (void)locks->counters().of(semaphore_for(0).kind());
    (void)locks->counters().of(rw_read().kind());
    (void)locks->counters().of(rw_write().kind());
    (void)locks->counters().of(fair_for(options.locks.fair_wait_timeout).kind());
  }

  ~impl() {
    if (!stopped) stop();
  }

  void stop() {
    stopped = true;
    // Releases queued by unlock() get one request timeout to reach the server.
    locks->shutdown(options.request_timeout);
    router.stop();
    work.reset();
    if (io_thread.joinable()) io_thread.join();
  }

  // A blocking call on the I/O thread would wait for the thread it blocks: refuse it.
  void check_not_io_thread() const {
    if (std::this_thread::get_id() == io_thread_id) {
      throw error(errc::would_deadlock,
                  "a blocking call from a dlock callback would wait for itself; use "
                  "async_command there");
    }
  }

  // Declaration order is destruction order in reverse: connections reference options and io.
  const std::uint64_t made_in = core::fork_generation();
  client_options options;
  std::shared_ptr<asio::ssl::context> tls_context;
  std::unique_ptr<asio::io_context> own_io;  // null on a shared_io
  asio::io_context& io;
  detail::shared_io* const shared_io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  route::router router;
  std::shared_ptr<locks::lock_engine> locks;  // shared with lock handles
  std::thread io_thread;                      // not joinable on a shared_io
  const std::thread::id io_thread_id;
  bool stopped = false;
};

client::client(std::string_view url) : client(client_options::from_url(url)) {}

client::client(client_options options) {
  check_options(options);
  core::watch_forks();
  impl_ = std::make_unique<impl>(std::move(options), nullptr);
}

client::client(client_options options, detail::shared_io& io) {
  check_options(options);
  core::watch_forks();
  impl_ = std::make_unique<impl>(std::move(options), &io);
}

client::~client() {
  // In a child forked after the client was made, its I/O thread does not exist (joining it would
  // hang), mutexes may be held for ever, and the sockets are the parent's: leave it all alone.
  if (impl_ && impl_->made_in != core::fork_generation()) (void)impl_.release();
  // Destroyed inside one of its own callbacks: this thread would wait for itself. A thread of
  // its own shuts the client down instead (releases still get their time) and drops it; without
  // a thread, the client is left running rather than hang.
  if (impl_ && impl_->shared_io == nullptr && std::this_thread::get_id() == impl_->io_thread_id) {
    impl* orphan = impl_.release();
    // Without a thread to spare, the client is leaked: better than a hang.
    (void)core::detached_shutdowns::instance().run([orphan] { delete orphan; });
  }
  // On a shared I/O thread, handlers for this client may still be queued after it stopped: its
  // state goes when that thread has ended.
  if (impl_ && impl_->shared_io != nullptr) {
    impl_->stop();
    detail::shared_io& io = *impl_->shared_io;
    io.keep(std::shared_ptr<impl>(std::move(impl_)));
  }
}

const client_options& client::options() const noexcept {
  return impl_->options;
}

reply client::command(std::initializer_list<std::string_view> args) {
  return command(std::span<const std::string_view>(args.begin(), args.size()));
}

reply client::command(const std::vector<std::string>& args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  return command(std::span<const std::string_view>(views));
}

reply client::command(std::span<const std::string_view> args) {
  core::check_same_process(impl_->made_in);
  check_command(args);
  impl_->check_not_io_thread();
  net::sync_call call;
  impl_->router.send(target_of(args), args, call.handler(), impl_->options.request_timeout,
                     {.caller_does = route::router::caller::waits});
  return call.wait();
}

void client::async_command(std::span<const std::string_view> args, reply_handler done) {
  core::check_same_process(impl_->made_in);
  check_command(args);
  impl_->router.send(target_of(args), args, std::move(done), impl_->options.request_timeout);
}

void client::async_command(std::initializer_list<std::string_view> args, reply_handler done) {
  async_command(std::span<const std::string_view>(args.begin(), args.size()), std::move(done));
}

std::future<reply> client::async_command(std::initializer_list<std::string_view> args) {
  return async_command(std::span<const std::string_view>(args.begin(), args.size()));
}

std::future<reply> client::async_command(std::span<const std::string_view> args) {
  std::promise<reply> promise;
  auto future = promise.get_future();
  async_command(args, promise_handler(promise));
  return future;
}

reply client::eval(const script& s, std::initializer_list<std::string_view> keys,
                   std::initializer_list<std::string_view> args) {
  return eval(s, std::span<const std::string_view>(keys.begin(), keys.size()),
              std::span<const std::string_view>(args.begin(), args.size()));
}

reply client::eval(const script& s, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args) {
  core::check_same_process(impl_->made_in);
  impl_->check_not_io_thread();
  net::sync_call call;
  const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
  impl_->router.eval(to, s, keys, args, impl_->options.request_timeout, call.handler(),
                     {.caller_does = route::router::caller::waits});
  return call.wait();
}

void client::async_eval(const script& s, std::span<const std::string_view> keys,
                        std::span<const std::string_view> args, reply_handler done) {
  core::check_same_process(impl_->made_in);
  const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
  impl_->router.eval(to, s, keys, args, impl_->options.request_timeout, std::move(done));
}

void client::async_eval_from_caller(const script& s, std::span<const std::string_view> keys,
                                    std::span<const std::string_view> args, reply_handler done,
                                    net::polled_reads* polled) {
  core::check_same_process(impl_->made_in);
  const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
  impl_->router.eval(to, s, keys, args, impl_->options.request_timeout, std::move(done),
                     {.caller_does = polled != nullptr ? route::router::caller::polls
                                                       : route::router::caller::writes,
                      .polled = polled});
}

void client::async_eval_deferred(const script& s, std::span<const std::string_view> keys,
                                 std::span<const std::string_view> args, reply_handler done) {
  core::check_same_process(impl_->made_in);
  const auto to = keys.empty() ? route::target::any_master() : route::target::key(keys.front());
  impl_->router.eval(to, s, keys, args, impl_->options.request_timeout, std::move(done),
                     {.caller_does = route::router::caller::defers});
}

dlock::lock_metrics client::lock_metrics() const noexcept {
  return impl_->locks->metrics();
}

dlock::routing_metrics client::routing_metrics() const noexcept {
  return impl_->router.metrics();
}

std::string client::metrics_text() const {
  return detail::metrics_text(impl_->locks->counters(), impl_->router.metrics());
}

mutex client::get_lock(std::string name) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  return mutex(
      std::make_shared<mutex::impl>(impl_->locks, locks::lock_ref{&reentrant(), std::move(name)}));
}

fair_mutex client::get_fair_lock(std::string name) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  return fair_mutex(mutex(std::make_shared<mutex::impl>(
      impl_->locks,
      locks::lock_ref{&fair_for(impl_->options.locks.fair_wait_timeout), std::move(name)})));
}

plain_lock client::get_plain_lock(std::string name) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  return plain_lock(
      std::make_shared<plain_lock::impl>(impl_->locks, locks::lock_ref{&plain(), std::move(name)}));
}

semaphore client::get_semaphore(std::string name, std::int64_t permits) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  if (permits < 0 || permits > max_count) {
    throw error(errc::invalid_argument,
                "a semaphore's permits must be 0 to 2^53 - 1: " + std::to_string(permits));
  }
  return semaphore(
      std::make_shared<semaphore::impl>(impl_->locks, semaphore_for(permits), std::move(name)));
}

count_down_latch client::get_count_down_latch(std::string name) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  return count_down_latch(
      std::make_shared<count_down_latch::impl>(impl_->locks, latch(), std::move(name)));
}

shared_mutex client::get_read_write_lock(std::string name) {
  core::check_same_process(impl_->made_in);
  locks::validate_lock_name(name);
  std::string read_name = name;  // one lock_ref per side
  return shared_mutex(std::make_shared<shared_mutex::impl>(
      impl_->locks, locks::lock_ref{&rw_read(), std::move(read_name)},
      locks::lock_ref{&rw_write(), std::move(name)}));
}

subscription client::subscribe(const std::string& channel,
                               std::function<void(std::string_view)> on_message,
                               std::function<void()> on_subscribed) {
  core::check_same_process(impl_->made_in);
  if (channel.empty()) throw error(errc::invalid_argument, "empty channel name");
  pubsub::subscriber& sub = impl_->router.subscriber_for(channel);
  const std::uint64_t id = sub.add(channel, {std::move(on_message), std::move(on_subscribed)});
  return pubsub::make_subscription(sub, id);
}

}  // namespace dlock
