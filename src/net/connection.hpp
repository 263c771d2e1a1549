// src/net/connection.hpp
//
// One multiplexed link to one Redis server: "how to talk to a server". It does not know which
// server it should be (that is the topology layer's job) nor what the commands mean.
//
// Threads: any thread may call send(); everything else happens on the client's I/O thread, which
// owns the socket and the timers, and reads unless a caller does (below). Completions run on the
// I/O thread (some on the caller's, see caller) and must not block.
//
// Auto-pipelining: send() encodes into a shared buffer under a mutex and wakes the I/O thread only
// when no write is under way. Everything queued while a write is in flight goes out in the next
// single write, so N threads issuing commands cost about one syscall per batch, not per command.
//
// The caller's own I/O (plain TCP and unix sockets, request-reply mode). Handing a request to the
// I/O thread and the reply back costs two thread wake-ups, each dearer than a loopback round trip
// on a small VM. So a caller that says it will block anyway (caller::waits) writes its request
// itself when no write is under way and nothing waits to be written, and then, if no other
// thread is reading, reads the replies itself until its own arrives (leader/follower): replies of
// earlier requests are matched in order on its thread, their completions handed to the I/O
// thread (or run there and then when they may run on any thread). A caller that does not wait
// (caller::writes, the lock releases) may write its request itself the same way. Busy links keep
// the I/O thread's batching: the shortcut is taken only when the link is free. Two roles, guarded
// by the mutex, keep the byte stream in order: the writer (write_scheduled_ or caller_writing_)
// and the reader (reader_). The I/O thread reads plain sockets by waiting for readability and
// then reading in its own system calls, so that at most one thread ever reads. A caller uses a
// duplicate of the socket's descriptor, which a teardown shuts down (waking the caller) but never
// closes under it.
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

class polled_reads;

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

  // What the calling thread of send() does while its request is under way.
  enum class caller {
    leaves,  // returns at once; `done` runs on the I/O thread
    writes,  // returns at once, but may write the request itself first; `done` may run on any
             // thread that reads replies (it must not need the I/O thread)
    waits,   // blocks until `done` has run anyway: may write the request and read the replies
             // itself before send() returns; `done` may run on any thread
    polls,   // as waits, but reads later, polling this link with others (see polled_reads);
             // `done` may run on any thread
    defers,  // returns at once; the request waits, unwritten, for the next request written on
             // this link (which carries it in the same write) or for a short timer (see
             // deferred_); otherwise as writes. For a release that nobody waits for: it then
             // costs the next lock() no round trip and the server no wake-up of its own.
  };

  // Queues one command. `done` runs exactly once, on the I/O thread (or on the calling thread
  // when the connection is stopped; for caller::writes and caller::waits see there).
  // `urgent`: queue it ahead of every command not yet written (see request_queue).
  // caller::polls needs `polled`, where the link is added when the caller took it.
  void send(std::span<const std::string_view> args, completion done,
            std::chrono::milliseconds timeout, bool urgent = false, caller c = caller::leaves,
            polled_reads* polled = nullptr);

  // Queues ASKING and then `args`, next to each other in the stream (a Redis Cluster ASK
  // redirection: the target node serves the importing slot to the one command after ASKING).
  // `done` gets the reply to `args`.
  void send_asking(std::span<const std::string_view> args, completion done,
                   std::chrono::milliseconds timeout);

  // Drops the link and connects again (the address may have changed: a failover). Requests not yet
  // written wait for the new link; those written fail with errc::connection_lost. Thread-safe.
  void reconnect(std::string reason);

  // Push mode: queues a command whose answers arrive as push messages. Dropped if the link is
  // lost before it is written (the link handler is told, so the caller can send again); queued
  // while no link is up, it goes out first on the next one, before the link handler runs.
  void send_unmatched(std::span<const std::string_view> args);

  // How often the read-soon timer was armed (a system call each): for tests and diagnostics.
  std::uint64_t soon_timer_arms() const noexcept {
    return soon_timer_arms_.load(std::memory_order_relaxed);
  }

  // How often one thread began writing to the socket while another's write was under way (the
  // writer role exists so that this never happens: the byte stream must follow the queue's
  // order): for tests.
  std::uint64_t overlapping_writes() const noexcept {
    return overlapping_writes_.load(std::memory_order_relaxed);
  }

  const client_options& options() const noexcept { return options_; }
  // The address this connection uses now (or tries next): options() or an alternative.
  const client_options& current_address() const noexcept;
  std::string endpoint() const;

 private:
  // Where send() and send_asking() put a request in the queue.
  enum class placement { in_order, urgent, after_asking };
  void enqueue(std::span<const std::string_view> args, completion done,
               std::chrono::milliseconds timeout, placement where, caller c = caller::leaves,
               polled_reads* polled = nullptr);

  // The caller's own I/O (see the top of this file).
  // A duplicate of a ready link's descriptor: shut down (never closed) by a teardown while a
  // caller may use it; closed when the last user lets go.
  struct shared_socket {
    explicit shared_socket(int descriptor) noexcept : fd(descriptor) {}
    shared_socket(const shared_socket&) = delete;
    shared_socket& operator=(const shared_socket&) = delete;
    ~shared_socket();
    const int fd;
  };
  // What a caller claimed in enqueue(): the writer role, and the reader role if `reads`.
  struct caller_turn {
    std::shared_ptr<shared_socket> socket;
    std::string bytes;              // its request, encoded
    std::uint64_t epoch = 0;        // link_epoch_ when claimed
    std::size_t replies_ahead = 0;  // written requests whose replies come before its own
    clock::time_point deadline;
    bool reads = false;
    bool peer_closed = false;  // not claimed: the idle link was closed by the server
  };
  enum class reader { none, io_thread, caller };
  // Claims the roles for a request (under mutex_); false: the I/O thread does the work.
  bool claim_caller_turn(caller c, placement where, caller_turn& turn);
  // Writes turn.bytes, then reads until the request's reply has been handled (or gives up: the
  // I/O thread then finishes the request). Calling thread, outside mutex_.
  void take_caller_turn(caller_turn& turn);
  // take_caller_turn's steps, which polled_reads takes for several links at once.
  struct turn_reading {
    bool handing_over = false;  // a completion of this turn went to handed_over_
    bool wrote = false;
    bool own_done = false;  // the turn's own reply was handled
    bool stale = false;     // the link was torn down meanwhile
    bool left = false;      // ended before its reply came: the I/O thread finishes it
    std::string failure;
    std::string end_of_stream;
  };
  void write_turn(caller_turn& turn, turn_reading& r);
  // Handles the replies buffered so far; true once reading is over (own reply, failure, stale).
  bool handle_buffered(caller_turn& turn, turn_reading& r);
  // Reads what the socket holds without blocking.
  void read_turn(caller_turn& turn, turn_reading& r);
  // Hands the roles, and what was read for others, back to the I/O thread.
  void end_turn(caller_turn& turn, turn_reading& r);
  friend class polled_reads;
  // Parses read_buffer_ into `out`; false (and `failure`) for a malformed stream. Reader role.
  bool parse_buffered(std::vector<reply>& out, std::string& failure);
  // The reader role is taken: the parser and buffer start afresh on a new link (under mutex_).
  void begin_reading_locked();
  // The link's descriptor is gone for callers: shut down, so a caller blocked on it wakes.
  void drop_shared_socket_locked();
  // I/O thread, parked (under mutex_): the socket leaves the reactor while no operation of ours
  // waits on it, so that the replies callers read do not wake the I/O thread (see io_parked_).
  void leave_reactor_if_idle();
  // I/O thread: the socket is readable, or a caller handed the reader role back.
  void read_available();
  // I/O thread: whatever read_available() found (n bytes more in read_buffer_, already counted).
  void on_bytes(std::uint64_t generation);

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
  // The caller's own I/O (see the top of this file).
  const bool callers_may_do_io_;   // request-reply mode, no TLS
  bool caller_writing_ = false;    // a caller holds the writer role
  reader reader_ = reader::none;   // who holds the reader role
  bool io_wants_to_read_ = false;  // the I/O thread found the reader role taken
  // The I/O thread keeps no read wait armed: it found a caller reading, and callers read while
  // they alone use the link (a wait would wake the I/O thread for every reply they read). It
  // arms again when it writes, or when a caller leaves replies unread. A server that closes the
  // link is still noticed at once (idle_watch_), and a caller peeks before it writes. While
  // parked, the socket is out of the reactor too (transport::leave_reactor): Asio's epoll holds a
  // socket for every event, so each reply a caller read woke the I/O thread anyway (two
  // context switches per cycle of a lock()-unlock() loop).
  bool io_parked_ = false;
  bool timer_stale_ = false;  // armed_deadline_ moved without waking the I/O thread
  // A caller that writes and does not read (a release) leaves its reply to the next caller that
  // reads, or to the I/O thread woken by this timer (a timerfd in idle_watch_; -1 if none) a
  // little later: waking the I/O thread at once would cost every unlock a thread wake-up, and
  // the next lock() of the same thread usually reads the reply anyway. Set by any thread.
  const int read_soon_timer_;
  bool read_soon_watched_ = false;  // idle_watch_ holds read_soon_timer_ for the ready link
  // The unwritten requests are deferred ones (caller::defers) that no writer was asked to write:
  // the next caller that takes the link writes them with its own, and the read-soon timer, armed
  // for flush_soon_delay, has the I/O thread write them otherwise (flush_deferred).
  bool deferred_ = false;
  clock::time_point deferred_at_{};  // when deferred_ became true
  // A caller left replies unread since then (see read_soon_timer_); cleared by the next reader.
  bool unread_left_ = false;
  clock::time_point unread_left_at_{};
  // When read_soon_timer_ expires: armed for the earliest of the two dues above and not moved
  // for later ones (the I/O thread arms it again when it expires early); min() if not armed.
  clock::time_point soon_timer_due_ = clock::time_point::min();
  // Under mutex_: has the timer expire by `due`, arming it unless it expires in time already;
  // false if it cannot be armed. Armed under the mutex (a system call, about once per delay, not
  // per request) so that the timer always holds soon_timer_due_: two threads arming it outside
  // the mutex could leave it armed for the earlier due, which expired, and the later one lost.
  bool arm_soon_timer_locked(clock::time_point now, clock::time_point due);
  std::atomic<std::uint64_t> soon_timer_arms_{0};
  // Writes to the socket under way (a caller's write_all, the I/O thread's async_write until its
  // completion runs) and how often a second one began (see overlapping_writes()).
  std::atomic<int> writes_under_way_{0};
  std::atomic<std::uint64_t> overlapping_writes_{0};
  void write_begins() noexcept;
  void write_ends() noexcept { writes_under_way_.fetch_sub(1, std::memory_order_acq_rel); }
  clock::time_point caller_read_at_{};  // when a caller last read replies (see peek_after_quiet)
  // A caller read replies since the I/O thread last held the reader role (under mutex_): a
  // readiness wake that then finds nothing due came late, for bytes a caller read (see read()).
  bool caller_read_since_io_ = false;
  // Whether a request may wait unwritten now (under mutex_).
  bool may_defer_locked(placement where) const;
  // I/O thread: writes the deferred requests if nobody has.
  void flush_deferred();
  std::uint64_t link_epoch_ = 0;                  // bumps when a link is torn down
  std::shared_ptr<shared_socket> shared_socket_;  // while ready
  finished_list handed_over_;    // read by a caller, to run on the I/O thread, in order
  bool handed_running_ = false;  // the timeout timer runs completions taken from handed_over_
  std::string reader_failure_;   // a caller found the stream broken: what (for the I/O thread)

  // I/O thread only.
  std::uint64_t generation_ = 0;  // bumps on every new link; stale callbacks compare and leave
  std::atomic<std::size_t> address_index_{0};  // 0: options_; i: alternatives_[i - 1]
  std::size_t failures_in_a_row_ = 0;          // attempts failed since the last ready link
  bool connecting_ = false;                    // an attempt is under way
  clock::time_point last_attempt_{};           // when the last attempt began
  std::shared_ptr<transport> transport_;
  // The reader role's (the I/O thread's when callers never read).
  resp::parser parser_;
  std::vector<char> read_buffer_;
  std::size_t read_filled_ = 0;
  std::uint64_t reader_epoch_ = 0;  // the link_epoch_ parser_ and read_buffer_ belong to
  bool link_readable_ = false;      // I/O thread: transport_ is connected (read_available)
  // I/O thread: an epoll set holding the link's hang-up (EPOLLRDHUP) and read_soon_timer_,
  // readable once the server closes the link or the timer expires. It tells a parked I/O thread
  // (io_parked_) at once, as an armed read would; replies do not wake it.
  std::unique_ptr<asio::posix::stream_descriptor> idle_watch_;
  void watch_idle_link();
  void on_idle_watch(std::error_code ec, std::uint64_t generation);
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
  std::atomic<bool> received_since_tick_{false};
  bool ping_outstanding_ = false;
  backoff backoff_;
  std::minstd_rand jitter_;
  std::atomic<bool> stop_requested_{false};
};

// Requests on several links whose replies the calling thread reads itself, polling the links'
// sockets together: Redlock's attempt on its N masters costs one round trip and no hand-off
// between threads. connection::send(..., caller::polls, &reads) adds its link here when the
// caller took the link's turn (see caller::waits); otherwise the request takes the I/O thread's
// path and `done` runs where replies are read (the I/O thread, or a caller reading that link).
// One calling thread; not copyable.
class polled_reads {
 public:
  polled_reads() = default;
  polled_reads(const polled_reads&) = delete;
  polled_reads& operator=(const polled_reads&) = delete;
  ~polled_reads() { finish(); }

  // Reads and handles replies as they arrive (their completions run on this thread) until
  // `enough()`, checked after each batch, holds, every link's own reply was handled, or
  // `deadline` passes. Replies already readable then are still handled.
  void read_until(clock::time_point deadline, const std::function<bool()>& enough);
  // Hands every link back to its I/O thread, which finishes what is still due. Idempotent.
  void finish() noexcept;
  // The links whose turn the caller took (it wrote their requests).
  std::size_t size() const noexcept { return entries_.size(); }

  // `done`, which also wakes read_until() when it runs on another thread than the caller's:
  // `enough()` may hold through it. connection::send wraps what it is given; a sender whose
  // request may complete through another one (the router's EVAL after NOSCRIPT, a request that
  // took no link's turn) wraps the completion it owes the caller as well. Calling thread.
  completion signalling(completion done);

 private:
  friend class connection;
  struct entry;
  // Wakes read_until() when a reply of its requests completes on another thread (the I/O thread,
  // or another caller reading that link).
  struct elsewhere_signal;

  std::vector<std::shared_ptr<entry>> entries_;
  std::shared_ptr<elsewhere_signal> signal_;  // made by the first request
};

}  // namespace dlock::net
