#include "dlock/count_down_latch.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

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

// What wakes a waiter: any message on the latch's channel, or a (re)subscription. Shared with the
// listener, which may still run on the I/O thread after the waiter left.
struct wake_events {
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t seen = 0;

  void bump() {
    {
      std::lock_guard lock(mutex);
      ++seen;
    }
    cv.notify_all();
  }
};

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

}  // namespace

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
  (void)wait_steady(forever);
}

bool count_down_latch::wait_steady(steady_clock::duration wait) const {
  const auto deadline =
      wait >= forever ? steady_clock::time_point::max() : steady_clock::now() + wait;
  const impl& s = *state_;
  engine_io& io = s.engine->io();
  if (count() <= 0) return true;
  if (wait <= steady_clock::duration::zero()) return false;

  auto events = std::make_shared<wake_events>();
  const std::string channel = locks::latch_channel(s.name);
  const subscription listening = io.use([&](route::router& router) {
    // The wake subscriber: sharded pub/sub on a cluster, as the scripts publish.
    pubsub::subscriber& sub = router.wake_subscriber();
    const std::uint64_t id = sub.add(
        channel, {[events](std::string_view) { events->bump(); }, [events] { events->bump(); }});
    return pubsub::make_subscription(sub, id);
  });
  // The first event is the subscription's confirmation: the count is read again then, so a zero
  // published between the read above and the subscription is not missed.
  std::uint64_t handled = 0;
  auto retry_at = steady_clock::time_point::max();  // when a re-read that met link trouble retries
  auto retry_delay = first_retry_delay;
  for (;;) {
    {
      std::unique_lock lock(events->mutex);
      while (events->seen == handled) {
        const auto now = steady_clock::now();
        if (now >= deadline) return false;
        if (now >= retry_at) break;
        auto wake = std::min(deadline, retry_at);
        if (wake - now > client_check_interval) wake = now + client_check_interval;
        events->cv.wait_until(lock, wake);
        if (events->seen == handled && io.stopped()) {
          throw error(errc::client_stopped, "the client of this latch was destroyed");
        }
      }
      handled = events->seen;
    }
    try {
      if (count() <= 0) return true;
      retry_at = steady_clock::time_point::max();
      retry_delay = first_retry_delay;
    } catch (const error& e) {
      // A resubscription comes with link trouble (a reconnect, a failover), and its re-read may
      // meet the trouble too: try again soon rather than end the wait or miss the zero.
      if (!link_trouble(e.code())) throw;
      retry_at = steady_clock::now() + retry_delay;
      retry_delay = std::min(retry_delay * 2, max_retry_delay);
    }
  }
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
