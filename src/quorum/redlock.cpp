// src/quorum/redlock.cpp
//
// Redlock over N dlock::client objects, one per independent master, using only the public client
// API (async_eval, subscribe) and the plain lock's scripts on every master. See dlock/redlock.hpp
// for the contract and docs/redlock.md for the algorithm and its limits.
//
// Threads. Callers acquire on their own thread: they send to all masters at once and wait on a
// fan_out for the replies. One watchdog thread per redlock renews watchdog leases (batched: one
// script per master for all holds due), ends explicit leases, and reports losses. One I/O
// thread (a detail::shared_io) runs every master's client: it only records replies and wakes
// waiters, once per batch of ready sockets rather than once per master. Locks: holds_mutex_ guards
// the hold table, the waker set and the stop flag; clients_mutex_ (shared) guards the clients
// against stop(); a gate's own mutex guards its busy flag. None is held while waiting for Redis.
//
// Metrics and logs. The counters are atomics (locks::lock_counters, the lock engine's, with the
// one type "redlock"); each master client's log hook tracks its connection state and forwards its
// records to redlock_options::on_log with the master's index.
#include "dlock/redlock.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "client/prometheus_text.hpp"
#include "client/shared_io.hpp"
#include "core/identity.hpp"
#include "core/log_sink.hpp"
#include "core/setting_range.hpp"
#include "core/shutdown_elsewhere.hpp"
#include "dlock/client.hpp"
#include "dlock/embedded_scripts.hpp"
#include "dlock/error.hpp"
#include "dlock/script.hpp"
#include "locks/engine/lock_counters.hpp"
#include "locks/engine/quiet_names.hpp"
#include "locks/names.hpp"
#include "locks/types/kind_refusal.hpp"
#include "locks/types/wait_line.hpp"
#include "net/connection.hpp"
#include "quorum/fan_out.hpp"

namespace dlock {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const script& lock_script() {
  static const script s{locks::with_wait_line(scripts::plain_lock)};
  return s;
}
const script& unlock_script() {
  static const script s{locks::with_wait_line(scripts::plain_unlock)};
  return s;
}
const script& renew_script() {
  static const script s{std::string(scripts::plain_renew)};
  return s;
}
const script& fence_script() {
  static const script s{std::string(scripts::raise_fence)};
  return s;
}

// The label of Redlock's series in the dlock_lock_* families.
constexpr std::string_view lock_kind = "redlock";

// An acquisition whose attempts found no majority this many times in a row is logged ("no
// majority"), at most once per interval per redlock: one split vote under contention is normal.
constexpr std::size_t no_majority_log_after = 3;
constexpr auto no_majority_log_interval = std::chrono::seconds(10);

// The most holds one renewal script carries (a long script blocks its master meanwhile).
constexpr std::size_t max_renewal_batch = 1000;

// The margin Redlock keeps for clock drift between this process and the masters.
milliseconds drift_of(milliseconds lease) {
  return lease / 100 + milliseconds(2);
}

std::mt19937_64& random_engine() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

// Uniform in [base / 2, base * 3 / 2]: competitors that split a vote retry at different times.
clock::duration jittered(milliseconds base) {
  const auto low = std::chrono::duration_cast<std::chrono::microseconds>(base) / 2;
  std::uniform_int_distribution<std::int64_t> pick(low.count(), low.count() * 3);
  return std::chrono::microseconds(pick(random_engine()));
}

void check_lease(milliseconds lease, std::string_view what) {
  if (lease <= milliseconds::zero() || lease > max_lock_lease) {
    throw error(errc::invalid_argument,
                std::string(what) + " must be positive and at most max_lock_lease");
  }
}

// What identifies a server for the duplicate check: its unix socket, or host:port (lowercase).
std::string server_identity(const client_options& o) {
  if (!o.unix_path.empty()) return "unix:" + o.unix_path;
  std::string host = o.host;
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!o.sentinel.master_name.empty()) return "sentinel:" + host + ":" + o.sentinel.master_name;
  return host + ":" + std::to_string(o.port);
}

bool is_yes_array(const std::optional<reply>& r) {
  return r && r->is_array() && !r->elements.empty() && r->elements[0].is_integer() &&
         r->elements[0].integer == 1;
}

// A master's answer that it set nothing: {0, pttl, dlock} (held by another) or {-1, what, name}
// (the key is not a plain lock), as plain_lock.lua answers.
bool is_refusal(const std::optional<reply>& r) {
  return r && r->is_array() && !r->elements.empty() && r->elements[0].is_integer() &&
         (r->elements[0].integer == 0 || r->elements[0].integer == -1);
}

}  // namespace

// Only one thread of a redlock competes for a name at a time; the others wait here. The thread
// that wins keeps the gate until it unlocks, so the next local waiter competes only after that.
struct redlock_gate {
  std::mutex mutex;
  std::condition_variable freed;
  bool busy = false;
  bool stopped = false;
  std::size_t waiting = 0;       // threads waiting here
  bool yield_to_others = false;  // freed by an unlock while threads waited: see acquire()

  // `after_hold`: the gate's thread held the lock and now released it.
  void release(bool after_hold = false) {
    {
      std::lock_guard lock(mutex);
      busy = false;
      yield_to_others = after_hold && waiting > 0;
    }
    freed.notify_one();
  }
};

// Wakes a waiting acquisition on an unlock message from any master, on a (re)subscription, or
// on stop().
struct redlock_waker {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t generation = 0;
  std::size_t subscribed = 0;
  bool stopped = false;

  void bump(bool subscription_confirmed) {
    {
      std::lock_guard lock(mutex);
      ++generation;
      if (subscription_confirmed) ++subscribed;
    }
    changed.notify_all();
  }
};

// One thread's hold (or an explicit lease) of one name. Fields after `value` are guarded by the
// redlock's holds_mutex_.
struct redlock_hold {
  std::string name;
  std::string owner;
  std::string value;  // "<owner>:<nonce>" on every master that granted
  milliseconds lease{0};
  bool watchdog = false;
  std::uint64_t token = 0;
  std::shared_ptr<redlock_gate> gate;
  clock::time_point since;  // when it was taken: the hold-time histogram
  clock::time_point valid_until;
  clock::time_point next_renewal;
  std::stop_source lost_source;
  bool lost = false;
  bool released = false;  // unlocked (or its thread ended): no renewal or loss concerns it any more
};

class redlock::impl : public core::thread_exit_listener {
 public:
  impl(const std::vector<std::string>& urls, redlock_options options);
  ~impl() override { stop(); }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void start_watchdog() {
    core::add_thread_exit_listener(this);
    watchdog_ = std::thread([this] { run_watchdog(); });
  }
  void stop() noexcept;
  // Whether the calling thread is one stop() waits for: the watchdog's, the I/O thread, or one
  // inside acquire() of this redlock (an on_log callback of a slow or failing acquisition).
  bool on_own_thread() const noexcept {
    const auto me = std::this_thread::get_id();
    return me == watchdog_.get_id() || me == io_.thread_id() ||
           std::find(acquiring_here.begin(), acquiring_here.end(), this) != acquiring_here.end();
  }
  // The redlocks whose acquire() runs on this thread (a callback may acquire another's).
  static thread_local std::vector<const impl*> acquiring_here;

  // Acquires `name` for the owner `owner_key` (a thread's key, or a lease's own key). Throws
  // errc::cancelled when `cancel` stops first.
  bool acquire(const std::string& name, clock::duration wait, const milliseconds* lease,
               std::uint64_t owner_key, const std::stop_token& cancel = {});
  std::error_code release(const std::string& name, std::uint64_t owner_key) noexcept;
  // What this thread's hold of `name` looks like now (no I/O).
  struct hold_view {
    bool present = false;
    bool lost = false;
    std::uint64_t token = 0;
    std::stop_token stop;
    clock::time_point valid_until;
  };
  hold_view find(const std::string& name, std::uint64_t owner_key) const noexcept;
  std::string owner_of_current_thread() const {
    return client_id_ + ":" + std::to_string(core::current_thread_key());
  }

  void on_thread_exit(std::uint64_t thread_key) noexcept override;
  // Releases and reports the holds of threads that ended without unlocking.
  void release_orphans(const std::vector<std::shared_ptr<redlock_hold>>& orphans) noexcept;

  std::string metrics_text() const;
  dlock::lock_metrics metrics() const noexcept { return counters_.snapshot(); }

  const redlock_options options_;
  const std::string client_id_ = core::random_id();
  std::size_t size_ = 0;
  std::size_t quorum_ = 0;

 private:
  // What an attempt came to (dlock_redlock_attempt_results_total's label).
  enum class attempt_outcome : std::uint8_t {
    majority,
    held_elsewhere,
    no_majority,
    validity_spent
  };
  static constexpr std::size_t attempt_outcome_count = 4;
  static std::string_view outcome_name(attempt_outcome o) noexcept;

  // One master's connection, as its client's log records tell it.
  struct master_link {
    std::atomic<bool> up{false};
    std::atomic<std::uint64_t> losses{0};
  };
  // A master client's log record: tracks the connection, then forwards it with the master's index.
  void on_master_log(std::size_t index, const log_record& r) noexcept;
  void log_no_majority(const std::string& name, std::size_t attempts, std::size_t answered,
                       std::size_t granted) noexcept;
  void observe_acquired(const std::string& name, clock::time_point started,
                        const redlock_hold& hold) noexcept;
  using hold_key = std::pair<std::string, std::uint64_t>;  // name, owner key

  struct attempt_result {
    std::shared_ptr<redlock_hold> hold;  // set when held
    attempt_outcome outcome = attempt_outcome::no_majority;
    std::size_t answered = 0;  // masters that answered before the attempt was decided
    std::size_t granted = 0;
    std::size_t refused = 0;      // masters held by someone else
    bool foreign_holder = false;  // a holder that publishes nothing on release
    milliseconds holder_left{0};  // when a majority's current holds would all have ended
  };

  // How send() writes the requests: the calling thread writes them and may read the replies
  // itself (`polled`, see net::polled_reads); the I/O thread does both (`by_io_thread`); or each
  // waits, unwritten, for the next request on its link (`deferred`, see
  // net::connection::caller::defers), for a request nobody waits for.
  enum class sending : std::uint8_t { polled, by_io_thread, deferred };
  std::shared_ptr<quorum::fan_out> send(const std::vector<std::size_t>& targets, const script& s,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args, sending how,
                                        net::polled_reads* polled = nullptr);
  std::vector<std::size_t> all_masters() const {
    std::vector<std::size_t> all(size_);
    for (std::size_t i = 0; i < size_; ++i)
      all[i] = i;
    return all;
  }
  attempt_result attempt(const std::string& name, const std::string& owner, milliseconds lease,
                         bool watchdog);
  std::shared_ptr<quorum::fan_out> release_on_all(const std::string& name, const std::string& value,
                                                  bool may_defer = false) {
    return release_on(all_masters(), name, value, may_defer);
  }
  // Releases `value` on the masters `targets` (indexes, not empty), in parallel, without waiting;
  // the fan-out's answers of the other masters stay empty. With `may_defer`, and if the name's
  // latest release reached no listener (quiet_), each request may wait for this process's
  // next request on its link (net::connection::caller::defers).
  std::shared_ptr<quorum::fan_out> release_on(const std::vector<std::size_t>& targets,
                                              const std::string& name, const std::string& value,
                                              bool may_defer = false);
  void check_not_cluster();
  // The error that ends an acquisition, if the answers call for one: so many masters hold
  // another kind of key under the name that no majority can form (errc::wrong_type), or a master
  // found this attempt's value already there, so two masters are one server
  // (errc::invalid_argument).
  std::optional<error> fatal_answer(const quorum::fan_out::answers& answers) const;
  // The error for a {3} answer (this attempt's value found already there), if there is one.
  std::optional<error> same_server_answer(const quorum::fan_out::answers& answers) const;
  // Throws the error of two URLs found to reach one server (looking first at the late answers
  // of an earlier attempt), unless every master granted one attempt already.
  void check_masters_apart();
  std::shared_ptr<redlock_gate> gate_for(const std::string& name);
  // Sets `waited` when the gate was busy on arrival.
  bool enter_gate(const std::shared_ptr<redlock_gate>& gate, clock::time_point deadline,
                  const std::stop_token& cancel, bool& waited);
  std::vector<subscription> subscribe_all(const std::string& name,
                                          const std::shared_ptr<redlock_waker>& waker);
  void forget_waker(const std::shared_ptr<redlock_waker>& waker);

  void run_watchdog();
  void renew(std::vector<std::shared_ptr<redlock_hold>> due);
  // Marks the hold lost, stops its token and tells on_lock_lost, once; not for a hold released
  // meanwhile unless `even_if_released` (the thread ended or the redlock stopped: that is the
  // loss).
  void report_loss(const std::shared_ptr<redlock_hold>& hold, lock_loss_reason reason,
                   bool even_if_released = false) noexcept;

  // How long the last attempt took (microseconds): the unit of a local yield (acquire()).
  std::atomic<std::int64_t> attempt_round_trip_us_{0};

  // Declared before the clients: their I/O threads use these until the clients are destroyed.
  const core::log_sink log_;
  locks::lock_counters counters_;
  locks::lock_type_counters& type_counters_ = counters_.of(lock_kind);
  std::array<std::atomic<std::uint64_t>, attempt_outcome_count> outcomes_{};
  // Validity left when a hold was taken (watchdog leases are 30 s by default).
  locks::duration_histogram validity_seconds_{0.01, 0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                              5,    10,   15,  20,   25,  30, 60};
  std::unique_ptr<master_link[]> links_;  // NOLINT(*-avoid-c-arrays): atomics do not move
  std::vector<std::string> endpoints_;
  std::mutex no_majority_log_mutex_;
  clock::time_point last_no_majority_log_{};

  // The one I/O thread of all the masters' clients: an attempt's N replies wake one thread.
  // Declared before the clients, which it outlives; after what their log hooks use.
  detail::shared_io io_;
  mutable std::shared_mutex clients_mutex_;
  std::vector<std::unique_ptr<client>> masters_;  // cleared by stop()

  mutable std::mutex holds_mutex_;
  std::condition_variable watchdog_wake_;
  // When the watchdog, asleep, wakes next; min() while it is awake. A new hold wakes it only if
  // it is due sooner: a thread wake-up per acquisition is dear on a small machine.
  clock::time_point watchdog_sleeps_until_ = clock::time_point::min();
  std::map<hold_key, std::shared_ptr<redlock_hold>> holds_;
  std::map<std::string, std::weak_ptr<redlock_gate>> gates_;
  std::set<std::shared_ptr<redlock_waker>> wakers_;
  std::vector<std::shared_ptr<redlock_hold>> orphans_;  // see on_thread_exit()
  std::size_t acquiring_ = 0;  // acquire() calls under way (stop() waits for them)
  bool stopping_ = false;
  std::thread watchdog_;

  // Names whose latest release reached no listener on any master that answered (plain_unlock.lua
  // answers 2 when its message reached one): their next release may ride with this process's
  // next request to each master instead of costing a write, and the masters a read, of its own.
  locks::quiet_names quiet_{locks::quiet_release_lasts};

  // Releases in flight, so that stop() can let them reach the masters first.
  std::mutex releases_mutex_;
  std::condition_variable releases_done_;
  std::size_t releases_in_flight_ = 0;

  // Set once every master granted one attempt: the URLs reach distinct servers (see attempt()).
  std::atomic<bool> masters_known_apart_{false};
  std::mutex same_server_mutex_;
  // Two URLs found to reach one server: every acquisition fails with this from then on.
  std::optional<error> same_server_;
  // The latest attempt decided before every master answered, while masters are not known apart:
  // the next attempt looks at its late answers.
  std::shared_ptr<quorum::fan_out> unchecked_answers_;
};

redlock::impl::impl(const std::vector<std::string>& urls, redlock_options options)
    : options_(std::move(options)), log_(options_.on_log) {
  if (urls.empty()) throw error(errc::invalid_argument, "redlock needs at least one master URL");
  check_lease(options_.watchdog_timeout, "redlock_options::watchdog_timeout");
  core::check_setting(options_.request_timeout, milliseconds(1),
                      "redlock_options::request_timeout");
  core::check_setting(options_.connect_timeout, milliseconds(1),
                      "redlock_options::connect_timeout");
  core::check_setting(options_.retry_delay, milliseconds(1), "redlock_options::retry_delay");
  core::check_setting(options_.slow_acquisition, milliseconds(0),
                      "redlock_options::slow_acquisition (0: no log)");
  std::vector<client_options> parsed;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    client_options o = client_options::from_url(urls[i]);
    if (!o.more_hosts.empty() && o.sentinel.master_name.empty()) {
      throw error(errc::invalid_argument,
                  "redlock master " + std::to_string(i + 1) +
                      " names several hosts (one deployment, such as a Redis Cluster); each "
                      "Redlock master must be one independent server");
    }
    if (!seen.insert(server_identity(o)).second) {
      throw error(errc::invalid_argument, "redlock master " + std::to_string(i + 1) +
                                              " names the same server as an earlier one (" +
                                              o.endpoint() + ")");
    }
    o.request_timeout = options_.request_timeout;
    o.connect_timeout = options_.connect_timeout;
    o.slow_acquisition = milliseconds::zero();  // the clients' own locks are not used
    // Always set: the connection state per master comes from these records.
    o.on_log = [this, i](const log_record& r) { on_master_log(i, r); };
    endpoints_.push_back(o.endpoint());
    parsed.push_back(std::move(o));
  }
  links_ = std::make_unique<master_link[]>(parsed.size());  // NOLINT(*-avoid-c-arrays)
  for (auto& o : parsed)
    masters_.push_back(std::make_unique<client>(std::move(o), io_));
  size_ = masters_.size();
  quorum_ = size_ / 2 + 1;
}

void redlock::impl::stop() noexcept {
  std::vector<std::shared_ptr<redlock_hold>> open;
  {
    std::lock_guard lock(holds_mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [key, hold] : holds_)
      open.push_back(hold);
    holds_.clear();
    for (const auto& waker : wakers_) {
      std::lock_guard w(waker->mutex);
      waker->stopped = true;
      waker->changed.notify_all();
    }
    for (auto& [name, weak] : gates_) {
      if (auto gate = weak.lock()) {
        std::lock_guard g(gate->mutex);
        gate->stopped = true;
        gate->freed.notify_all();
      }
    }
  }
  watchdog_wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  core::remove_thread_exit_listener(this);
  {
    std::unique_lock lock(holds_mutex_);
    auto orphans = std::exchange(orphans_, {});
    lock.unlock();
    release_orphans(orphans);
  }
  // Nobody renews these any more: release them and say so.
  for (const auto& hold : open) {
    try {
      release_on_all(hold->name, hold->value);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the lease ends them anyway
    }
    report_loss(hold, lock_loss_reason::client_stopped, true);
  }
  // Waiters were told to stop, and an attempt still out is answered or times out: wait until
  // every acquisition has ended (one whose attempt took a hold releases it; waiters drop their
  // subscriptions) while the masters' clients still live.
  {
    std::unique_lock lock(holds_mutex_);
    watchdog_wake_.wait_for(lock, options_.request_timeout + std::chrono::seconds(5),
                            [this] { return wakers_.empty() && acquiring_ == 0; });
  }
  {
    std::unique_lock lock(releases_mutex_);
    releases_done_.wait_for(lock, options_.request_timeout,
                            [this] { return releases_in_flight_ == 0; });
  }
  {
    std::unique_lock lock(clients_mutex_);
    masters_.clear();
  }
  io_.stop();
}

std::shared_ptr<quorum::fan_out> redlock::impl::send(const std::vector<std::size_t>& targets,
                                                     const script& s,
                                                     const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& args,
                                                     sending how, net::polled_reads* polled) {
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  const std::vector<std::string_view> arg_views(args.begin(), args.end());
  auto calls = std::make_shared<quorum::fan_out>(size_);
  std::shared_lock lock(clients_mutex_);
  if (masters_.empty()) throw error(errc::client_stopped, "the redlock was destroyed");
  for (const std::size_t i : targets) {
    try {
      switch (how) {
        case sending::polled:
          masters_[i]->async_eval_from_caller(s, key_views, arg_views, calls->handler(i), polled);
          break;
        case sending::by_io_thread:
          masters_[i]->async_eval(s, key_views, arg_views, calls->handler(i));
          break;
        case sending::deferred:
          masters_[i]->async_eval_deferred(s, key_views, arg_views, calls->handler(i));
          break;
      }
    } catch (const error& e) {
      calls->complete(i, e.code(), reply::make_error(e.what()));
    }
  }
  return calls;
}

std::shared_ptr<quorum::fan_out> redlock::impl::release_on(const std::vector<std::size_t>& targets,
                                                           const std::string& name,
                                                           const std::string& value,
                                                           bool may_defer) {
  const bool deferred = may_defer && quiet_.is_quiet(name, clock::now());
  if (deferred) ++counters_.releases_deferred;
  {
    std::lock_guard lock(releases_mutex_);
    releases_in_flight_ += 1;
  }
  auto calls = std::make_shared<quorum::fan_out>(size_);
  const std::string channel = locks::plain_unlock_channel(name);
  const std::vector<std::string_view> key_views{name, channel};
  const std::vector<std::string_view> arg_views{value, "publish"};
  // The in-flight count drops when the last master has answered (or failed); then whether any
  // master's message reached a listener is recorded.
  struct tally {
    std::atomic<std::size_t> remaining;
    std::atomic<bool> answered{false};
    std::atomic<bool> heard{false};
  };
  auto counts = std::make_shared<tally>();
  counts->remaining = targets.size();
  // No owning pointer: stop() destroys the clients, which completes every callback, before the
  // impl goes.
  auto finish_one = [this, counts, name](const reply& r) {
    if (r.is_integer()) {
      counts->answered = true;
      if (r.integer == 2) counts->heard = true;
    }
    if (counts->remaining.fetch_sub(1) != 1) return;
    if (counts->answered) quiet_.record(name, counts->heard, clock::now());
    {
      std::lock_guard lock(releases_mutex_);
      releases_in_flight_ -= 1;
    }
    releases_done_.notify_all();
  };
  std::shared_lock lock(clients_mutex_);
  for (const std::size_t i : targets) {
    auto record = calls->handler(i);
    reply_handler done = [record, finish_one](std::error_code ec, reply r) {
      finish_one(r);
      record(ec, std::move(r));
    };
    if (masters_.empty()) {
      done(make_error_code(errc::client_stopped), reply::make_error("stopped"));
      continue;
    }
    try {
      if (deferred) {
        masters_[i]->async_eval_deferred(unlock_script(), key_views, arg_views, done);
      } else {
        // The I/O thread writes it (and, right behind, this thread's next attempt, if it comes
        // meanwhile): writing three requests itself costs the unlocking thread more.
        masters_[i]->async_eval(unlock_script(), key_views, arg_views, done);
      }
    } catch (const error& e) {
      done(e.code(), reply::make_error(e.what()));
    }
  }
  return calls;
}

std::optional<error> redlock::impl::same_server_answer(
    const quorum::fan_out::answers& answers) const {
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& r = answers[i];
    if (r && r->is_array() && !r->elements.empty() && r->elements[0].is_integer() &&
        r->elements[0].integer == 3) {
      // plain_lock.lua found this attempt's own value: a master that answered earlier is the
      // same server, spelled otherwise (localhost and 127.0.0.1, a host name and its address),
      // or one that replicates into it.
      return error(errc::invalid_argument,
                   "redlock master " + std::to_string(i + 1) + " (" + endpoints_[i] +
                       ") is the same server as another master, or replicates into one (an "
                       "attempt's value was there already); Redlock needs independent masters");
    }
  }
  return std::nullopt;
}

void redlock::impl::check_masters_apart() {
  if (masters_known_apart_.load(std::memory_order_acquire)) return;
  const std::lock_guard lock(same_server_mutex_);
  if (!same_server_ && unchecked_answers_) {
    const auto late = unchecked_answers_->wait(
        clock::time_point::min(), [](const quorum::fan_out::answers&) { return true; });
    same_server_ = same_server_answer(late);
    if (std::all_of(late.begin(), late.end(), [](const auto& r) { return r.has_value(); })) {
      unchecked_answers_.reset();
    }
  }
  if (same_server_) throw error(*same_server_);
}

std::optional<error> redlock::impl::fatal_answer(const quorum::fan_out::answers& answers) const {
  if (auto same = same_server_answer(answers)) return same;
  std::size_t other_kind = 0;
  std::string kind_refusal;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& r = answers[i];
    if (!r || !r->is_array() || r->elements.empty() || !r->elements[0].is_integer()) continue;
    const std::string master =
        "redlock master " + std::to_string(i + 1) + " (" + endpoints_[i] + ")";
    if (locks::is_kind_refusal(*r) && ++other_kind == 1) {
      kind_refusal = master + ": the name '" + locks::printable_name(r->elements[2].str) +
                     "' holds " + r->elements[1].str + ", not a Redlock (a plain lock)";
    }
  }
  // A master whose key is of another kind counts as one that refused; once so many refuse that
  // no majority can form while those keys stand, waiting cannot help.
  if (other_kind > size_ - quorum_) {
    return error(errc::wrong_type, kind_refusal + " (" + std::to_string(other_kind) + " of " +
                                       std::to_string(size_) + " masters)");
  }
  return std::nullopt;
}

void redlock::impl::check_not_cluster() {
  std::shared_lock lock(clients_mutex_);
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (masters_[i]->routing_metrics().deployment == deployment_kind::cluster) {
      throw error(errc::invalid_argument,
                  "redlock master " + std::to_string(i + 1) + " (" +
                      masters_[i]->options().endpoint() +
                      ") is a Redis Cluster node; Redlock needs independent masters");
    }
  }
}

thread_local std::vector<const redlock::impl*> redlock::impl::acquiring_here;

redlock::impl::attempt_result redlock::impl::attempt(const std::string& name,
                                                     const std::string& owner, milliseconds lease,
                                                     bool watchdog) {
  check_masters_apart();
  const std::string nonce = core::random_id();
  const std::string value = owner + ":" + nonce;
  const auto start = clock::now();
  const auto validity_end = start + lease - drift_of(lease);
  ++counters_.attempts;
  ++type_counters_.attempts;
  // This thread writes the N requests and reads the replies of the links it could take itself:
  // one round trip, no hand-off to the I/O thread and back.
  net::polled_reads reads;
  auto calls = send(all_masters(), lock_script(), {name, locks::fence_key(name)},
                    {std::to_string(lease.count()), owner, nonce, "0"}, sending::polled, &reads);
  const std::size_t quorum = quorum_;
  const std::size_t size = size_;
  // Stop waiting once a majority granted, or once it no longer can.
  const auto decided = [quorum, size](const quorum::fan_out::answers& a) {
    std::size_t yes = 0, no = 0;
    for (const auto& r : a) {
      if (!r) continue;
      if (is_yes_array(r)) {
        ++yes;
      } else {
        ++no;
      }
    }
    return yes >= quorum || no > size - quorum || yes + no == size;
  };
  const auto wait_end = std::min(start + options_.request_timeout, validity_end);
  reads.read_until(wait_end, [&] { return calls->holds(decided); });
  reads.finish();  // the I/O thread reads what is still due
  auto answers = calls->wait(wait_end, decided);
  attempt_round_trip_us_.store(
      std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start).count(),
      std::memory_order_relaxed);
  if (!masters_known_apart_.load(std::memory_order_acquire)) {
    // Until every master has granted one attempt, two URLs may reach one server (its second
    // request finds this attempt's value: {3}). That answer follows its twin's at once, so a
    // short wait for the rest nearly always settles it; a hung master costs up to one more round
    // trip (2 ms at least). Answers later still are looked at by the next attempt.
    const auto all_in = [](const quorum::fan_out::answers& a) {
      return std::all_of(a.begin(), a.end(), [](const auto& r) { return r.has_value(); });
    };
    const auto elapsed = clock::now() - start;
    answers = calls->wait(
        std::min(wait_end, clock::now() + std::max<clock::duration>(elapsed, milliseconds(2))),
        all_in);
    if (std::all_of(answers.begin(), answers.end(),
                    [](const auto& r) { return is_yes_array(r); })) {
      // Two URLs of one server cannot both grant one attempt.
      masters_known_apart_.store(true, std::memory_order_release);
    } else if (!all_in(answers)) {
      const std::lock_guard lock(same_server_mutex_);
      unchecked_answers_ = calls;
    }
  }
  const auto now = clock::now();

  attempt_result result;
  std::vector<std::size_t> granted;
  std::vector<std::uint64_t> tokens(answers.size(), 0);
  std::uint64_t token = 0;
  std::vector<milliseconds> holder_ttls;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& r = answers[i];
    if (r && !r->is_error()) ++result.answered;  // a failed request (refused, lost) is no answer
    if (is_yes_array(r) && r->elements.size() >= 2) {
      granted.push_back(i);
      const reply& t = r->elements[1];
      tokens[i] = t.is_integer() ? static_cast<std::uint64_t>(t.integer) : std::stoull(t.str);
      token = std::max(token, tokens[i]);
    } else if (r && r->is_array() && r->elements.size() >= 3 && r->elements[0].integer == 0) {
      ++result.refused;
      const std::int64_t pttl = r->elements[1].integer;
      holder_ttls.push_back(pttl < 0 ? milliseconds(1000) : milliseconds(pttl));
      if (r->elements[2].integer == 0) result.foreign_holder = true;
    }
  }
  result.granted = granted.size();
  // An answer that ends the acquisition, once what it may have taken is undone.
  const std::optional<error> fatal = fatal_answer(answers);
  result.outcome =
      fatal ? attempt_outcome::no_majority
      : granted.size() >= quorum_
          ? (now < validity_end ? attempt_outcome::majority : attempt_outcome::validity_spent)
      : result.refused >= quorum_ ? attempt_outcome::held_elsewhere
                                  : attempt_outcome::no_majority;
  ++outcomes_[static_cast<std::size_t>(result.outcome)];
  if (result.outcome == attempt_outcome::majority) {
    // Later majorities overlap this one in at least one master: make its counter know the token
    // (the masters that handed out this very token know it already).
    std::vector<std::size_t> behind;
    for (const std::size_t i : granted) {
      if (tokens[i] < token) behind.push_back(i);
    }
    if (!behind.empty()) {
      // Nobody waits for it: it rides with this process's next request to those masters (the
      // release, at the latest), ahead of it on the link, so it lands before the key is freed
      // there; or the link's timer writes it within about a millisecond.
      send(behind, fence_script(), {locks::fence_key(name)}, {std::to_string(token)},
           sending::deferred);
    }
    auto hold = std::make_shared<redlock_hold>();
    hold->name = name;
    hold->owner = owner;
    hold->value = value;
    hold->lease = lease;
    hold->watchdog = watchdog;
    hold->token = token;
    hold->since = now;
    hold->valid_until = validity_end;
    hold->next_renewal = start + lease / 3;
    result.hold = std::move(hold);
    return result;
  }
  // Not held: undo it wherever it may stand, also where no answer came (the SET may still land
  // there); a master that answered with a refusal set nothing.
  std::vector<std::size_t> undo;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (!is_refusal(answers[i])) undo.push_back(i);
  }
  if (!undo.empty()) {
    auto released = release_on(undo, name, value);
    released->wait(clock::now() + options_.request_timeout,
                   [&undo](const quorum::fan_out::answers& a) {
                     return std::all_of(undo.begin(), undo.end(),
                                        [&a](std::size_t i) { return a[i].has_value(); });
                   });
  }
  if (fatal) {
    if (fatal->code() == errc::invalid_argument) {
      const std::lock_guard lock(same_server_mutex_);
      same_server_ = fatal;
    }
    throw error(*fatal);
  }
  if (!holder_ttls.empty()) {
    // The holder keeps a majority until enough of its masters' leases ended for ours to win.
    // We can win once no more than size - quorum of its masters still hold: after the
    // (refused - (size - quorum))-th shortest lease ends.
    std::sort(holder_ttls.begin(), holder_ttls.end());
    const std::size_t must_end =
        holder_ttls.size() > size_ - quorum_ ? holder_ttls.size() - (size_ - quorum_) : 1;
    result.holder_left = holder_ttls[must_end - 1];
  }
  check_not_cluster();
  return result;
}

std::shared_ptr<redlock_gate> redlock::impl::gate_for(const std::string& name) {
  std::lock_guard lock(holds_mutex_);
  if (stopping_) throw error(errc::client_stopped, "the redlock was destroyed");
  auto& weak = gates_[name];
  auto gate = weak.lock();
  if (!gate) {
    gate = std::make_shared<redlock_gate>();
    weak = gate;
  }
  // Forget gates nobody uses any more, so the map does not grow with every name ever locked.
  if (gates_.size() > 64) {
    std::erase_if(gates_, [](const auto& entry) { return entry.second.expired(); });
  }
  return gate;
}

bool redlock::impl::enter_gate(const std::shared_ptr<redlock_gate>& gate,
                               clock::time_point deadline, const std::stop_token& cancel,
                               bool& waited) {
  std::unique_lock lock(gate->mutex);
  waited = gate->busy;
  ++gate->waiting;
  gate->freed.wait_until(lock, deadline,
                         [&] { return !gate->busy || gate->stopped || cancel.stop_requested(); });
  --gate->waiting;
  if (gate->stopped) throw error(errc::client_stopped, "the redlock was destroyed");
  if (cancel.stop_requested()) throw error(errc::cancelled, "the acquisition was cancelled");
  if (gate->busy) return false;
  gate->busy = true;
  return true;
}

std::vector<subscription> redlock::impl::subscribe_all(
    const std::string& name, const std::shared_ptr<redlock_waker>& waker) {
  {
    std::lock_guard lock(holds_mutex_);
    if (stopping_) throw error(errc::client_stopped, "the redlock was destroyed");
    wakers_.insert(waker);
  }
  const std::string channel = locks::plain_unlock_channel(name);
  std::vector<subscription> subs;
  std::shared_lock lock(clients_mutex_);
  if (masters_.empty()) throw error(errc::client_stopped, "the redlock was destroyed");
  for (auto& master : masters_) {
    std::weak_ptr<redlock_waker> weak = waker;
    subs.push_back(master->subscribe(
        channel,
        [weak](std::string_view) {
          if (auto w = weak.lock()) w->bump(false);
        },
        [weak] {
          if (auto w = weak.lock()) w->bump(true);
        }));
  }
  return subs;
}

void redlock::impl::forget_waker(const std::shared_ptr<redlock_waker>& waker) {
  {
    std::lock_guard lock(holds_mutex_);
    wakers_.erase(waker);
  }
  watchdog_wake_.notify_all();
}

bool redlock::impl::acquire(const std::string& name, clock::duration wait,
                            const milliseconds* lease, std::uint64_t owner_key,
                            const std::stop_token& cancel) {
  const milliseconds lease_ms = lease != nullptr ? *lease : options_.watchdog_timeout;
  if (lease != nullptr) check_lease(lease_ms, "the lease");
  const std::string owner = client_id_ + ":" + std::to_string(owner_key);
  {
    std::lock_guard lock(holds_mutex_);
    if (stopping_) throw error(errc::client_stopped, "the redlock was destroyed");
    auto it = holds_.find({name, owner_key});
    if (it != holds_.end()) {
      if (!it->second->lost) {
        throw error(errc::would_deadlock, "this thread already holds the Redlock " +
                                              locks::printable_name(name) +
                                              " (it is not reentrant)");
      }
    }
    ++acquiring_;
  }
  // stop() waits for this acquisition to end before the masters' clients go.
  struct acquiring_guard {
    impl& self;
    explicit acquiring_guard(impl& i) : self(i) { acquiring_here.push_back(&self); }
    acquiring_guard(const acquiring_guard&) = delete;
    acquiring_guard& operator=(const acquiring_guard&) = delete;
    ~acquiring_guard() {
      acquiring_here.pop_back();
      std::lock_guard lock(self.holds_mutex_);
      --self.acquiring_;
      if (self.stopping_) self.watchdog_wake_.notify_all();
    }
  } counted{*this};
  // A lost hold this thread never unlocked: forget it (releasing it where it may remain).
  (void)release(name, owner_key);

  check_not_cluster();
  const auto started = clock::now();
  const auto deadline = started + wait;
  auto gate = gate_for(name);
  auto waker = std::make_shared<redlock_waker>();
  // Cancelling wakes whichever wait this acquisition is in (taking each mutex first, so that a
  // waiter between its check and its sleep cannot miss the notification).
  const std::stop_callback on_cancel(cancel, [&gate, &waker] {
    { const std::lock_guard g(gate->mutex); }
    gate->freed.notify_all();
    { const std::lock_guard w(waker->mutex); }
    waker->changed.notify_all();
  });
  // Counted once per acquisition that had to wait (at the gate or for a holder), and once per
  // acquisition whose wait ran out.
  bool counted_wait = false;
  const auto count_wait = [&] {
    if (std::exchange(counted_wait, true)) return;
    ++counters_.waited;
    ++type_counters_.waited;
  };
  const auto timed_out = [&] {
    ++counters_.timed_out;
    ++type_counters_.timed_out;
    return false;
  };
  bool gate_was_busy = false;
  const bool entered = enter_gate(gate, deadline, cancel, gate_was_busy);
  if (gate_was_busy && wait > clock::duration::zero()) count_wait();
  if (!entered) return timed_out();
  bool yield_first = false;
  {
    const std::lock_guard g(gate->mutex);
    yield_first = std::exchange(gate->yield_to_others, false);
  }
  if (yield_first) {
    // A thread of this process just unlocked and handed us the local turn. Waiters in other
    // processes hear of the unlock a message later than we do: give them about two round trips
    // to win it, or this process would keep the lock among its own threads.
    const auto courtesy = std::clamp<clock::duration>(
        2 * std::chrono::microseconds(attempt_round_trip_us_.load(std::memory_order_relaxed)),
        std::chrono::microseconds(200), milliseconds(5));
    std::unique_lock lock(waker->mutex);
    waker->changed.wait_until(lock, std::min(deadline, clock::now() + courtesy),
                              [&] { return cancel.stop_requested(); });
  }
  bool gate_kept = false;
  struct gate_guard {
    std::shared_ptr<redlock_gate>& gate;
    bool& kept;
    ~gate_guard() {
      if (!kept) gate->release();
    }
  } guard{gate, gate_kept};

  std::vector<subscription> subs;  // empty until the first attempt failed
  struct waker_guard {
    impl& self;
    std::shared_ptr<redlock_waker>& waker;
    std::vector<subscription>& subs;
    ~waker_guard() {
      if (subs.empty()) return;
      subs.clear();
      self.forget_waker(waker);
    }
  } unsubscribe{*this, waker, subs};

  std::size_t no_majority_in_a_row = 0;
  for (;;) {
    if (cancel.stop_requested()) throw error(errc::cancelled, "the acquisition was cancelled");
    std::uint64_t seen_generation = 0;
    {
      std::lock_guard lock(waker->mutex);
      seen_generation = waker->generation;
    }
    attempt_result result = attempt(name, owner, lease_ms, lease == nullptr);
    if (result.hold) {
      if (cancel.stop_requested()) {  // cancelled while the attempt was out: given back at once
        try {
          release_on_all(name, result.hold->value);
        } catch (...) {  // NOLINT(bugprone-empty-catch): stopped meanwhile; the lease ends it
        }
        throw error(errc::cancelled, "the acquisition was cancelled");
      }
      bool wake_watchdog = false;
      result.hold->gate = gate;
      {
        std::lock_guard lock(holds_mutex_);
        if (stopping_) {
          release_on_all(name, result.hold->value);
          throw error(errc::client_stopped, "the redlock was destroyed");
        }
        holds_[{name, owner_key}] = result.hold;
        const auto first_due =
            result.hold->watchdog ? result.hold->next_renewal : result.hold->valid_until;
        wake_watchdog = first_due < watchdog_sleeps_until_;
      }
      if (wake_watchdog) watchdog_wake_.notify_all();
      gate_kept = true;
      observe_acquired(name, started, *result.hold);
      return true;
    }
    if (result.outcome == attempt_outcome::no_majority) {
      if (++no_majority_in_a_row >= no_majority_log_after) {
        log_no_majority(name, no_majority_in_a_row, result.answered, result.granted);
      }
    } else {
      no_majority_in_a_row = 0;
    }
    if (clock::now() >= deadline) return timed_out();
    count_wait();

    if (subs.empty()) {
      // Listen before the next attempt, so that no release between the two goes unheard.
      subs = subscribe_all(name, waker);
      std::unique_lock lock(waker->mutex);
      waker->changed.wait_until(
          lock, std::min(deadline, clock::now() + options_.request_timeout),
          // A majority of listeners hears at least one master of any holder's majority.
          [&] {
            return waker->subscribed >= quorum_ || waker->stopped || cancel.stop_requested();
          });
      if (waker->stopped) throw error(errc::client_stopped, "the redlock was destroyed");
      continue;
    }

    clock::time_point until;
    bool wake_on_message = true;
    if (result.refused >= quorum_) {
      // Held by someone else: wait for an unlock message, or until its leases would end. A
      // foreign holder (redis-py, node-redlock) publishes nothing: re-check at least every
      // 100 ms.
      auto left = result.holder_left + milliseconds(1);
      if (result.foreign_holder) left = std::min(left, milliseconds(100));
      until = clock::now() + left;
    } else {
      // A split vote, or masters that did not answer: back off for a random time.
      until = clock::now() + jittered(options_.retry_delay);
      wake_on_message = false;
    }
    until = std::min(until, deadline);
    std::unique_lock lock(waker->mutex);
    waker->changed.wait_until(lock, until, [&] {
      return waker->stopped || cancel.stop_requested() ||
             (wake_on_message && waker->generation != seen_generation);
    });
    if (waker->stopped) throw error(errc::client_stopped, "the redlock was destroyed");
  }
}

redlock::impl::hold_view redlock::impl::find(const std::string& name,
                                             std::uint64_t owner_key) const noexcept {
  hold_view view;
  std::stop_source lost_source = std::stop_source(std::nostopstate);
  {
    std::lock_guard lock(holds_mutex_);
    auto it = holds_.find({name, owner_key});
    if (it == holds_.end()) return {};
    const redlock_hold& h = *it->second;
    view = {true, h.lost, h.token, h.lost_source.get_token(), h.valid_until};
    if (h.lost) lost_source = h.lost_source;  // the same stop state
  }
  // report_loss() requests the stop after leaving the mutex, maybe not yet: an answer that the
  // hold is lost comes after its stop_token stopped (a second request does nothing).
  if (lost_source.stop_possible()) lost_source.request_stop();
  return view;
}

std::error_code redlock::impl::release(const std::string& name, std::uint64_t owner_key) noexcept {
  std::shared_ptr<redlock_hold> hold;
  bool was_lost = false;
  bool ran_out = false;
  {
    std::lock_guard lock(holds_mutex_);
    auto it = holds_.find({name, owner_key});
    if (it == holds_.end()) return make_error_code(errc::not_owner);
    hold = it->second;
    was_lost = hold->lost;
    ran_out = !was_lost && clock::now() >= hold->valid_until;
    hold->released = true;
    holds_.erase(it);
  }
  if (ran_out) {
    // The validity ended and the watchdog has not run since (this process was stopped, say):
    // the hold is lost, and its holder hears it now, not "released".
    report_loss(hold,
                hold->watchdog ? lock_loss_reason::unconfirmed : lock_loss_reason::lease_expired,
                /*even_if_released=*/true);
    was_lost = true;
  }
  if (!was_lost) {
    ++counters_.released;
    ++type_counters_.released;
    type_counters_.hold_seconds.observe(clock::now() - hold->since);
  }
  // While threads of this process wait for the name, the release goes out at once: the next one
  // waits a courtesy (see acquire()) for other processes' waiters, who hear of the release only
  // from its message.
  bool local_waiters = false;
  if (hold->gate) {
    const std::lock_guard g(hold->gate->mutex);
    local_waiters = hold->gate->waiting > 0;
  }
  try {
    release_on_all(hold->name, hold->value, !local_waiters);
  } catch (...) {  // NOLINT(bugprone-empty-catch): stopped; the leases end the holds
  }
  if (hold->gate) hold->gate->release(true);
  if (!was_lost) return {};
  // report_loss() requests the stop after leaving the mutex, maybe not yet: a holder told
  // lock_lost must find its stop_token stopped (a second request does nothing).
  hold->lost_source.request_stop();
  return make_error_code(errc::lock_lost);
}

void redlock::impl::on_thread_exit(std::uint64_t thread_key) noexcept {
  // This runs under the thread-exit listeners' mutex, which a client's destructor also takes (its
  // lock engine is a listener too): sending from here could deadlock with stop(). The watchdog
  // thread releases and reports the orphans.
  bool found = false;
  {
    std::lock_guard lock(holds_mutex_);
    for (auto it = holds_.begin(); it != holds_.end();) {
      if (it->first.second == thread_key) {
        it->second->released = true;
        orphans_.push_back(it->second);
        it = holds_.erase(it);
        found = true;
      } else {
        ++it;
      }
    }
  }
  if (found) watchdog_wake_.notify_all();
}

void redlock::impl::release_orphans(
    const std::vector<std::shared_ptr<redlock_hold>>& orphans) noexcept {
  for (const auto& hold : orphans) {
    try {
      release_on_all(hold->name, hold->value);
    } catch (...) {  // NOLINT(bugprone-empty-catch): stopped; the leases end the holds
    }
    if (hold->gate) hold->gate->release();
    report_loss(hold, lock_loss_reason::thread_exited, true);
  }
}

void redlock::impl::report_loss(const std::shared_ptr<redlock_hold>& hold, lock_loss_reason reason,
                                bool even_if_released) noexcept {
  {
    std::lock_guard lock(holds_mutex_);
    if (hold->lost || (hold->released && !even_if_released)) return;
    hold->lost = true;
  }
  ++counters_.lost;
  ++type_counters_.lost[static_cast<std::size_t>(reason)];
  hold->lost_source.request_stop();
  if (log_.enabled()) {
    try {
      log_.emit(log_level::error, "lock lost",
                {{"name", hold->name},
                 {"owner", hold->owner},
                 {"reason", std::string(locks::loss_reason_name(reason))}});
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory for the fields; reported below
    }
  }
  if (options_.on_lock_lost) {
    try {
      options_.on_lock_lost(lock_loss{hold->name, hold->owner, reason});
    } catch (...) {  // NOLINT(bugprone-empty-catch): the contract drops them
    }
  }
}

void redlock::impl::run_watchdog() {
  std::unique_lock lock(holds_mutex_);
  while (!stopping_) {
    if (!orphans_.empty()) {
      auto orphans = std::exchange(orphans_, {});
      lock.unlock();
      release_orphans(orphans);
      lock.lock();
      continue;
    }
    const auto now = clock::now();
    auto next = now + std::chrono::hours(1);
    std::vector<std::shared_ptr<redlock_hold>> due, expired, unconfirmed;
    for (auto& [key, hold] : holds_) {
      if (hold->lost) continue;
      if (hold->valid_until <= now) {
        (hold->watchdog ? unconfirmed : expired).push_back(hold);
        continue;
      }
      next = std::min(next, hold->valid_until);
      if (hold->watchdog) {
        if (hold->next_renewal <= now) {
          due.push_back(hold);
        } else {
          next = std::min(next, hold->next_renewal);
        }
      }
    }
    if (due.empty() && expired.empty() && unconfirmed.empty()) {
      watchdog_sleeps_until_ = next;
      watchdog_wake_.wait_until(lock, next);
      watchdog_sleeps_until_ = clock::time_point::min();
      continue;
    }
    lock.unlock();
    for (const auto& hold : expired)
      report_loss(hold, lock_loss_reason::lease_expired);
    for (const auto& hold : unconfirmed)
      report_loss(hold, lock_loss_reason::unconfirmed);
    // One script per master for up to max_renewal_batch holds, as the lock engine does.
    for (std::size_t first = 0; first < due.size(); first += max_renewal_batch) {
      const std::size_t last = std::min(due.size(), first + max_renewal_batch);
      renew({due.begin() + static_cast<std::ptrdiff_t>(first),
             due.begin() + static_cast<std::ptrdiff_t>(last)});
    }
    lock.lock();
  }
}

void redlock::impl::renew(std::vector<std::shared_ptr<redlock_hold>> due) {
  std::vector<std::string> keys, args;
  args.push_back(std::to_string(options_.watchdog_timeout.count()));
  auto earliest_end = clock::time_point::max();
  {
    std::lock_guard lock(holds_mutex_);
    for (const auto& hold : due) {
      keys.push_back(hold->name);
      args.push_back(hold->value);
      earliest_end = std::min(earliest_end, hold->valid_until);
    }
  }
  const auto start = clock::now();
  const milliseconds lease = options_.watchdog_timeout;
  std::shared_ptr<quorum::fan_out> calls;
  try {
    calls = send(all_masters(), renew_script(), keys, args, sending::by_io_thread);
  } catch (const error&) {
    return;  // stopped
  }
  counters_.renewal_scripts += size_;
  const auto answers = calls->wait(
      std::min(start + options_.request_timeout, earliest_end),
      [](const quorum::fan_out::answers& a) {
        return std::all_of(a.begin(), a.end(), [](const auto& r) { return r.has_value(); });
      });
  const auto now = clock::now();
  const auto validity_end = start + lease - drift_of(lease);
  std::vector<std::shared_ptr<redlock_hold>> gone;
  {
    std::lock_guard lock(holds_mutex_);
    for (std::size_t j = 0; j < due.size(); ++j) {
      std::size_t confirmed = 0, denied = 0;
      for (const auto& r : answers) {
        if (!r) continue;
        if (r->is_array() && r->elements.size() == due.size() && r->elements[j].integer == 1) {
          ++confirmed;
        } else if (r->is_array()) {
          ++denied;
        }
      }
      auto& hold = due[j];
      if (hold->released) continue;
      if (confirmed < quorum_ || now >= validity_end) ++type_counters_.renewals_failed;
      if (confirmed >= quorum_ && now < validity_end) {
        ++counters_.leases_renewed;
        ++type_counters_.leases_renewed;
        hold->valid_until = validity_end;
        hold->next_renewal = start + lease / 3;
      } else if (denied > size_ - quorum_) {
        gone.push_back(hold);  // a majority says it is not ours: no retry can bring it back
      } else {
        // Not confirmed yet: try again soon; the hold ends at valid_until if nothing confirms.
        hold->next_renewal = now + std::min<clock::duration>(lease / 10, std::chrono::seconds(1));
      }
    }
  }
  for (const auto& hold : gone)
    report_loss(hold, lock_loss_reason::not_held);
}

// --- metrics and logs -------------------------------------------------------------------------

std::string_view redlock::impl::outcome_name(attempt_outcome o) noexcept {
  switch (o) {
    case attempt_outcome::majority:
      return "majority";
    case attempt_outcome::held_elsewhere:
      return "held_elsewhere";
    case attempt_outcome::no_majority:
      return "no_majority";
    case attempt_outcome::validity_spent:
      return "validity_spent";
  }
  return "unknown";
}

void redlock::impl::on_master_log(std::size_t index, const log_record& r) noexcept {
  master_link& link = links_[index];
  if (r.message == "connection lost") {
    link.up = false;
    ++link.losses;
  } else if (r.message == "connected" || r.message == "connection recovered") {
    link.up = true;
  }
  if (!log_.enabled()) return;
  try {
    std::vector<log_field> fields(r.fields.begin(), r.fields.end());
    fields.push_back({"redlock_master", std::to_string(index)});
    fields.push_back({"endpoint", endpoints_[index]});
    log_.emit(r.level, r.message, fields);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory for the fields: not logged
  }
}

void redlock::impl::log_no_majority(const std::string& name, std::size_t attempts,
                                    std::size_t answered, std::size_t granted) noexcept {
  if (!log_.enabled()) return;
  {
    const auto now = clock::now();
    std::lock_guard lock(no_majority_log_mutex_);
    if (last_no_majority_log_ != clock::time_point{} &&
        now - last_no_majority_log_ < no_majority_log_interval) {
      return;
    }
    last_no_majority_log_ = now;
  }
  try {
    log_.emit(log_level::warning, "no majority",
              {{"name", name},
               {"attempts", std::to_string(attempts)},
               {"answered", std::to_string(answered)},
               {"granted", std::to_string(granted)},
               {"quorum", std::to_string(quorum_)}});
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory for the fields: not logged
  }
}

void redlock::impl::observe_acquired(const std::string& name, clock::time_point started,
                                     const redlock_hold& hold) noexcept {
  ++counters_.acquired;
  ++type_counters_.acquired;
  const auto waited = hold.since - started;
  type_counters_.wait_seconds.observe(waited);
  validity_seconds_.observe(hold.valid_until - hold.since);
  const milliseconds slow = options_.slow_acquisition;
  if (slow.count() > 0 && waited >= slow && log_.enabled()) {
    try {
      log_.emit(
          log_level::warning, "slow acquisition",
          {{"name", name},
           {"type", std::string(lock_kind)},
           {"wait_ms", std::to_string(std::chrono::duration_cast<milliseconds>(waited).count())}});
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory for the fields: not logged
    }
  }
}

std::string redlock::impl::metrics_text() const {
  detail::prometheus_writer w;
  detail::write_lock_series(w, counters_,
                            {.reentries = false, .release_retries = false, .unconfirmed = false});

  w.family("dlock_redlock_masters", "gauge", "Independent masters this redlock votes over.");
  w.sample("dlock_redlock_masters", "", std::uint64_t{size_});
  w.family("dlock_redlock_quorum", "gauge",
           "Masters that must grant an attempt or a renewal (a majority).");
  w.sample("dlock_redlock_quorum", "", std::uint64_t{quorum_});
  const auto master_label = [](std::size_t i) { return "master=\"" + std::to_string(i) + "\""; };
  w.family("dlock_redlock_master_up", "gauge",
           "1 while the command connection to the master (its index in the URL list) is up.");
  for (std::size_t i = 0; i < size_; ++i)
    w.sample("dlock_redlock_master_up", master_label(i), std::uint64_t{links_[i].up ? 1U : 0U});
  w.family("dlock_redlock_master_connection_losses_total", "counter",
           "Working command connections to the master that broke.");
  for (std::size_t i = 0; i < size_; ++i)
    w.sample("dlock_redlock_master_connection_losses_total", master_label(i),
             links_[i].losses.load());
  w.family("dlock_redlock_attempt_results_total", "counter",
           "Acquisition attempts by result: majority (held), held_elsewhere (a majority "
           "refused), no_majority (split votes, masters not answering), validity_spent (a "
           "majority granted too late).");
  for (std::size_t o = 0; o < attempt_outcome_count; ++o) {
    w.sample("dlock_redlock_attempt_results_total",
             "result=\"" + std::string(outcome_name(static_cast<attempt_outcome>(o))) + "\"",
             outcomes_[o].load());
  }
  w.family("dlock_redlock_validity_seconds", "histogram",
           "Validity left when a hold was taken: its lease minus the attempt's time and the "
           "clock-drift margin.");
  w.histogram_series("dlock_redlock_validity_seconds", "", validity_seconds_);
  return w.take();
}

// --- public API --------------------------------------------------------------------------------

class redlock_mutex::state {
 public:
  state(std::shared_ptr<redlock::impl> owner, std::string lock_name)
      : impl(std::move(owner)), name(std::move(lock_name)) {}
  std::shared_ptr<redlock::impl> impl;
  std::string name;
};

redlock::redlock(const std::vector<std::string>& urls, redlock_options options)
    : impl_(std::make_shared<impl>(urls, std::move(options))) {
  impl_->start_watchdog();
}

redlock::~redlock() {
  if (impl_->on_own_thread()) {
    // Destroyed inside its own callback (on_lock_lost on the watchdog thread, on_log on the I/O
    // thread): stop() would wait for this very thread. Another thread stops it; handles keep the
    // state alive meanwhile. Without a thread to spare, it is left running rather than hang.
    (void)core::detached_shutdowns::instance().run([state = impl_] { state->stop(); });
    return;
  }
  impl_->stop();
}

redlock_mutex redlock::get_lock(std::string name) {
  locks::validate_lock_name(name);
  return redlock_mutex(std::make_shared<redlock_mutex::state>(impl_, std::move(name)));
}

std::size_t redlock::size() const noexcept {
  return impl_->size_;
}
std::size_t redlock::quorum() const noexcept {
  return impl_->quorum_;
}
const redlock_options& redlock::options() const noexcept {
  return impl_->options_;
}

std::string redlock::metrics_text() const {
  return impl_->metrics_text();
}

dlock::lock_metrics redlock::lock_metrics() const noexcept {
  return impl_->metrics();
}

void redlock_mutex::lock() {
  (void)acquire_for(detail::steady_wait(std::chrono::hours::max()), nullptr);
}

void redlock_mutex::lock(lease_time lease) {
  const auto explicit_lease = lease.value();
  (void)acquire_for(detail::steady_wait(std::chrono::hours::max()), &explicit_lease);
}

bool redlock_mutex::try_lock() {
  return acquire_for(steady_clock::duration::zero(), nullptr);
}

bool redlock_mutex::acquire_for(steady_clock::duration wait,
                                const std::chrono::milliseconds* lease) {
  return state_->impl->acquire(state_->name, wait, lease, core::current_thread_key());
}

std::error_code redlock_mutex::unlock_checked() noexcept {
  return state_->impl->release(state_->name, core::current_thread_key());
}

bool redlock_mutex::is_held_by_current_thread() const noexcept {
  const auto hold = state_->impl->find(state_->name, core::current_thread_key());
  return hold.present && !hold.lost && clock::now() < hold.valid_until;
}

std::uint64_t redlock_mutex::fencing_token() const noexcept {
  return state_->impl->find(state_->name, core::current_thread_key()).token;
}

std::stop_token redlock_mutex::stop_token() const noexcept {
  return state_->impl->find(state_->name, core::current_thread_key()).stop;
}

std::chrono::milliseconds redlock_mutex::validity() const noexcept {
  const auto hold = state_->impl->find(state_->name, core::current_thread_key());
  if (!hold.present || hold.lost) return milliseconds::zero();
  return std::max(milliseconds::zero(),
                  std::chrono::duration_cast<milliseconds>(hold.valid_until - clock::now()));
}

// --- asynchronous acquisition -------------------------------------------------------------------

class redlock_lease::impl {
 public:
  impl(std::shared_ptr<redlock::impl> owner, std::string lock_name, std::uint64_t key)
      : quorum(std::move(owner)), name(std::move(lock_name)), owner_key(key) {}
  std::shared_ptr<redlock::impl> quorum;
  std::string name;
  std::uint64_t owner_key;
};

redlock_lease::redlock_lease() noexcept = default;
redlock_lease::redlock_lease(std::unique_ptr<impl> state) noexcept : state_(std::move(state)) {}
redlock_lease::redlock_lease(redlock_lease&& other) noexcept = default;
redlock_lease& redlock_lease::operator=(redlock_lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    state_ = std::move(other.state_);
  }
  return *this;
}
redlock_lease::~redlock_lease() {
  (void)release();
}

std::error_code redlock_lease::release() noexcept {
  if (!state_) return make_error_code(errc::not_owner);
  const std::unique_ptr<impl> state = std::move(state_);
  return state->quorum->release(state->name, state->owner_key);
}

std::uint64_t redlock_lease::fencing_token() const noexcept {
  return state_ ? state_->quorum->find(state_->name, state_->owner_key).token : 0;
}

std::stop_token redlock_lease::stop_token() const noexcept {
  return state_ ? state_->quorum->find(state_->name, state_->owner_key).stop : std::stop_token{};
}

bool redlock_lease::lost() const noexcept {
  if (!state_) return false;
  const auto hold = state_->quorum->find(state_->name, state_->owner_key);
  return !hold.present || hold.lost;
}

std::chrono::milliseconds redlock_lease::validity() const noexcept {
  if (!state_) return milliseconds::zero();
  const auto hold = state_->quorum->find(state_->name, state_->owner_key);
  if (!hold.present || hold.lost) return milliseconds::zero();
  return std::max(milliseconds::zero(),
                  std::chrono::duration_cast<milliseconds>(hold.valid_until - clock::now()));
}

std::string redlock_lease::owner_id() const {
  return state_ ? state_->quorum->client_id_ + ":" + std::to_string(state_->owner_key)
                : std::string();
}

std::future<redlock_lease> redlock_mutex::async_acquire(const acquire_options& options) {
  if (options.lease) check_lease(*options.lease, "the lease");
  auto promise = std::make_shared<std::promise<redlock_lease>>();
  auto future = promise->get_future();
  // A fresh owner: never a thread's key, so thread exits do not touch it.
  const std::uint64_t key = core::new_owner_key();
  std::thread([quorum = state_->impl, name = state_->name, options, key, promise] {
    try {
      const auto wait = !options.wait ? detail::steady_wait(std::chrono::hours::max())
                        : *options.wait <= milliseconds::zero()
                            ? steady_clock::duration::zero()
                            : detail::steady_wait(*options.wait);
      const milliseconds lease = options.lease.value_or(milliseconds::zero());
      const bool held =
          quorum->acquire(name, wait, options.lease ? &lease : nullptr, key, options.cancel);
      promise->set_value(
          held ? redlock_lease(std::make_unique<redlock_lease::impl>(quorum, name, key))
               : redlock_lease());
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  return future;
}

std::string redlock_mutex::owner_id() const {
  return state_->impl->owner_of_current_thread();
}

const std::string& redlock_mutex::name() const noexcept {
  return state_->name;
}

}  // namespace dlock
