#include "dlock/count_down_latch.hpp"

#include <algorithm>
#include <functional>
#include <future>
#include <optional>

#include "locks/handles/latch_state.hpp"
#include "locks/names.hpp"
#include "net/sync_call.hpp"
#include "pubsub/subscriber.hpp"

namespace dlock {
namespace {

using locks::engine_io;

// Makes sure the deployment's kind is known before a script publishes: it decides between
// "publish" and "spublish" (one blocking PING at most, once per client).
void learn_deployment(engine_io& io) {
  const bool unknown =
      io.use([](route::router& router) { return router.mode() == topology::mode::unknown; });
  if (!unknown) return;
  const std::string_view ping[] = {"PING"};
  net::sync_call c;
  io.use([&](route::router& router) {
    router.send(route::target::any_master(), ping, c.handler(), io.request_timeout());
  });
  c.wait();
}

reply call(engine_io& io, const locks::script_call& c) {
  io.check_not_io_thread();
  learn_deployment(io);
  net::sync_call sync;
  io.eval(c, sync.handler());
  return sync.wait();
}

// How often a waiter with nothing to hear checks that its client still exists: a destroyed
// client sends no message, and a wait() would otherwise never end. No I/O.
constexpr std::chrono::seconds client_check_interval{1};

// A re-read that failed for want of a link is tried again after 50 ms, doubling up to a second.
constexpr std::chrono::milliseconds first_retry_delay{50};
constexpr std::chrono::milliseconds max_retry_delay{1000};

bool link_trouble(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout;
}

// One wait, blocking or not: read the count; while it is above zero, listen on the latch's channel
// and read it again after every message and (re)subscription. Callbacks on the I/O thread, where
// all its state lives: the subscription and the timer must go there, while the client's
// io_context and subscriber live (a client being destroyed finishes it from the timer). The
// listener, the pending request or the timer keep it alive; finish() drops the listener.
class async_latch_wait : public std::enable_shared_from_this<async_latch_wait> {
 public:
  using clock = std::chrono::steady_clock;

  // `done` also gets the failure's detail (the server's or the system's message).
  using completion =
      std::function<void(std::error_code ec, const std::string& detail, bool opened)>;

  // `read_first`: false when the caller has just read a count above zero; the subscription's
  // confirmation then brings the next read.
  async_latch_wait(std::shared_ptr<const count_down_latch::impl> state, clock::time_point deadline,
                   bool read_first, completion done)
      : state_(std::move(state)),
        io_(state_->engine->io()),
        deadline_(deadline),
        read_first_(read_first),
        done_(std::move(done)) {}

  // Any thread. A client already gone completes it on this thread.
  void start() {
    try {
      io_.post([self = shared_from_this()] {
        if (self->read_first_) {
          self->read();
        } else if (self->listen()) {
          self->arm();
        }
      });
    } catch (const error& e) {
      finish(e.code(), e.detail(), false);
    }
  }

 private:
  void read() {
    if (finished_) return;
    reading_ = true;
    try {
      io_.eval(state_->protocol.count(state_->name),
               [self = shared_from_this()](std::error_code ec, const reply& r) {
                 self->on_count(ec, r);
               });
    } catch (const error& e) {
      finish(e.code(), e.detail(), false);
    }
  }

  void on_count(std::error_code ec, const reply& r) {
    reading_ = false;
    if (finished_) return;
    if (ec) {
      // Before the subscription, as wait_for() throws; after it, retried as wait_steady() does.
      if (!listening_ || !link_trouble(ec)) return finish(ec, r.str, false);
      retry_at_ = clock::now() + retry_delay_;
      retry_delay_ = std::min(retry_delay_ * 2, max_retry_delay);
      return arm();
    }
    std::int64_t count = 0;
    try {
      count = state_->protocol.read_count(state_->name, r).count;
    } catch (const error& e) {
      return finish(e.code(), e.detail(), false);
    }
    retry_at_ = clock::time_point::max();
    retry_delay_ = first_retry_delay;
    if (count <= 0) return finish({}, {}, true);
    if (clock::now() >= deadline_) return finish({}, {}, false);
    if (!listening_) {
      if (!listen()) return;
    } else if (event_pending_) {
      event_pending_ = false;
      return read();
    }
    arm();
  }

  // The first event is the subscription's confirmation: the count is read again then.
  bool listen() {
    std::weak_ptr<async_latch_wait> weak = weak_from_this();
    const auto on_event = [weak] {
      if (auto self = weak.lock()) self->on_event();
    };
    try {
      listening_ = io_.use([&](route::router& router) {
        pubsub::subscriber& sub = router.wake_subscriber();
        const std::uint64_t id = sub.add(locks::latch_channel(state_->name),
                                         {[on_event](std::string_view) { on_event(); }, on_event});
        return pubsub::make_subscription(sub, id);
      });
    } catch (const error& e) {
      finish(e.code(), e.detail(), false);
      return false;
    }
    return true;
  }

  void on_event() {
    if (finished_) return;
    if (reading_) {
      event_pending_ = true;
    } else {
      read();
    }
  }

  // Wakes at the deadline, at a due retry, and every client_check_interval to notice a destroyed
  // client (whose subscription hears nothing more).
  void arm() {
    const auto now = clock::now();
    auto wake = std::min(deadline_, retry_at_);
    if (wake - now > client_check_interval) wake = now + client_check_interval;
    // Made here, on the I/O thread of a client that exists: never on a destroyed io_context.
    if (!timer_) timer_.emplace(io_.io());
    timer_->expires_at(wake);
    timer_->async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec != asio::error::operation_aborted) self->on_timer();
    });
  }

  void on_timer() {
    if (finished_ || reading_) return;
    if (io_.stopped()) {
      return finish(make_error_code(errc::client_stopped), "the client of this latch was destroyed",
                    false);
    }
    const auto now = clock::now();
    if (now >= deadline_) return finish({}, {}, false);
    if (now >= retry_at_) return read();
    arm();
  }

  void finish(std::error_code ec, const std::string& detail, bool opened) {
    if (finished_) return;
    finished_ = true;
    timer_.reset();  // on the I/O thread (cancels its wait), not wherever the last share goes
    listening_.reset();
    const completion done = std::move(done_);
    done(ec, detail, opened);
  }

  const std::shared_ptr<const count_down_latch::impl> state_;
  engine_io& io_;
  std::optional<asio::steady_timer> timer_;  // I/O thread only
  const clock::time_point deadline_;
  const bool read_first_;
  completion done_;
  subscription listening_;
  bool finished_ = false;
  bool reading_ = false;
  bool event_pending_ = false;  // an event came during a read: read once more after it
  clock::time_point retry_at_ = clock::time_point::max();
  std::chrono::milliseconds retry_delay_ = first_retry_delay;
};

using std::chrono::steady_clock;

void start_async_wait(const std::shared_ptr<count_down_latch::impl>& state,
                      steady_clock::duration limit, steady_clock::duration forever,
                      async_latch_wait::completion done, bool read_first = true) {
  const auto deadline =
      limit >= forever ? steady_clock::time_point::max() : steady_clock::now() + limit;
  std::make_shared<async_latch_wait>(state, deadline, read_first, std::move(done))->start();
}

}  // namespace

void count_down_latch::async_wait(std::optional<std::chrono::milliseconds> wait,
                                  wait_handler done) const {
  start_async_wait(state_, wait ? detail::steady_wait(*wait) : detail::wait_forever,
                   detail::wait_forever,
                   [done = std::move(done)](std::error_code ec, const std::string&, bool opened) {
                     done(ec, opened);
                   });
}

std::future<bool> count_down_latch::async_wait(
    std::optional<std::chrono::milliseconds> wait) const {
  auto promise = std::make_shared<std::promise<bool>>();
  std::future<bool> result = promise->get_future();
  start_async_wait(state_, wait ? detail::steady_wait(*wait) : detail::wait_forever,
                   detail::wait_forever,
                   [promise](std::error_code ec, const std::string& detail, bool opened) {
                     if (ec) {
                       promise->set_exception(std::make_exception_ptr(error(ec, detail)));
                     } else {
                       promise->set_value(opened);
                     }
                   });
  return result;
}

bool count_down_latch::try_set_count(std::int64_t count) {
  const impl& s = *state_;
  const locks::script_call c = s.protocol.try_set_count(s.name, count);
  return s.protocol.read_try_set_count(s.name, call(s.engine->io(), c));
}

std::int64_t count_down_latch::count_down() {
  const impl& s = *state_;
  return s.protocol.read_count_down(s.name, call(s.engine->io(), s.protocol.count_down(s.name)));
}

std::int64_t count_down_latch::count() const {
  const impl& s = *state_;
  return s.protocol.read_count(s.name, call(s.engine->io(), s.protocol.count(s.name))).count;
}

bool count_down_latch::delete_latch() {
  const impl& s = *state_;
  return s.protocol.read_remove(s.name, call(s.engine->io(), s.protocol.remove(s.name)));
}

void count_down_latch::wait() const {
  (void)wait_steady(detail::wait_forever);
}

bool count_down_latch::wait_steady(steady_clock::duration wait) const {
  if (count() <= 0) return true;  // also refuses the I/O thread, before anything is queued
  if (wait <= steady_clock::duration::zero()) return false;
  struct outcome {
    std::error_code ec;
    std::string detail;
    bool opened = false;
  };
  auto done = std::make_shared<std::promise<outcome>>();
  std::future<outcome> result = done->get_future();
  start_async_wait(
      state_, wait, detail::wait_forever,
      [done](std::error_code ec, const std::string& detail, bool opened) {
        done->set_value({ec, detail, opened});
      },
      false);
  const outcome o = result.get();
  if (o.ec) throw error(o.ec, o.detail);
  return o.opened;
}

latch_status count_down_latch::status() const {
  const impl& s = *state_;
  engine_io& io = s.engine->io();
  const auto read = s.protocol.read_count(s.name, call(io, s.protocol.count(s.name)));
  latch_status st;
  st.count = read.count;
  st.exists = read.exists;
  const std::string channel = locks::latch_channel(s.name);
  const bool sharded =
      io.use([](route::router& router) { return router.mode() == topology::mode::cluster; });
  const std::string_view numsub[] = {"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB", channel};
  net::sync_call c;
  io.use([&](route::router& router) {
    router.send(route::target::key(channel), numsub, c.handler(), io.request_timeout());
  });
  const reply n = c.wait();
  if (n.is_array() && n.elements.size() == 2) {
    st.subscribers = static_cast<std::uint64_t>(n.elements[1].integer);
  }
  return st;
}

const std::string& count_down_latch::name() const noexcept {
  return state_->name;
}

}  // namespace dlock
