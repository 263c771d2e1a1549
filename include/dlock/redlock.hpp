// dlock/redlock.hpp
//
// dlock::redlock: the Redlock algorithm over N independent Redis masters (no replication between
// them, no cluster), and dlock::redlock_mutex, a lock held only while a majority of them agree.
//
//   dlock::redlock rl{{"redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"}};
//   dlock::redlock_mutex m = rl.get_lock("jobs:nightly");
//   {
//     std::unique_lock guard{m};      // held on at least 2 of the 3 masters
//     ... work; m.fencing_token() orders writes to other systems ...
//   }
//
// Acquisition. One random nonce per attempt; the plain lock's SET NX PX script (the key is a string
// at the lock's name, holding "<client id>:<owner key>:<nonce>", as node-redlock and redsync keep
// it) goes to all N masters in parallel, in one round trip. The attempt holds when a majority
// (N/2 + 1) granted it and the validity, lease - elapsed - drift (drift = lease / 100 + 2 ms,
// elapsed on the steady clock from the moment the requests were sent), is still positive.
// Otherwise the attempt is released on all N masters, those that did not answer included, and
// retried: after an unlock message from any master when the lock is held by others, or after a
// random delay when the votes split. Within one dlock::redlock, only one thread at a time competes
// for one name; the others wait locally.
//
// Leases. lock() and try_lock_for(wait) take a watchdog lease (redlock_options::watchdog_timeout)
// that a thread of the dlock::redlock renews on all N masters every third of it; the hold lasts
// only while a majority confirms each renewal within the validity. lock(lease_time) and
// try_lock_for(wait, lease_time) take an explicit lease, never renewed.
//
// Losing a hold. When a renewal cannot gather a majority before the validity ends, or an explicit
// lease runs out before unlock(), the hold is lost: its stop_token() stops and
// redlock_options::on_lock_lost is told.
//
// Fencing. Each master hands out a token from its own per-name counter; the hold's token is the
// largest of the granting majority's, written back to those masters, so that tokens of one name
// strictly increase while a majority of masters keeps its counters (docs/redlock.md says what a
// master restarted without persistence does to this).
//
// Operating it. metrics_text() gives the dlock_lock_* series (label type="redlock") and Redlock's
// own (masters up, attempt results, validity at acquisition) in the Prometheus text format;
// redlock_options::on_log hears lost holds, slow acquisitions, repeated attempts without a
// majority and each master's connection records (docs/operating.md has both tables).
//
// Not reentrant: a thread that holds the lock and asks for it again gets errc::would_deadlock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/lock_metrics.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/log.hpp"
#include "dlock/mutex.hpp"  // acquire_options
#include "dlock/wait_time.hpp"

namespace dlock {

struct redlock_options {
  // The lease of holds taken without an explicit one; renewed every third of it while held.
  std::chrono::milliseconds watchdog_timeout{30000};
  // What one master may cost an attempt, a renewal or a release: a master that has not answered
  // by then counts as a "no". Also each master client's request_timeout.
  std::chrono::milliseconds request_timeout{500};
  // Each master client's connect_timeout.
  std::chrono::milliseconds connect_timeout{1000};
  // After a split vote (no majority for anyone) an attempt is retried after a random delay in
  // [retry_delay / 2, retry_delay * 3 / 2], so that competing clients do not split again.
  std::chrono::milliseconds retry_delay{5};
  // The three durations above must be at least 1 ms and at most a day, slow_acquisition 0 or
  // more and at most a day: the constructor throws errc::invalid_argument otherwise.
  // Operational events as structured records (dlock/log.hpp): "lock lost", "slow acquisition"
  // and "no majority" (an acquisition's attempts found no majority several times in a row; at
  // most one record per 10 s), plus every master client's own records ("connection lost", ...)
  // with two more fields: `redlock_master`, the master's index in the URL list (0 to N-1), and
  // `endpoint`. Runs on the thread that saw the event (a caller's, the watchdog's or a master's
  // I/O thread): must be thread-safe, must not block, must not throw (exceptions are dropped).
  // Empty (the default): silent.
  log_handler on_log{};  // {}: GCC's -Wmissing-field-initializers spares designated initializers
  // An acquisition that takes at least this long to get its lock is logged as "slow acquisition".
  // Zero: never logged. Negative: the constructor throws errc::invalid_argument.
  std::chrono::milliseconds slow_acquisition{1000};
  // Told of every lost hold, after its stop_token was stopped. Runs on the redlock's watchdog
  // thread; must not block or throw (exceptions are dropped).
  std::function<void(const lock_loss&)> on_lock_lost;
};

class redlock_mutex;

// dlock::redlock_lease: one hold of a Redlock taken by redlock_mutex::async_acquire(). It belongs
// to no thread: move it anywhere and release it there; destroying it releases the hold. Each lease
// is its own owner (leases are not reentrant, and a lease and a thread's hold of the same name
// exclude each other). Not safe for concurrent use by several threads; different leases are
// independent.
class redlock_lease {
 public:
  // An empty lease: holds nothing (what a wait that ran out delivers).
  redlock_lease() noexcept;
  class impl;  // for dlock's internals
  explicit redlock_lease(std::unique_ptr<impl> state) noexcept;
  redlock_lease(redlock_lease&& other) noexcept;
  // Releases this lease's hold (as release()), then takes `other`'s.
  redlock_lease& operator=(redlock_lease&& other) noexcept;
  redlock_lease(const redlock_lease&) = delete;
  redlock_lease& operator=(const redlock_lease&) = delete;
  // Releases the hold, if any. Never throws.
  ~redlock_lease();

  // Whether this lease has a hold that was not released (a lost one still counts until release).
  bool owns_lock() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }
  // Releases on all masters without waiting; never throws; the lease is empty afterwards. Returns
  // {} released; errc::lock_lost the hold had been lost; errc::not_owner the lease was empty (or
  // the redlock was destroyed, which reported the hold lost).
  std::error_code release() noexcept;
  // As redlock_mutex's members of the same names, for this lease's hold (no I/O).
  std::uint64_t fencing_token() const noexcept;
  std::stop_token stop_token() const noexcept;
  bool lost() const noexcept;
  std::chrono::milliseconds validity() const noexcept;
  std::string owner_id() const;

 private:
  std::unique_ptr<impl> state_;
};

class redlock {
 public:
  // redlock::redlock(urls, options)
  // One client per URL (each a single master: redis://, rediss:// or unix://; Sentinel URLs name a
  // single master too). Connects in the background. Throws dlock::error(errc::invalid_argument)
  // for no URL, a malformed URL, two URLs naming the same server (the same host:port or unix
  // path), a URL naming several hosts (one deployment, not independent masters), or options out
  // of range. An even number of masters is allowed but tolerates no more failures than one fewer
  // (docs/redlock.md). A master found to be a Redis Cluster node, or two URLs spelled apart that
  // reach one server (localhost and 127.0.0.1), fail acquisitions with errc::invalid_argument.
  explicit redlock(const std::vector<std::string>& urls, redlock_options options = {});
  // Stops the watchdog (holds still open are reported lost with client_stopped), lets
  // acquisitions under way end (each fails with client_stopped; one whose attempt was out
  // releases what that attempt took; up to request_timeout + 5 s), waits up to request_timeout
  // for releases in flight, and closes the connections. Handles may outlive it:
  // their calls then fail with errc::client_stopped. Never throws. Destroyed inside one of its
  // own callbacks (on_lock_lost, on_log), it returns at once and another thread does all that.
  ~redlock();

  redlock(const redlock&) = delete;
  redlock& operator=(const redlock&) = delete;

  // redlock::get_lock()
  // A handle to the Redlock `name`. Cheap; sends nothing. Throws errc::invalid_argument for an
  // empty name, one over 64 KiB, or control bytes.
  redlock_mutex get_lock(std::string name);

  // How many masters there are, and how many must agree (size() / 2 + 1).
  std::size_t size() const noexcept;
  std::size_t quorum() const noexcept;
  const redlock_options& options() const noexcept;

  // redlock::metrics_text()
  // This redlock's metrics in the Prometheus text exposition format (version 0.0.4): the
  // dlock_lock_* counters and histograms of client::metrics_text() that apply, with
  // type="redlock", and dlock_redlock_* series (masters, connections per master with a label
  // master="0".."N-1", attempt results, validity left at acquisition). No label names a lock.
  // The table is in docs/operating.md. No I/O; thread-safe; throws only std::bad_alloc.
  std::string metrics_text() const;
  // redlock::lock_metrics(): the totals behind metrics_text() (reentered, release_retries and
  // unconfirmed stay 0: they do not apply to Redlock). No I/O; thread-safe.
  dlock::lock_metrics lock_metrics() const noexcept;

  class impl;

 private:
  std::shared_ptr<impl> impl_;
};

class redlock_mutex {
 public:
  using steady_clock = std::chrono::steady_clock;

  // For dlock's internals: redlock::get_lock() makes them.
  class state;
  explicit redlock_mutex(std::shared_ptr<state> s) noexcept : state_(std::move(s)) {}

  // redlock_mutex::lock(), lock(lease)
  // Waits until this thread holds the lock on a majority (watchdog lease, or the explicit `lease`).
  // Throws dlock::error: would_deadlock if this thread holds it already; invalid_argument for a
  // lease that is not positive or over max_lock_lease, a master that is a cluster node, or two
  // masters found to be one server (URLs spelled apart, such as localhost and 127.0.0.1: an
  // attempt finds its own value there, nearly always the first); wrong_type when so many masters
  // hold another kind of key under the name that no majority can form (nothing is taken then; on a
  // minority of masters such a key counts as a refusal); client_stopped after the redlock was
  // destroyed. Unreachable masters are not errors: the call keeps trying while fewer than a
  // majority answer.
  void lock();
  void lock(lease_time lease);

  // redlock_mutex::try_lock()
  // One attempt on all masters, no waiting. Returns whether this thread now holds the lock.
  // Throws as lock().
  [[nodiscard]] bool try_lock();

  // redlock_mutex::try_lock_for(wait[, lease]), try_lock_until(deadline)
  // Waits up to `wait` (or until `deadline`) for the lock; returns false when the time ran out
  // (an attempt started before the end may finish up to request_timeout after it). A zero or
  // past wait is one attempt. Throws as lock().
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_for(detail::steady_wait(wait), nullptr);
  }
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                                  lease_time lease) {
    const auto explicit_lease = lease.value();
    return acquire_for(detail::steady_wait(wait), &explicit_lease);
  }
  template <typename Clock, typename Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_for(detail::steady_wait_until(deadline), nullptr);
  }

  // redlock_mutex::async_acquire(options), async_lock(), async_try_lock_for(wait)
  // Acquire without blocking the caller: the future delivers a redlock_lease (empty when the wait
  // ran out) or throws from get() what lock() throws, plus errc::cancelled when options.cancel
  // stopped first (a majority that arrives meanwhile is released at once). options.wait:
  // std::nullopt waits until acquired, zero or less makes one attempt; options.lease: an explicit
  // lease, else a watchdog lease. Each call waits on a thread of its own (the acquisition is the
  // blocking one, on behalf of a fresh owner). Throws errc::invalid_argument for a lease out of
  // range (before any I/O).
  std::future<redlock_lease> async_acquire(const acquire_options& options);
  std::future<redlock_lease> async_lock() { return async_acquire({}); }
  std::future<redlock_lease> async_try_lock_for(std::chrono::milliseconds wait) {
    return async_acquire({.wait = wait});
  }

  // redlock_mutex::unlock()
  // Releases this thread's hold on all masters in parallel, without waiting for their replies.
  // Never throws. A thread that holds nothing changes nothing.
  void unlock() noexcept { (void)unlock_checked(); }
  // As unlock(), and says what happened: {} released; errc::not_owner this thread held nothing;
  // errc::lock_lost the hold had been lost before (it was released on the masters anyway).
  std::error_code unlock_checked() noexcept;

  // redlock_mutex::is_held_by_current_thread(): this thread holds it and has not lost it (no I/O).
  bool is_held_by_current_thread() const noexcept;
  // redlock_mutex::fencing_token(): the token of this thread's hold; 0 when it holds none.
  std::uint64_t fencing_token() const noexcept;
  // redlock_mutex::stop_token(): stopped when this thread's hold is lost; a token that can never
  // stop when this thread holds nothing.
  std::stop_token stop_token() const noexcept;
  // redlock_mutex::validity(): how long this thread's hold is certain to last without another
  // renewal, on the steady clock; zero when it holds none (no I/O).
  std::chrono::milliseconds validity() const noexcept;
  // redlock_mutex::owner_id(): "<client id>:<thread key>", the prefix of this thread's values.
  std::string owner_id() const;
  const std::string& name() const noexcept;

 private:
  bool acquire_for(steady_clock::duration wait, const std::chrono::milliseconds* lease);

  std::shared_ptr<state> state_;
};

}  // namespace dlock
