#include "dlock/client.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "net/transport.hpp"
#include "pubsub/subscriber.hpp"
#include "topology/standalone.hpp"

namespace dlock {
namespace {

// Blocks a caller until its request completes. The completion notifies while holding the mutex,
// so the waiter cannot return (and destroy this object) before the completion is done with it.
class sync_call {
 public:
  reply_handler handler() {
    return [this](std::error_code ec, reply r) {
      std::lock_guard lock(mutex_);
      ec_ = ec;
      result_ = std::move(r);
      done_ = true;
      cv_.notify_one();
    };
  }

  reply wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
    if (ec_) throw error(ec_, result_.str);
    return std::move(result_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::error_code ec_;
  reply result_;
};

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

// The key a command is routed by: its first argument after the name (right for the commands
// dlock sends; keyless commands go to any master).
std::string_view routing_key(std::span<const std::string_view> args) {
  return args.size() > 1 ? args[1] : std::string_view{};
}

bool is_noscript(std::error_code ec, const reply& r) {
  return ec == errc::server_error && r.str.compare(0, 8, "NOSCRIPT") == 0;
}

}  // namespace

struct client::impl {
  explicit impl(client_options o)
      : options(std::move(o)),
        tls_context(options.tls.enabled ? net::make_tls_context(options.tls) : nullptr),
        work(asio::make_work_guard(io)),
        servers(std::make_unique<topology::standalone>(io, options, tls_context)),
        io_thread([this] { io.run(); }) {}

  ~impl() {
    servers->stop();
    work.reset();
    io_thread.join();
  }

  net::connection& connection_for(std::string_view key) { return servers->connection_for(key); }

  // A blocking call on the I/O thread would wait for the thread it blocks: refuse it.
  void check_not_io_thread() const {
    if (std::this_thread::get_id() == io_thread.get_id()) {
      throw error(errc::invalid_argument,
                  "a blocking call from a dlock callback would deadlock; use async_command there");
    }
  }

  // Declaration order is destruction order in reverse: connections reference options and io.
  client_options options;
  std::shared_ptr<asio::ssl::context> tls_context;
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::unique_ptr<topology::topology> servers;
  std::thread io_thread;
};

client::client(std::string_view url) : client(client_options::from_url(url)) {}

client::client(client_options options) {
  if (options.connect_timeout.count() <= 0 || options.request_timeout.count() <= 0) {
    throw error(errc::invalid_argument, "connect_timeout and request_timeout must be positive");
  }
  if (options.unix_path.empty() && options.host.empty()) {
    throw error(errc::invalid_argument, "no host and no unix socket path");
  }
  impl_ = std::make_unique<impl>(std::move(options));
}

client::~client() = default;

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
  check_command(args);
  impl_->check_not_io_thread();
  sync_call call;
  impl_->connection_for(routing_key(args))
      .send(args, call.handler(), impl_->options.request_timeout);
  return call.wait();
}

void client::async_command(std::span<const std::string_view> args, reply_handler done) {
  check_command(args);
  impl_->connection_for(routing_key(args))
      .send(args, std::move(done), impl_->options.request_timeout);
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
  impl_->check_not_io_thread();
  sync_call call;
  async_eval(s, keys, args, call.handler());
  return call.wait();
}

void client::async_eval(const script& s, std::span<const std::string_view> keys,
                        std::span<const std::string_view> args, reply_handler done) {
  // EVALSHA sha numkeys keys... args...; on NOSCRIPT the same with EVAL and the source, which also
  // caches the script for next time. The fallback needs the arguments after this call returns.
  auto owned = std::make_shared<std::vector<std::string>>();
  owned->reserve(3 + keys.size() + args.size());
  owned->emplace_back("EVALSHA");
  owned->emplace_back(s.sha1());
  owned->emplace_back(std::to_string(keys.size()));
  owned->insert(owned->end(), keys.begin(), keys.end());
  owned->insert(owned->end(), args.begin(), args.end());
  std::vector<std::string_view> views(owned->begin(), owned->end());

  const std::string_view key = keys.empty() ? std::string_view{} : keys.front();
  net::connection& link = impl_->connection_for(key);
  const auto timeout = impl_->options.request_timeout;
  auto fallback = [&link, owned, source = s.source(), timeout, done = std::move(done)](
                      std::error_code ec, reply r) mutable {
    if (!is_noscript(ec, r)) return done(ec, std::move(r));
    (*owned)[0] = "EVAL";
    (*owned)[1] = std::move(source);
    std::vector<std::string_view> retry(owned->begin(), owned->end());
    link.send(retry, std::move(done), timeout);
  };
  link.send(views, std::move(fallback), timeout);
}

subscription client::subscribe(std::string channel,
                               std::function<void(std::string_view)> on_message,
                               std::function<void()> on_subscribed) {
  if (channel.empty()) throw error(errc::invalid_argument, "empty channel name");
  pubsub::subscriber& sub = impl_->servers->subscriber_for(channel);
  const std::uint64_t id =
      sub.add(std::move(channel), {std::move(on_message), std::move(on_subscribed)});
  return subscription(sub.shared_from_this(), id);
}

void subscription::reset() noexcept {
  if (!owner_) return;
  try {
    owner_->remove(id_);
  } catch (...) {
    // remove() only allocates; out of memory here must not escape a destructor.
  }
  owner_.reset();
}

}  // namespace dlock
