#include "locks/lock_service.hpp"

#include <algorithm>
#include <future>

#include "core/eval.hpp"
#include "core/sync_call.hpp"
#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "locks/names.hpp"

namespace dlock::locks {
namespace {

using std::chrono::milliseconds;

// What Redisson publishes on unlock; its waiters and ours both understand it.
constexpr std::string_view unlock_message = "0";

// A hold counts as lost this much before its lease would end on the server, so the holder hears
// of it while the lock is still its own.
milliseconds safety_margin(milliseconds lease) {
  return std::max(lease / 10, milliseconds(1));
}

// A release retried after a lost connection or a timeout: how often at most.
constexpr int release_tries = 5;

lease::lease_scheduler make_scheduler(milliseconds watchdog) {
  try {
    return lease::lease_scheduler(watchdog, safety_margin(watchdog));
  } catch (const std::invalid_argument& e) {
    throw error(errc::invalid_argument, std::string("lock_watchdog_timeout: ") + e.what());
  }
}

bool is_retryable(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout;
}

}  // namespace

void check_lease(const milliseconds* lease) {
  if (lease != nullptr && lease->count() <= 0) {
    throw error(errc::invalid_argument, "a lock lease must be positive");
  }
}

std::vector<std::string_view> scripts_to_preload() {
  return {scripts::reentrant_lock, scripts::reentrant_unlock, scripts::renew_leases,
          scripts::force_unlock, scripts::lock_status};
}

lock_service::lock_service(asio::io_context& io, topology::topology& servers,
                           const client_options& options)
    : io_(io),
      servers_(servers),
      watchdog_lease_(options.lock_watchdog_timeout),
      request_timeout_(options.request_timeout),
      client_id_(core::random_id()),
      lock_script_(std::string(scripts::reentrant_lock)),
      unlock_script_(std::string(scripts::reentrant_unlock)),
      renew_script_(std::string(scripts::renew_leases)),
      force_script_(std::string(scripts::force_unlock)),
      status_script_(std::string(scripts::lock_status)),
      on_lock_lost_(options.on_lock_lost),
      scheduler_(make_scheduler(options.lock_watchdog_timeout)),
      timer_(std::in_place, io) {
  core::add_thread_exit_listener(this);
}

lock_service::~lock_service() {
  core::remove_thread_exit_listener(this);
}

std::string lock_service::owner_field(std::uint64_t key) const {
  return client_id_ + ":" + std::to_string(key);
}

void lock_service::check_not_io_thread() const {
  if (std::this_thread::get_id() == io_thread_.load()) {
    throw error(errc::invalid_argument,
                "a blocking lock call from a dlock callback would deadlock; use the async API");
  }
}

reply lock_service::call_script(const script& s, const std::string& name,
                                std::span<const std::string_view> keys,
                                std::span<const std::string_view> args) {
  check_not_io_thread();
  core::sync_call call;
  with_servers([&](topology::topology& servers) {
    core::eval_on(servers.connection_for(name), s, keys, args, request_timeout_, call.handler());
  });
  return call.wait();
}

void lock_service::mark_lost(const hold_key& key, hold& h, lock_loss_reason reason, losses& out) {
  if (h.lost) return;
  h.lost = true;
  if (h.watchdog) {
    (void)scheduler_.remove(*h.watchdog);
    watchdog_owner_.erase(*h.watchdog);
    h.watchdog.reset();
  }
  out.stops.push_back(h.stop);
  if (on_lock_lost_) out.events.push_back({key.first, owner_field(key.second), reason});
  ++counters_.lost;
}

void lock_service::fire(const losses& lost) const noexcept {
  for (const auto& s : lost.stops)
    s->request_stop();
  for (const lock_loss& event : lost.events) {
    try {
      on_lock_lost_(event);
    } catch (...) {
      // Documented: the callback must not throw; a failing logger must not stop the others.
    }
  }
}

lock_metrics lock_service::metrics() const noexcept {
  lock_metrics m;
  m.acquired = counters_.acquired;
  m.reentered = counters_.reentered;
  m.waited = counters_.waited;
  m.timed_out = counters_.timed_out;
  m.released = counters_.released;
  m.lost = counters_.lost;
  m.renewal_scripts = counters_.renewal_scripts;
  m.leases_renewed = counters_.leases_renewed;
  m.release_retries = counters_.release_retries;
  return m;
}

// --- acquiring ---------------------------------------------------------------------------------

lock_service::attempt_request lock_service::prepare_attempt(const std::string& name,
                                                            std::uint64_t key,
                                                            const milliseconds* lease) {
  attempt_request req;
  req.name = name;
  req.key = key;
  req.lease = lease != nullptr ? *lease : watchdog_lease_;
  req.watchdog = lease == nullptr;
  std::uint64_t known = 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = holds_.find({name, key});
    if (it != holds_.end() && !it->second.lost) {
      // A re-entry keeps the lease kind of the first hold.
      known = it->second.count;
      req.lease = it->second.lease;
      req.watchdog = !it->second.lose_at.has_value();
    }
  }
  req.field = owner_field(key);
  req.fence = fence_key(name);
  req.lease_arg = std::to_string(req.lease.count());
  req.known_arg = std::to_string(known);
  req.sent_at = clock::now();
  return req;
}

lock_service::attempt_result lock_service::apply_attempt(const attempt_request& req,
                                                         const reply& r) {
  if (!r.is_array() || r.elements.size() != 2) {
    throw error(errc::protocol_error, "unexpected reply to the lock script: " + to_string(r));
  }
  const std::int64_t status = r.elements[0].integer;
  const std::int64_t value = r.elements[1].integer;
  const hold_key key{req.name, req.key};

  losses lost;
  bool wake_watchdog = false;
  {
    std::lock_guard lock(mutex_);
    const auto it = holds_.find(key);
    const bool live = it != holds_.end() && !it->second.lost && it->second.count > 0;
    if (status == 0 || status == 1) {
      // Our server-side hold is gone (taken, or expired and freshly acquired) while we still
      // counted it: that hold is lost, whatever this call does next.
      if (live) mark_lost(key, it->second, lock_loss_reason::not_held, lost);
    }
    if (status != 0) {
      hold& h = holds_[key];
      if (status == 1 || !live) {
        if (h.watchdog) {
          (void)scheduler_.remove(*h.watchdog);
          watchdog_owner_.erase(*h.watchdog);
        }
        const std::uint64_t token = status == 1 ? static_cast<std::uint64_t>(value) : h.token;
        h = hold{};
        h.token = token;
        h.lease = req.lease;
        std::optional<clock::time_point> due;
        if (req.watchdog) {
          h.watchdog = scheduler_.add({req.name, req.field}, req.sent_at);
          watchdog_owner_[*h.watchdog] = key;
          due = scheduler_.next_wakeup();
        } else {
          h.lose_at = req.sent_at + req.lease - safety_margin(req.lease);
          due = h.lose_at;
        }
        // The timer is re-armed only if this hold needs it sooner: one tick per acquisition
        // would cost the I/O thread a pass over every hold.
        wake_watchdog = !timer_at_ || (due && *due < *timer_at_);
        ++counters_.acquired;
      } else if (h.lose_at) {
        // The re-entry re-set the TTL: an explicit lease runs from this request on (later than
        // before, so the armed timer is early, never late).
        h.lose_at = req.sent_at + h.lease - safety_margin(h.lease);
      }
      if (status == 2 && live) ++counters_.reentered;
      h.count = status == 1 ? 1 : static_cast<std::uint64_t>(value);
      // A reply applied after shutdown() swept the holds: nobody will renew this one either.
      std::shared_lock lifetime(lifetime_);
      if (stopped_) mark_lost(key, h, lock_loss_reason::client_stopped, lost);
    }
  }
  fire(lost);
  if (wake_watchdog) schedule_tick();
  if (status == 0) return {attempt_status::held_by_other, value};
  return {status == 1 ? attempt_status::acquired : attempt_status::reentered};
}

lock_service::attempt_result lock_service::attempt(const std::string& name, std::uint64_t key,
                                                   const milliseconds* lease) {
  const attempt_request req = prepare_attempt(name, key, lease);
  const std::string_view keys[] = {req.name, req.fence};
  const std::string_view args[] = {req.lease_arg, req.field, req.known_arg};
  return apply_attempt(req, call_script(lock_script_, name, keys, args));
}

bool lock_service::acquire(const std::string& name, const milliseconds* lease,
                           clock::time_point deadline) {
  check_lease(lease);
  check_not_io_thread();
  const std::uint64_t thread = core::current_thread_key();
  // Behind this client's earlier waiters, unless this thread re-enters a hold it has.
  if (deadline > clock::now()) {
    if (const auto ttl = queued_ttl(name); ttl && hold_count(name, thread) == 0) {
      return wait_for_lock(name, thread, lease, deadline, *ttl, false);
    }
  }
  attempt_result first = attempt(name, thread, lease);
  if (first.status != attempt_status::held_by_other) return true;
  if (clock::now() >= deadline) {
    ++counters_.timed_out;
    return false;
  }
  return wait_for_lock(name, thread, lease, deadline, first.ttl_ms, true);
}

// --- waiting -----------------------------------------------------------------------------------

void lock_service::add_waiter(const std::string& channel, waiter* w,
                              std::optional<std::int64_t> ttl_ms) {
  std::lock_guard lock(waiters_mutex_);
  auto [it, created] = waiters_.try_emplace(channel);
  it->second.queue.push_back(w);
  // In the same critical section, so a newcomer never sees this waiter without the holder.
  if (ttl_ms) it->second.saw_holder(*ttl_ms);
  if (!created) return;
  try {
    std::weak_ptr<lock_service> weak = weak_from_this();
    it->second.sub = with_servers([&](topology::topology& servers) {
      pubsub::subscriber& sub = servers.subscriber_for(channel);
      const std::uint64_t id = sub.add(channel, {[weak, channel](std::string_view) {
                                                   if (auto self = weak.lock())
                                                     self->on_unlock_message(channel);
                                                 },
                                                 [weak, channel] {
                                                   if (auto self = weak.lock())
                                                     self->on_subscribed(channel);
                                                 }});
      return subscription(sub.shared_from_this(), id);
    });
  } catch (...) {
    waiters_.erase(it);
    throw;
  }
}

void lock_service::note_holder_ttl(const std::string& channel, std::int64_t ttl_ms) {
  std::lock_guard lock(waiters_mutex_);
  const auto it = waiters_.find(channel);
  if (it == waiters_.end()) return;
  it->second.saw_holder(ttl_ms);
}

std::optional<std::int64_t> lock_service::queued_ttl(const std::string& name) {
  std::lock_guard lock(waiters_mutex_);
  if (waiters_.empty()) return std::nullopt;
  const auto it = waiters_.find(unlock_channel(name));
  if (it == waiters_.end() || it->second.queue.empty() || !it->second.holder_seen) {
    return std::nullopt;
  }
  const auto& end = it->second.holder_lease_end;
  if (!end) return -1;
  const auto left = std::chrono::ceil<milliseconds>(*end - clock::now());
  return std::max<std::int64_t>(left.count(), 0);
}

void lock_service::remove_waiter(const std::string& channel, waiter* w) {
  subscription last;  // the channel's last waiter left: unsubscribed after the mutex is released
  {
    std::lock_guard lock(waiters_mutex_);
    const auto it = waiters_.find(channel);
    if (it == waiters_.end()) return;
    auto& queue = it->second.queue;
    queue.erase(std::remove(queue.begin(), queue.end(), w), queue.end());
    bool unused_permit = false;
    {
      std::lock_guard wl(w->m);
      unused_permit = w->permit;
    }
    // A waiter that leaves (timed out, or failed) with an unused wake-up passes it on: the
    // unlock it stands for is still there for someone else to take.
    if (unused_permit) give_permit(it->second);
    if (!queue.empty()) return;
    last = std::move(it->second.sub);
    waiters_.erase(it);
  }
  // Unsubscribing is I/O: only while the topology lives. Once shutdown() began the subscription
  // is parked, and shutdown's step on the I/O thread drops it while the subscriber still lives.
  std::shared_lock lifetime(lifetime_);
  if (!stopped_) {
    last.reset();
    return;
  }
  lifetime.unlock();
  std::lock_guard lock(waiters_mutex_);
  parked_subscriptions_.push_back(std::move(last));
}

void lock_service::give_permit(channel_waiters& waiters) {
  for (waiter* w : waiters.queue) {
    std::lock_guard wl(w->m);
    if (w->permit) continue;
    w->permit = true;
    w->notify();
    return;
  }
}

void lock_service::on_unlock_message(const std::string& channel) {
  // One message, one waiter: the first that has no wake-up pending keeps its place in line.
  std::lock_guard lock(waiters_mutex_);
  const auto it = waiters_.find(channel);
  if (it != waiters_.end()) give_permit(it->second);
}

void lock_service::on_subscribed(const std::string& channel) {
  // Subscribed (again): what was published before is lost, so every waiter re-checks.
  std::lock_guard lock(waiters_mutex_);
  const auto it = waiters_.find(channel);
  if (it == waiters_.end()) return;
  wake_all(it->second);
}

void lock_service::wake_all(channel_waiters& waiters) {
  for (waiter* w : waiters.queue) {
    std::lock_guard wl(w->m);
    w->permit = true;
    w->notify();
  }
}

// --- releasing ---------------------------------------------------------------------------------

std::error_code lock_service::release(const std::string& name) noexcept {
  return release(name, core::current_thread_key());
}

std::error_code lock_service::release(const std::string& name, std::uint64_t thread) noexcept {
  try {
    std::error_code result;
    std::vector<std::string> keys, args;
    {
      std::lock_guard lock(mutex_);
      const auto it = holds_.find({name, thread});
      if (it == holds_.end() || it->second.count == 0) return make_error_code(errc::not_owner);
      hold& h = it->second;
      // A lost hold is forgotten with all its counts; a live one gives up one. The script sets
      // the count we keep (see reentrant_unlock.lua).
      if (h.lost) result = make_error_code(errc::lock_lost);
      const std::string lease_arg = std::to_string(h.lease.count());
      const std::uint64_t token = h.token;
      h.count = h.lost ? 0 : h.count - 1;
      const std::string remaining = std::to_string(h.count);
      if (h.count == 0) {
        if (!h.lost) ++counters_.released;
        if (h.watchdog) {
          (void)scheduler_.remove(*h.watchdog);
          watchdog_owner_.erase(*h.watchdog);
        }
        holds_.erase(it);
      }
      // Sent even for a lost hold: the script changes nothing unless our field is still there,
      // and then it frees the lock for others sooner.
      queue_release(name, thread, lease_arg, remaining, token);
    }
    return result;
  } catch (const error& e) {
    return e.code();
  } catch (...) {
    // Out of memory while building the request: the lease will end the hold on the server.
    return make_error_code(errc::client_stopped);
  }
}

void lock_service::queue_release(const std::string& name, std::uint64_t key,
                                 const std::string& lease_arg, const std::string& remaining,
                                 std::uint64_t token) {
  std::vector<std::string> keys = {name, unlock_channel(name), fence_key(name)};
  // The first try is ordered after everything this owner did before: it needs no check.
  std::vector<std::string> args = {std::string(unlock_message), lease_arg, owner_field(key),
                                   remaining, "0"};
  send_release(name, std::move(keys), std::move(args), token, release_tries, false);
}

void lock_service::release_orphan(const std::string& name, std::uint64_t key) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (holds_.count({name, key}) != 0) return;  // a known hold: its owner releases it
    // Async lease keys are never reused, so the field alone says whose hold it is: no token.
    queue_release(name, key, std::to_string(watchdog_lease_.count()), "0", 0);
  } catch (...) {
    // Stopped, or out of memory: the orphan ends with its lease.
  }
}

void lock_service::send_release(const std::string& name, std::vector<std::string> keys,
                                std::vector<std::string> args, std::uint64_t token, int tries_left,
                                bool urgent) {
  {
    std::lock_guard lock(releases_mutex_);
    ++releases_in_flight_;
  }
  auto finished = [this] {
    std::lock_guard lock(releases_mutex_);
    --releases_in_flight_;
    releases_cv_.notify_all();
  };
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  std::vector<std::string_view> arg_views(args.begin(), args.end());
  std::weak_ptr<lock_service> weak = weak_from_this();
  auto on_reply = [weak, name, keys = std::move(keys), args = std::move(args), token, tries_left](
                      std::error_code ec, reply) mutable {
    auto self = weak.lock();
    if (!self) return;
    // The first try may have run. Setting the same remaining count again is harmless; a retry
    // after this owner's hold ended and a new one began is refused by the token check (see
    // reentrant_unlock.lua). The retry goes ahead of everything not yet written.
    if (ec && is_retryable(ec) && tries_left > 1) {
      ++self->counters_.release_retries;
      if (token != 0) args.back() = std::to_string(token);
      try {
        self->send_release(name, std::move(keys), std::move(args), token, tries_left - 1, true);
      } catch (...) {
        // Stopped meanwhile: the lease ends the hold.
      }
    }
    std::lock_guard lock(self->releases_mutex_);
    --self->releases_in_flight_;
    self->releases_cv_.notify_all();
  };
  try {
    with_servers([&](topology::topology& servers) {
      core::eval_on(servers.connection_for(name), unlock_script_, key_views, arg_views,
                    request_timeout_, std::move(on_reply), urgent);
    });
  } catch (...) {
    finished();
    throw;
  }
}

void lock_service::shutdown(milliseconds limit) {
  {
    // Releases already queued (and their retries) get `limit` to reach the server.
    std::unique_lock lock(releases_mutex_);
    releases_cv_.wait_for(lock, limit, [&] { return releases_in_flight_ == 0; });
  }
  {
    std::unique_lock lifetime(lifetime_);
    stopped_ = true;  // nothing new reaches the topology from now on
  }
  losses lost;
  {
    // Nobody renews the remaining holds any more: their holders must hear it.
    std::lock_guard lock(mutex_);
    for (auto& [key, h] : holds_)
      mark_lost(key, h, lock_loss_reason::client_stopped, lost);
  }
  // The timer belongs to the I/O thread: drop it there, so that handles that outlive the client
  // never touch the destroyed io_context.
  std::promise<void> dropped;
  asio::post(io_, [this, &dropped] {
    finish_acquisitions();  // waiting callers and async handlers get client_stopped
    std::vector<subscription> parked;
    {
      std::lock_guard lock(waiters_mutex_);
      parked.swap(parked_subscriptions_);
    }
    // Dropped while the subscriber and its io_context live: handles may outlive the client.
    parked.clear();
    timer_.reset();
    dropped.set_value();
  });
  dropped.get_future().wait();
  fire(lost);
}

bool lock_service::force_release(const std::string& name) {
  const std::string channel = unlock_channel(name);
  const std::string_view keys[] = {name, channel};
  const std::string_view args[] = {unlock_message};
  return call_script(force_script_, name, keys, args).integer == 1;
}

reply lock_service::call_command(const std::string& name, std::span<const std::string_view> args) {
  check_not_io_thread();
  core::sync_call call;
  with_servers([&](topology::topology& servers) {
    servers.connection_for(name).send(args, call.handler(), request_timeout_);
  });
  return call.wait();
}

lock_status lock_service::status(const std::string& name) {
  const std::string fence = fence_key(name);
  const std::string channel = unlock_channel(name);
  const std::string_view keys[] = {name, fence};
  const reply r = call_script(status_script_, name, keys, {});
  if (!r.is_array() || r.elements.size() != 4 || !r.elements[3].is_array() ||
      r.elements[3].elements.size() % 2 != 0) {
    throw error(errc::protocol_error, "unexpected reply to the status script: " + to_string(r));
  }
  const std::string& kind = r.elements[0].str;
  if (kind != "none" && kind != "hash") {
    throw error(errc::server_error,
                "the key '" + name + "' holds a " + kind + ", not a reentrant lock (a hash)");
  }
  lock_status s;
  s.locked = kind == "hash";
  s.remaining_ttl = milliseconds(r.elements[1].integer);
  try {
    s.last_fencing_token = std::stoull(r.elements[2].str);
    const auto& fields = r.elements[3].elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
      s.holders.push_back({fields[i].str, std::stoull(fields[i + 1].str)});
  } catch (const std::logic_error&) {  // stoull: not a number, or out of range
    throw error(errc::protocol_error, "a lock's counts are not numbers: " + to_string(r));
  }
  const std::string_view numsub[] = {"PUBSUB", "NUMSUB", channel};
  const reply n = call_command(channel, numsub);
  if (n.is_array() && n.elements.size() == 2) {
    s.subscribers = static_cast<std::uint64_t>(n.elements[1].integer);
  }
  return s;
}

bool lock_service::is_locked(const std::string& name) {
  const std::string_view args[] = {"EXISTS", name};
  return call_command(name, args).integer == 1;
}

milliseconds lock_service::remaining_ttl(const std::string& name) {
  const std::string_view args[] = {"PTTL", name};
  return milliseconds(call_command(name, args).integer);
}

std::uint64_t lock_service::hold_count(const std::string& name, std::uint64_t key) const noexcept {
  std::lock_guard lock(mutex_);
  const auto it = holds_.find({name, key});
  return it == holds_.end() || it->second.lost ? 0 : it->second.count;
}

std::uint64_t lock_service::fencing_token(const std::string& name,
                                          std::uint64_t key) const noexcept {
  std::lock_guard lock(mutex_);
  const auto it = holds_.find({name, key});
  return it == holds_.end() ? 0 : it->second.token;
}

std::stop_token lock_service::stop_token(const std::string& name,
                                         std::uint64_t key) const noexcept {
  std::lock_guard lock(mutex_);
  const auto it = holds_.find({name, key});
  return it == holds_.end() ? std::stop_token{} : it->second.stop->get_token();
}

// --- the watchdog ------------------------------------------------------------------------------

void lock_service::schedule_tick() {
  try {
    with_servers([&](topology::topology&) {
      asio::post(io_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->tick();
      });
    });
  } catch (const error&) {
    // Stopped: no watchdog any more.
  }
}

void lock_service::tick() {
  losses lost;
  std::optional<clock::time_point> next;
  {
    std::lock_guard lock(mutex_);
    const auto now = clock::now();

    std::vector<lease::renewal> batch = scheduler_.due(now);
    if (!batch.empty()) {
      // One script renews every due lease. Queued under mutex_: see the header.
      std::vector<std::string> arg_storage{std::to_string(watchdog_lease_.count())};
      std::vector<std::string_view> keys, args;
      for (const auto& r : batch)
        arg_storage.push_back(r.key->owner_field);
      for (const auto& r : batch)
        keys.push_back(r.key->name);
      for (const auto& a : arg_storage)
        args.push_back(a);
      std::weak_ptr<lock_service> weak = weak_from_this();
      ++counters_.renewal_scripts;
      try {
        with_servers([&](topology::topology& servers) {
          core::eval_on(servers.connection_for(keys.front()), renew_script_, keys, args,
                        request_timeout_, [weak, batch, &io = io_](std::error_code ec, reply r) {
                          // Posted: on a stopped connection this runs at once, under mutex_.
                          asio::post(io, [weak, batch, ec, r = std::move(r)] {
                            if (auto self = weak.lock()) self->on_renewed(batch, ec, r);
                          });
                        });
        });
      } catch (const error&) {
        return;  // stopped: shutdown() reports the remaining holds
      }
    }

    for (const lease::lost_lease& l : scheduler_.take_lost(now)) {
      const auto owner = watchdog_owner_.find(l.id);
      if (owner == watchdog_owner_.end()) continue;
      const auto it = holds_.find(owner->second);
      watchdog_owner_.erase(owner);
      if (it == holds_.end()) continue;
      it->second.watchdog.reset();
      mark_lost(it->first, it->second,
                l.reason == lease::lost_reason::not_held ? lock_loss_reason::not_held
                                                         : lock_loss_reason::unconfirmed,
                lost);
    }
    for (auto& [key, h] : holds_) {
      if (!h.lose_at || h.lost) continue;
      if (*h.lose_at <= now) {
        mark_lost(key, h, lock_loss_reason::lease_expired, lost);
      } else if (!next || *h.lose_at < *next) {
        next = h.lose_at;
      }
    }
    if (const auto w = scheduler_.next_wakeup(); w && (!next || *w < *next)) next = w;
    timer_at_ = timer_ ? next : std::nullopt;
  }
  // Outside the mutex: stop callbacks are user code.
  fire(lost);
  if (next && timer_) {
    timer_->expires_at(*next);
    timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->tick();
    });
  }
}

void lock_service::on_renewed(const std::vector<lease::renewal>& batch, std::error_code ec,
                              const reply& r) {
  {
    std::lock_guard lock(mutex_);
    const auto now = clock::now();
    const bool answered = !ec && r.is_array() && r.elements.size() == batch.size();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      lease::renewal_outcome outcome = lease::renewal_outcome::failed;
      if (answered) {
        outcome = r.elements[i].integer == 1 ? lease::renewal_outcome::renewed
                                             : lease::renewal_outcome::not_held;
        if (outcome == lease::renewal_outcome::renewed) ++counters_.leases_renewed;
      }
      scheduler_.on_result(batch[i].id, batch[i].sent_at, outcome, now);
    }
  }
  tick();
}

void lock_service::on_thread_exit(std::uint64_t thread_key) noexcept {
  // A thread that ended cannot unlock: stop renewing its holds and let their leases run out.
  // Copies of their stop tokens (handed to other threads) hear that the holds are gone.
  losses lost;
  {
    std::lock_guard lock(mutex_);
    for (auto it = holds_.begin(); it != holds_.end();) {
      if (it->first.second != thread_key) {
        ++it;
        continue;
      }
      mark_lost(it->first, it->second, lock_loss_reason::thread_exited, lost);
      it = holds_.erase(it);
    }
  }
  if (lost.stops.empty()) return;
  // Stop callbacks are user code; here the thread-exit registry's mutex is held, so they run on
  // the I/O thread instead.
  try {
    with_servers([&](topology::topology&) {
      asio::post(io_, [weak = weak_from_this(), lost] {
        if (auto self = weak.lock()) self->fire(lost);
      });
    });
  } catch (...) {
    // Stopped: shutdown() already reported every hold, so nothing is left to fire.
  }
}

}  // namespace dlock::locks
