// src/net/connection.hpp
//
// One multiplexed link to one Redis server: "how to talk to a server". It does not know which
// server it should be (that is the topology layer's job) nor what the commands mean.
//
// Threads: any thread may call send(); everything else happens on the client's I/O thread, which
// owns the socket, the parser and the timers. Completions run on the I/O thread and must not block.
//
// Auto-pipelining: send() encodes into a shared buffer under a mutex and wakes the I/O thread only
// when no write is under way. Everything queued while a write is in flight goes out in the next
// single write, so N threads issuing commands cost about one syscall per batch, not per command.
//
// Connection states (user-visible through send()):
//
//   connecting --handshake ok--> ready --socket error / dead health check--> connecting
//       |                                 (written requests fail: connection_lost;
//       |                                  unwritten ones wait for the next connection)
//       +--refused / timeout / auth refused--> waiting_to_reconnect --backoff delay--> connecting
//                (queued requests fail with that error; a new request brings the next attempt
//                 forward to reconnect_delay_min after the last one, and waits for its outcome)
//   any state --stop()--> stopped (everything fails with client_stopped)
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "dlock/options.hpp"
#include "net/backoff.hpp"
#include "net/request_queue.hpp"
#include "net/transport.hpp"
#include "resp/codec.hpp"

namespace dlock::net {

class connection : public std::enable_shared_from_this<connection> {
 public:
  enum class mode {
    request_reply,  // each reply answers the oldest request
    push,           // pub/sub: every message goes to the push handler
  };
  // Push mode: a message (an array such as ["message", channel, payload]).
  using push_handler = std::function<void(reply message)>;
  // Called on the I/O thread with true when the link becomes ready (after every reconnect) and
  // with false when it is lost.
  using link_handler = std::function<void(bool up)>;

  // `options` must outlive the connection (the client owns both).
  connection(asio::io_context& io, const client_options& options,
             std::shared_ptr<asio::ssl::context> tls_context, mode m = mode::request_reply);
  ~connection();

  // Set before start(); run on the I/O thread.
  void set_push_handler(push_handler h) { on_push_ = std::move(h); }
  void set_link_handler(link_handler h) { on_link_ = std::move(h); }
  // Called on the I/O thread when an attempt to connect failed (every address), just before the
  // requests queued for it fail with its error.
  void set_attempt_failed_handler(std::function<void()> h) { on_attempt_failed_ = std::move(h); }
  // Lua sources to SCRIPT LOAD in every handshake; they must outlive the connection.
  void set_preload_scripts(std::vector<std::string_view> sources) {
    preload_scripts_ = std::move(sources);
  }
  // One more command in every handshake, whose reply (an error too) goes to `on_reply` on the
  // I/O thread before the link is ready and before any queued request is written. The topology
  // asks here what kind of deployment the server belongs to, or whether it is a master. A
  // non-empty return refuses the server: the attempt fails (errc::connect_failed, that text).
  using probe_handler = std::function<std::string(const reply& r)>;
  void set_handshake_probe(std::vector<std::string> args, probe_handler on_reply) {
    probe_args_ = std::move(args);
    on_probe_ = std::move(on_reply);
  }
  // Other addresses of the same deployment (each a copy of the options with its host and port).
  // When an attempt fails, the next address is tried at once; queued requests fail, and backoff
  // applies, only when every address failed in a row.
  void set_alternatives(std::vector<std::shared_ptr<const client_options>> alternatives) {
    alternatives_ = std::move(alternatives);
  }
  // Where to connect, asked again before every attempt (Redis Sentinel: "which server is the
  // master now?"). The provider runs on the I/O thread and calls back there, once, with the
  // address (options aimed at it) or an error, which fails the attempt like a refused connect.
  using address_callback = std::function<void(std::error_code ec, std::string detail,
                                              std::shared_ptr<const client_options> address)>;
  using address_provider = std::function<void(address_callback done)>;
  void set_address_provider(address_provider provider) { provider_ = std::move(provider); }

  // Begins connecting. Call once.
  void start();

  // Closes the link for good: every queued request completes with errc::client_stopped. Safe from
  // any thread, idempotent; it takes effect on the I/O thread.
  void stop();

  // Queues one command. `done` runs exactly once, on the I/O thread (or on the calling thread
  // when the connection is stopped).
  // `urgent`: queue it ahead of every command not yet written (see request_queue).
  void send(std::span<const std::string_view> args, completion done,
            std::chrono::milliseconds timeout, bool urgent = false);

  // Queues ASKING and then `args`, next to each other in the stream (a Redis Cluster ASK
  // redirection: the target node serves the importing slot to the one command after ASKING).
  // `done` gets the reply to `args`.
  void send_asking(std::span<const std::string_view> args, completion done,
                   std::chrono::milliseconds timeout);

  // Drops the link and connects again (the address may have changed: a failover). Requests not yet
  // written wait for the new link; those written fail with errc::connection_lost. Thread-safe.
  void reconnect(std::string reason);

  // Push mode: queues a command whose answers arrive as push messages. Dropped if the link is
  // lost before it is written; the link handler is told, so the caller can send again.
  void send_unmatched(std::span<const std::string_view> args);

  const client_options& options() const noexcept { return options_; }
  // The address this connection uses now (or tries next): options() or an alternative.
  const client_options& current_address() const noexcept;
  std::string endpoint() const;

 private:
  // Where send() and send_asking() put a request in the queue.
  enum class placement { in_order, urgent, after_asking };
  void enqueue(std::span<const std::string_view> args, completion done,
               std::chrono::milliseconds timeout, placement where);

  enum class state { connecting, ready, waiting_to_reconnect, stopped };

  // All on the I/O thread.
  void connect();
  void connect_to(std::uint64_t generation);  // after the address is known
  void connect_soon();                        // a request arrived while waiting to reconnect
  std::chrono::milliseconds next_reconnect_delay();
  void schedule_reconnect(std::chrono::milliseconds delay);
  void on_transport_connected(std::uint64_t generation);
  void on_handshake_reply(const reply& r);
  void on_ready();
  void on_connect_failed(std::error_code ec, const std::string& detail);
  void on_link_error(std::error_code ec, const std::string& detail);
  void read();
  void on_read(std::size_t n);
  void write();
  void arm_timeout_timer();
  void on_timeout_timer();
  void arm_health_timer();
  void on_health_tick();
  void do_stop();

  asio::io_context& io_;
  const client_options& options_;
  std::shared_ptr<asio::ssl::context> tls_context_;
  const mode mode_;
  push_handler on_push_;
  link_handler on_link_;
  std::function<void()> on_attempt_failed_;
  std::vector<std::string_view> preload_scripts_;
  std::vector<std::string> probe_args_;
  probe_handler on_probe_;
  std::vector<std::shared_ptr<const client_options>> alternatives_;
  address_provider provider_;
  std::shared_ptr<const client_options> provided_;  // the provider's last answer (I/O thread)
  bool resolving_ = false;                          // the provider is being asked

  // Shared with user threads, guarded by mutex_.
  std::mutex mutex_;
  state state_ = state::connecting;
  request_queue queue_;
  bool write_scheduled_ = false;  // the I/O thread will write, or is writing, the queue
  clock::time_point armed_deadline_ = clock::time_point::max();
  std::string last_failure_;  // why the last attempt failed; empty once a link is ready

  // I/O thread only.
  std::uint64_t generation_ = 0;  // bumps on every new link; stale callbacks compare and leave
  std::atomic<std::size_t> address_index_{0};  // 0: options_; i: alternatives_[i - 1]
  std::size_t failures_in_a_row_ = 0;          // attempts failed since the last ready link
  bool connecting_ = false;                    // an attempt is under way
  clock::time_point last_attempt_{};           // when the last attempt began
  std::shared_ptr<transport> transport_;
  resp::parser parser_;
  std::vector<char> read_buffer_;
  std::size_t read_filled_ = 0;
  std::string write_buffer_;  // owned by the write in flight while writing_
  bool writing_ = false;
  std::size_t handshake_remaining_ = 0;
  enum class handshake_step { auth, select, probe, optional };
  std::vector<handshake_step> handshake_steps_;
  std::error_code handshake_error_;
  std::string probe_refusal_;
  std::string handshake_error_detail_;
  asio::steady_timer connect_timer_;
  asio::steady_timer reconnect_timer_;
  asio::steady_timer timeout_timer_;
  asio::steady_timer health_timer_;
  bool received_since_tick_ = false;
  bool ping_outstanding_ = false;
  backoff backoff_;
  std::minstd_rand jitter_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace dlock::net
