#include "net/connection.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "dlock/error.hpp"

namespace dlock::net {
namespace {

constexpr std::size_t initial_read_buffer = 16 * 1024;

// A caller takes the link (see connection.hpp) only when at most this many written requests'
// replies are due before its own: one thread's release ahead of its next lock, and a Redlock
// attempt's reply that came after the majority, not the traffic of many threads, whose commands
// the I/O thread batches better. Deferred requests, which the caller writes, come on top. With
// one, a Redlock loop fell to the I/O thread on a quarter of its links (a reply left unread and
// a release: the next attempt, and then every request behind it, went through the I/O thread).
constexpr std::size_t max_replies_ahead = 2;

// How long a reply a caller left unread (its release's) may wait for the next caller to read it
// before the I/O thread does: short against any request timeout, long against a lock + unlock
// cycle, so that a thread that locks again at once is the one that reads it.
constexpr auto read_soon_delay = std::chrono::microseconds(1000);

// A caller peeks at a parked link before it writes (has the server closed it meanwhile?) only
// when no caller read from it for this long: a server that closed the link within this window
// (no restart is that fast) fails the request with connection_lost, as if it had died under it.
// A lock()-unlock() loop saves a system call per cycle.
constexpr auto peek_after_quiet = std::chrono::milliseconds(10);

// How long a deferred request (caller::defers, a release) may wait for the next request to carry
// it before the I/O thread writes it: the read-soon timer's delay, so that a loop re-arms one
// timer per cycle and it never fires. Long against the gap between an unlock() and the next
// lock() of a loop, short against a lease; a release that others are seen to wait for is not
// deferred (lock_engine::release_timing). Shorter delays measured worse on 2 vCPUs (200 and
// 500 us: the timer expired under the loop, waking the I/O thread up to 0.9 times per cycle).
constexpr auto flush_soon_delay = read_soon_delay;

// Arms `timer` (a timerfd on CLOCK_MONOTONIC, steady_clock's clock) to expire once at `when`;
// false if it cannot. An absolute time: of two threads arming it, the later system call wins,
// and an earlier expiry than the work needs only has the I/O thread arm it again.
bool arm_at(int timer, clock::time_point when) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
  itimerspec at{};
  at.it_value.tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  at.it_value.tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  if (at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0) at.it_value.tv_nsec = 1;  // 0 disarms
  return ::timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, nullptr) == 0;
}

int make_read_soon_timer(bool wanted) {
  return wanted ? ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Milliseconds from now to `deadline` for poll(), rounded up; 0 once it has passed.
int poll_timeout(clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

// Reads what `fd` holds without blocking, growing `buffer` as needed. Returns the bytes read;
// `failure` says why the stream ended (the server closed it, or a socket error), empty otherwise.
// `to_eagain`: reads until the socket says it is empty (the I/O thread, whose edge-triggered
// wait would not hear again of an end of stream that came with the last bytes). Otherwise a read
// that leaves room in the buffer took everything there was, and saves the call that hears EAGAIN
// (a caller: the idle watch hears a hang-up, and bytes that come later make the socket readable).
std::size_t read_without_blocking(int fd, std::vector<char>& buffer, std::size_t& filled,
                                  std::string& failure, bool to_eagain) {
  std::size_t got = 0;
  for (;;) {
    if (filled == buffer.size()) buffer.resize(buffer.size() * 2);
    const std::size_t room = buffer.size() - filled;
    const ssize_t n = ::recv(fd, buffer.data() + filled, room, MSG_DONTWAIT);
    if (n > 0) {
      filled += static_cast<std::size_t>(n);
      got += static_cast<std::size_t>(n);
      if (!to_eagain && static_cast<std::size_t>(n) < room) return got;
      continue;
    }
    if (n == 0) {
      failure = "server closed the connection";
    } else if (errno == EINTR) {
      continue;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      failure = std::strerror(errno);
    }
    return got;
  }
}

// Writes all of `bytes` to `fd` by `deadline`; false, with `failure`, otherwise (the stream may
// then hold part of them).
bool write_all(int fd, std::string_view bytes, clock::time_point deadline, std::string& failure) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int timeout = poll_timeout(deadline);
      if (timeout == 0 || (::poll(&p, 1, timeout) == 0 && clock::now() >= deadline)) {
        failure = "write timed out";
        return false;
      }
      continue;
    }
    failure = std::string("write failed: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

// One link of a polled_reads: its turn, and how far its reading got.
struct polled_reads::entry {
  std::shared_ptr<connection> link;
  connection::caller_turn turn;
  connection::turn_reading reading;
  bool over = false;  // nothing more to read: its own reply was handled, or it cannot come here
  bool ended = false;
};

namespace {
// The calling thread's eventfd for polled_reads::elsewhere_signal: made once per thread, not per
// attempt (two system calls a Redlock acquisition saved), closed when the thread ends. A plain
// int, so that a Redlock acquisition in another thread_local's destructor, run after the closer,
// finds -2 ("closed") and not a number the process may have reused.
thread_local int calling_thread_eventfd = -1;  // -1: none yet; -2: closed at thread exit
struct eventfd_closer {
  eventfd_closer() = default;
  eventfd_closer(const eventfd_closer&) = delete;
  eventfd_closer& operator=(const eventfd_closer&) = delete;
  ~eventfd_closer() {
    if (calling_thread_eventfd >= 0) ::close(calling_thread_eventfd);
    calling_thread_eventfd = -2;
  }
};
thread_local eventfd_closer close_eventfd_at_thread_exit;

// -1 when there is none (read_until() then looks again every millisecond).
int calling_thread_event() noexcept {
  if (calling_thread_eventfd == -1) {
    (void)&close_eventfd_at_thread_exit;  // constructed now: it closes the descriptor
    calling_thread_eventfd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  return calling_thread_eventfd < 0 ? -1 : calling_thread_eventfd;
}
}  // namespace

// Armed only while the calling thread polls in read_until(): a reply completed elsewhere then
// writes the calling thread's eventfd; at any other time (the caller waits for the I/O thread's
// completions in another way, or is gone) it writes nothing. The mutex keeps a completion from
// writing to a descriptor its thread has closed since.
struct polled_reads::elsewhere_signal {
  void notify() noexcept {
    std::lock_guard lock(mutex);
    if (armed_fd < 0) return;
    const std::uint64_t one = 1;
    (void)!::write(armed_fd, &one, sizeof one);
  }
  // The calling thread's eventfd, armed; -1 if it has none.
  int arm() noexcept {
    const int fd = calling_thread_event();
    std::lock_guard lock(mutex);
    armed_fd = fd;
    return fd;
  }
  void disarm() noexcept {
    std::lock_guard lock(mutex);
    armed_fd = -1;
  }
  static void drain(int fd) noexcept {
    std::uint64_t count = 0;
    (void)!::read(fd, &count, sizeof count);
  }

  std::mutex mutex;
  int armed_fd = -1;
  const std::thread::id caller = std::this_thread::get_id();
};

completion polled_reads::signalling(completion done) {
  if (!signal_) signal_ = std::make_shared<elsewhere_signal>();
  return [signal = signal_, done = std::move(done)](std::error_code ec, reply r) {
    done(ec, std::move(r));
    if (std::this_thread::get_id() != signal->caller) signal->notify();
  };
}

connection::shared_socket::~shared_socket() {
  ::close(fd);
}

connection::connection(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context, mode m)
    : io_(io),
      options_(options),
      tls_context_(std::move(tls_context)),
      mode_(m),
      callers_may_do_io_(m == mode::request_reply && !options.tls.enabled),
      read_soon_timer_(make_read_soon_timer(callers_may_do_io_)),
      read_buffer_(initial_read_buffer),
      connect_timer_(io),
      reconnect_timer_(io),
      timeout_timer_(io),
      health_timer_(io),
      backoff_(options.reconnect_delay_min, options.reconnect_delay_max),
      jitter_(std::random_device{}()) {}

connection::~connection() {
  if (read_soon_timer_ >= 0) ::close(read_soon_timer_);
}

void connection::start() {
  asio::post(io_, [self = shared_from_this()] { self->connect(); });
}

void connection::stop() {
  if (stop_requested_.exchange(true)) return;
  asio::post(io_, [self = shared_from_this()] { self->do_stop(); });
}

void connection::do_stop() {
  ++generation_;
  if (transport_) transport_->close();
  link_readable_ = false;
  idle_watch_.reset();
  connect_timer_.cancel();
  reconnect_timer_.cancel();
  timeout_timer_.cancel();
  health_timer_.cancel();
  finished_list failed;
  {
    std::lock_guard lock(mutex_);
    state_ = state::stopped;
    drop_shared_socket_locked();
    failed.swap(handed_over_);  // read before the stop: their replies, in order
    queue_.fail_all(make_error_code(errc::client_stopped), "the client was stopped", failed);
  }
  for (auto& f : failed)
    f.run();
}

void connection::drop_shared_socket_locked() {
  ++link_epoch_;
  reader_failure_.clear();
  // The next link starts with the I/O thread's read armed (on_transport_connected).
  io_parked_ = false;
  io_wants_to_read_ = false;
  read_soon_watched_ = false;
  deferred_ = false;  // unwritten requests wait for the next link, which writes them at once
  unread_left_ = false;
  if (!shared_socket_) return;
  ::shutdown(shared_socket_->fd, SHUT_RDWR);
  shared_socket_.reset();
}

void connection::send(std::span<const std::string_view> args, completion done,
                      std::chrono::milliseconds timeout, bool urgent, caller c,
                      polled_reads* polled) {
  if (c == caller::polls && polled == nullptr) c = caller::waits;
  enqueue(args, std::move(done), timeout, urgent ? placement::urgent : placement::in_order, c,
          polled);
}

void connection::send_asking(std::span<const std::string_view> args, completion done,
                             std::chrono::milliseconds timeout) {
  enqueue(args, std::move(done), timeout, placement::after_asking);
}

void connection::enqueue(std::span<const std::string_view> args, completion done,
                         std::chrono::milliseconds timeout, placement where, caller c,
                         polled_reads* polled) {
  static constexpr std::string_view asking[] = {"ASKING"};
  const auto now = clock::now();
  const auto deadline = now + timeout;
  bool kick_writer = false;
  bool rearm_timer = false;
  bool connect_now = false;
  bool look_at_link = false;  // the idle link was closed by the server (see claim_caller_turn)
  completion refused;         // the completion of a request sent to a stopped connection
  caller_turn turn;
  bool took_turn = false;
  bool flush_soon = false;  // deferred: the read-soon timer writes it unless a caller does first
  bool deferred_here = false;
  std::shared_ptr<polled_reads::entry> polled_entry;
  if (c == caller::polls) {
    // Allocated before the turn is claimed: nothing may throw between the claim and the entry
    // that gives the turn back.
    polled_entry = std::make_shared<polled_reads::entry>();
    polled->entries_.reserve(polled->entries_.size() + 1);
    done = polled->signalling(std::move(done));
  }
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) {
      refused = std::move(done);
    } else if (c == caller::defers && may_defer_locked(where)) {
      queue_.push(args, std::move(done), deadline, true);
      if (!deferred_) deferred_at_ = now;
      deferred_ = true;
      deferred_here = true;
      flush_soon = !arm_soon_timer_locked(now, deferred_at_ + flush_soon_delay);
      if (deadline < armed_deadline_) {
        // Armed by the I/O thread when it next wakes (the flush timer wakes it at the latest).
        armed_deadline_ = deadline;
        timer_stale_ = true;
      }
    } else if (claim_caller_turn(c == caller::defers ? caller::writes : c, where, turn)) {
      turn.deadline = deadline;
      queue_.push(args, std::move(done), deadline, true);
      queue_.take_unwritten(turn.bytes);  // deferred requests first, then this one
      // The flush timer stays armed: disarming it costs every cycle of a loop a system call,
      // and the next deferral moves it on anyway; it fires for nothing only after a pause.
      deferred_ = false;
      if (turn.reads) turn.replies_ahead = queue_.written() - 1;
      took_turn = true;
      if (deadline < armed_deadline_) {
        // Armed by the I/O thread when it next wakes; the caller watches its own deadline.
        armed_deadline_ = deadline;
        timer_stale_ = true;
      }
    } else {
      look_at_link = turn.peer_closed;
      if (state_ == state::waiting_to_reconnect) {
        // Someone needs the server now: the request waits for a fresh attempt, made at once
        // or when reconnect_delay_min has passed since the last one, instead of failing with
        // an error that may be stale (the server may be back).
        state_ = state::connecting;
        connect_now = true;
      }
      switch (where) {
        case placement::in_order:
          queue_.push(args, std::move(done), deadline, c != caller::leaves);
          break;
        case placement::urgent:
          queue_.push_front_unwritten(args, std::move(done), deadline);
          break;
        case placement::after_asking:
          queue_.push(asking, nullptr, deadline);
          queue_.push(args, std::move(done), deadline);
          break;
      }
      if (deadline < armed_deadline_ || timer_stale_) {
        armed_deadline_ = std::min(armed_deadline_, deadline);
        rearm_timer = true;
      }
      if (state_ == state::ready && !write_scheduled_) {
        write_scheduled_ = true;
        kick_writer = true;
      }
    }
  }
  if (refused) {
    refused(make_error_code(errc::client_stopped), reply::make_error("the client was stopped"));
    return;
  }
  if (flush_soon) {  // the timer could not be armed
    asio::post(io_, [self = shared_from_this()] { self->flush_deferred(); });
  }
  if (deferred_here) return;
  if (took_turn && c == caller::polls) {
    // Written now; read with the other links' replies (polled_reads::read_until). A link this
    // caller will not read (a failed write, or only the writer role) goes back at once.
    auto& e = polled_entry;
    e->link = shared_from_this();
    e->turn = std::move(turn);
    write_turn(e->turn, e->reading);
    if (!e->reading.wrote || !e->turn.reads) {
      e->over = true;
      e->ended = true;
      end_turn(e->turn, e->reading);
    }
    polled->entries_.push_back(std::move(e));
    return;
  }
  if (took_turn) return take_caller_turn(turn);
  if (kick_writer || rearm_timer || connect_now || look_at_link) {
    asio::post(io_,
               [self = shared_from_this(), kick_writer, rearm_timer, connect_now, look_at_link] {
                 if (look_at_link)
                   self->read_available();  // before the write: it finds the link closed
                 if (rearm_timer) self->arm_timeout_timer();
                 if (kick_writer) self->write();
                 if (connect_now) self->connect_soon();
               });
  }
}

const client_options& connection::current_address() const noexcept {
  if (provided_) return *provided_;
  const std::size_t i = address_index_.load(std::memory_order_relaxed);
  return i == 0 || i > alternatives_.size() ? options_ : *alternatives_[i - 1];
}

std::string connection::endpoint() const {
  return current_address().endpoint();
}

void connection::reconnect(std::string reason) {
  asio::post(io_, [self = shared_from_this(), reason = std::move(reason)] {
    if (self->stop_requested_) return;
    state now;
    {
      std::lock_guard lock(self->mutex_);
      now = self->state_;
    }
    if (now == state::ready) {
      self->on_link_error(make_error_code(errc::connection_lost), reason);
    } else if (now == state::waiting_to_reconnect && !self->connecting_) {
      self->reconnect_timer_.cancel();
      self->connect();
    }
    // Connecting: the attempt under way asks where to go anew if it fails.
  });
}

void connection::send_unmatched(std::span<const std::string_view> args) {
  std::string encoded;
  resp::append_command(encoded, args);
  bool kick_writer = false;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    queue_.push_unmatched(encoded);
    if (state_ == state::ready && !write_scheduled_) {
      write_scheduled_ = true;
      kick_writer = true;
    }
  }
  if (kick_writer) asio::post(io_, [self = shared_from_this()] { self->write(); });
}

// --- connecting --------------------------------------------------------------------------------

void connection::connect() {
  if (stop_requested_) return;
  const std::uint64_t generation = ++generation_;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    state_ = state::connecting;
  }
  connecting_ = true;
  last_attempt_ = clock::now();
  link_readable_ = false;
  if (callers_may_do_io_) {
    // A caller of the old link may still hold the reader role: the next reader starts afresh.
    std::lock_guard lock(mutex_);
    ++link_epoch_;
    io_parked_ = false;
    io_wants_to_read_ = false;
    caller_read_since_io_ = false;
  } else {
    parser_.reset();
    read_filled_ = 0;
  }
  write_buffer_.clear();
  writing_ = false;
  received_since_tick_ = false;
  ping_outstanding_ = false;

  // connect_timeout covers finding the address too (a provider may ask other servers).
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), generation](std::error_code ec) {
    // Not connecting any more: on_ready's cancel() came too late for an expiry that the same
    // reactor pass queued behind the handshake's last reply. Failing the ready link then would
    // keep its written requests for the next link (their replies would cross) or call them
    // never sent.
    if (ec || generation != self->generation_ || !self->connecting_) return;
    self->on_connect_failed(
        make_error_code(errc::connect_timeout),
        "no connection within " + std::to_string(self->options_.connect_timeout.count()) + " ms");
  });
  if (provider_) {
    resolving_ = true;
    provider_([self = shared_from_this(), generation](std::error_code ec, const std::string& detail,
                                                      std::shared_ptr<const client_options> to) {
      if (generation != self->generation_) return;
      if (ec) return self->on_connect_failed(ec, detail);
      self->resolving_ = false;
      self->provided_ = std::move(to);
      self->connect_to(generation);
    });
    return;
  }
  connect_to(generation);
}

void connection::connect_to(std::uint64_t generation) {
  transport_ = std::make_shared<transport>(io_, current_address(), tls_context_);
  transport_->async_connect([self = shared_from_this(), generation, t = transport_](
                                std::error_code ec, const std::string& detail) {
    if (generation != self->generation_) return;
    if (ec) return self->on_connect_failed(ec, detail);
    self->on_transport_connected(generation);
  });
}

void connection::connect_soon() {
  if (connecting_ || stop_requested_) return;
  reconnect_timer_.expires_at(last_attempt_ + options_.reconnect_delay_min);
  reconnect_timer_.async_wait(
      [self = shared_from_this(), generation = generation_](std::error_code e) {
        if (!e && generation == self->generation_ && !self->connecting_) self->connect();
      });
}

void connection::on_transport_connected(std::uint64_t generation) {
  // The handshake, pipelined before any user command: AUTH, SELECT, CLIENT SETNAME, and SCRIPT
  // LOAD of the scripts this connection will run, so that EVALSHA finds them even on a server
  // that just restarted (an EVAL fallback would be ordered after later commands).
  std::string bytes;
  handshake_steps_.clear();
  if (!options_.password.empty()) {
    if (options_.username.empty()) {
      resp::append_command(bytes, {"AUTH", options_.password});
    } else {
      resp::append_command(bytes, {"AUTH", options_.username, options_.password});
    }
    handshake_steps_.push_back(handshake_step::auth);
  }
  if (options_.database != 0) {
    const std::string db = std::to_string(options_.database);
    resp::append_command(bytes, {"SELECT", db});
    handshake_steps_.push_back(handshake_step::select);
  }
  // Always at least one command, so a server that wants AUTH we lack says NOAUTH right here.
  resp::append_command(
      bytes, {"CLIENT", "SETNAME", options_.client_name.empty() ? "dlock" : options_.client_name});
  handshake_steps_.push_back(handshake_step::optional);
  if (!probe_args_.empty()) {
    std::vector<std::string_view> probe(probe_args_.begin(), probe_args_.end());
    resp::append_command(bytes, probe);
    handshake_steps_.push_back(handshake_step::probe);
  }
  for (const std::string_view source : preload_scripts_) {
    resp::append_command(bytes, {"SCRIPT", "LOAD", source});
    handshake_steps_.push_back(handshake_step::optional);
  }
  handshake_remaining_ = handshake_steps_.size();
  handshake_error_ = {};
  handshake_error_detail_.clear();

  write_buffer_ = std::move(bytes);
  writing_ = true;
  link_readable_ = true;
  read();
  transport_->async_write(
      asio::buffer(write_buffer_),
      [self = shared_from_this(), generation, t = transport_](std::error_code ec, std::size_t) {
        if (generation != self->generation_) return;
        self->writing_ = false;
        self->write_buffer_.clear();
        if (ec) {
          return self->on_connect_failed(make_error_code(errc::connect_failed),
                                         "handshake write failed: " + ec.message());
        }
        // Replies may have beaten this completion; then on_ready() left the
        // queued requests for us.
        self->write();
      });
}

void connection::on_handshake_reply(const reply& r) {
  const handshake_step step = handshake_steps_[handshake_steps_.size() - handshake_remaining_];
  --handshake_remaining_;
  if (step == handshake_step::probe && on_probe_) {
    std::string refusal = on_probe_(r);
    if (!refusal.empty() && !handshake_error_) {
      handshake_error_ = make_error_code(errc::connect_failed);
      handshake_error_detail_ = std::move(refusal);
    }
  }
  if (r.is_error() && !handshake_error_) {
    const bool auth_problem = step == handshake_step::auth || starts_with(r.str, "NOAUTH") ||
                              starts_with(r.str, "WRONGPASS");
    // A refused SELECT also stops us: commands would otherwise land in the wrong database. A
    // refused SETNAME or SCRIPT LOAD (an ACL may forbid them) only costs a name or an EVAL.
    if (auth_problem || step == handshake_step::select) {
      handshake_error_ = make_error_code(errc::auth_failed);
      handshake_error_detail_ = r.str;
    }
  }
  if (handshake_remaining_ > 0) return;
  if (handshake_error_) return on_connect_failed(handshake_error_, handshake_error_detail_);
  on_ready();
}

void connection::on_ready() {
  connecting_ = false;
  failures_in_a_row_ = 0;
  connect_timer_.cancel();
  backoff_.reset();
  bool kick_writer = false;
  if (callers_may_do_io_) watch_idle_link();
  {
    std::lock_guard lock(mutex_);
    state_ = state::ready;
    last_failure_.clear();
    if (callers_may_do_io_) {
      const int fd = ::fcntl(transport_->native_handle(), F_DUPFD_CLOEXEC, 0);
      if (fd >= 0) shared_socket_ = std::make_shared<shared_socket>(fd);
    }
    if (queue_.has_unwritten() && !write_scheduled_) {
      write_scheduled_ = true;
      kick_writer = true;
    }
  }
  arm_health_timer();
  if (on_link_) on_link_(true);
  if (kick_writer) write();
}

void connection::watch_idle_link() {
  const int watch = ::epoll_create1(EPOLL_CLOEXEC);
  if (watch < 0) return;  // then only the health check notices a server closing an idle link
  epoll_event interest{};
  interest.events = EPOLLRDHUP;
  interest.data.fd = transport_->native_handle();
  if (::epoll_ctl(watch, EPOLL_CTL_ADD, transport_->native_handle(), &interest) != 0) {
    ::close(watch);
    return;
  }
  epoll_event timer{};
  timer.events = EPOLLIN;
  timer.data.fd = read_soon_timer_;
  const bool has_timer =
      read_soon_timer_ >= 0 && ::epoll_ctl(watch, EPOLL_CTL_ADD, read_soon_timer_, &timer) == 0;
  idle_watch_ = std::make_unique<asio::posix::stream_descriptor>(io_, watch);
  idle_watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                          [self = shared_from_this(), generation = generation_](
                              std::error_code ec) { self->on_idle_watch(ec, generation); });
  std::lock_guard lock(mutex_);
  read_soon_watched_ = has_timer;
}

void connection::on_idle_watch(std::error_code ec, std::uint64_t generation) {
  if (ec || generation != generation_ || !idle_watch_) return;
  // Armed again first: the set's readiness reaches us edge-triggered.
  idle_watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                          [self = shared_from_this(), generation](std::error_code e) {
                            self->on_idle_watch(e, generation);
                          });
  epoll_event ready[2];
  const int n = ::epoll_wait(idle_watch_->native_handle(), ready, 2, 0);
  bool hang_up = n < 0;  // unknown: look at the link
  for (int i = 0; i < n; ++i)
    hang_up = hang_up || ready[i].data.fd != read_soon_timer_;
  std::uint64_t expirations = 0;
  if (read_soon_timer_ >= 0)
    (void)::read(read_soon_timer_, &expirations, sizeof expirations);  // EAGAIN if not expired
  // The timer is armed once for many deferrals and unread replies (arming costs a system call,
  // several microseconds on a VM): it may expire before the latest of them is due. What is due
  // is done; what is not has the timer armed again, so that a loop of lock() and unlock() is not
  // disturbed once per expiry (an early read would take the reader role from its callers).
  bool read_due = hang_up;
  bool flush_due = false;
  clock::time_point next = clock::time_point::max();
  {
    const auto now = clock::now();
    std::lock_guard lock(mutex_);
    if (soon_timer_due_ <= now) soon_timer_due_ = clock::time_point::min();  // expired
    if (unread_left_) {
      const auto due = unread_left_at_ + read_soon_delay;
      if (due <= now) {
        read_due = true;
      } else {
        next = due;
      }
    }
    if (deferred_) {
      const auto due = deferred_at_ + flush_soon_delay;
      if (due <= now) {
        flush_due = true;
      } else {
        next = std::min(next, due);
      }
    }
    if (next != clock::time_point::max() && !arm_soon_timer_locked(now, next))
      read_due = flush_due = true;
  }
  if (read_due) read_available();  // the unread replies, or the end of the stream
  if (flush_due) flush_deferred();
}

bool connection::arm_soon_timer_locked(clock::time_point now, clock::time_point due) {
  if (soon_timer_due_ > now && soon_timer_due_ <= due) return true;  // it expires in time
  soon_timer_arms_.fetch_add(1, std::memory_order_relaxed);
  if (!arm_at(read_soon_timer_, due)) {
    soon_timer_due_ = clock::time_point::min();
    return false;
  }
  soon_timer_due_ = due;
  return true;
}

void connection::flush_deferred() {
  {
    std::lock_guard lock(mutex_);
    if (!deferred_ || state_ != state::ready || write_scheduled_ || caller_writing_) return;
    deferred_ = false;
    write_scheduled_ = true;
  }
  write();
}

void connection::on_connect_failed(std::error_code ec, const std::string& detail) {
  ++generation_;
  connecting_ = false;
  link_readable_ = false;
  idle_watch_.reset();
  if (transport_) transport_->close();
  connect_timer_.cancel();
  // A failed search for the address (Sentinel) says itself where it looked.
  const std::string message = resolving_ ? detail : current_address().endpoint() + ": " + detail;
  resolving_ = false;
  ++failures_in_a_row_;
  if (!alternatives_.empty()) {
    address_index_.store((address_index_.load() + 1) % (alternatives_.size() + 1));
    // Another address may answer: try it at once, while queued requests wait.
    if (failures_in_a_row_ % (alternatives_.size() + 1) != 0) return connect();
  }
  if (on_attempt_failed_) on_attempt_failed_();
  finished_list failed;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    state_ = state::waiting_to_reconnect;
    write_scheduled_ = false;
    drop_shared_socket_locked();
    failed.swap(handed_over_);
    last_failure_ = message;
    // Nothing of these reached the server, but their callers should hear that it is unreachable
    // now rather than wait out a reconnect that may never succeed.
    queue_.fail_all(ec, message, failed);
  }
  for (auto& f : failed)
    f.run();

  // Never retry a server that just refused at once: at least reconnect_delay_min.
  schedule_reconnect(std::max(next_reconnect_delay(), options_.reconnect_delay_min));
}

void connection::on_link_error(std::error_code ec, const std::string& detail) {
  ++generation_;
  if (transport_) transport_->close();
  link_readable_ = false;
  idle_watch_.reset();
  health_timer_.cancel();
  finished_list failed;
  bool rearm_timer = false;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    state_ = state::connecting;
    write_scheduled_ = false;
    drop_shared_socket_locked();
    // A deferred request's deadline waited for the flush timer, which went with the link.
    rearm_timer = timer_stale_;
    failed.swap(handed_over_);  // replies read before the loss: they complete first, in order
    queue_.fail_written(ec, "connection to " + current_address().endpoint() + " lost: " + detail,
                        failed);
    if (mode_ == mode::push) {
      // Stale SUBSCRIBE/UNSUBSCRIBE bytes; the link handler sends the full set when back up.
      finished_list none;
      queue_.fail_all(ec, detail, none);
    }
  }
  for (auto& f : failed)
    f.run();
  if (rearm_timer) arm_timeout_timer();
  if (on_link_) on_link_(false);

  schedule_reconnect(next_reconnect_delay());  // the first retry after a working link is at once
}

std::chrono::milliseconds connection::next_reconnect_delay() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return backoff_.next(unit(jitter_));
}

void connection::schedule_reconnect(std::chrono::milliseconds delay) {
  if (delay.count() == 0) return connect();
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait(
      [self = shared_from_this(), generation = generation_](std::error_code e) {
        // A request may have started an attempt already (see connect_soon()).
        if (!e && generation == self->generation_ && !self->connecting_) self->connect();
      });
}

// --- reading and writing -----------------------------------------------------------------------

void connection::read() {
  auto failed = [this](std::error_code ec) {
    const std::string detail =
        ec == asio::error::eof ? "server closed the connection" : ec.message();
    if (handshake_remaining_ > 0)
      return on_connect_failed(make_error_code(errc::connect_failed), detail);
    return on_link_error(make_error_code(errc::connection_lost), detail);
  };
  if (callers_may_do_io_) {
    // The reading is ours (read_available), so that a caller may do it instead.
    transport_->async_wait_readable([self = shared_from_this(), generation = generation_,
                                     t = transport_, failed](std::error_code ec) {
      if (generation != self->generation_) return;
      if (ec) return failed(ec);
      {
        std::lock_guard lock(self->mutex_);
        // We woke late, after a caller read the replies that woke us, and nothing is due:
        // taking the role now for nothing would make the caller's next request meet it taken
        // (on a loaded machine, several in a row).
        const bool late_for_a_caller = self->reader_ == reader::none &&
                                       self->caller_read_since_io_ && self->queue_.written() == 0 &&
                                       self->state_ == state::ready &&
                                       self->handshake_remaining_ == 0;
        if (self->reader_ == reader::caller || late_for_a_caller) {
          // The caller reads (or read); it wakes us if it leaves anything unread (io_parked_).
          self->io_parked_ = true;
        }
        if (self->io_parked_) {
          self->leave_reactor_if_idle();
          return;
        }
      }
      // Armed again before reading: readiness is edge-triggered, and bytes that arrive while we
      // read must wake us once more.
      self->read();
      self->read_available();
    });
    return;
  }
  if (read_filled_ == read_buffer_.size()) read_buffer_.resize(read_buffer_.size() * 2);
  transport_->async_read_some(
      asio::buffer(read_buffer_.data() + read_filled_, read_buffer_.size() - read_filled_),
      [self = shared_from_this(), generation = generation_, t = transport_, failed](
          std::error_code ec, std::size_t n) {
        if (generation != self->generation_) return;
        if (ec) return failed(ec);
        self->received_since_tick_ = true;
        self->read_filled_ += n;
        self->on_bytes(generation);
        if (generation == self->generation_) self->read();
      });
}

void connection::leave_reactor_if_idle() {
  // Parked (no read wait armed) and no write under way: no operation of ours is pending on the
  // socket, which is what transport::leave_reactor() needs.
  if (!writing_ && state_ == state::ready && transport_) transport_->leave_reactor();
}

void connection::begin_reading_locked() {
  if (reader_epoch_ == link_epoch_) return;
  reader_epoch_ = link_epoch_;
  parser_.reset();
  read_filled_ = 0;
}

void connection::read_available() {
  finished_list handed;
  std::string failure;
  bool rearm_timer = false;
  bool rearm_read = false;
  bool took_role = false;
  {
    std::lock_guard lock(mutex_);
    rearm_timer = std::exchange(timer_stale_, false);
    rearm_read = std::exchange(io_parked_, false);
    if (reader_ != reader::none) {
      io_wants_to_read_ = true;  // the caller hands the role back with a call here
      io_parked_ = rearm_read;
    } else {
      took_role = true;
      unread_left_ = false;
      caller_read_since_io_ = false;
      reader_ = reader::io_thread;
      io_wants_to_read_ = false;
      begin_reading_locked();
      handed.swap(handed_over_);
      failure = std::move(reader_failure_);
      reader_failure_.clear();
    }
  }
  if (rearm_timer) arm_timeout_timer();
  if (!took_role) return;
  struct release_role {
    connection& c;
    ~release_role() {
      std::lock_guard lock(c.mutex_);
      c.reader_ = reader::none;
    }
  } release{*this};
  for (auto& f : handed)  // earlier in the stream than anything read now
    f.run();
  if (!link_readable_) return;
  if (rearm_read) read();
  const std::uint64_t generation = generation_;
  if (!failure.empty()) return on_link_error(make_error_code(errc::connection_lost), failure);
  if (read_without_blocking(transport_->native_handle(), read_buffer_, read_filled_, failure,
                            true) > 0) {
    received_since_tick_ = true;
    on_bytes(generation);
  }
  if (failure.empty() || generation != generation_) return;
  if (handshake_remaining_ > 0)
    return on_connect_failed(make_error_code(errc::connect_failed), failure);
  on_link_error(make_error_code(errc::connection_lost), failure);
}

bool connection::parse_buffered(std::vector<reply>& out, std::string& failure) {
  std::size_t offset = 0;
  bool ok = true;
  while (offset < read_filled_) {
    const std::size_t used =
        parser_.parse(std::string_view(read_buffer_.data() + offset, read_filled_ - offset));
    offset += used;
    if (parser_.failed()) {
      failure = "invalid reply from server: " + parser_.error_message();
      ok = false;
      break;
    }
    if (parser_.done()) {
      out.push_back(parser_.take());
    } else if (used == 0) {
      break;
    }
  }
  if (offset > 0) {
    std::memmove(read_buffer_.data(), read_buffer_.data() + offset, read_filled_ - offset);
    read_filled_ -= offset;
  }
  return ok;
}

void connection::on_bytes(std::uint64_t generation) {
  std::vector<reply> replies;
  std::string failure;
  if (!parse_buffered(replies, failure)) {
    if (handshake_remaining_ > 0) {
      return on_connect_failed(make_error_code(errc::protocol_error), failure);
    }
    return on_link_error(make_error_code(errc::protocol_error), failure);
  }

  std::size_t first_user_reply = 0;
  while (handshake_remaining_ > 0 && first_user_reply < replies.size()) {
    on_handshake_reply(replies[first_user_reply++]);
    if (generation != generation_) return;  // the handshake failed and the link was closed
  }

  if (mode_ == mode::push) {
    for (std::size_t i = first_user_reply; i < replies.size(); ++i) {
      if (on_push_) on_push_(std::move(replies[i]));
    }
  } else if (first_user_reply < replies.size()) {
    finished_list done;
    bool unexpected = false;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = first_user_reply; i < replies.size() && !unexpected; ++i) {
        unexpected = !queue_.match(std::move(replies[i]), done);
      }
    }
    for (auto& f : done)
      f.run();
    if (unexpected) {
      return on_link_error(make_error_code(errc::protocol_error), "reply without a request");
    }
  }
}

bool connection::may_defer_locked(placement where) const {
  // Only on a link the next caller may take (it writes the deferred requests with its own: no
  // writer, nothing unwritten but deferred requests, no more replies due than a caller may read
  // ahead of its own, such as a quorum attempt's reply that came after the majority), and where
  // the timer can wake the I/O thread.
  return where == placement::in_order && callers_may_do_io_ && state_ == state::ready &&
         shared_socket_ && read_soon_watched_ && !write_scheduled_ && !caller_writing_ &&
         reader_failure_.empty() && (!queue_.has_unwritten() || deferred_) &&
         queue_.written() <= max_replies_ahead;
}

bool connection::claim_caller_turn(caller c, placement where, caller_turn& turn) {
  // Deferred requests do not stop a caller: it writes them ahead of its own. A stream that a
  // caller found broken (a failed write, a malformed reply) takes nothing more: the I/O thread
  // tears the link down, and the request waits for the next one.
  if (c == caller::leaves || where != placement::in_order || !callers_may_do_io_ ||
      state_ != state::ready || !shared_socket_ || write_scheduled_ || caller_writing_ ||
      !reader_failure_.empty() || (queue_.has_unwritten() && !deferred_) ||
      queue_.written() > max_replies_ahead || io_.get_executor().running_in_this_thread()) {
    return false;
  }
  if (io_parked_ && clock::now() - caller_read_at_ > peek_after_quiet) {
    // Nobody watched the idle link: if the server closed it, the I/O thread must hear of it
    // (the request then waits for the next link instead of meeting the closed one).
    char byte;
    const ssize_t n = ::recv(shared_socket_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      turn.peer_closed = true;
      return false;
    }
  }
  caller_writing_ = true;
  turn.socket = shared_socket_;
  turn.epoch = link_epoch_;
  // Reading, the caller would complete its own request before earlier ones whose completions
  // must wait for the I/O thread: it reads only behind requests whose completions run anywhere,
  // and once the I/O thread has run those a caller read for it (handed_over_).
  if ((c == caller::waits || c == caller::polls) && reader_ == reader::none &&
      handed_over_.empty() && !handed_running_ && queue_.written_run_anywhere()) {
    reader_ = reader::caller;
    begin_reading_locked();
    turn.reads = true;
    turn.replies_ahead = queue_.written();
  }
  return true;
}

void connection::take_caller_turn(caller_turn& turn) {
  turn_reading r;
  write_turn(turn, r);
  // Read until our own reply has been handled: earlier replies first, in order.
  while (r.wrote && turn.reads && r.failure.empty()) {
    if (handle_buffered(turn, r)) break;
    const int timeout = poll_timeout(turn.deadline);
    if (timeout == 0) {
      r.left = true;  // the I/O thread's timer completes the request
      break;
    }
    pollfd p{turn.socket->fd, POLLIN, 0};
    if (::poll(&p, 1, timeout) <= 0) continue;  // timed out or interrupted: look again
    read_turn(turn, r);
  }
  end_turn(turn, r);
}

void connection::write_begins() noexcept {
  if (writes_under_way_.fetch_add(1, std::memory_order_acq_rel) != 0)
    overlapping_writes_.fetch_add(1, std::memory_order_relaxed);
}

void connection::write_turn(caller_turn& turn, turn_reading& r) {
  write_begins();
  r.wrote = write_all(turn.socket->fd, turn.bytes, turn.deadline, r.failure);
  write_ends();
  bool kick_writer = false;
  {
    std::lock_guard lock(mutex_);
    caller_writing_ = false;
    // The stream may hold part of the request: nothing more may follow it (see claim_caller_turn;
    // end_turn wakes the I/O thread to tear the link down).
    if (!r.wrote && turn.epoch == link_epoch_) reader_failure_ = r.failure;
    // Commands queued meanwhile (their senders saw the writer role taken) go out now.
    if (state_ == state::ready && queue_.has_unwritten() && reader_failure_.empty()) {
      write_scheduled_ = true;
      kick_writer = true;
    }
  }
  if (kick_writer) asio::post(io_, [self = shared_from_this()] { self->write(); });
}

bool connection::handle_buffered(caller_turn& turn, turn_reading& r) {
  std::vector<reply> replies;
  if (!parse_buffered(replies, r.failure)) return true;
  finished_list here;
  if (!replies.empty()) {
    std::lock_guard lock(mutex_);
    if (link_epoch_ != turn.epoch) {
      r.stale = true;  // torn down: the I/O thread completed every written request
      return true;
    }
    caller_read_at_ = clock::now();
    caller_read_since_io_ = true;
    for (reply& reply : replies) {
      finished_list out;
      if (!queue_.match(std::move(reply), out)) {
        r.failure = "reply without a request";
        break;
      }
      const bool own = !r.own_done && turn.replies_ahead == 0;
      if (own) {
        r.own_done = true;
      } else if (!r.own_done) {
        --turn.replies_ahead;
      }
      // A completion for the I/O thread is handed over at once, under the mutex that matched
      // it: a teardown meanwhile (on_link_error) then runs it before the requests it fails.
      // Once one is, later ones follow it there, in stream order, whatever thread they allow.
      for (finished& f : out) {
        if (own || (f.any_thread && !r.handing_over)) {
          here.push_back(std::move(f));
        } else {
          r.handing_over = true;
          handed_over_.push_back(std::move(f));
        }
      }
    }
  }
  for (finished& f : here)
    f.run();
  if (r.own_done || !r.failure.empty()) return true;
  if (!r.end_of_stream.empty()) {
    r.failure = r.end_of_stream;
    return true;
  }
  return false;
}

void connection::read_turn(caller_turn& turn, turn_reading& r) {
  if (read_without_blocking(turn.socket->fd, read_buffer_, read_filled_, r.end_of_stream, false) >
      0) {
    received_since_tick_ = true;
  }
}

void connection::end_turn(caller_turn& turn, turn_reading& r) {
  // The stream ended right behind the replies we needed: the I/O thread must hear of it.
  if (r.failure.empty() && !r.end_of_stream.empty()) r.failure = r.end_of_stream;
  // Left before its reply came (a quorum had enough): like a request this caller did not read.
  const bool unread = r.wrote && !r.own_done && !r.stale && !r.left && r.failure.empty();
  bool wake_io_thread = !r.wrote;
  {
    std::lock_guard lock(mutex_);
    if (turn.reads) {
      reader_ = reader::none;
      // It read every reply ahead of its own: none left earlier waits any longer, unless a
      // writer left one behind its own meanwhile (then the timer stays the backstop).
      if (r.own_done && queue_.written() == 0) unread_left_ = false;
      if (!r.stale && !r.failure.empty() && link_epoch_ == turn.epoch) {
        reader_failure_ = r.failure;
      }
      if (r.left) timer_stale_ = true;
      // A parked I/O thread is woken only when replies are left for it; an armed one whenever
      // it met the role taken (bytes may wait that no new readiness will announce). A caller
      // that gave up needs the I/O thread's timer to complete its request; a new link (the
      // epoch moved) may have bytes the I/O thread met while we held the role.
      wake_io_thread = r.left || r.stale || link_epoch_ != turn.epoch || !handed_over_.empty() ||
                       !reader_failure_.empty() || io_wants_to_read_ ||
                       (!unread && io_parked_ && queue_.written() > 0);
    }
    // A reply this caller does not read needs a reader that is sure to come: the I/O thread,
    // unless it is armed already, and not at once: the next caller to read (this thread's next
    // request, usually) reads it first; the read-soon timer wakes the I/O thread otherwise.
    // Its timeout needs the I/O thread's timer armed (see timer_stale_).
    if (!wake_io_thread && (unread || (r.wrote && !turn.reads)) &&
        ((io_parked_ && reader_ != reader::caller) || timer_stale_)) {
      if (read_soon_watched_ && turn.epoch == link_epoch_) {
        const auto now = clock::now();
        if (!unread_left_) unread_left_at_ = now;
        unread_left_ = true;
        if (!arm_soon_timer_locked(now, unread_left_at_ + read_soon_delay)) wake_io_thread = true;
      } else {
        wake_io_thread = true;
      }
    }
  }
  if (wake_io_thread) asio::post(io_, [self = shared_from_this()] { self->read_available(); });
}

// --- polled_reads ------------------------------------------------------------------------------

void polled_reads::read_until(clock::time_point deadline, const std::function<bool()>& enough) {
  bool last_look = false;
  std::vector<pollfd> fds;
  std::vector<entry*> live;
  if (entries_.empty()) return;  // the caller took no link: nothing to read here
  // Armed before enough() is first asked: a completion elsewhere after that wakes the poll. A
  // stale signal (of an earlier call on this thread) costs one look more.
  const int signal_fd = signal_ ? signal_->arm() : -1;
  struct disarm_at_exit {
    elsewhere_signal* signal;
    ~disarm_at_exit() {
      if (signal != nullptr) signal->disarm();
    }
  } disarm{signal_.get()};
  for (;;) {
    // Buffered replies first: the reader role never leaves complete replies unhandled.
    fds.clear();
    live.clear();
    for (const auto& e : entries_) {
      if (e->over) continue;
      if (e->link->handle_buffered(e->turn, e->reading)) {
        // Its own reply is in (or cannot come here): the link goes back to its I/O thread now,
        // not when the other links are done, so that other requests on it are not held up.
        e->over = true;
        e->ended = true;
        e->link->end_turn(e->turn, e->reading);
        continue;
      }
      fds.push_back({e->turn.socket->fd, POLLIN, 0});
      live.push_back(e.get());
    }
    if (live.empty() || last_look) return;
    // Once enough replies are in, the others are not waited for (a slow master must not hold
    // the caller); their replies are read by the next caller or the I/O thread. Replies that
    // complete on other threads may make it enough too: their signal wakes the poll (without
    // one, it looks again every millisecond).
    int timeout = enough() ? 0 : poll_timeout(deadline);
    if (timeout == 0) last_look = true;  // what is readable now, then stop
    if (signal_fd >= 0) {
      fds.push_back({signal_fd, POLLIN, 0});
    } else if (timeout < 0 || timeout > 1) {
      timeout = 1;
    }
    if (::poll(fds.data(), fds.size(), timeout) <= 0) continue;
    if (signal_fd >= 0 && fds.back().revents != 0) elsewhere_signal::drain(signal_fd);
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (fds[i].revents != 0) live[i]->link->read_turn(live[i]->turn, live[i]->reading);
    }
  }
}

void polled_reads::finish() noexcept {
  for (const auto& e : entries_) {
    if (e->ended) continue;
    e->ended = true;
    e->link->end_turn(e->turn, e->reading);
  }
  entries_.clear();
}

void connection::write() {
  if (writing_) return;  // the running write's completion comes back here
  bool rearm_timer = false;
  bool rearm_read = false;
  {
    std::lock_guard lock(mutex_);
    if (caller_writing_) return;  // the caller kicks us again when it is done
    rearm_timer = std::exchange(timer_stale_, false);
    // A broken stream (reader_failure_) is torn down by read_available; the next link writes.
    if (state_ != state::ready || !queue_.has_unwritten() || !reader_failure_.empty()) {
      write_scheduled_ = false;
      if (io_parked_) leave_reactor_if_idle();  // parked while this write was under way
    } else {
      // The writer role is ours until this write's completion finds nothing more to write, even
      // when no sender scheduled us (a kick that outlived the write it asked for, the handshake's
      // completion): a caller that claimed the link meanwhile would write ahead of these bytes.
      write_scheduled_ = true;
      queue_.take_unwritten(write_buffer_);
      deferred_ = false;
      rearm_read = std::exchange(io_parked_, false);  // these replies are ours to read
    }
  }
  if (rearm_timer) arm_timeout_timer();
  if (write_buffer_.empty()) return;
  if (rearm_read) read();
  writing_ = true;
  write_begins();
  transport_->async_write(
      asio::buffer(write_buffer_), [self = shared_from_this(), generation = generation_,
                                    t = transport_](std::error_code ec, std::size_t) {
        self->write_ends();
        if (generation != self->generation_) return;
        self->writing_ = false;
        self->write_buffer_.clear();
        if (ec) return self->on_link_error(make_error_code(errc::connection_lost), ec.message());
        self->write();
      });
}

// --- timers ------------------------------------------------------------------------------------

void connection::arm_timeout_timer() {
  clock::time_point deadline;
  {
    std::lock_guard lock(mutex_);
    deadline = armed_deadline_;
    timer_stale_ = false;
  }
  if (deadline == clock::time_point::max()) return;
  timeout_timer_.expires_at(deadline);
  timeout_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec != asio::error::operation_aborted) self->on_timeout_timer();
  });
}

void connection::on_timeout_timer() {
  finished_list due;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    // Completions a caller read ahead of these go first: a reply that came in time must not be
    // seen after the timeout of a request behind it (a script's WAIT, say). Until they have run,
    // no caller may read (its own would run first: see claim_caller_turn).
    due.swap(handed_over_);
    handed_running_ = !due.empty();
    // A request that never left because the server cannot be reached says why.
    queue_.expire(clock::now(), due,
                  state_ == state::ready ? std::string_view() : std::string_view(last_failure_));
    armed_deadline_ = queue_.next_deadline().value_or(clock::time_point::max());
  }
  for (auto& f : due)
    f.run();
  if (handed_running_) {
    std::lock_guard lock(mutex_);
    handed_running_ = false;
  }
  arm_timeout_timer();
}

void connection::arm_health_timer() {
  if (options_.health_check_interval.count() <= 0) return;
  health_timer_.expires_after(options_.health_check_interval);
  health_timer_.async_wait(
      [self = shared_from_this(), generation = generation_](std::error_code ec) {
        if (!ec && generation == self->generation_) self->on_health_tick();
      });
}

void connection::on_health_tick() {
  bool rearm_timer = false;
  {
    std::lock_guard lock(mutex_);
    rearm_timer = std::exchange(timer_stale_, false);
  }
  if (rearm_timer) arm_timeout_timer();
  if (received_since_tick_) {
    received_since_tick_ = false;
    ping_outstanding_ = false;
  } else if (ping_outstanding_) {
    return on_link_error(make_error_code(errc::connection_lost),
                         "no reply to the health-check PING");
  } else {
    ping_outstanding_ = true;
    static constexpr std::string_view ping[] = {"PING"};
    if (mode_ == mode::push) {
      send_unmatched(ping);
    } else {
      send(ping, nullptr, options_.health_check_interval);
    }
  }
  arm_health_timer();
}

}  // namespace dlock::net
