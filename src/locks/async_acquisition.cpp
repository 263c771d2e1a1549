// Asynchronous acquisition: the same attempts and the same waiter queue as a blocking lock(), with
// the waiting done by callbacks on the I/O thread instead of a sleeping caller.
//
// An acquisition is a small state machine confined to the I/O thread once started:
//   attempt in flight --reply: acquired--> done (lease)
//                     --reply: held------> waiting (subscribed; timer at min(deadline, holder TTL))
//   waiting --permit (unlock message) or timer--> attempt in flight
//   any state --cancel / deadline / error / client stopped--> done
// A permit that arrives while an attempt is in flight stays on the waiter and starts the next
// attempt as soon as the reply says the lock is still taken, so no unlock message is lost.
#include <asio.hpp>

#include "core/eval.hpp"
#include "core/identity.hpp"
#include "dlock/error.hpp"
#include "locks/lock_service.hpp"
#include "locks/names.hpp"

namespace dlock::locks {

using std::chrono::milliseconds;

class lock_service::async_acquisition
    : public std::enable_shared_from_this<lock_service::async_acquisition> {
 public:
  async_acquisition(std::shared_ptr<lock_service> service, std::string name,
                    std::optional<milliseconds> lease, clock::time_point deadline,
                    std::stop_token cancel, lease_handler done)
      : service_(std::move(service)),
        name_(std::move(name)),
        channel_(unlock_channel(name_)),
        key_(core::new_owner_key()),
        lease_(lease),
        deadline_(deadline),
        cancel_(std::move(cancel)),
        done_(std::move(done)) {}

  // On the I/O thread.
  void start() {
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
    try_once();
  }

  // Before start(): the unlock-message notification posts a retry to the I/O thread.
  void waiter_notify_ready() {
    waiter_.notify = [weak = weak_from_this(), &io = service_->io_] {
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->on_wake();
      });
    };
  }

  // On the I/O thread: the client is stopping.
  void stop() { finish(make_error_code(errc::client_stopped), {}); }

  void complete_with(std::error_code ec) { done_(ec, {}); }

 private:
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
      finish(e.code(), {});
    }
  }

  void on_reply(const attempt_request& req, std::error_code ec, const reply& r) {
    in_flight_ = false;
    if (finished_) {
      // Stopped while the attempt was out: a hold it may have taken ends with its lease.
      return;
    }
    if (ec) {
      // The script may have run: undo a hold nobody will ever release (a no-op if it did not).
      if (ec != errc::server_error) service_->release_orphan(name_, key_);
      give_back_wake_up();
      finish(ec, {});
      return;
    }
    attempt_result result;
    try {
      result = service_->apply_attempt(req, r);
    } catch (const error& e) {
      give_back_wake_up();
      finish(e.code(), {});
      return;
    }
    if (result.status != attempt_status::held_by_other) {
      lock_lease lease = service_->make_lease(name_, key_);
      if (cancel_.stop_requested()) {
        (void)lease.release();
        finish(make_error_code(errc::cancelled), {});
      } else {
        finish({}, std::move(lease));
      }
      return;
    }
    if (clock::now() >= deadline_) {
      ++service_->counters_.timed_out;
      finish({}, {});
      return;
    }
    if (!subscribed_) {
      ++service_->counters_.waited;
      // Listen for the unlock message. The (re)subscription confirmation wakes every waiter to
      // re-check, which covers an unlock between this attempt and the subscription.
      try {
        service_->add_waiter(channel_, &waiter_);
      } catch (const error& e) {
        finish(e.code(), {});
        return;
      }
      subscribed_ = true;
    }
    wait(result.ttl_ms);
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

  void finish(std::error_code ec, lock_lease lease) {
    if (finished_) return;
    finished_ = true;
    const auto keep_alive = shared_from_this();
    cancel_callback_.reset();
    ++timer_generation_;
    timer_.reset();
    if (subscribed_) service_->remove_waiter(channel_, &waiter_);
    service_->acquisitions_.erase(this);
    try {
      done_(ec, std::move(lease));
    } catch (...) {
      // The caller's handler failed; the lease it was given (if it kept none) is released.
    }
  }

  const std::shared_ptr<lock_service> service_;
  const std::string name_;
  const std::string channel_;
  const std::uint64_t key_;
  const std::optional<milliseconds> lease_;
  const clock::time_point deadline_;
  const std::stop_token cancel_;
  lease_handler done_;

  waiter waiter_;
  std::optional<asio::steady_timer> timer_;
  std::uint64_t timer_generation_ = 0;
  std::optional<std::stop_callback<std::function<void()>>> cancel_callback_;
  bool in_flight_ = false;
  bool subscribed_ = false;
  bool woken_ = false;
  bool finished_ = false;
};

void lock_service::async_acquire(const std::string& name, const acquire_options& options,
                                 lease_handler done) {
  if (!done) throw error(errc::invalid_argument, "an asynchronous acquisition needs a handler");
  const milliseconds* lease = options.lease ? &*options.lease : nullptr;
  check_lease(lease);
  auto deadline = clock::time_point::max();
  if (options.wait) {
    // Waits longer than a century are "forever" (and cannot overflow the deadline).
    constexpr auto cap = std::chrono::hours(24 * 365 * 100);
    if (*options.wait < cap) deadline = clock::now() + *options.wait;
  }
  auto acquisition = std::make_shared<async_acquisition>(shared_from_this(), name, options.lease,
                                                         deadline, options.cancel, std::move(done));
  acquisition->waiter_notify_ready();
  try {
    with_servers(
        [&](topology::topology&) { asio::post(io_, [acquisition] { acquisition->start(); }); });
  } catch (const error& e) {
    acquisition->complete_with(e.code());  // stopped: on the calling thread, as documented
  }
}

void lock_service::finish_async_acquisitions() {
  // Copied: finishing erases from the map.
  std::vector<std::shared_ptr<async_acquisition>> all;
  for (const auto& [raw, acquisition] : acquisitions_)
    all.push_back(acquisition);
  for (const auto& acquisition : all)
    acquisition->stop();
}

lock_lease lock_service::make_lease(const std::string& name, std::uint64_t key) {
  std::lock_guard lock(mutex_);
  const auto it = holds_.find({name, key});
  if (it == holds_.end()) return {};
  return lock_lease(shared_from_this(), name, key, owner_field(key), it->second.token,
                    it->second.stop->get_token());
}

}  // namespace dlock::locks
