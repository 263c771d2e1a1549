// Waiting for a lock, for blocking and asynchronous acquisitions alike: a small state machine on
// the I/O thread. A blocking lock() makes its first attempt on the calling thread (no thread
// hand-off when the lock is free) and, if the lock is taken, sleeps until the machine is done; an
// async acquisition runs everything here. Driving the retries from the I/O thread means that an
// unlock message turns into the next attempt without waking any other thread first.
//
// The machine, confined to the I/O thread once started:
//   attempt in flight --reply: acquired--> done (lease)
//                     --reply: held------> waiting (subscribed; timer at min(deadline, holder TTL))
//   waiting --permit (unlock message) or timer--> attempt in flight
//   any state --cancel / deadline / error / client stopped--> done
// A permit that arrives while an attempt is in flight stays on the waiter and starts the next
// attempt as soon as the reply says the lock is still taken, so no unlock message is lost.
#include <asio.hpp>

#include "core/eval.hpp"
#include "core/identity.hpp"
#include "core/sync_call.hpp"
#include "dlock/error.hpp"
#include "locks/lock_service.hpp"
#include "locks/names.hpp"

namespace dlock::locks {

using std::chrono::milliseconds;

namespace {
// The detail of a dlock::error, without the code's message that what() starts with.
std::string detail_of(const error& e) {
  const std::string what = e.what();
  const std::string prefix = e.code().message() + ": ";
  if (what.compare(0, prefix.size(), prefix) == 0) return what.substr(prefix.size());
  return what == e.code().message() ? std::string() : what;
}
}  // namespace

class lock_service::acquisition : public std::enable_shared_from_this<lock_service::acquisition> {
 public:
  // `done` runs once, on the I/O thread (or on the caller of start_waiting()/start() when the
  // client is stopped): an error with its detail, or whether `key` now holds the lock.
  using completion = std::function<void(std::error_code ec, const std::string& detail, bool held)>;

  // `release_orphans`: whether `key` is used once only (a lease), so that an attempt whose reply
  // was lost must release what it may have taken.
  static std::shared_ptr<acquisition> create(std::shared_ptr<lock_service> service,
                                             std::string name, std::uint64_t key,
                                             bool release_orphans,
                                             std::optional<milliseconds> lease,
                                             clock::time_point deadline, std::stop_token cancel,
                                             completion done) {
    auto machine =
        std::make_shared<acquisition>(std::move(service), std::move(name), key, release_orphans,
                                      lease, deadline, std::move(cancel), std::move(done));
    // An unlock message for this waiter posts a retry to the I/O thread.
    machine->waiter_.notify = [weak = machine->weak_from_this(), &io = machine->service_->io_] {
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->on_wake();
      });
    };
    return machine;
  }

  // Use create().
  acquisition(std::shared_ptr<lock_service> service, std::string name, std::uint64_t key,
              bool release_orphans, std::optional<milliseconds> lease, clock::time_point deadline,
              std::stop_token cancel, completion done)
      : service_(std::move(service)),
        name_(std::move(name)),
        channel_(unlock_channel(name_)),
        key_(key),
        release_orphans_(release_orphans),
        lease_(lease),
        deadline_(deadline),
        cancel_(std::move(cancel)),
        done_(std::move(done)) {}

  // On the I/O thread: begins with an attempt.
  void start() {
    if (!begin()) return;
    if (clock::now() < deadline_) {
      if (const auto ttl = service_->queued_ttl(name_)) {
        on_held(*ttl, false);  // behind this client's earlier waiters
        return;
      }
    }
    try_once();
  }

  // On the I/O thread: the caller's attempt found the lock held with `ttl_ms` left (`attempted`),
  // or the caller queues behind earlier waiters who saw that much left.
  void start_waiting(std::int64_t ttl_ms, bool attempted) {
    if (!begin()) return;
    attempted_ = attempted;
    on_held(ttl_ms, attempted);
  }

  // On the I/O thread: the client is stopping.
  void stop() { finish(make_error_code(errc::client_stopped), "the client was destroyed"); }

  // Not started because the client is stopped: on the calling thread.
  void refuse(const error& e) { done_(e.code(), detail_of(e), false); }

 private:
  bool begin() {
    service_->acquisitions_[this] = shared_from_this();
    if (cancel_.stop_possible()) {
      cancel_callback_.emplace(cancel_, [weak = weak_from_this(), &io = service_->io_] {
        // Only posts: the I/O thread owns the state. Deregistered by finish() before the client
        // (and its io_context) can go away.
        asio::post(io, [weak] {
          if (auto self = weak.lock()) self->on_cancel();
        });
      });
    }
    if (cancel_.stop_requested()) {
      finish(make_error_code(errc::cancelled), {});
      return false;
    }
    return true;
  }

  void try_once() {
    if (finished_ || in_flight_) return;
    if (cancel_.stop_requested()) {
      finish(make_error_code(errc::cancelled), {});
      return;
    }
    {
      std::lock_guard lock(waiter_.m);
      woken_ = waiter_.permit;  // this attempt uses up the wake-up, if there was one
      waiter_.permit = false;
    }
    ++timer_generation_;  // a timer that fired meanwhile is stale now
    if (timer_) timer_->cancel();
    attempted_ = true;
    const milliseconds* lease = lease_ ? &*lease_ : nullptr;
    auto req = std::make_shared<attempt_request>(service_->prepare_attempt(name_, key_, lease));
    const std::string_view keys[] = {req->name, req->fence};
    const std::string_view args[] = {req->lease_arg, req->field, req->known_arg};
    in_flight_ = true;
    try {
      service_->with_servers([&](topology::topology& servers) {
        core::eval_on(servers.connection_for(name_), service_->lock_script_, keys, args,
                      service_->request_timeout_,
                      [self = shared_from_this(), req](std::error_code ec, reply r) {
                        self->on_reply(*req, ec, r);
                      });
      });
    } catch (const error& e) {
      in_flight_ = false;
      give_back_wake_up();
      finish(e.code(), detail_of(e));
    }
  }

  void on_reply(const attempt_request& req, std::error_code ec, const reply& r) {
    in_flight_ = false;
    if (finished_) {
      // Stopped while the attempt was out: a hold it may have taken ends with its lease.
      return;
    }
    if (ec) {
      // The script may have run: a lease key's orphan is undone now (nobody would ever release
      // it); a thread's is taken over by that thread's next acquisition (see the lock script).
      if (ec != errc::server_error && release_orphans_) {
        service_->release_orphan(name_, key_);
      }
      give_back_wake_up();
      finish(ec, r.str);
      return;
    }
    attempt_result result;
    try {
      result = service_->apply_attempt(req, r);
    } catch (const error& e) {
      give_back_wake_up();
      finish(e.code(), detail_of(e));
      return;
    }
    if (result.status != attempt_status::held_by_other) {
      if (cancel_.stop_requested()) {
        (void)service_->release(name_, key_);
        finish(make_error_code(errc::cancelled), {});
      } else {
        finish({}, {}, true);
      }
      return;
    }
    on_held(result.ttl_ms, true);
  }

  // The lock is taken, with `ttl_ms` left; `observed`: seen by this machine's own attempt (not
  // inherited from earlier waiters).
  void on_held(std::int64_t ttl_ms, bool observed) {
    if (cancel_.stop_requested()) {
      finish(make_error_code(errc::cancelled), {});
      return;
    }
    if (clock::now() >= deadline_) {
      if (!attempted_) {
        // Queued behind others and out of time before trying: one attempt, as try_lock().
        try_once();
        return;
      }
      ++service_->counters_.timed_out;
      finish({}, {}, false);
      return;
    }
    if (!subscribed_) {
      ++service_->counters_.waited;
      // Listen for the unlock message. The (re)subscription confirmation wakes every waiter to
      // re-check, which covers an unlock between this attempt and the subscription.
      try {
        service_->add_waiter(channel_, &waiter_, observed ? std::optional(ttl_ms) : std::nullopt);
      } catch (const error& e) {
        finish(e.code(), detail_of(e));
        return;
      }
      subscribed_ = true;
    } else if (observed) {
      service_->note_holder_ttl(channel_, ttl_ms);
    }
    wait(ttl_ms);
  }

  void wait(std::int64_t ttl_ms) {
    {
      std::lock_guard lock(waiter_.m);
      if (waiter_.permit) {
        // Woken while the attempt was out: try again at once.
        asio::post(service_->io_, [self = shared_from_this()] { self->try_once(); });
        return;
      }
    }
    auto wake_at = deadline_;
    if (ttl_ms >= 0) wake_at = std::min(wake_at, clock::now() + milliseconds(ttl_ms + 1));
    if (!timer_) timer_.emplace(service_->io_);
    timer_->expires_at(wake_at);
    timer_->async_wait(
        [self = shared_from_this(), generation = timer_generation_](std::error_code ec) {
          if (ec || generation != self->timer_generation_) return;
          self->try_once();
        });
  }

  void on_wake() {
    // During an attempt the permit waits on the waiter; wait() picks it up.
    if (!finished_ && !in_flight_) try_once();
  }

  void on_cancel() {
    // An attempt in flight finishes first (and releases what it got).
    if (!finished_ && !in_flight_) finish(make_error_code(errc::cancelled), {});
  }

  // After a failed attempt that used up a wake-up standing for an unlock: hand it back, so that
  // leaving passes it on to the next waiter.
  void give_back_wake_up() {
    if (!woken_) return;
    std::lock_guard lock(waiter_.m);
    waiter_.permit = true;
  }

  void finish(std::error_code ec, const std::string& detail, bool held = false) {
    if (finished_) return;
    finished_ = true;
    const auto keep_alive = shared_from_this();
    cancel_callback_.reset();
    ++timer_generation_;
    timer_.reset();
    if (subscribed_) service_->remove_waiter(channel_, &waiter_);
    service_->acquisitions_.erase(this);
    done_(ec, detail, held);  // must not throw (the wrappers below catch)
  }

  const std::shared_ptr<lock_service> service_;
  const std::string name_;
  const std::string channel_;
  const std::uint64_t key_;
  const bool release_orphans_;
  const std::optional<milliseconds> lease_;
  const clock::time_point deadline_;
  const std::stop_token cancel_;
  completion done_;

  waiter waiter_;
  std::optional<asio::steady_timer> timer_;
  std::uint64_t timer_generation_ = 0;
  std::optional<std::stop_callback<std::function<void()>>> cancel_callback_;
  bool in_flight_ = false;
  bool attempted_ = false;  // an attempt was made (by this machine or, blocking, by the caller)
  bool subscribed_ = false;
  bool woken_ = false;
  bool finished_ = false;
};

void lock_service::async_acquire(const std::string& name, const acquire_options& options,
                                 lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  check_lease(options.lease ? &*options.lease : nullptr);
  auto deadline = clock::time_point::max();
  if (options.wait) {
    // Waits longer than a century are "forever" (and cannot overflow the deadline).
    constexpr auto cap = std::chrono::hours(24 * 365 * 100);
    if (*options.wait < cap) deadline = clock::now() + *options.wait;
  }
  const std::uint64_t key = core::new_owner_key();
  auto on_done = [weak = weak_from_this(), name, key, done = std::move(done)](
                     std::error_code ec, const std::string&, bool held) {
    lock_lease lease;
    if (!ec && held) {
      if (auto self = weak.lock()) lease = self->make_lease(name, key);
    }
    try {
      done(ec, std::move(lease));
    } catch (...) {
      // The caller's handler failed; a lease it did not keep is released by its destructor.
    }
  };
  auto machine = acquisition::create(shared_from_this(), name, key, true, options.lease, deadline,
                                     options.cancel, std::move(on_done));
  try {
    with_servers([&](topology::topology&) { asio::post(io_, [machine] { machine->start(); }); });
  } catch (const error& e) {
    machine->refuse(e);  // stopped: on the calling thread, as documented
  }
}

bool lock_service::wait_for_lock(const std::string& name, std::uint64_t key,
                                 const milliseconds* lease, clock::time_point deadline,
                                 std::int64_t ttl_ms, bool attempted) {
  // Blocks like any synchronous request: the outcome travels as a reply (integer 1: held).
  core::sync_call call;
  auto machine = acquisition::create(
      shared_from_this(), name, key, false, lease ? std::optional(*lease) : std::nullopt, deadline,
      std::stop_token{},
      [done = call.handler()](std::error_code ec, const std::string& detail, bool held) {
        done(ec, ec ? reply::make_error(detail) : reply::make_integer(held ? 1 : 0));
      });
  with_servers([&](topology::topology&) {
    asio::post(io_, [machine, ttl_ms, attempted] { machine->start_waiting(ttl_ms, attempted); });
  });
  return call.wait().integer == 1;
}

void lock_service::finish_acquisitions() {
  // Copied: finishing erases from the map.
  std::vector<std::shared_ptr<acquisition>> all;
  for (const auto& [raw, machine] : acquisitions_)
    all.push_back(machine);
  for (const auto& machine : all)
    machine->stop();
}

lock_lease lock_service::make_lease(const std::string& name, std::uint64_t key) {
  std::lock_guard lock(mutex_);
  const auto it = holds_.find({name, key});
  if (it == holds_.end()) return {};
  return lock_lease(shared_from_this(), name, key, owner_field(key), it->second.token,
                    it->second.stop->get_token());
}

}  // namespace dlock::locks
