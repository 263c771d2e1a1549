// src/locks/engine/lock_engine.hpp
//
// What every lock type shares, one per client, driven by each type's lock_protocol:
//   hold_book      this client's holds and the watchdog's schedule (hold_registry, sans I/O)
//   watchdog       renews due leases in batched scripts and reports expired holds
//   wait_queues    one FIFO per lock, one subscription per wake channel
//   acquisition    an attempt that may wait: acquisition_machine's decisions carried out on the
//                  I/O thread, for blocking and asynchronous callers alike
//   release_queue  releases without waiting, retried idempotently
//   engine_io      the way out to the router and the I/O thread, closed by shutdown()
// The public handles (dlock::mutex, dlock::lock_lease, ...) are thin: a lock_ref plus this.
//
// Locking order: engine_io's lifetime lock (shared) may be taken under the holds' mutex or the
// wait queues' mutex, never the other way round; those two are never held together; user
// callbacks (stop callbacks, on_lock_lost, acquisition handlers) run with none held.
//
// Lifetime: handles keep the engine alive, possibly longer than the client. After shutdown()
// nothing touches the router or the io_context again; every call fails with
// errc::client_stopped and every remaining hold has been reported lost.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/identity.hpp"
#include "core/log_sink.hpp"
#include "dlock/error.hpp"
#include "dlock/lock_lease.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/mutex.hpp"
#include "locks/engine/engine_io.hpp"
#include "locks/engine/hold_registry.hpp"
#include "locks/engine/line_uses.hpp"
#include "locks/engine/lock_counters.hpp"
#include "locks/engine/quiet_names.hpp"
#include "locks/engine/release_queue.hpp"
#include "locks/engine/wait_queues.hpp"
#include "locks/engine/watchdog.hpp"

namespace dlock::locks {

// Whether an acquisition whose attempt failed with `ec` may hold something on the server that
// must be given back: not when the server answered with an error. A connect that failed wrote
// nothing, but the acquisition's earlier attempt (one whose link broke, retried as the same
// owner) or a release its attempt made the release queue skip (release_queue::supersede) may
// have left a hold all the same.
inline bool attempt_may_have_run(std::error_code ec) {
  return ec != errc::server_error && ec != errc::wrong_type;
}

class acquisition;

class lock_engine : public std::enable_shared_from_this<lock_engine>,
                    private core::thread_exit_listener {
 public:
  // `io` and `router` must stay alive until shutdown() returns (the client owns them).
  // `log` hears lost holds, link changes and acquisitions slower than `slow_acquisition` (zero:
  // none are reported).
  static std::shared_ptr<lock_engine> create(
      asio::io_context& io, route::router& router, const lock_options& settings,
      std::chrono::milliseconds request_timeout, core::log_sink log = {},
      std::chrono::milliseconds slow_acquisition = std::chrono::milliseconds(0));
  ~lock_engine() override;

  // Takes or re-enters `lock` for owner `owner` (a thread key), blocking. `lease`: explicit, or
  // nullptr for the watchdog. Waits until `deadline` (a past one: one attempt). Returns whether
  // the owner holds it. Throws dlock::error for I/O failures and invalid durations, and
  // errc::would_deadlock, sending nothing, when `lock` is not reentrant (lock_protocol::
  // reentrant()) and the owner holds it already. `why`, when given, is set to
  // errc::replicas_unavailable when the wait ended because the last attempt was not confirmed by
  // lock_options::min_replicas replicas (cleared otherwise).
  bool acquire(const lock_ref& lock, std::uint64_t owner, const std::chrono::milliseconds* lease,
               clock::time_point deadline, std::error_code* why = nullptr);
  // Takes `lock` for a new lock_lease without blocking; see mutex::async_acquire(). `done` also
  // gets the failure's detail (the server's or the system's message).
  using lease_completion =
      std::function<void(std::error_code ec, const std::string& detail, lock_lease lease)>;
  void async_acquire(const lock_ref& lock, const acquire_options& options, lease_completion done);

  // Releases one hold of `owner`; see mutex::unlock_checked(). Never throws.
  std::error_code release(const lock_ref& lock, std::uint64_t owner) noexcept;

  bool force_release(const lock_ref& lock);
  // Runs a protocol's own script (a semaphore's count operations, a release by id), blocking.
  reply run_script(const script_call& call);
  lock_status status(const lock_ref& lock);
  // PTTL of the key `name` (-2 none, -1 no TTL); EXISTS.
  std::chrono::milliseconds remaining_ttl(const std::string& name);
  bool exists(const std::string& name);

  // The hold of `lock` by `owner` (no I/O).
  // Checks the clock first: a hold whose lease ran out is reported lost even if the watchdog's
  // timer has not run yet.
  std::uint64_t hold_count(const lock_ref& lock, std::uint64_t owner) noexcept;
  std::uint64_t fencing_token(const lock_ref& lock, std::uint64_t owner) const noexcept;
  std::stop_token stop_token(const lock_ref& lock, std::uint64_t owner) noexcept;
  // "<client id>:<owner key>": the hash field of an owner.
  std::string owner_field(std::uint64_t owner) const;

  // Reports, from the calling thread, every hold whose loss deadline has passed (the watchdog's
  // timer may not have run: the process was stopped, or the I/O thread is busy).
  void expire_due_holds() noexcept;

  lock_metrics metrics() const noexcept { return counters_.snapshot(); }
  // Every counter, per lock type too (client::metrics_text()).
  lock_counters& counters() noexcept { return counters_; }
  engine_io& io() noexcept { return io_; }

  // The client is stopping: gives queued releases up to `limit` to reach Redis, then stops
  // everything. Afterwards every call fails with errc::client_stopped.
  void shutdown(std::chrono::milliseconds limit);

 private:
  // Makes sure the deployment's kind is known (one blocking PING at most, once per client).
  void learn_deployment();
  friend class acquisition;

  lock_engine(asio::io_context& io, route::router& router, const lock_options& settings,
              std::chrono::milliseconds request_timeout, core::log_sink log,
              std::chrono::milliseconds slow_acquisition);
  // An acquisition started at `started` got its lock: the wait-time histogram, the slow log.
  void observe_acquired(const lock_ref& lock, clock::time_point started) noexcept;
  void start();  // after construction: parts that need shared_from_this
  // A command connection became ready (`up`) or was lost; I/O thread.
  void on_link(bool up);

  // See route::router::masters_move().
  bool masters_move();
  // One attempt, blocking (`may_wait`: the caller waits if it fails). Returns what it found (see
  // read_attempt_reply). `may_be_in_line`: the attempt may leave a mark (line_uses::end).
  attempt_outcome attempt_now(const lock_ref& lock, std::uint64_t owner,
                              const std::chrono::milliseconds* lease, bool may_wait,
                              bool& unconfirmed, bool& may_be_in_line);
  // After an attempt that took `lock` and left the wait line (it knew of no other waiter here):
  // if a waiter of this client came meanwhile, it attempts, which puts the client back in line
  // (it would otherwise sleep through the wake-ups of other clients). `self`: the acquisition's
  // own waiter, if it is one.
  void keep_place_in_line(const lock_ref& lock, const wait_queues::waiter* self);
  // Arms the timer that unsubscribes channels idle for wait_queues::idle_channel_linger (I/O
  // thread).
  void drop_idle_subscriptions_later();
  // The client (or, for a type that waits_by_owner(), `owner`) leaves the server's line of
  // `lock`, or withdraws its writers' intents: its last acquisition of the lock ended, and one
  // that gave up may have left a mark (decided by line_uses_).
  void leave_line(const lock_ref& lock, std::uint64_t owner) noexcept;
  // The line `owner`'s acquisitions of `lock` share (line_uses): the lock's type and name, or for
  // a type that waits_by_owner(), the owner's own channel.
  line_uses::line_key line_of(const lock_ref& lock, std::uint64_t owner) const;
  struct line_share;
  // Every acquisition under way ends with errc::client_stopped (I/O thread).
  void stop_acquisitions();
  // Sends `owner`'s attempt (with WAIT behind it when min_replicas asks for it); that owner's
  // releases of the lock still out are not retried after it (release_queue::supersede). Returns
  // whether there were such releases: if the attempt then fails without running (a server
  // error), its caller must release the owner's field again behind it (release_orphan), as the
  // withdrawn retries would have. `c`: see net::connection::caller.
  bool send_attempt(const lock_ref& lock, std::string_view owner, const script_call& call,
                    net::completion done, route::router::caller c = route::router::caller::leaves);
  // Reads an attempt's reply and records it. With min_replicas, a first hold that fewer replicas
  // acknowledged is undone (a token-checked release) and reads as held by another for
  // replica_timeout; `unconfirmed` says so. Throws errc::protocol_error for a malformed reply.
  attempt_outcome read_attempt_reply(const hold_key& key, const attempt_plan& plan, const reply& r,
                                     clock::time_point sent_at, bool& unconfirmed,
                                     std::string& why);
  // Records an attempt's reply (on any thread).
  void record(const hold_key& key, const attempt_plan& plan, const attempt_outcome& outcome,
              clock::time_point sent_at);
  attempt_plan plan(const hold_key& key, const std::chrono::milliseconds* lease);
  void release_orphan(const hold_key& key) noexcept;
  // The reply of an attempt that was out when the client began to stop (`ec`, `r`): a hold it
  // took is released with its token (which a plain lock's value needs), then
  // release_queue::expected_done().
  void give_back_late_hold(const hold_key& key, const attempt_plan& plan, std::error_code ec,
                           const reply& r) noexcept;
  // Whether a release of `lock` goes out at once or with the next request (see release()).
  release_queue::timing release_timing(const lock_ref& lock);
  lock_lease make_lease(const lock_ref& lock, std::uint64_t owner);
  reply call(const script_call& c);
  // One command on the master that serves `routing_key`, blocking.
  reply command(std::string_view routing_key, std::span<const std::string_view> args);
  void fire(const losses& lost) const noexcept;
  subscription subscribe(const std::string& channel);
  void on_thread_exit(std::uint64_t thread_key) noexcept override;

  engine_io io_;
  lock_counters counters_;
  const core::log_sink log_;
  const std::chrono::milliseconds slow_acquisition_;
  const std::function<void(const lock_loss&)> on_lock_lost_;
  const route::confirmation confirm_;  // lock_options::min_replicas, replica_timeout
  hold_book holds_;
  wait_queues waiters_;
  line_uses line_uses_;                // acquisitions under way per line: when the client leaves it
  std::atomic<bool> stopping_{false};  // shutdown() began: blocking attempts give holds back
  std::shared_ptr<release_queue> releases_;
  // Names whose latest release reached no waiting client (release_timing).
  quiet_names quiet_;
  std::shared_ptr<watchdog> watchdog_;
  // Unsubscribes idle wake channels (drop_idle_subscriptions_later); I/O thread only.
  std::optional<asio::steady_timer> idle_timer_;
  bool idle_timer_armed_ = false;
  // Acquisitions under way on the I/O thread; I/O thread only.
  std::map<acquisition*, std::shared_ptr<acquisition>> acquisitions_;
  // Subscriptions whose last waiter left after shutdown began: dropped on the I/O thread.
  std::mutex parked_mutex_;
  std::vector<subscription> parked_;
};

// Throws errc::invalid_argument unless `lease` is null or within (0, max_lock_lease].
void check_lease(const std::chrono::milliseconds* lease);

// now + `wait`, saturated: a wait that would pass the clock's range waits forever.
clock::time_point deadline_after(clock::duration wait) noexcept;

// A lease object for `owner`'s hold of `lock` (defined with dlock::lock_lease).
lock_lease make_lock_lease(std::shared_ptr<lock_engine> engine, const lock_ref& lock,
                           std::uint64_t owner, std::string owner_field, std::uint64_t token,
                           std::stop_token stop);

}  // namespace dlock::locks
