// dlock/client.hpp
//
// dlock::client owns the connections to Redis and one background I/O thread that drives them.
// Create one per process (or per Redis deployment) and share it: it is thread-safe, and many
// threads issuing commands at once share one connection through auto-pipelining.
//
//   dlock::client c{"redis://127.0.0.1:6379"};
//   c.command({"SET", "greeting", "hello"});
//   std::string v = c.command({"GET", "greeting"}).str;
//
// Lifetime: destroying the client waits up to request_timeout for releases queued by unlock()
// to reach Redis, and for lock attempts still out (their callers get errc::client_stopped, and a
// hold such an attempt takes is released; none of either: no wait), reports holds still open as
// lost, stops its I/O thread, and completes requests still queued with errc::client_stopped.
// Destroyed inside one of its own callbacks (on its I/O thread, which cannot wait for itself), it
// returns at once and another thread does all that; the client's remaining callbacks (loss
// notifications) may then run after the destructor returned. Lock handles and leases may outlive
// it (their calls then fail with errc::client_stopped).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/count_down_latch.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/lock_metrics.hpp"
#include "dlock/mutex.hpp"
#include "dlock/options.hpp"
#include "dlock/plain_lock.hpp"
#include "dlock/reply.hpp"
#include "dlock/routing_metrics.hpp"
#include "dlock/script.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "dlock/subscription.hpp"

namespace dlock {

namespace detail {
class shared_io;
}
namespace net {
class polled_reads;
}

// Completion of an asynchronous request. On failure `ec` is set and `r` is an error reply whose
// text describes the failure (for errc::server_error, the server's own message).
using reply_handler = std::function<void(std::error_code ec, reply r)>;

class client {
 public:
  // client::client(url)
  // Parses `url` (see dlock/options.hpp for the forms) and starts connecting in the background.
  // Throws dlock::error(errc::invalid_argument) for a malformed URL. Does not wait for the server:
  // an unreachable server shows up as errors of the first requests.
  explicit client(std::string_view url);
  explicit client(client_options options);
  // For dlock's internals (Redlock's masters): a client driven by the I/O thread of `io`, which
  // must outlive it, instead of a thread of its own.
  client(client_options options, detail::shared_io& io);
  ~client();

  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // client::command()
  // Sends one command and blocks until its reply. Returns the reply. Throws dlock::error:
  //   errc::server_error    Redis answered with an error; what() holds its message;
  //   errc::timeout         no reply within options().request_timeout;
  //   errc::connection_lost the connection died with the command in flight (it may have run);
  //   errc::connect_failed, connect_timeout, tls_failed, auth_failed: Redis cannot be reached
  //                         (the command was not sent);
  //   errc::invalid_argument for an empty command;
  //   errc::would_deadlock  when called from one of this client's callbacks (use async_command);
  //   errc::client_stopped.
  // Thread-safe.
  reply command(std::initializer_list<std::string_view> args);
  reply command(std::span<const std::string_view> args);
  reply command(const std::vector<std::string>& args);

  // client::async_command()
  // Queues one command; `done` runs exactly once, on the client's I/O thread (it must not block),
  // or on the calling thread if the command fails before being queued. The future variant
  // rethrows the errors of command() from get().
  void async_command(std::span<const std::string_view> args, reply_handler done);
  void async_command(std::initializer_list<std::string_view> args, reply_handler done);
  std::future<reply> async_command(std::initializer_list<std::string_view> args);
  std::future<reply> async_command(std::span<const std::string_view> args);

  // client::eval()
  // Runs `s` with EVALSHA, and with EVAL if the server does not have it cached. Errors as for
  // command(). Thread-safe.
  reply eval(const script& s, std::initializer_list<std::string_view> keys,
             std::initializer_list<std::string_view> args);
  reply eval(const script& s, std::span<const std::string_view> keys,
             std::span<const std::string_view> args);
  void async_eval(const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args, reply_handler done);
  // For dlock's internals (Redlock): async_eval where the calling thread may write the request
  // itself and, given `polled`, read the reply with other clients' (net::polled_reads). `done`
  // must be free to run on any thread.
  void async_eval_from_caller(const script& s, std::span<const std::string_view> keys,
                              std::span<const std::string_view> args, reply_handler done,
                              net::polled_reads* polled);
  // For dlock's internals (Redlock's releases that nobody is seen to wait for): async_eval where
  // the request may wait, unwritten, for the next request on its link, which carries it in the
  // same write, or for a timer of about a millisecond (net::connection::caller::defers). `done`
  // must be free to run on any thread.
  void async_eval_deferred(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args, reply_handler done);

  // client::subscribe()
  // Listens on `channel` until the returned subscription is destroyed. `on_message` gets each
  // payload; `on_subscribed` runs when the server has confirmed the subscription and again after
  // each reconnect (messages published while disconnected are lost; re-check state then). Both
  // run on the I/O thread and must not block. Throws dlock::error(errc::invalid_argument) for an
  // empty channel name.
  subscription subscribe(const std::string& channel,
                         std::function<void(std::string_view)> on_message,
                         std::function<void()> on_subscribed = {});

  // client::get_lock()
  // A handle to the reentrant lock `name` (see dlock/mutex.hpp). Cheap; sends nothing. Throws
  // dlock::error(errc::invalid_argument) for an empty name, one over 64 KiB, or control bytes.
  mutex get_lock(std::string name);

  // client::get_fair_lock()
  // A handle to the fair lock `name` (see dlock/fair_mutex.hpp): a reentrant lock whose waiters,
  // across all clients, are served in arrival order; Redisson's RFairLock on the wire. Cheap;
  // sends nothing. Throws dlock::error(errc::invalid_argument) for a name get_lock() refuses.
  fair_mutex get_fair_lock(std::string name);

  // client::get_plain_lock()
  // A handle to the plain lock `name` (see dlock/plain_lock.hpp): the key `name` holding one
  // holder's value, as redis-py, redsync and node-redlock keep it; not reentrant. Cheap; sends
  // nothing. Throws dlock::error(errc::invalid_argument) for a name get_lock() refuses.
  plain_lock get_plain_lock(std::string name);

  // client::get_semaphore()
  // A handle to the semaphore `name` (see dlock/semaphore.hpp), Redisson's permit-expirable
  // semaphore; its first use creates it with `permits` permits when it does not exist (an
  // existing count is kept). Cheap; sends nothing. Throws dlock::error(errc::invalid_argument)
  // for a name get_lock() refuses or a negative count.
  semaphore get_semaphore(std::string name, std::int64_t permits);

  // client::get_count_down_latch()
  // A handle to the count-down latch `name` (see dlock/count_down_latch.hpp), Redisson's
  // RCountDownLatch. Cheap; sends nothing. Throws dlock::error(errc::invalid_argument) for a name
  // get_lock() refuses.
  count_down_latch get_count_down_latch(std::string name);

  // client::get_read_write_lock()
  // A handle to the read-write lock `name` (see dlock/shared_mutex.hpp), Redisson's
  // RReadWriteLock on the wire. Cheap; sends nothing. Throws dlock::error(errc::invalid_argument)
  // for a name get_lock() refuses.
  shared_mutex get_read_write_lock(std::string name);

  // client::lock_metrics(): counters of this client's locks (no I/O; thread-safe).
  dlock::lock_metrics lock_metrics() const noexcept;
  // client::routing_metrics(): the deployment found and the redirections and retries its
  // requests met (no I/O; thread-safe).
  dlock::routing_metrics routing_metrics() const noexcept;

  // client::metrics_text()
  // Every metric of this client in the Prometheus text exposition format (version 0.0.4): lock
  // counters and wait/hold-time histograms per lock type (label `type`, e.g. "reentrant"),
  // losses by reason, connection state and reconnects, routing. Names start with `dlock_`; no
  // label per lock name, so the number of series stays bounded. Serve it from your /metrics
  // handler; the table is in docs/operating.md. No I/O; thread-safe; throws only std::bad_alloc.
  std::string metrics_text() const;

  const client_options& options() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace dlock
