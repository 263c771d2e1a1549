#include "net/connection.hpp"

#include <algorithm>
#include <cstring>

#include "dlock/error.hpp"

namespace dlock::net {
namespace {

constexpr std::size_t initial_read_buffer = 16 * 1024;

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

connection::connection(asio::io_context& io, const client_options& options,
                       std::shared_ptr<asio::ssl::context> tls_context, mode m)
    : io_(io),
      options_(options),
      tls_context_(std::move(tls_context)),
      mode_(m),
      read_buffer_(initial_read_buffer),
      connect_timer_(io),
      reconnect_timer_(io),
      timeout_timer_(io),
      health_timer_(io),
      backoff_(options.reconnect_delay_min, options.reconnect_delay_max),
      jitter_(std::random_device{}()) {}

connection::~connection() = default;

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
  connect_timer_.cancel();
  reconnect_timer_.cancel();
  timeout_timer_.cancel();
  health_timer_.cancel();
  finished_list failed;
  {
    std::lock_guard lock(mutex_);
    state_ = state::stopped;
    queue_.fail_all(make_error_code(errc::client_stopped), "the client was stopped", failed);
  }
  for (auto& f : failed)
    f.run();
}

void connection::send(std::span<const std::string_view> args, completion done,
                      std::chrono::milliseconds timeout, bool urgent) {
  enqueue(args, std::move(done), timeout, urgent ? placement::urgent : placement::in_order);
}

void connection::send_asking(std::span<const std::string_view> args, completion done,
                             std::chrono::milliseconds timeout) {
  enqueue(args, std::move(done), timeout, placement::after_asking);
}

void connection::enqueue(std::span<const std::string_view> args, completion done,
                         std::chrono::milliseconds timeout, placement where) {
  static constexpr std::string_view asking[] = {"ASKING"};
  const auto deadline = clock::now() + timeout;
  bool kick_writer = false;
  bool rearm_timer = false;
  bool connect_now = false;
  completion refused;  // the completion of a request sent to a stopped connection
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) {
      refused = std::move(done);
    } else {
      if (state_ == state::waiting_to_reconnect) {
        // Someone needs the server now: the request waits for a fresh attempt, made at once
        // or when reconnect_delay_min has passed since the last one, instead of failing with
        // an error that may be stale (the server may be back).
        state_ = state::connecting;
        connect_now = true;
      }
      switch (where) {
        case placement::in_order:
          queue_.push(args, std::move(done), deadline);
          break;
        case placement::urgent:
          queue_.push_front_unwritten(args, std::move(done), deadline);
          break;
        case placement::after_asking:
          queue_.push(asking, nullptr, deadline);
          queue_.push(args, std::move(done), deadline);
          break;
      }
      if (deadline < armed_deadline_) {
        armed_deadline_ = deadline;
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
  if (kick_writer || rearm_timer || connect_now) {
    asio::post(io_, [self = shared_from_this(), kick_writer, rearm_timer, connect_now] {
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
  parser_.reset();
  read_filled_ = 0;
  write_buffer_.clear();
  writing_ = false;
  received_since_tick_ = false;
  ping_outstanding_ = false;

  // connect_timeout covers finding the address too (a provider may ask other servers).
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), generation](std::error_code ec) {
    if (ec || generation != self->generation_) return;
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
  {
    std::lock_guard lock(mutex_);
    state_ = state::ready;
    last_failure_.clear();
    if (queue_.has_unwritten() && !write_scheduled_) {
      write_scheduled_ = true;
      kick_writer = true;
    }
  }
  arm_health_timer();
  if (on_link_) on_link_(true);
  if (kick_writer) write();
}

void connection::on_connect_failed(std::error_code ec, const std::string& detail) {
  ++generation_;
  connecting_ = false;
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
  health_timer_.cancel();
  finished_list failed;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    state_ = state::connecting;
    write_scheduled_ = false;
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
  if (read_filled_ == read_buffer_.size()) read_buffer_.resize(read_buffer_.size() * 2);
  transport_->async_read_some(
      asio::buffer(read_buffer_.data() + read_filled_, read_buffer_.size() - read_filled_),
      [self = shared_from_this(), generation = generation_, t = transport_](std::error_code ec,
                                                                            std::size_t n) {
        if (generation != self->generation_) return;
        if (ec) {
          const bool handshaking = self->handshake_remaining_ > 0;
          const std::string detail =
              ec == asio::error::eof ? "server closed the connection" : ec.message();
          if (handshaking)
            return self->on_connect_failed(make_error_code(errc::connect_failed), detail);
          return self->on_link_error(make_error_code(errc::connection_lost), detail);
        }
        self->on_read(n);
      });
}

void connection::on_read(std::size_t n) {
  const std::uint64_t generation = generation_;
  received_since_tick_ = true;
  read_filled_ += n;

  std::vector<reply> replies;
  std::size_t offset = 0;
  while (offset < read_filled_) {
    const std::size_t used =
        parser_.parse(std::string_view(read_buffer_.data() + offset, read_filled_ - offset));
    offset += used;
    if (parser_.failed()) {
      const std::string detail = "invalid reply from server: " + parser_.error_message();
      if (handshake_remaining_ > 0) {
        return on_connect_failed(make_error_code(errc::protocol_error), detail);
      }
      return on_link_error(make_error_code(errc::protocol_error), detail);
    }
    if (parser_.done()) {
      replies.push_back(parser_.take());
    } else if (used == 0) {
      break;
    }
  }
  if (offset > 0) {
    std::memmove(read_buffer_.data(), read_buffer_.data() + offset, read_filled_ - offset);
    read_filled_ -= offset;
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
  if (generation == generation_) read();
}

void connection::write() {
  if (writing_) return;  // the running write's completion comes back here
  {
    std::lock_guard lock(mutex_);
    if (state_ != state::ready || !queue_.has_unwritten()) {
      write_scheduled_ = false;
      return;
    }
    queue_.take_unwritten(write_buffer_);
  }
  writing_ = true;
  transport_->async_write(
      asio::buffer(write_buffer_), [self = shared_from_this(), generation = generation_,
                                    t = transport_](std::error_code ec, std::size_t) {
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
  }
  if (deadline == clock::time_point::max()) return;
  timeout_timer_.expires_at(deadline);
  timeout_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec != asio::error::operation_aborted) self->on_timeout_timer();
  });
}

void connection::on_timeout_timer() {
  finished_list expired;
  {
    std::lock_guard lock(mutex_);
    if (state_ == state::stopped) return;
    // A request that never left because the server cannot be reached says why.
    queue_.expire(clock::now(), expired,
                  state_ == state::ready ? std::string_view() : std::string_view(last_failure_));
    armed_deadline_ = queue_.next_deadline().value_or(clock::time_point::max());
  }
  for (auto& f : expired)
    f.run();
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
