#include "locks/engine/lock_engine.hpp"

#include <algorithm>
#include <functional>
#include <future>

#include "locks/engine/acquisition.hpp"
#include "locks/names.hpp"
#include "net/sync_call.hpp"

namespace dlock::locks {

using std::chrono::milliseconds;

void check_lease(const milliseconds* lease) {
  if (lease == nullptr) return;
  if (lease->count() <= 0) throw error(errc::invalid_argument, "a lock lease must be positive");
  if (*lease > max_lock_lease) {
    throw error(errc::invalid_argument, "a lock lease of " + std::to_string(lease->count()) +
                                            " ms is over the limit of " +
                                            std::to_string(max_lock_lease.count()) + " ms");
  }
}

clock::time_point deadline_after(clock::duration wait) noexcept {
  const auto now = clock::now();
  if (wait <= clock::duration::zero()) return now;
  if (wait >= clock::time_point::max() - now) return clock::time_point::max();
  return now + wait;
}

std::shared_ptr<lock_engine> lock_engine::create(asio::io_context& io, route::router& router,
                                                 const lock_options& settings,
                                                 milliseconds request_timeout, core::log_sink log,
                                                 milliseconds slow_acquisition) {
  std::shared_ptr<lock_engine> engine(
      new lock_engine(io, router, settings, request_timeout, std::move(log), slow_acquisition));
  engine->start();
  return engine;
}

lock_engine::lock_engine(asio::io_context& io, route::router& router, const lock_options& settings,
                         milliseconds request_timeout, core::log_sink log,
                         milliseconds slow_acquisition)
    : io_(io, router, request_timeout),
      log_(std::move(log)),
      slow_acquisition_(slow_acquisition),
      on_lock_lost_(settings.on_lock_lost),
      confirm_{settings.min_replicas, settings.replica_timeout},
      holds_(settings.watchdog_timeout, core::random_id(), counters_),
      waiters_([this](const std::string& channel) { return subscribe(channel); },
               wake_id(holds_.registry.owner_field(0))),
      quiet_(quiet_release_lasts) {}

void lock_engine::start() {
  releases_ = std::make_shared<release_queue>(
      [this](const script_call& call, bool urgent, release_queue::timing when,
             std::shared_ptr<route::resend_gate> gate,
             std::function<void(std::error_code, const reply&)> done) {
        // The release's completion (retries, counters) may run on any thread.
        io_.eval(call, std::move(done),
                 {.urgent = urgent,
                  .caller_does = when == release_queue::timing::with_next_request
                                     ? route::router::caller::defers
                                     : route::router::caller::writes,
                  .gate = std::move(gate)});
      },
      [this](const std::string& name, bool heard) { quiet_.record(name, heard, clock::now()); },
      counters_);
  watchdog_ = std::make_shared<watchdog>(io_, holds_, counters_,
                                         [this](const losses& lost) { fire(lost); });
  core::add_thread_exit_listener(this);
  // Connection events reach the engine on the I/O thread, where the router's listener lives.
  io_.post([weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    try {
      self->io_.use([&](route::router& router) {
        router.set_link_listener([weak](bool up) {
          if (auto engine = weak.lock()) engine->on_link(up);
        });
      });
    } catch (const error&) {
      // Stopped before the I/O thread ran this: no links to hear of.
    }
  });
}

void lock_engine::on_link(bool up) {
  const std::uint64_t ups = up ? ++counters_.links_up : counters_.links_up.load();
  const std::uint64_t losses = up ? counters_.links_lost.load() : ++counters_.links_lost;
  if (up && losses > 0) ++counters_.links_recovered;
  if (log_.enabled()) {
    const std::string links_up = std::to_string(ups > losses ? ups - losses : 0);
    if (!up) {
      log_.emit(log_level::warning, "connection lost", {{"links_up", links_up}});
    } else if (losses > 0) {
      log_.emit(log_level::info, "connection recovered", {{"links_up", links_up}});
    } else {
      log_.emit(log_level::debug, "connected", {{"links_up", links_up}});
    }
  }
  if (up) {
    // Back: the server may have lost every hold (a restart, a failover). Check them all first.
    watchdog_->recheck_all();
  } else {
    // Lost: a waiter would otherwise sleep until its holder's lease end before noticing that the
    // server is gone. Its attempt now either reaches the server again or fails with the
    // connection's error (connect_failed, connect_timeout, ...).
    waiters_.wake_all();
  }
}

lock_engine::~lock_engine() {
  core::remove_thread_exit_listener(this);
}

std::string lock_engine::owner_field(std::uint64_t owner) const {
  return holds_.registry.owner_field(owner);
}

subscription lock_engine::subscribe(const std::string& channel) {
  std::weak_ptr<lock_engine> weak = weak_from_this();
  return io_.use([&](route::router& router) {
    pubsub::subscriber& sub = router.wake_subscriber();
    const std::uint64_t id = sub.add(channel, {[weak, channel](std::string_view payload) {
                                                 if (auto self = weak.lock())
                                                   self->waiters_.on_message(channel, payload);
                                               },
                                               [weak, channel] {
                                                 if (auto self = weak.lock())
                                                   self->waiters_.on_subscribed(channel);
                                               }});
    return pubsub::make_subscription(sub, id);
  });
}

void lock_engine::observe_acquired(const lock_ref& lock, clock::time_point started) noexcept {
  const auto waited = clock::now() - started;
  try {
    counters_.of(lock.protocol->kind()).wait_seconds.observe(waited);
    if (slow_acquisition_.count() > 0 && waited >= slow_acquisition_ && log_.enabled()) {
      const auto ms = std::chrono::duration_cast<milliseconds>(waited).count();
      log_.emit(log_level::warning, "slow acquisition",
                {{"name", lock.name},
                 {"type", std::string(lock.protocol->kind())},
                 {"wait_ms", std::to_string(ms)}});
    }
  } catch (...) {
    // Out of memory for a counter or a field: the acquisition itself stands.
  }
}

void lock_engine::fire(const losses& lost) const noexcept {
  for (const auto& s : lost.stops)
    s->request_stop();
  if (log_.enabled()) {
    for (const lock_loss& event : lost.events) {
      try {
        log_.emit(log_level::error, "lock lost",
                  {{"name", event.name},
                   {"owner", event.owner},
                   {"reason", std::string(loss_reason_name(event.reason))}});
      } catch (...) {
        // Out of memory for the fields: the loss is still reported below and by the stop_token.
      }
    }
  }
  if (!on_lock_lost_) return;
  for (const lock_loss& event : lost.events) {
    try {
      on_lock_lost_(event);
    } catch (...) {
      // Documented: the callback must not throw; a failing logger must not stop the others.
    }
  }
}

reply lock_engine::call(const script_call& c) {
  io_.check_not_io_thread();
  net::sync_call call;
  io_.eval(c, call.handler(), {.caller_does = route::router::caller::waits});
  return call.wait();
}

// --- acquiring ---------------------------------------------------------------------------------

attempt_plan lock_engine::plan(const hold_key& key, const milliseconds* lease) {
  std::lock_guard lock(holds_.mutex);
  return holds_.registry.plan(key, lease);
}

void lock_engine::record(const hold_key& key, const attempt_plan& plan,
                         const attempt_outcome& outcome, clock::time_point sent_at) {
  losses lost;
  std::optional<clock::time_point> wake;
  {
    std::lock_guard lock(holds_.mutex);
    wake = holds_.registry.record_attempt(key, plan, outcome, sent_at, io_.stopped(),
                                          holds_.timer_at, lost);
    if (wake) holds_.lower_wakeup(*wake);
  }
  fire(lost);
  // The timer is re-armed only if this hold needs it sooner: one round per acquisition would
  // cost the I/O thread a pass over the due leases every time.
  if (wake) watchdog_->wake();
}

bool lock_engine::masters_move() {
  try {
    return io_.use([](route::router& router) { return router.masters_move(); });
  } catch (const error&) {
    return false;  // stopped
  }
}

void lock_engine::drop_idle_subscriptions_later() {
  if (idle_timer_armed_ || io_.stopped()) return;
  const auto next = waiters_.next_idle_expiry();
  if (!next) return;
  if (!idle_timer_) idle_timer_.emplace(io_.io());
  idle_timer_armed_ = true;
  idle_timer_->expires_at(*next);
  idle_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    self->idle_timer_armed_ = false;
    if (self->io_.stopped()) return;  // shutdown drops them
    self->waiters_.take_idle(clock::now() - wait_queues::idle_channel_linger).clear();
    self->drop_idle_subscriptions_later();
  });
}

void lock_engine::keep_place_in_line(const lock_ref& lock, const wait_queues::waiter* self) {
  if (lock.protocol->wakes_by_line()) waiters_.nudge(lock, self);
}

line_uses::line_key lock_engine::line_of(const lock_ref& lock, std::uint64_t owner) const {
  if (!lock.protocol->waits_by_owner()) return {lock.protocol, lock.name};
  return {lock.protocol, lock.protocol->owner_wake_channel(lock.name, owner_field(owner))};
}

void lock_engine::leave_line(const lock_ref& lock, std::uint64_t owner) noexcept {
  try {
    const auto call = lock.protocol->leave_line(
        lock.name, holds_.registry.owner_field(lock.protocol->waits_by_owner() ? owner : 0));
    if (call) releases_->send_once(*call);  // shutdown() gives it the releases' time
  } catch (...) {
    // Stopped, or out of memory: the client's place lapses with its line deadline.
  }
}

bool lock_engine::send_attempt(const lock_ref& lock, std::string_view owner,
                               const script_call& call, net::completion done,
                               route::router::caller c) {
  const bool withdrew = releases_->supersede(*lock.protocol, lock.name, owner);
  io_.eval(call, std::move(done), {.confirm = confirm_, .caller_does = c});
  ++counters_.attempts;
  ++counters_.of(lock.protocol->kind()).attempts;
  return withdrew;
}

attempt_outcome lock_engine::read_attempt_reply(const hold_key& key, const attempt_plan& plan,
                                                const reply& r, clock::time_point sent_at,
                                                bool& unconfirmed, std::string& why) {
  unconfirmed = false;
  if (confirm_.replicas == 0) {
    const attempt_outcome outcome = key.lock.protocol->read_attempt(r);
    record(key, plan, outcome, sent_at);
    return outcome;
  }
  // [the script's reply, WAIT's reply]; see route::router::eval.
  if (!r.is_array() || r.elements.size() != 2) {
    throw error(errc::protocol_error, "an acquisition without its WAIT reply: " + to_string(r));
  }
  attempt_outcome outcome = key.lock.protocol->read_attempt(r.elements[0]);
  const reply& acks = r.elements[1];
  if (outcome.status != attempt_outcome::kind::acquired ||
      (acks.is_integer() && acks.integer >= static_cast<std::int64_t>(confirm_.replicas))) {
    record(key, plan, outcome, sent_at);
    return outcome;
  }
  // Too few replicas have it: a failover now could hand it out again. Undo it (the release
  // carries the hold's token, so nothing newer is touched) and try again later.
  unconfirmed = true;
  why = acks.is_integer()
            ? std::to_string(acks.integer) + " of " + std::to_string(confirm_.replicas) +
                  " replicas acknowledged within " + std::to_string(confirm_.timeout.count()) +
                  " ms"
            : "WAIT failed: " + acks.str;
  ++counters_.unconfirmed;
  ++counters_.of(key.lock.protocol->kind()).unconfirmed;
  releases_->send(*key.lock.protocol, release_request{std::string(key.lock.name), plan.owner,
                                                      plan.lease, 0, outcome.token});
  attempt_outcome retry;
  retry.status = attempt_outcome::kind::held_by_other;
  retry.holder_ttl_ms = confirm_.timeout.count();
  return retry;
}

attempt_outcome lock_engine::attempt_now(const lock_ref& lock, std::uint64_t owner,
                                         const milliseconds* lease, bool may_wait,
                                         bool& unconfirmed, bool& may_be_in_line) {
  const hold_key key{lock, owner};
  const attempt_plan p = plan(key, lease);
  const auto sent_at = clock::now();
  io_.check_not_io_thread();
  if (stopping_.load(std::memory_order_acquire)) {
    throw error(errc::client_stopped, "the client of this lock was destroyed");
  }
  net::sync_call c;
  attempt_request request{lock.name, p.owner, p.lease, p.known_holds};
  request.may_wait = may_wait;
  request.others_waiting = waiters_.waiting(lock) > 0;
  may_be_in_line = may_wait || request.others_waiting;
  const bool withdrew = send_attempt(lock, p.owner, lock.protocol->attempt(request), c.handler(),
                                     route::router::caller::waits);
  reply answer;
  try {
    answer = c.wait();
  } catch (const error& e) {
    // Not run (a server error), it cannot stand in for the releases it withdrew: sent again.
    if (withdrew && !attempt_may_have_run(e.code())) release_orphan(key);
    throw;
  }
  std::string why;
  attempt_outcome outcome = read_attempt_reply(key, p, answer, sent_at, unconfirmed, why);
  if (stopping_.load(std::memory_order_acquire)) {
    // Answered while the client stops (acquire() keeps the drain waiting). A hold is given back
    // rather than handed to a caller as one already lost; a refusal's mark (a place in line, an
    // intent) is taken back by ~line_share while requests still go out.
    if (outcome.status != attempt_outcome::kind::held_by_other) (void)release(lock, owner);
    throw error(errc::client_stopped, "the client of this lock was destroyed");
  }
  if (outcome.status != attempt_outcome::kind::held_by_other && !request.others_waiting) {
    keep_place_in_line(lock, nullptr);
  }
  return outcome;
}

// A blocking call's use of the client's line (line_uses), for a type that leaves_line(): from
// before its first attempt until it returns, or until the waiting machine takes it over.
struct lock_engine::line_share {
  line_share(lock_engine& e, const lock_ref& l, std::uint64_t o)
      : engine(e), lock(l), owner(o), counted(l.protocol->leaves_line()) {
    if (counted) {
      line = e.line_of(l, o);
      engine.line_uses_.begin(line);
    }
  }
  line_share(const line_share&) = delete;
  line_share& operator=(const line_share&) = delete;
  ~line_share() {
    if (counted && !handed_over) {
      engine.line_uses_.end(line, held, may_be_in_line, [this] { engine.leave_line(lock, owner); });
    }
  }
  lock_engine& engine;
  const lock_ref& lock;
  const std::uint64_t owner;
  const bool counted;
  line_uses::line_key line;
  bool handed_over = false;
  bool held = false;
  bool may_be_in_line = false;
};

bool lock_engine::acquire(const lock_ref& lock, std::uint64_t owner, const milliseconds* lease,
                          clock::time_point deadline, std::error_code* why) {
  if (why != nullptr) why->clear();
  io_.check_same_process();
  check_lease(lease);
  io_.check_not_io_thread();
  if (!lock.protocol->reentrant() && hold_count(lock, owner) != 0) {
    // Waiting for oneself would never end; refused before anything is sent.
    throw error(errc::would_deadlock, "the " + std::string(lock.protocol->kind()) + " lock '" +
                                          printable_name(lock.name) +
                                          "' is not reentrant and this thread holds it already");
  }
  const auto started = clock::now();
  // The shutdown's drain waits for this call (declared first: it outlives what ~line_share and
  // the error path below send): a hold taken while the client stops goes back, a mark left by a
  // refused attempt is taken back, before the client stops sending.
  const release_queue::expecting drain_waits(*releases_);
  line_share share(*this, lock, owner);
  std::optional<std::int64_t> queued;
  // Behind this client's earlier waiters, unless the owner re-enters a hold it has.
  if (deadline > clock::now()) {
    queued = waiters_.queued_ttl(lock);
    if (queued && hold_count(lock, owner) != 0) queued.reset();
  }
  bool attempted = false;
  bool publishes = true;
  bool calls = false;
  std::int64_t ttl = queued.value_or(-1);
  std::optional<clock::time_point> attempt_sent;
  bool field_may_be_left = false;  // see acquisition::start_waiting
  if (!queued) {
    bool unconfirmed = false;
    attempt_outcome first;
    attempt_sent = clock::now();  // a little before it leaves: never later
    try {
      first = attempt_now(lock, owner, lease, deadline > clock::now(), unconfirmed,
                          share.may_be_in_line);
    } catch (const error& e) {
      // A link broken under the attempt where masters move (a failover): the waiting machine
      // tries again soon, as the same owner (see acquisition::on_reply).
      if (e.code() != errc::connection_lost || deadline <= clock::now() || !masters_move()) {
        // The script may have run and taken the lock after all (see acquisition::on_reply);
        // when the client stops, attempt_now gave back what it took.
        if (attempt_may_have_run(e.code()) && e.code() != errc::client_stopped) {
          release_orphan(hold_key{lock, owner});
        }
        throw;
      }
      first.status = attempt_outcome::kind::held_by_other;
      first.holder_ttl_ms = 50;
      field_may_be_left = true;
    }
    if (first.status != attempt_outcome::kind::held_by_other) {
      share.held = true;
      observe_acquired(lock, started);
      return true;
    }
    if (clock::now() >= deadline) {
      // An attempt that might wait may have joined the server's line or left a writer's intent:
      // undone when this was the client's last acquisition of the lock (~line_share).
      ++counters_.timed_out;
      ++counters_.of(lock.protocol->kind()).timed_out;
      if (unconfirmed && why != nullptr) *why = make_error_code(errc::replicas_unavailable);
      return false;
    }
    attempted = true;
    ttl = first.holder_ttl_ms;
    publishes = first.holder_publishes;
    calls = first.holder_calls;
  }
  // Wait on the I/O thread's machine; the outcome travels as a reply (integer 1: held).
  net::sync_call call;
  auto machine = acquisition::create(
      shared_from_this(), {lock, owner, lease ? std::optional(*lease) : std::nullopt, deadline, {}},
      [done = call.handler()](std::error_code ec, const std::string& detail, bool held) {
        // Not confirmed by enough replicas is "not acquired", not a failure (integer 2).
        if (ec == errc::replicas_unavailable) return done({}, reply::make_integer(2));
        done(ec, ec ? reply::make_error(detail) : reply::make_integer(held ? 1 : 0));
      });
  io_.post([machine, ttl, attempted, publishes, calls, attempt_sent, field_may_be_left] {
    machine->start_waiting(ttl, attempted, publishes, calls, attempt_sent, field_may_be_left);
  });
  share.handed_over = true;  // the machine ends this call's use of the line
  const std::int64_t result = call.wait().integer;
  if (result == 2 && why != nullptr) *why = make_error_code(errc::replicas_unavailable);
  if (result == 1) observe_acquired(lock, started);
  return result == 1;
}

void lock_engine::async_acquire(const lock_ref& lock, const acquire_options& options,
                                lease_completion done) {
  io_.check_same_process();
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  check_lease(options.lease ? &*options.lease : nullptr);
  constexpr auto forever = std::chrono::hours(24 * 365 * 100);  // and cannot overflow
  const auto deadline = options.wait && *options.wait < forever ? deadline_after(*options.wait)
                                                                : clock::time_point::max();
  const std::uint64_t owner = core::new_owner_key();
  auto on_done = [weak = weak_from_this(), lock, owner, started = clock::now(),
                  done = std::move(done)](std::error_code ec, const std::string& detail,
                                          bool held) {
    lock_lease lease;
    if (!ec && held) {
      if (auto self = weak.lock()) {
        self->observe_acquired(lock, started);
        lease = self->make_lease(lock, owner);
      }
    }
    try {
      done(ec, detail, std::move(lease));
    } catch (...) {
      // The caller's handler failed; a lease it did not keep is released by its destructor.
    }
  };
  auto machine = acquisition::create(shared_from_this(),
                                     {lock, owner, options.lease, deadline, options.cancel},
                                     std::move(on_done));
  try {
    io_.post([machine] { machine->start(); });
  } catch (const error& e) {
    machine->refuse(e);  // stopped: on the calling thread, as documented
  }
}

lock_lease lock_engine::make_lease(const lock_ref& lock, std::uint64_t owner) {
  const hold_key key{lock, owner};
  std::lock_guard guard(holds_.mutex);
  if (holds_.registry.count(key) == 0 && holds_.registry.token(key) == 0) return {};
  return make_lock_lease(shared_from_this(), lock, owner, holds_.registry.owner_field(owner),
                         holds_.registry.token(key), holds_.registry.stop_token(key));
}

// --- releasing ---------------------------------------------------------------------------------

std::error_code lock_engine::release(const lock_ref& lock, std::uint64_t owner) noexcept {
  if (io_.forked()) return make_error_code(errc::forked);  // the parent's holds are its own
  expire_due_holds();  // a hold whose lease ran out unnoticed is reported lost (lock_lost)
  try {
    const release_queue::timing when = release_timing(lock);
    std::error_code result;
    std::shared_ptr<std::stop_source> lost_stop;
    {
      std::lock_guard guard(holds_.mutex);
      auto request = holds_.registry.release({lock, owner}, result, &lost_stop);
      // Queued under the holds' mutex: a renewal batch for this lock is on the wire first.
      if (request) releases_->send(*lock.protocol, std::move(*request), when);
    }
    // The thread that marked the hold lost (the watchdog's, or another caller's expiry check)
    // may not have requested the stop yet: done here too (once in all), outside the mutex, as
    // the holder's callbacks may ask about their holds.
    if (lost_stop) lost_stop->request_stop();
    return result;
  } catch (const error& e) {
    return e.code();
  } catch (...) {
    // Out of memory while building the request: the lease will end the hold on the server.
    return make_error_code(errc::client_stopped);
  }
}

release_queue::timing lock_engine::release_timing(const lock_ref& lock) {
  // A release that others may wait for goes out at once: this client waited for the lock lately
  // (its channel is still subscribed), or the name's latest release reached a waiting client
  // (in another process: the reply says so), or was not released lately. Otherwise the release
  // rides with this thread's next request (a lock() loop: one write and one server wake-up per
  // cycle instead of two), or goes within net::connection's flush delay: a waiter elsewhere
  // that came since the last release waits that much longer, once.
  if (lock.protocol->waits_by_owner() || waiters_.listens(lock) ||
      !quiet_.is_quiet(lock.name, clock::now())) {
    return release_queue::timing::now;
  }
  ++counters_.releases_deferred;
  return release_queue::timing::with_next_request;
}

void lock_engine::release_orphan(const hold_key& key) noexcept {
  if (io_.forked()) return;
  try {
    std::lock_guard guard(holds_.mutex);
    if (auto request = holds_.registry.orphan_release(key)) {
      releases_->send(*key.lock.protocol, std::move(*request));
    }
  } catch (...) {
    // Stopped, or out of memory: the orphan ends with its lease.
  }
}

void lock_engine::give_back_late_hold(const hold_key& key, const attempt_plan& plan,
                                      std::error_code ec, const reply& r) noexcept {
  try {
    // With min_replicas: [the script's reply, WAIT's reply] (see read_attempt_reply).
    const reply* script = &r;
    if (confirm_.replicas != 0 && r.is_array() && r.elements.size() == 2) script = &r.elements[0];
    const attempt_outcome outcome =
        ec ? attempt_outcome{} : key.lock.protocol->read_attempt(*script);
    if (outcome.status == attempt_outcome::kind::acquired) {
      releases_->send(*key.lock.protocol,
                      release_request{key.lock.name, plan.owner, plan.lease, 0, outcome.token});
    }
  } catch (...) {
    // Stopped meanwhile, a malformed reply, or out of memory: the hold ends with its lease.
  }
  releases_->expected_done();
}

void lock_engine::stop_acquisitions() {
  std::vector<std::shared_ptr<acquisition>> all;  // copied: finishing erases from the map
  for (const auto& [raw, machine] : acquisitions_)
    all.push_back(machine);
  for (const auto& machine : all)
    machine->stop();  // waiting callers and async handlers get client_stopped
}

namespace {
// Runs `f` on the I/O thread of `io` and waits for it (the caller is another thread).
void run_and_wait(asio::io_context& io, const std::function<void()>& f) {
  std::promise<void> done;
  asio::post(io, [&] {
    f();
    done.set_value();
  });
  done.get_future().wait();
}
}  // namespace

void lock_engine::shutdown(milliseconds limit) {
  stopping_.store(true, std::memory_order_release);
  // Waiters stop first, while requests still go out: one in a server-side wait line (the fair
  // lock's) leaves it instead of keeping the lock from everyone until its place times out.
  run_and_wait(io_.io(), [this] { stop_acquisitions(); });
  // Releases and those departures (and their retries) get `limit`.
  releases_->drain(limit);
  io_.stop();  // nothing new reaches the router from now on
  losses lost;
  {
    // Nobody renews the remaining holds any more: their holders must hear it.
    std::lock_guard lock(holds_.mutex);
    holds_.registry.lose_all(lock_loss_reason::client_stopped, lost);
  }
  // The timer and the acquisitions belong to the I/O thread: finish them there, so that handles
  // that outlive the client never touch the destroyed io_context.
  run_and_wait(io_.io(), [this] {
    stop_acquisitions();  // those that began meanwhile
    std::vector<subscription> parked;
    {
      std::lock_guard lock(parked_mutex_);
      parked.swap(parked_);
    }
    parked.clear();  // while the subscriber and its io_context live
    waiters_.take_idle(clock::time_point::max()).clear();
    idle_timer_.reset();
    watchdog_->stop();
  });
  fire(lost);
}

// --- admin and queries -------------------------------------------------------------------------

void lock_engine::learn_deployment() {
  // The first reply of a client comes after its seed connection learnt whether it talks to a
  // cluster, which decides how scripts publish (see script_call::publish_command_arg).
  const bool unknown =
      io_.use([](route::router& router) { return router.mode() == topology::mode::unknown; });
  if (!unknown) return;
  const std::string_view ping[] = {"PING"};
  io_.check_not_io_thread();
  net::sync_call c;
  io_.use([&](route::router& router) {
    router.send(route::target::any_master(), ping, c.handler(), io_.request_timeout());
  });
  c.wait();
}

bool lock_engine::force_release(const lock_ref& lock) {
  learn_deployment();
  return lock.protocol->read_force_release(lock.name,
                                           call(lock.protocol->force_release(lock.name)));
}

reply lock_engine::run_script(const script_call& c) {
  learn_deployment();
  return call(c);
}

lock_status lock_engine::status(const lock_ref& lock) {
  learn_deployment();
  lock_status s = lock.protocol->read_status(lock.name, call(lock.protocol->status(lock.name)));
  const std::string channel = lock.protocol->wake_channel(lock.name);
  std::vector<std::string> channels{channel};
  if (lock.protocol->wakes_by_line()) {
    // dlock's waiters listen on their own call channels: those of the clients in the wait line.
    const std::string line = wait_line_key(lock.name);
    const std::string_view zrange[] = {"ZRANGE", line, "0", "999"};
    const reply members = command(line, zrange);
    for (const reply& m : members.elements)
      channels.push_back(lock.protocol->call_channel(lock.name, m.str));
  }
  if (lock.protocol->waits_by_owner()) {
    // A fair lock's waiters listen on their own channels: those of the owners in its line.
    for (const lock_waiter& w : s.queue)
      channels.push_back(lock.protocol->owner_wake_channel(lock.name, w.owner));
  }
  // Waiters listen with sharded pub/sub on a cluster, on the node of the channel's slot.
  const bool sharded =
      io_.use([](route::router& router) { return router.mode() == topology::mode::cluster; });
  std::vector<std::string_view> numsub{"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB"};
  numsub.insert(numsub.end(), channels.begin(), channels.end());
  const reply n = command(channel, numsub);
  for (std::size_t i = 1; n.is_array() && i < n.elements.size(); i += 2)
    s.subscribers += static_cast<std::uint64_t>(std::max<std::int64_t>(n.elements[i].integer, 0));
  return s;
}

milliseconds lock_engine::remaining_ttl(const std::string& name) {
  const std::string_view args[] = {"PTTL", name};
  return milliseconds(command(name, args).integer);
}

bool lock_engine::exists(const std::string& name) {
  const std::string_view args[] = {"EXISTS", name};
  return command(name, args).integer == 1;
}

reply lock_engine::command(std::string_view routing_key, std::span<const std::string_view> args) {
  io_.check_not_io_thread();
  net::sync_call c;
  io_.use([&](route::router& router) {
    router.send(route::target::key(routing_key), args, c.handler(), io_.request_timeout(),
                {.caller_does = route::router::caller::waits});
  });
  return c.wait();
}

void lock_engine::expire_due_holds() noexcept {
  if (io_.forked()) return;
  // The common path: nothing can have expired before the registry's next wake-up.
  if (clock::now().time_since_epoch().count() <
      holds_.nothing_expires_before.load(std::memory_order_acquire)) {
    return;
  }
  // The watchdog's timer runs on the I/O thread, which may not have run since a lease ran out
  // (this process was stopped, or the I/O thread is busy in a callback): a holder asking now must
  // not be told it still holds a lock its lease no longer covers.
  losses lost;
  {
    std::lock_guard guard(holds_.mutex);
    holds_.registry.take_expired(clock::now(), lost);
  }
  fire(lost);
}

std::uint64_t lock_engine::hold_count(const lock_ref& lock, std::uint64_t owner) noexcept {
  if (io_.forked()) return 0;  // a child holds none of its parent's locks
  expire_due_holds();
  std::uint64_t count = 0;
  std::shared_ptr<std::stop_source> lost_stop;
  {
    std::lock_guard guard(holds_.mutex);
    count = holds_.registry.count({lock, owner});
    if (count == 0) lost_stop = holds_.registry.stop_if_lost({lock, owner});
  }
  // As release(): a holder told "not held" of a lost hold finds its stop_token stopped.
  if (lost_stop) lost_stop->request_stop();
  return count;
}

std::uint64_t lock_engine::fencing_token(const lock_ref& lock, std::uint64_t owner) const noexcept {
  if (io_.forked()) return 0;  // a child holds none of its parent's locks
  std::lock_guard guard(const_cast<std::mutex&>(holds_.mutex));
  return holds_.registry.token({lock, owner});
}

std::stop_token lock_engine::stop_token(const lock_ref& lock, std::uint64_t owner) noexcept {
  if (io_.forked()) return {};  // a child holds none of its parent's locks
  expire_due_holds();
  std::stop_token token;
  std::shared_ptr<std::stop_source> lost_stop;
  {
    std::lock_guard guard(holds_.mutex);
    token = holds_.registry.stop_token({lock, owner});
    lost_stop = holds_.registry.stop_if_lost({lock, owner});
  }
  if (lost_stop) lost_stop->request_stop();  // as release()
  return token;
}

void lock_engine::on_thread_exit(std::uint64_t thread_key) noexcept {
  if (io_.forked()) return;
  // A thread that ended cannot unlock: stop renewing its holds and let their leases run out.
  // Copies of their stop tokens (handed to other threads) hear that the holds are gone.
  losses lost;
  {
    std::lock_guard lock(holds_.mutex);
    holds_.registry.drop_owner(thread_key, lock_loss_reason::thread_exited, lost);
  }
  if (lost.empty()) return;
  // Stop callbacks are user code; here the thread-exit registry's mutex is held, so they run on
  // the I/O thread instead.
  try {
    io_.post([weak = weak_from_this(), lost] {
      if (auto self = weak.lock()) self->fire(lost);
    });
  } catch (...) {
    // Stopped: the client reported every hold lost already.
  }
}

}  // namespace dlock::locks
