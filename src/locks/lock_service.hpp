// src/locks/lock_service.hpp
//
// The reentrant lock's machinery, one per client, shared by every dlock::mutex handle:
//   - the holds of this client, per (lock name, thread): count, fencing token, lease kind, and the
//     stop_source that tells the holder when the hold is lost;
//   - waiting: one pub/sub listener per lock channel; an unlock message wakes one waiting thread,
//     a (re)subscription wakes them all to re-check (messages sent while unsubscribed are lost);
//   - the watchdog: a lease_scheduler (src/lease) driven by a timer on the I/O thread, renewing
//     every due lease in one renew_leases.lua call;
//   - releases: queued without waiting, retried idempotently (checked against the released hold's
//     fencing token) when the connection dies with one in flight, and flushed when the client
//     stops.
//
// Locking order: lifetime_ (shared) may be taken under mutex_ or waiters_mutex_, never the other
// way round; mutex_ and waiters_mutex_ are never held together; user callbacks (stop callbacks)
// run with none held. Requests are queued while mutex_ is held so that a renewal batch is always
// on the wire before a later release of the same lock.
//
// Lifetime: dlock::mutex handles keep this object alive, possibly longer than the client. After
// shutdown() nothing touches the topology, the io_context or the client's options again; every
// call fails with errc::client_stopped and every remaining hold has been reported lost.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/identity.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/mutex.hpp"
#include "dlock/options.hpp"
#include "dlock/script.hpp"
#include "dlock/subscription.hpp"
#include "lease/lease_scheduler.hpp"
#include "topology/topology.hpp"

namespace dlock::locks {

using clock = std::chrono::steady_clock;

// Throws errc::invalid_argument unless `lease` is null or positive.
void check_lease(const std::chrono::milliseconds* lease);

// The Lua sources of the lock types: every command connection loads them when it connects.
std::vector<std::string_view> scripts_to_preload();

class lock_service : public std::enable_shared_from_this<lock_service>,
                     private core::thread_exit_listener {
 public:
  // `io`, `servers` and `options` must outlive the service (the client owns all four).
  lock_service(asio::io_context& io, topology::topology& servers, const client_options& options);
  ~lock_service();

  // Takes or re-enters `name` for the calling thread. `lease`: explicit, or nullptr for the
  // watchdog. Waits until `deadline` (a past deadline means one attempt). Returns whether the
  // thread holds it. Throws dlock::error for I/O failures and invalid durations.
  bool acquire(const std::string& name, const std::chrono::milliseconds* lease,
               clock::time_point deadline);

  // Takes `name` for a new lock_lease without blocking; see mutex::async_acquire().
  void async_acquire(const std::string& name, const acquire_options& options, lease_handler done);

  // Releases one hold of the owner `key` (the calling thread's by default); see
  // mutex::unlock_checked().
  std::error_code release(const std::string& name) noexcept;
  std::error_code release(const std::string& name, std::uint64_t key) noexcept;

  bool force_release(const std::string& name);
  lock_status status(const std::string& name);
  // "<client id>:<key>": the lock hash field of a thread key or an async lease key.
  std::string owner_field(std::uint64_t key) const;
  bool is_locked(const std::string& name);
  std::chrono::milliseconds remaining_ttl(const std::string& name);

  // The hold of `name` by owner `key` (no I/O).
  std::uint64_t hold_count(const std::string& name, std::uint64_t key) const noexcept;
  std::uint64_t fencing_token(const std::string& name, std::uint64_t key) const noexcept;
  std::stop_token stop_token(const std::string& name, std::uint64_t key) const noexcept;

  // The counters behind client::lock_metrics().
  lock_metrics metrics() const noexcept;

  // The client's I/O thread, where blocking lock calls are refused (they would wait for
  // themselves).
  void set_io_thread(std::thread::id id) noexcept { io_thread_ = id; }

  // The client is stopping: waits up to `limit` for queued releases, then stops the watchdog.
  // Afterwards every call fails with errc::client_stopped (handles may outlive the client).
  void shutdown(std::chrono::milliseconds limit);

 private:
  struct hold {
    std::uint64_t count = 0;
    std::uint64_t token = 0;
    std::chrono::milliseconds lease{0};
    std::optional<lease::lease_id> watchdog;   // renewed holds
    std::optional<clock::time_point> lose_at;  // explicit leases: when to count it lost
    std::shared_ptr<std::stop_source> stop = std::make_shared<std::stop_source>();
    bool lost = false;
  };
  using hold_key = std::pair<std::string, std::uint64_t>;  // (name, thread key)

  // An acquisition waiting for a lock; woken by a permit. `notify` runs with waiters_mutex_ and
  // `m` held, and only posts to the I/O thread.
  struct waiter {
    std::mutex m;
    bool permit = false;
    std::function<void()> notify;
  };
  struct channel_waiters {
    subscription sub;
    std::deque<waiter*> queue;
    // When the holder's lease ends, as the latest failed attempt saw it (nullopt: no TTL); only
    // meaningful once `holder_seen`.
    bool holder_seen = false;
    std::optional<clock::time_point> holder_lease_end;

    // A waiter's failed attempt saw the holder with `ttl_ms` left (-1: no TTL).
    void saw_holder(std::int64_t ttl_ms) {
      holder_seen = true;
      holder_lease_end = ttl_ms >= 0
                             ? std::optional(clock::now() + std::chrono::milliseconds(ttl_ms))
                             : std::nullopt;
    }
  };

  enum class attempt_status { acquired, reentered, held_by_other };
  struct attempt_result {
    attempt_status status = attempt_status::held_by_other;
    std::int64_t ttl_ms = 0;  // held_by_other: remaining lease of the holder (-1: none)
  };
  // One run of the lock script for owner `key`: what it sends, and when it was sent.
  struct attempt_request {
    std::string name;
    std::uint64_t key = 0;
    std::chrono::milliseconds lease{0};
    bool watchdog = true;
    std::string field, fence, lease_arg, known_arg;
    clock::time_point sent_at;
  };
  class acquisition;

  // Throws errc::invalid_argument on the client's I/O thread.
  void check_not_io_thread() const;
  // Runs `use(servers_)` unless shutdown() has run (then throws errc::client_stopped).
  template <typename F>
  auto with_servers(F&& use);
  attempt_result attempt(const std::string& name, std::uint64_t key,
                         const std::chrono::milliseconds* lease);
  attempt_request prepare_attempt(const std::string& name, std::uint64_t key,
                                  const std::chrono::milliseconds* lease);
  // Records the script's reply `r` to `req` in holds_; throws errc::protocol_error for a bad one.
  attempt_result apply_attempt(const attempt_request& req, const reply& r);
  // The lease object for owner `key`'s fresh hold of `name`.
  lock_lease make_lease(const std::string& name, std::uint64_t key);
  // Finishes every acquisition with client_stopped (shutdown, on the I/O thread).
  void finish_acquisitions();
  // The calling thread's attempt found `name` held with `ttl_ms` left (`attempted`), or it
  // queues behind earlier waiters that saw that: waits on the I/O thread's acquisition machine.
  // Returns whether `key` holds it; throws as acquire().
  bool wait_for_lock(const std::string& name, std::uint64_t key,
                     const std::chrono::milliseconds* lease, clock::time_point deadline,
                     std::int64_t ttl_ms, bool attempted);
  reply call_script(const script& s, const std::string& name,
                    std::span<const std::string_view> keys, std::span<const std::string_view> args);
  reply call_command(const std::string& name, std::span<const std::string_view> args);
  // With mutex_ held: sends the unlock script for owner `key`, keeping `remaining` holds.
  // `token`: the hold's fencing token, checked by retries (0: no check).
  void queue_release(const std::string& name, std::uint64_t key, const std::string& lease_arg,
                     const std::string& remaining, std::uint64_t token);
  // Releases a hold of `key` that an attempt may have taken without the client learning of it.
  void release_orphan(const std::string& name, std::uint64_t key) noexcept;
  void send_release(const std::string& name, std::vector<std::string> keys,
                    std::vector<std::string> args, std::uint64_t token, int tries_left,
                    bool urgent);
  // Holds found lost under mutex_, told (stop tokens, then on_lock_lost) after it is released.
  struct losses {
    std::vector<std::shared_ptr<std::stop_source>> stops;
    std::vector<lock_loss> events;
  };
  // With mutex_ held: counts the hold as lost, stops renewing it, and queues the news for fire().
  void mark_lost(const hold_key& key, hold& h, lock_loss_reason reason, losses& out);
  // With no lock held: stops the lost holds' tokens and calls on_lock_lost.
  void fire(const losses& lost) const noexcept;

  // `ttl_ms`: the holder's remaining lease seen by the waiter's failed attempt (-1: no TTL), or
  // nullopt when the waiter made none (it queued behind others).
  void add_waiter(const std::string& channel, waiter* w, std::optional<std::int64_t> ttl_ms);
  // Records the holder's remaining lease seen by a waiter's failed attempt (-1: no TTL).
  void note_holder_ttl(const std::string& channel, std::int64_t ttl_ms);
  // If this client already has waiters for `channel` that saw the holder, its remaining lease as
  // they last saw it (-1: none): a new acquisition queues behind them instead of making an
  // attempt that would fail (first come, first served among this client's waiters).
  // Cheap when this client has no waiters at all (the uncontended path): no channel name is built.
  std::optional<std::int64_t> queued_ttl(const std::string& name);
  void remove_waiter(const std::string& channel, waiter* w);
  void on_unlock_message(const std::string& channel);
  void on_subscribed(const std::string& channel);
  // With waiters_mutex_ held.
  void give_permit(channel_waiters& waiters);
  void wake_all(channel_waiters& waiters);

  // The watchdog, on the I/O thread.
  void schedule_tick();
  void tick();
  void on_renewed(const std::vector<lease::renewal>& batch, std::error_code ec, const reply& r);

  void on_thread_exit(std::uint64_t thread_key) noexcept override;

  asio::io_context& io_;
  topology::topology& servers_;  // only through with_servers()
  // Copied: handles may outlive the client and its options.
  const std::chrono::milliseconds watchdog_lease_;
  const std::chrono::milliseconds request_timeout_;
  const std::string client_id_;
  const script lock_script_;
  const script unlock_script_;
  const script renew_script_;
  const script force_script_;
  const script status_script_;
  const std::function<void(const lock_loss&)> on_lock_lost_;

  mutable std::mutex mutex_;
  std::map<hold_key, hold> holds_;
  lease::lease_scheduler scheduler_;
  std::map<lease::lease_id, hold_key> watchdog_owner_;
  // When the watchdog timer is armed to fire (nullopt: not armed); set by tick().
  std::optional<clock::time_point> timer_at_;

  std::atomic<std::thread::id> io_thread_{};

  std::shared_mutex lifetime_;
  bool stopped_ = false;  // guarded by lifetime_

  std::mutex waiters_mutex_;
  std::map<std::string, channel_waiters> waiters_;
  std::vector<subscription> parked_subscriptions_;  // guarded by waiters_mutex_

  std::optional<asio::steady_timer> timer_;  // I/O thread only; dropped by shutdown()
  struct counters {
    std::atomic<std::uint64_t> acquired{0}, reentered{0}, waited{0}, timed_out{0}, released{0},
        lost{0}, renewal_scripts{0}, leases_renewed{0}, release_retries{0};
  };
  counters counters_;

  // Acquisitions waiting or attempting on the I/O thread; I/O thread only.
  std::map<acquisition*, std::shared_ptr<acquisition>> acquisitions_;

  std::mutex releases_mutex_;
  std::condition_variable releases_cv_;
  std::size_t releases_in_flight_ = 0;
};

template <typename F>
auto lock_service::with_servers(F&& use) {
  // Shared with other users, exclusive with shutdown(): once it has run, the topology and the
  // io_context may be gone, and nothing here may touch them.
  std::shared_lock lifetime(lifetime_);
  if (stopped_) throw error(errc::client_stopped, "the client of this lock was destroyed");
  return use(servers_);
}

}  // namespace dlock::locks
