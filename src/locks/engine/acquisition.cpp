#include "locks/engine/acquisition.hpp"

#include <utility>

namespace dlock::locks {

using kind = acquisition_machine::action::kind;

// How soon an attempt lost with its link (a failover) is tried again.
constexpr std::int64_t lost_link_retry_ms = 50;
using verdict = acquisition_machine::verdict;

std::shared_ptr<acquisition> acquisition::create(std::shared_ptr<lock_engine> engine, params p,
                                                 completion done) {
  auto self = std::make_shared<acquisition>(std::move(engine), std::move(p), std::move(done));
  // A wake-up for this waiter posts the next step to the I/O thread (it runs under the queues'
  // mutex, so it must not do more).
  self->waiter_.wake = [weak = self->weak_from_this(), &io = self->engine_->io().io()] {
    asio::post(io, [weak] {
      if (auto machine = weak.lock()) machine->run(machine->machine_.on_wake_up());
    });
  };
  return self;
}

acquisition::acquisition(std::shared_ptr<lock_engine> engine, params p, completion done)
    : engine_(std::move(engine)),
      p_(std::move(p)),
      key_{p_.lock, p_.owner},
      channel_(
          p_.lock.protocol->waits_by_owner()
              ? p_.lock.protocol->owner_wake_channel(p_.lock.name, engine_->owner_field(p_.owner))
              : p_.lock.protocol->wake_channel(p_.lock.name)),
      // One queue per owner where the server keeps the order: this client's waiters of the lock
      // neither queue behind each other nor share wake-ups.
      waits_(p_.lock.protocol->waits_by_owner() ? lock_ref{p_.lock.protocol, channel_} : p_.lock),
      uses_line_(p_.lock.protocol->leaves_line()),
      line_{p_.lock.protocol, waits_.name},
      done_(std::move(done)),
      machine_(p_.deadline, p_.lock.protocol->wait_refresh()) {}

bool acquisition::begin(bool line_use_taken_over) {
  // A blocking caller hands its use of the line over; an asynchronous acquisition begins one.
  if (uses_line_ && !line_use_taken_over) engine_->line_uses_.begin(line_);
  engine_->acquisitions_[this] = shared_from_this();
  if (engine_->stopping_.load(std::memory_order_acquire)) {
    // Began while the client stops (after stop_acquisitions() ran): ends now, while requests
    // still go out, rather than attempt unseen by the shutdown.
    finish(make_error_code(errc::client_stopped), "the client was destroyed", false);
    return false;
  }
  if (p_.cancel.stop_possible()) {
    cancel_callback_.emplace(p_.cancel, [weak = weak_from_this(), &io = engine_->io().io()] {
      // Only posts: the I/O thread owns the state. Deregistered by finish() before the client
      // (and its io_context) can go away.
      asio::post(io, [weak] {
        if (auto self = weak.lock()) self->run(self->machine_.on_cancel());
      });
    });
  }
  if (p_.cancel.stop_requested()) {
    finish(make_error_code(errc::cancelled), {}, false);
    return false;
  }
  return true;
}

void acquisition::start() {
  if (!begin(false)) return;
  run(machine_.start(clock::now(), engine_->waiters_.queued_ttl(waits_)));
}

void acquisition::start_waiting(std::int64_t ttl_ms, bool attempted, bool holder_publishes,
                                bool holder_calls, std::optional<clock::time_point> attempt_sent,
                                bool field_may_be_left) {
  if (!begin(true)) return;
  attempt_sent_ = attempt_sent;
  field_may_be_left_ = field_may_be_left;
  holder_calls_ = holder_calls;
  // The blocking caller's attempt was one that may wait: it may have joined the server's line
  // (the fair lock's owners, the wait line of clients) or left a writer's intent, and must undo
  // that if this ends without a hold.
  may_be_in_line_ = attempted;
  run(machine_.start_waiting(clock::now(), ttl_ms, attempted, holder_publishes));
}

void acquisition::stop() {
  // An attempt still out may take the lock, which nobody would then hold. A release by owner
  // follows it at once on its link (it works even if the client cannot wait for the reply), and
  // the shutdown's drain waits for the reply, which gives back a hold whose release needs its
  // token (a plain lock's value): not left for its lease either way.
  if (machine_.attempting() || field_may_be_left_) engine_->release_orphan(key_);
  if (machine_.attempting()) {
    engine_->releases_->expect();
    stopped_mid_attempt_ = true;
  }
  finish(make_error_code(errc::client_stopped), "the client was destroyed", false);
}

void acquisition::refuse(const error& e) {
  done_(e.code(), e.detail(), false);
}

void acquisition::run(const acquisition_machine::action& a) {
  if (finished_) return;
  switch (a.what) {
    case kind::none:
      return;
    case kind::attempt:
      if (a.holder_ttl_ms && !saw_holder(a)) return;
      send_attempt();
      return;
    case kind::wait:
      if (a.join_queue) {
        ++engine_->counters_.waited;
        ++engine_->counters_.of(p_.lock.protocol->kind()).waited;
        try {
          engine_->waiters_.join(waits_, channel_, &waiter_, a.holder_ttl_ms, a.holder_publishes,
                                 attempt_sent_, holder_calls_);
        } catch (const error& e) {
          finish(e.code(), e.detail(), false);
          return;
        }
        in_queue_ = true;
      } else if (a.holder_ttl_ms && !saw_holder(a)) {
        return;
      }
      arm_timer(a.wake_at);
      return;
    case kind::finish:
      switch (a.result) {
        case verdict::acquired:
          finish({}, {}, true);
          return;
        case verdict::timed_out:
          ++engine_->counters_.timed_out;
          ++engine_->counters_.of(p_.lock.protocol->kind()).timed_out;
          if (unconfirmed_) {
            finish(make_error_code(errc::replicas_unavailable), unconfirmed_why_, false);
          } else {
            finish({}, {}, false);
          }
          return;
        case verdict::cancelled:
          finish(make_error_code(errc::cancelled), {}, false);
          return;
        case verdict::failed:
          return;  // on_reply finishes with the error itself
      }
  }
}

bool acquisition::saw_holder(const acquisition_machine::action& a) {
  try {
    if (engine_->waiters_.saw_holder(waits_, *a.holder_ttl_ms, a.holder_publishes, holder_calls_,
                                     &waiter_, attempt_sent_)) {
      engine_->drop_idle_subscriptions_later();
    }
    return true;
  } catch (const error& e) {  // subscribing to the shared channel failed (the client stopped)
    finish(e.code(), e.detail(), false);
    return false;
  }
}

void acquisition::send_attempt() {
  const bool used_wake_up = in_queue_ && engine_->waiters_.take_wake_up(&waiter_);
  machine_.attempt_sent(used_wake_up);
  ++timer_generation_;  // a timer that fired meanwhile is stale now
  if (timer_) timer_->cancel();
  const attempt_plan plan = engine_->plan(key_, p_.lease ? &*p_.lease : nullptr);
  attempt_request request{p_.lock.name, plan.owner, plan.lease, plan.known_holds};
  request.may_wait = clock::now() < p_.deadline;
  request.in_line = in_queue_;
  request.others_waiting = engine_->waiters_.waiting(waits_) > (in_queue_ ? 1 : 0);
  may_be_in_line_ = may_be_in_line_ || request.may_wait || request.others_waiting;
  const script_call call = p_.lock.protocol->attempt(request);
  const auto sent_at = clock::now();
  attempt_sent_ = sent_at;
  try {
    // (On the I/O thread, as the reply: a reply handled inside the call failed it already.)
    const bool withdrew = engine_->send_attempt(
        p_.lock, plan.owner, call,
        [self = shared_from_this(), plan, sent_at, others = request.others_waiting](
            std::error_code ec, const reply& r) { self->on_reply(plan, sent_at, others, ec, r); });
    if (withdrew) field_may_be_left_ = true;
  } catch (const error& e) {
    finish(e.code(), e.detail(), false, used_wake_up);
  }
}

void acquisition::on_reply(const attempt_plan& plan, clock::time_point sent_at, bool others_waiting,
                           std::error_code ec, const reply& r) {
  if (finished_) {
    // Stopped while the attempt was out (see stop()); otherwise the finish came from its reply.
    if (std::exchange(stopped_mid_attempt_, false)) engine_->give_back_late_hold(key_, plan, ec, r);
    return;
  }
  attempt_outcome outcome;
  std::string detail = r.str;
  if (!ec) {
    try {
      outcome = engine_->read_attempt_reply(key_, plan, r, sent_at, unconfirmed_, unconfirmed_why_);
    } catch (const error& e) {
      ec = e.code();
      detail = e.detail();
    }
  }
  if (ec == errc::connection_lost && !retried_lost_link_ && engine_->masters_move()) {
    // A master that can move (Sentinel, Cluster) broke the link under the attempt: most likely a
    // failover. Try once more, soon, as the same owner: if the lost attempt did take the lock,
    // the lock script takes that hold over as a fresh one. Later failures end the wait.
    retried_lost_link_ = true;
    field_may_be_left_ = true;
    const bool pending = in_queue_ && engine_->waiters_.has_wake_up(&waiter_);
    run(machine_.on_held(clock::now(), lost_link_retry_ms, pending, p_.cancel.stop_requested()));
    return;
  }
  if (ec) {
    // The script may have run and taken the lock after all: undone now, unless the owner held
    // it already (lock_engine::release_orphan), rather than left held until its lease ends. Not
    // run, it cannot stand in for an earlier attempt that may have run or for the releases it
    // withdrew (lock_engine::send_attempt): the same.
    if (attempt_may_have_run(ec) || field_may_be_left_) engine_->release_orphan(key_);
    const auto a = machine_.on_failed();
    finish(ec, detail, false, a.pass_wake_up);
    return;
  }
  // It ran: it took the owner's field over, re-entered its hold or was refused, leaving none.
  field_may_be_left_ = false;
  const bool cancel_requested = p_.cancel.stop_requested();
  if (outcome.status != attempt_outcome::kind::held_by_other) {
    if (!others_waiting) engine_->keep_place_in_line(waits_, &waiter_);
    const auto a = machine_.on_acquired(cancel_requested);
    if (a.result == verdict::cancelled) {
      (void)engine_->release(p_.lock, p_.owner);  // a hold that came too late goes back
    }
    run(a);
    return;
  }
  const bool pending = in_queue_ && engine_->waiters_.has_wake_up(&waiter_);
  holder_calls_ = outcome.holder_calls;
  run(machine_.on_held(clock::now(), outcome.holder_ttl_ms, pending, cancel_requested,
                       outcome.holder_publishes));
}

void acquisition::arm_timer(clock::time_point at) {
  if (!timer_) timer_.emplace(engine_->io().io());
  timer_->expires_at(at);
  timer_->async_wait(
      [self = shared_from_this(), generation = timer_generation_](std::error_code ec) {
        if (ec || generation != self->timer_generation_) return;
        const bool first = self->engine_->waiters_.is_first(self->waits_, &self->waiter_);
        self->run(self->machine_.on_timer(clock::now(), first));
      });
}

void acquisition::finish(std::error_code ec, const std::string& detail, bool held, bool give_back) {
  if (finished_) return;
  finished_ = true;
  const auto keep_alive = shared_from_this();
  cancel_callback_.reset();
  ++timer_generation_;
  timer_.reset();
  if (in_queue_) {
    bool last_of_lock = false;
    subscription last = engine_->waiters_.leave(waits_, &waiter_, give_back, &last_of_lock);
    if (last_of_lock) engine_->drop_idle_subscriptions_later();
    if (last) {
      // Unsubscribing is I/O: only while the client lives; afterwards the subscription is parked
      // and dropped by shutdown on the I/O thread while the subscriber still lives.
      if (engine_->io().stopped()) {
        std::lock_guard lock(engine_->parked_mutex_);
        engine_->parked_.push_back(std::move(last));
      } else {
        last.reset();
      }
    }
  }
  // The client's last acquisition of the lock ended, and one that gave up may have left a mark
  // (a place in the server's line, a writer's intent; also one whose attempt was still out when
  // its client stopped, or that the client's shutdown ended): the client leaves the line, after
  // that attempt.
  if (uses_line_) {
    engine_->line_uses_.end(line_, held, may_be_in_line_,
                            [this] { engine_->leave_line(p_.lock, p_.owner); });
  }
  engine_->acquisitions_.erase(this);
  done_(ec, detail, held);
}

}  // namespace dlock::locks
