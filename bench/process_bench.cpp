// dlock_bench_processes: locks the way services use them, in separate processes each with its own
// client, beside the seeds' naive lock written on a plain synchronous C client (hiredis), both
// measured on the same server in the same run.
//
// Sides:
//   dlock   each process one dlock::client; threads share it; dlock::mutex with a watchdog lease
//   naive   each thread its own hiredis connection: SET key token NX PX 30000, on failure sleep
//           --naive-retry-ms and retry; release by a compare-and-delete script (waits for its
//           reply)
//   redis++ each thread its own redis-plus-plus connection (optional: built only when CMake is
//   given
//           -DDLOCK_BENCH_REDIS_PLUS_PLUS=<its source tree>): RedLock<RedLockMutex> on one
//           master, try_lock(30 s) retried after --naive-retry-ms, as its README waits; unlock
//           by its compare-and-delete script
//   redis-py, node-redlock
//           the script baselines of dlock_bench_lock (bench/baselines), each process one
//           interpreter at the library's defaults (redis-py Lock: 0.1 s sleep between attempts;
//           node-redlock: 200 ms retry delay + up to 100 ms jitter; threads = its async workers);
//           skipped, saying why, when `<interpreter> <script> --version` fails; no handoff (h)
// Scenarios (the benchmark re-executes itself for every process it needs):
//   a        1 process x 1 thread, lock + unlock cycles on one key, no hold, no think
//   b        1 process x --threads threads, each on its own key, no hold, no think
//   PxT      P processes x T threads on ONE key, holding --hold-ms and thinking --think-ms
//   (sleeps):
//            acquisitions/s, per-process min and max acquisitions, p50/p99/max wait (calling lock
//            to holding), client commands per acquisition
//   h        handoff between two processes: A holds, B waits in lock(); A unlocks at t0 and B's
//            lock() returns at t1 (both read CLOCK_MONOTONIC, common to the machine's processes);
//            p50/p99 of t1 - t0; also for two floors on hiredis without threads (a waiter sleeps
//            in its subscriber socket's read): the seeds' lock with an unlock message, and the
//            grant floor, whose release hands the lock to the first in line (no attempt after
//            the wake-up). Both floors run in the PxT layouts too.
// RTT is the median of --pings synchronous hiredis PINGs made by a child process pinned to another
// vCPU than the server's main thread (the sides' processes are not pinned, and on an otherwise
// idle machine they mostly run on another vCPU than the server: the naive lock's own SET costs
// about this RTT); the same PING with both on one vCPU is printed beside it, several times
// cheaper on a VM, where waking an idle vCPU is dear. "lock p50" of (a) is the uncontended
// lock() latency; the floor under it is printed beside it: dlock::mutex's own lock script on
// hiredis, one waited round trip, from a child pinned as the RTT's. Client commands ("cmds/acq")
// come from INFO commandstats between the moment every process starts its clock (CONFIG
// RESETSTAT then) and the end, minus the commands the lock scripts run inside Redis and the
// connections' own (subscriptions, handshakes: "conn/proc", per process); what the processes
// sent before, connecting and warming up, is "setup/proc" (a dlock client's handshake loads
// every script: about 35 SCRIPT LOADs); --print-commands lists both by command name. "srv
// us/acq" is the private server's CPU time over the same window
// (/proc/<pid>/stat, user + system) per acquisition: one server thread does all of
// Redis' work, so 1e6 / that is the most acquisitions per second the server could serve. "cli
// us/acq" is the same for the side's client processes (getrusage of the children waited for,
// which includes their start-up): with both on the machine's vCPUs, CPU per acquisition bounds
// throughput. The
// targets of issue 15 are printed beside the figures, not enforced; the exit status is non-zero
// only on errors.
//
//   dlock_bench_processes [--redis URL] [--seconds 3] [--repeat 3] [--layouts 8x1,4x2,2x4,1x8]
//                         [--threads 8] [--hold-ms 1] [--think-ms 1] [--handoffs 200]
//                         [--python /usr/bin/python3|none] [--node node|none]
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_support.hpp"
#include "dlock/client.hpp"
#include "hiredis_support.hpp"
#include "locks/types/reentrant_protocol.hpp"
#include "redis_process.hpp"

#ifdef DLOCK_BENCH_HAS_REDIS_PLUS_PLUS
#include <sw/redis++/patterns/redlock.h>
#include <sw/redis++/redis++.h>
#endif

extern char** environ;

namespace {

using dlock::bench::children_cpu_seconds;
using dlock::bench::connect_hiredis;
using dlock::bench::cpu_model;
using dlock::bench::cpu_seconds_of;
using dlock::bench::endpoint_of;
using dlock::bench::hiredis_context;
using dlock::bench::hiredis_reply;
using dlock::bench::info_field;
using dlock::bench::median_ping_us;
using dlock::bench::pin;
using dlock::bench::print_idle;
using dlock::bench::redis_endpoint;
using dlock::bench::run;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view naive_release_lua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";
// The handoff floor's release: the same, and an unlock message on KEYS[2].
constexpr std::string_view floor_release_lua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], '0') return 1 end return 0";
// The grant floor's scripts (one server only: the release names the channel it publishes on).
// An attempt takes the lock or joins the line (KEYS[2]); a release hands the lock to the first in
// line, which learns it from a message on its own channel, or deletes it.
constexpr std::string_view grant_acquire_lua =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "redis.call('rpush', KEYS[2], ARGV[1]) return 0";
constexpr std::string_view grant_release_lua =
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local next = redis.call('lpop', KEYS[2]) "
    "if next then redis.call('set', KEYS[1], next, 'PX', ARGV[2]) "
    "redis.call('publish', KEYS[1] .. ':grant:' .. next, '1') return 2 end "
    "redis.call('del', KEYS[1]) return 1";
// Commands the lock scripts of either side run inside Redis: not sent by a client.
constexpr std::string_view script_inner_commands[] = {
    "exists", "hexists", "hset",   "hget",  "hincrby", "hdel", "pexpire",
    "pttl",   "type",    "time",   "get",   "publish", "del",  "spublish",
    "zadd",   "zrem",    "zrange", "hkeys", "rpush",   "lpop"};
// SET is sent by the naive client, and run inside dlock's scripts (the fencing counter).
constexpr std::string_view harness_commands[] = {"info", "config", "flushall"};
// A connection's own commands (its handshake, its subscriptions): a process sends them once per
// connection or wait channel, not per acquisition. Those sent during the run (a process's first
// wait subscribes; idle channels are dropped and clients stop at its end) are "conn/proc".
constexpr std::string_view connection_commands[] = {
    "subscribe",    "unsubscribe", "ssubscribe", "sunsubscribe", "psubscribe",
    "punsubscribe", "client",      "hello",      "auth",         "select",
    "cluster",      "script",      "readonly",   "command"};

struct bench_options {
  std::string redis_url;  // empty: start a private redis-server
  double seconds = 3.0;
  int repeat = 3;
  int threads = 8;
  int hold_ms = 1;
  int think_ms = 1;
  int naive_retry_ms = 10;
  int handoffs = 200;
  int pings = 2000;
  std::string layouts = "8x1,4x2,2x4,1x8";
  std::string python = "/usr/bin/python3";  // empty: no redis-py side
  std::string node = "node";                // empty: no node-redlock side
  std::string baselines_dir = DLOCK_BENCH_BASELINES_DIR;
  bool print_commands = false;  // each run's client commands by name
};

// A baseline run by an interpreter: `interpreter script` with redis_py_lock.py's options.
struct script_side {
  std::string interpreter;
  std::string script;
  bool inner_set = false;  // its acquisition runs SET inside a script (not a client command)
};

// --- small statistics ------------------------------------------------------------------------

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 50);
}

std::int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

// What one hand-off between two threads costs here (a condition variable and back, halved):
// the floor under any client that hands a blocking call to an I/O thread and back, as dlock
// does, paid twice per call on top of the round trip.
double median_thread_handoff_us(int rounds) {
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;  // even: the main thread's, odd: the echo thread's
  std::thread echo([&] {
    for (int i = 0; i < rounds; ++i) {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return turn % 2 == 1; });
      ++turn;
      lock.unlock();
      cv.notify_one();
    }
  });
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = steady::now();
    {
      std::lock_guard lock(m);
      ++turn;
    }
    cv.notify_one();
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return turn % 2 == 0; });
    us.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count() / 2);
  }
  echo.join();
  return median(us);
}

// The seeds' lock on one hiredis connection.
class naive_lock {
 public:
  naive_lock(const redis_endpoint& at, std::string key, std::chrono::milliseconds retry)
      : c_(connect_hiredis(at)), key_(std::move(key)), retry_(retry) {
    static std::atomic<std::uint64_t> next{1};
    token_ = std::to_string(::getpid()) + ":" + std::to_string(next++);
    sha_ = run(c_.get(), {"SCRIPT", "LOAD", std::string(naive_release_lua)})->str;
  }
  void lock() {
    for (;;) {
      const hiredis_reply r = run(c_.get(), {"SET", key_, token_, "NX", "PX", "30000"});
      if (r->type == REDIS_REPLY_STATUS) return;
      std::this_thread::sleep_for(retry_);
    }
  }
  void unlock() { run(c_.get(), {"EVALSHA", sha_, "1", key_, token_}); }

 private:
  hiredis_context c_;
  std::string key_;
  std::string token_;
  std::string sha_;
  std::chrono::milliseconds retry_;
};

// The handoff's floor: the seeds' lock with an unlock message, on a synchronous C client with no
// thread of its own (hiredis): a waiter subscribes, sleeps in the socket read until the message
// comes and then attempts; the release is one small script. What any client pays here for a
// wake-up by pub/sub, with no hand-off between threads and the least work in Redis.
class floor_lock {
 public:
  floor_lock(const redis_endpoint& at, std::string key)
      : c_(connect_hiredis(at)),
        sub_(connect_hiredis(at)),
        key_(std::move(key)),
        channel_(key_ + ":unlocked") {
    token_ = std::to_string(::getpid());
    sha_ = run(c_.get(), {"SCRIPT", "LOAD", std::string(floor_release_lua)})->str;
    run(sub_.get(), {"SUBSCRIBE", channel_});  // the confirmation
  }
  void lock() {
    for (;;) {
      const hiredis_reply r = run(c_.get(), {"SET", key_, token_, "NX", "PX", "30000"});
      if (r->type == REDIS_REPLY_STATUS) return;
      void* message = nullptr;
      if (redisGetReply(sub_.get(), &message) != REDIS_OK) {
        throw std::runtime_error(std::string("hiredis: ") + sub_->errstr);
      }
      freeReplyObject(message);
    }
  }
  void unlock() { run(c_.get(), {"EVALSHA", sha_, "2", key_, channel_, token_}); }

 private:
  hiredis_context c_;
  hiredis_context sub_;
  std::string key_;
  std::string channel_;
  std::string token_;
  std::string sha_;
};

// The grant floor: what a handoff costs when the waiter makes no attempt at all. The release
// hands the lock to the first process in line (sets the key to its token) and tells it on its own
// channel; the waiter, asleep in its subscriber socket's read, holds the lock when the message
// comes. One wake-up of the waiter and one script fewer than any wake-then-attempt design (the
// floor above, dlock, Redisson): the least a handoff through Redis costs on this machine. A
// benchmark's lock only: a waiter that dies in line is granted the lock all the same.
class grant_lock {
 public:
  grant_lock(const redis_endpoint& at, std::string key)
      : c_(connect_hiredis(at)),
        sub_(connect_hiredis(at)),
        key_(std::move(key)),
        line_(key_ + ":line"),
        token_(std::to_string(::getpid()) + ":" + std::to_string(next_id_++)) {
    acquire_sha_ = run(c_.get(), {"SCRIPT", "LOAD", std::string(grant_acquire_lua)})->str;
    release_sha_ = run(c_.get(), {"SCRIPT", "LOAD", std::string(grant_release_lua)})->str;
    run(sub_.get(), {"SUBSCRIBE", key_ + ":grant:" + token_});  // the confirmation
  }
  void lock() {
    const hiredis_reply r =
        run(c_.get(), {"EVALSHA", acquire_sha_, "2", key_, line_, token_, "30000"});
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) return;
    void* message = nullptr;  // the grant: the lock is ours
    if (redisGetReply(sub_.get(), &message) != REDIS_OK) {
      throw std::runtime_error(std::string("hiredis: ") + sub_->errstr);
    }
    freeReplyObject(message);
  }
  void unlock() { run(c_.get(), {"EVALSHA", release_sha_, "2", key_, line_, token_, "30000"}); }

 private:
  static inline std::atomic<int> next_id_{0};
  hiredis_context c_;
  hiredis_context sub_;
  std::string key_;
  std::string line_;
  std::string token_;
  std::string acquire_sha_;
  std::string release_sha_;
};

// The ceiling of (a) and (b): dlock::mutex's own reentrant lock and release scripts (the calls it
// makes, from locks::reentrant_protocol) on a synchronous hiredis connection with no thread of its
// own, the release appended by unlock() and sent in the same write as the next lock (hiredis
// writes what was appended when a reply is asked for; the server runs the release first), as
// dlock defers a release nobody is seen to wait for. One round trip per cycle: the most cycles
// per second a client running dlock's scripts reaches here. Uncontended use only (it never
// waits: a refused lock throws).
class script_lock {
 public:
  script_lock(const redis_endpoint& at, std::string key)
      : c_(connect_hiredis(at)),
        key_(std::move(key)),
        owner_("0123456789abcdef0123456789abcdef:" + std::to_string(next_id_++)) {
    dlock::locks::attempt_request attempt;
    attempt.name = key_;
    attempt.owner = owner_;
    attempt.lease = std::chrono::seconds(30);
    attempt.may_wait = true;
    lock_call_ = protocol_.attempt(attempt);
    run(c_.get(), {"SCRIPT", "LOAD", lock_call_.code->source()});
    run(c_.get(), {"SCRIPT", "LOAD", release_call(0).code->source()});
  }
  script_lock(const script_lock&) = delete;
  script_lock& operator=(const script_lock&) = delete;
  ~script_lock() {
    try {
      flush();
    } catch (const std::exception&) {  // a benchmark's lock: the lease ends it
    }
  }
  void lock() {
    append(lock_call_);
    if (release_pending_) next_reply();  // the release's, first
    release_pending_ = false;
    const hiredis_reply r = next_reply();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->integer != 1)
      throw std::runtime_error("script lock: the lock script did not grant");
    token_ = static_cast<std::uint64_t>(r->element[1]->integer);
  }
  void unlock() {
    append(release_call(token_));
    release_pending_ = true;
  }
  // Sends an appended release now and waits for its reply.
  void flush() {
    if (!release_pending_) return;
    release_pending_ = false;
    next_reply();
  }

 private:
  dlock::locks::script_call release_call(std::uint64_t token) const {
    dlock::locks::release_request release;
    release.name = key_;
    release.owner = owner_;
    release.token = token;
    return protocol_.release(release);
  }
  void append(const dlock::locks::script_call& sc) {
    if (sc.code == nullptr) throw std::runtime_error("script lock: no script");
    std::vector<std::string> args{"EVALSHA", sc.code->sha1(), std::to_string(sc.keys.size())};
    args.insert(args.end(), sc.keys.begin(), sc.keys.end());
    args.insert(args.end(), sc.args.begin(), sc.args.end());
    if (sc.publish_command_arg != dlock::locks::script_call::no_publish)
      args[3 + sc.keys.size() + sc.publish_command_arg] = "publish";
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& x : args) {
      argv.push_back(x.data());
      lengths.push_back(x.size());
    }
    redisAppendCommandArgv(c_.get(), static_cast<int>(args.size()), argv.data(), lengths.data());
  }
  hiredis_reply next_reply() {
    void* r = nullptr;
    if (redisGetReply(c_.get(), &r) != REDIS_OK || r == nullptr)
      throw std::runtime_error(std::string("script lock: ") + c_->errstr);
    return hiredis_reply(static_cast<redisReply*>(r));
  }

  static inline std::atomic<int> next_id_{0};
  const dlock::locks::reentrant_protocol protocol_;
  hiredis_context c_;
  std::string key_;
  std::string owner_;
  dlock::locks::script_call lock_call_;
  std::uint64_t token_ = 0;
  bool release_pending_ = false;
};

// --- children ----------------------------------------------------------------------------------

// A lock either side's child uses: lock() blocks until held.
class any_lock {
 public:
  virtual ~any_lock() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
};

class dlock_side final : public any_lock {
 public:
  explicit dlock_side(dlock::mutex m) : m_(std::move(m)) {}
  void lock() override { m_.lock(); }
  void unlock() override { m_.unlock(); }

 private:
  dlock::mutex m_;
};

// One of the hiredis locks above (floor_lock, grant_lock, script_lock) as a side.
template <class Lock>
class hiredis_side final : public any_lock {
 public:
  hiredis_side(const redis_endpoint& at, const std::string& key) : l_(at, key) {}
  void lock() override { l_.lock(); }
  void unlock() override { l_.unlock(); }

 private:
  Lock l_;
};

class naive_side final : public any_lock {
 public:
  explicit naive_side(naive_lock l) : l_(std::move(l)) {}
  void lock() override { l_.lock(); }
  void unlock() override { l_.unlock(); }

 private:
  naive_lock l_;
};

#ifdef DLOCK_BENCH_HAS_REDIS_PLUS_PLUS
// redis-plus-plus' RedLock on one master. It has no waiting of its own (RedMutex::lock() sleeps a
// random 0-5 ms before every attempt, the first included), so a waiter retries try_lock after
// the same sleep as the naive lock.
class rpp_side final : public any_lock {
 public:
  rpp_side(const redis_endpoint& at, const std::string& key, std::chrono::milliseconds retry)
      : redis_(connect(at)), mutex_(redis_, key), lock_(mutex_, std::defer_lock), retry_(retry) {}
  void lock() override {
    while (!lock_.try_lock(std::chrono::milliseconds(30000)))
      std::this_thread::sleep_for(retry_);
  }
  void unlock() override { lock_.unlock(); }

 private:
  static std::shared_ptr<sw::redis::Redis> connect(const redis_endpoint& at) {
    sw::redis::ConnectionOptions o;
    o.host = at.host;
    o.port = at.port;
    sw::redis::ConnectionPoolOptions pool;
    pool.size = 1;
    return std::make_shared<sw::redis::Redis>(o, pool);
  }
  std::shared_ptr<sw::redis::Redis> redis_;
  sw::redis::RedLockMutex mutex_;
  sw::redis::RedLock<sw::redis::RedLockMutex> lock_;
  std::chrono::milliseconds retry_;
};
constexpr bool have_redis_plus_plus = true;
constexpr const char* redis_plus_plus_source = DLOCK_BENCH_REDIS_PLUS_PLUS_SOURCE;
#else
constexpr bool have_redis_plus_plus = false;
constexpr const char* redis_plus_plus_source = "";
#endif

struct child_args {
  std::string side;  // "dlock", "naive" or "redis++"
  std::string url;
  std::string key;
  int threads = 1;
  bool own_keys = false;
  double seconds = 1;
  int hold_us = 0;
  int think_us = 0;
  int naive_retry_ms = 10;
  std::int64_t start_ns = 0;  // when every process starts its clock (CLOCK_MONOTONIC)
  int pings = 2000;
  int cpu = -1;  // the ping child: the vCPU it pins itself to (-1: none)
};

// A lock of `side` on `key`; `client` is the process's dlock::client (dlock side only).
std::unique_ptr<any_lock> make_lock(const child_args& a, dlock::client* client,
                                    const std::string& key) {
  const std::chrono::milliseconds retry(a.naive_retry_ms);
  if (a.side == "dlock") return std::make_unique<dlock_side>(client->get_lock(key));
  if (a.side == "naive") {
    return std::make_unique<naive_side>(naive_lock(endpoint_of(a.url), key, retry));
  }
  if (a.side == "floor") return std::make_unique<hiredis_side<floor_lock>>(endpoint_of(a.url), key);
  if (a.side == "grant") return std::make_unique<hiredis_side<grant_lock>>(endpoint_of(a.url), key);
  if (a.side == "ceiling")
    return std::make_unique<hiredis_side<script_lock>>(endpoint_of(a.url), key);
#ifdef DLOCK_BENCH_HAS_REDIS_PLUS_PLUS
  if (a.side == "redis++") return std::make_unique<rpp_side>(endpoint_of(a.url), key, retry);
#endif
  throw std::runtime_error("unknown side: " + a.side);
}

// The measuring child: prints two lines per thread, "acquisitions <n> waits_us <w1> <w2> ..."
// (each lock()'s time) and "blocked_us <b1> <b2> ..." (each cycle's time in lock() and unlock()
// together: a side whose unlock() waits for its reply, or whose lock() carries the previous
// release, is compared fairly only there).
int run_load_child(const child_args& a) {
  std::unique_ptr<dlock::client> client;
  if (a.side == "dlock") client = std::make_unique<dlock::client>(a.url);
  std::vector<std::unique_ptr<any_lock>> locks;
  for (int t = 0; t < a.threads; ++t) {
    locks.push_back(
        make_lock(a, client.get(), a.own_keys ? a.key + ":" + std::to_string(t) : a.key));
  }
  if (client) {  // connect, load the scripts and subscribe before the clock starts
    locks.front()->lock();
    locks.front()->unlock();
  }
  const steady::time_point start{std::chrono::nanoseconds(a.start_ns)};
  const steady::time_point end = start + std::chrono::duration_cast<steady::duration>(
                                             std::chrono::duration<double>(a.seconds));
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(a.threads));
  std::vector<std::vector<double>> blocked(static_cast<std::size_t>(a.threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < a.threads; ++t) {
    workers.emplace_back([&, t] {
      auto& mine = waits[static_cast<std::size_t>(t)];
      auto& mine_blocked = blocked[static_cast<std::size_t>(t)];
      any_lock& l = *locks[static_cast<std::size_t>(t)];
      const auto us = [](steady::duration d) {
        return std::chrono::duration<double, std::micro>(d).count();
      };
      std::this_thread::sleep_until(start);
      while (steady::now() < end) {
        const auto t0 = steady::now();
        l.lock();
        const double in_lock = us(steady::now() - t0);
        mine.push_back(in_lock);
        if (a.hold_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(a.hold_us));
        const auto t1 = steady::now();
        l.unlock();
        mine_blocked.push_back(in_lock + us(steady::now() - t1));
        if (a.think_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(a.think_us));
      }
    });
  }
  for (auto& w : workers)
    w.join();
  const auto print = [](std::string line, const std::vector<double>& values) {
    for (const double v : values) {
      line += ' ';
      line += std::to_string(static_cast<long long>(v));
    }
    std::puts(line.c_str());
  };
  for (std::size_t t = 0; t < waits.size(); ++t) {
    print("acquisitions " + std::to_string(waits[t].size()) + " waits_us", waits[t]);
    print("blocked_us", blocked[t]);
  }
  locks.clear();
  client.reset();
  return 0;
}

// The ping child: on vCPU a.cpu if given, prints "rtt_us <median synchronous hiredis PING>".
int run_ping_child(const child_args& a) {
  if (a.cpu >= 0 && !pin(0, a.cpu)) throw std::runtime_error("cannot pin to a vCPU");
  std::printf("rtt_us %.3f\n", median_ping_us(endpoint_of(a.url), a.pings));
  return 0;
}

// The script floor's child: `pings` uncontended cycles of dlock's own reentrant lock and release
// scripts on a script_lock; prints the median lock script's round trip, "lock_us" with each
// release waited for and "lock_after_release_us" with the previous release in the same write as
// the lock, as scenario (a) runs dlock. What one round trip with dlock's lock script costs a client
// with no thread of its own: the floor under (a)'s lock().
int run_script_floor_child(const child_args& a) {
  if (a.cpu >= 0 && !pin(0, a.cpu)) throw std::runtime_error("cannot pin to a vCPU");
  script_lock l(endpoint_of(a.url), a.key);
  const auto median_us = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const auto time_lock_us = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    l.lock();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> waited, pipelined;
  for (int i = 0; i < a.pings; ++i) {  // the release waited for before the next lock
    waited.push_back(time_lock_us());
    l.unlock();
    l.flush();
  }
  for (int i = 0; i < a.pings; ++i) {  // the release in the same write as the next lock
    pipelined.push_back(time_lock_us());
    l.unlock();
  }
  l.flush();
  std::printf("lock_us %.3f\nlock_after_release_us %.3f\n", median_us(waited),
              median_us(pipelined));
  return 0;
}

// The handoff child: reads "lock", "unlock" or "quit" lines; answers "locked <ns>" after lock()
// returns and "unlocked <ns>" with the time just before unlock().
int run_handoff_child(const child_args& a) {
  std::unique_ptr<dlock::client> client;
  if (a.side == "dlock") client = std::make_unique<dlock::client>(a.url);
  std::unique_ptr<any_lock> l = make_lock(a, client.get(), a.key);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::puts("ready");
  char line[64];
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    const std::string_view command(line, std::strcspn(line, "\n"));
    if (command == "lock") {
      l->lock();
      std::printf("locked %lld\n", static_cast<long long>(monotonic_ns()));
    } else if (command == "unlock") {
      const std::int64_t t0 = monotonic_ns();
      l->unlock();
      std::printf("unlocked %lld\n", static_cast<long long>(t0));
    } else {
      break;
    }
  }
  l.reset();
  client.reset();
  return 0;
}

// --- the parent's view of a child --------------------------------------------------------------

class child_process {
 public:
  // Runs `program` (looked up in PATH when it has no slash) with `args` (args[0] is its name);
  // by default this benchmark itself.
  child_process(const std::vector<std::string>& args, bool interactive,
                const std::string& program = "/proc/self/exe") {
    int out[2];
    int in[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (interactive) posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    std::vector<char*> argv;
    std::vector<std::string> owned = args;
    for (auto& s : owned)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawnp(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(in[0]);
    if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    out_ = ::fdopen(out[0], "r");
    in_ = ::fdopen(in[1], "w");
    if (!interactive) {
      std::fclose(in_);
      in_ = nullptr;
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (in_ != nullptr) std::fclose(in_);
    if (out_ != nullptr) std::fclose(out_);
    if (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
    }
  }

  void send(const std::string& line) {
    std::fputs((line + "\n").c_str(), in_);
    std::fflush(in_);
  }
  // The next line, without its newline; throws at end of output.
  std::string read_line() {
    std::string line;
    for (int ch = std::fgetc(out_); ch != EOF && ch != '\n'; ch = std::fgetc(out_))
      line += static_cast<char>(ch);
    if (line.empty() && std::feof(out_)) throw std::runtime_error("a child process ended early");
    return line;
  }
  std::vector<std::string> read_all() {
    std::vector<std::string> lines;
    try {
      for (;;)
        lines.push_back(read_line());
    } catch (const std::runtime_error&) {
    }
    return lines;
  }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  std::FILE* out_ = nullptr;
  std::FILE* in_ = nullptr;
};

// --- the parent's scenarios ----------------------------------------------------------------------

struct load_result {
  double per_second = 0;
  std::vector<std::uint64_t> per_process;
  std::vector<double> waits_us;
  std::vector<double> blocked_us;  // per cycle, in lock() and unlock() together (C++ sides only)
  double client_commands_per_acquisition = 0;  // from the start of the clocks to the end
  double connection_commands_per_process = 0;  // of those, the connections' own (not counted above)
  double setup_commands_per_process = 0;       // before that: connections, warm-up cycles
  double server_cpu_s = -1;  // the server's CPU time (user + system) over the run; -1: unknown
  double clients_cpu_s = 0;  // the client processes' CPU time (user + system)
};

std::map<std::string, std::uint64_t> command_calls(dlock::client& admin) {
  const std::string text = admin.command({"INFO", "commandstats"}).str;
  std::map<std::string, std::uint64_t> calls;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cmdstat_", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    const std::size_t at = line.find("calls=", colon);
    if (colon == std::string::npos || at == std::string::npos) continue;
    calls[line.substr(8, colon - 8)] = std::strtoull(line.c_str() + at + 6, nullptr, 10);
  }
  return calls;
}

// Which client commands `calls` holds: all of them (the setup), or only the acquisitions' (the
// connections' own left out) or only the connections' own.
enum class command_set { all, acquisitions, connections };

std::uint64_t client_commands(const std::map<std::string, std::uint64_t>& calls, bool inner_set,
                              command_set which = command_set::all) {
  std::uint64_t total = 0;
  for (const auto& [name, n] : calls) {
    // Redis 7 names subcommands "config|resetstat": the command is what precedes the bar.
    const std::string_view command = std::string_view(name).substr(0, name.find('|'));
    const auto is = [&](std::string_view x) { return command == x; };
    if (std::any_of(std::begin(harness_commands), std::end(harness_commands), is)) continue;
    if (std::any_of(std::begin(script_inner_commands), std::end(script_inner_commands), is))
      continue;
    if (name == "set" && inner_set) continue;
    const bool connection =
        std::any_of(std::begin(connection_commands), std::end(connection_commands), is);
    if (which == command_set::acquisitions && connection) continue;
    if (which == command_set::connections && !connection) continue;
    total += n;
  }
  return total;
}

// The command line of one script-baseline process (redis_py_lock.py's options).
std::vector<std::string> script_args(const script_side& s, const bench_options& o,
                                     const std::string& url, int processes, int threads,
                                     bool own_keys, int hold_ms, int think_ms,
                                     const std::string& key, std::int64_t start_ns) {
  const redis_endpoint at = endpoint_of(url);
  const bool cycles_only = processes == 1 && threads == 1 && hold_ms == 0 && think_ms == 0;
  return {s.interpreter,  s.script,
          "--scenario",   own_keys ? "b" : (cycles_only ? "a" : "c2"),
          "--host",       at.host,
          "--port",       std::to_string(at.port),
          "--key",        key,
          "--threads",    std::to_string(threads),
          "--seconds",    std::to_string(o.seconds),
          "--hold-ms",    std::to_string(hold_ms),
          "--think-ms",   std::to_string(think_ms),
          "--start-ns",   std::to_string(start_ns),
          "--print-waits"};
}

// One process's acquisitions and waits (us), from either kind of child's output: this
// benchmark's "acquisitions <n> waits_us <w>..." and "blocked_us <b>..." per thread, or a
// script's name=value lines (no blocked times).
std::uint64_t parse_child_output(const std::vector<std::string>& lines,
                                 std::vector<double>& waits_us, std::vector<double>& blocked_us) {
  std::uint64_t n = 0;
  for (const std::string& line : lines) {
    if (line.rfind("acquisitions=", 0) == 0) {
      n += std::strtoull(line.c_str() + std::strlen("acquisitions="), nullptr, 10);
    } else if (line.rfind("waits_ms=", 0) == 0) {
      std::istringstream in(line.substr(std::strlen("waits_ms=")));
      for (std::string w; std::getline(in, w, ',');)
        waits_us.push_back(std::strtod(w.c_str(), nullptr) * 1000);
    } else if (line.rfind("acquisitions ", 0) == 0) {
      std::istringstream in(line);
      std::string word;
      std::uint64_t mine = 0;
      in >> word >> mine >> word;
      n += mine;
      for (double w; in >> w;)
        waits_us.push_back(w);
    } else if (line.rfind("blocked_us", 0) == 0) {
      std::istringstream in(line.substr(std::strlen("blocked_us")));
      for (double b; in >> b;)
        blocked_us.push_back(b);
    }
  }
  return n;
}

load_result run_load(const bench_options& o, const std::string& url, dlock::client& admin,
                     const std::string& side, const script_side* script, int processes, int threads,
                     bool own_keys, int hold_ms, int think_ms, const std::string& key,
                     pid_t server_pid) {
  admin.command({"DEL", key, key + ":line"});  // the grant floor's line too
  admin.command({"CONFIG", "RESETSTAT"});
  const bool inner_set =
      side == "dlock" || side == "grant" || side == "ceiling" || (script && script->inner_set);
  const double children_before = children_cpu_seconds();
  // Interpreters take longer to start (imports, connections): every process starts its clock
  // at the same moment, after all of them are up.
  const int start_in_ms = script != nullptr ? 1500 + 150 * processes : 500 + 50 * processes;
  const std::int64_t start_ns =
      monotonic_ns() + std::chrono::nanoseconds(std::chrono::milliseconds(start_in_ms)).count();
  std::vector<std::unique_ptr<child_process>> children;
  for (int p = 0; p < processes; ++p) {
    if (script != nullptr) {
      children.push_back(
          std::make_unique<child_process>(script_args(*script, o, url, processes, threads, own_keys,
                                                      hold_ms, think_ms, key, start_ns),
                                          false, script->interpreter));
      continue;
    }
    children.push_back(
        std::make_unique<child_process>(std::vector<std::string>{"dlock_bench_processes",
                                                                 "--child",
                                                                 "load",
                                                                 "--side",
                                                                 side,
                                                                 "--url",
                                                                 url,
                                                                 "--key",
                                                                 key,
                                                                 "--child-threads",
                                                                 std::to_string(threads),
                                                                 "--own-keys",
                                                                 own_keys ? "1" : "0",
                                                                 "--seconds",
                                                                 std::to_string(o.seconds),
                                                                 "--hold-us",
                                                                 std::to_string(hold_ms * 1000),
                                                                 "--think-us",
                                                                 std::to_string(think_ms * 1000),
                                                                 "--naive-retry-ms",
                                                                 std::to_string(o.naive_retry_ms),
                                                                 "--start-ns",
                                                                 std::to_string(start_ns)},
                                        false));
  }
  // Every process is up, connected and warmed up by its start: what the servers executed until
  // then is the processes' setup (dlock's handshake loads every script), counted apart from the
  // acquisitions.
  std::this_thread::sleep_until(steady::time_point{std::chrono::nanoseconds(start_ns)});
  const std::map<std::string, std::uint64_t> setup_calls = command_calls(admin);
  const std::uint64_t setup_commands = client_commands(setup_calls, inner_set);
  admin.command({"CONFIG", "RESETSTAT"});
  const double cpu_before = cpu_seconds_of(server_pid);
  load_result r;
  r.setup_commands_per_process =
      static_cast<double>(setup_commands) / static_cast<double>(processes);
  std::uint64_t total = 0;
  for (auto& c : children) {
    const std::uint64_t mine = parse_child_output(c->read_all(), r.waits_us, r.blocked_us);
    if (c->wait() != 0) throw std::runtime_error("a " + side + " child process failed");
    r.per_process.push_back(mine);
    total += mine;
  }
  r.per_second = static_cast<double>(total) / o.seconds;
  const double cpu_after = cpu_seconds_of(server_pid);
  if (cpu_before >= 0 && cpu_after >= 0) r.server_cpu_s = cpu_after - cpu_before;
  r.clients_cpu_s = children_cpu_seconds() - children_before;
  const std::map<std::string, std::uint64_t> calls = command_calls(admin);
  const std::uint64_t commands = client_commands(calls, inner_set, command_set::acquisitions);
  r.connection_commands_per_process =
      static_cast<double>(client_commands(calls, inner_set, command_set::connections)) /
      static_cast<double>(processes);
  if (o.print_commands) {
    const auto print = [&](const char* what, const std::map<std::string, std::uint64_t>& by_name,
                           double per) {
      std::printf("  %s, %dx%d: client commands %s:", side.c_str(), processes, threads, what);
      for (const auto& [name, n] : by_name) {
        if (client_commands({{name, n}}, inner_set) > 0 && per > 0)
          std::printf(" %s %.3f", name.c_str(), static_cast<double>(n) / per);
      }
      std::printf("\n");
    };
    print("per process in the setup", setup_calls, processes);
    print("per acquisition", calls, static_cast<double>(total));
  }
  r.client_commands_per_acquisition =
      total > 0 ? static_cast<double>(commands) / static_cast<double>(total) : 0;
  return r;
}

// A measuring child's figures: runs `--child role` on vCPU `cpu` (-1: anywhere) and returns the
// numbers on its output lines "<field> <microseconds>" by field.
std::map<std::string, double> child_figures_us(const bench_options& o, const std::string& url,
                                               const std::string& role, int cpu) {
  child_process c({"dlock_bench_processes", "--child", role, "--url", url, "--key", "bench:" + role,
                   "--pings", std::to_string(o.pings), "--cpu", std::to_string(cpu)},
                  false);
  std::map<std::string, double> figures;
  for (const std::string& line : c.read_all()) {
    const std::size_t space = line.find(' ');
    if (space != std::string::npos)
      figures[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  if (c.wait() != 0 || figures.empty()) throw std::runtime_error("the " + role + " child failed");
  return figures;
}

// The median PING of a child process on vCPU `cpu` (-1: anywhere).
double rtt_in_child(const bench_options& o, const std::string& url, int cpu) {
  return child_figures_us(o, url, "ping", cpu).at("rtt_us");
}

std::vector<double> run_handoff(const bench_options& o, const std::string& url,
                                dlock::client& admin, const std::string& side) {
  const std::string key = "bench:handoff:" + side;
  admin.command({"DEL", key, key + ":line"});
  const std::vector<std::string> args{"dlock_bench_processes",
                                      "--child",
                                      "handoff",
                                      "--side",
                                      side,
                                      "--url",
                                      url,
                                      "--key",
                                      key,
                                      "--naive-retry-ms",
                                      std::to_string(o.naive_retry_ms)};
  child_process a(args, true);
  child_process b(args, true);
  if (a.read_line() != "ready" || b.read_line() != "ready")
    throw std::runtime_error("a handoff child did not start");
  child_process* holder = &a;
  child_process* waiter = &b;
  holder->send("lock");
  holder->read_line();
  std::vector<double> us;
  for (int i = 0; i < o.handoffs; ++i) {
    waiter->send("lock");
    // Let the waiter find the lock taken and start waiting (a benchmark, not a test: no event to
    // wait for from outside the process).
    std::this_thread::sleep_for(5ms);
    holder->send("unlock");
    const std::string released = holder->read_line();
    const std::string acquired = waiter->read_line();
    const long long t0 = std::atoll(released.c_str() + std::strlen("unlocked "));
    const long long t1 = std::atoll(acquired.c_str() + std::strlen("locked "));
    us.push_back(static_cast<double>(t1 - t0) / 1000.0);
    std::swap(holder, waiter);
  }
  holder->send("unlock");
  holder->read_line();
  a.send("quit");
  b.send("quit");
  a.wait();
  b.wait();
  return us;
}

template <typename T>
T median_of(std::vector<T> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const T& x, const T& y) { return x.per_second < y.per_second; });
  return runs[runs.size() / 2];
}

void print_load(const char* scenario, const std::string& side, const load_result& r,
                double naive_per_second, double seconds) {
  const auto [lo, hi] = std::minmax_element(r.per_process.begin(), r.per_process.end());
  const std::string ratio = naive_per_second > 0
                                ? std::to_string(r.per_second / naive_per_second).substr(0, 4) + "x"
                                : "-";
  const double acquisitions = r.per_second * seconds;
  char server_us[32] = "-";
  if (r.server_cpu_s >= 0 && acquisitions > 0)
    std::snprintf(server_us, sizeof server_us, "%.1f", 1e6 * r.server_cpu_s / acquisitions);
  char clients_us[32] = "-";
  if (acquisitions > 0)
    std::snprintf(clients_us, sizeof clients_us, "%.1f", 1e6 * r.clients_cpu_s / acquisitions);
  std::printf(
      "  %-6s %-12s %10.0f  %7s  %8llu %8llu %6.2f  %8.3f %8.3f %8.2f  %6.2f %9.1f %10s %10s "
      "%8.1f\n",
      scenario, side.c_str(), r.per_second, ratio.c_str(), static_cast<unsigned long long>(*lo),
      static_cast<unsigned long long>(*hi),
      *lo > 0 ? static_cast<double>(*hi) / static_cast<double>(*lo) : 0,
      percentile(r.waits_us, 50) / 1000, percentile(r.waits_us, 99) / 1000,
      percentile(r.waits_us, 100) / 1000, r.client_commands_per_acquisition,
      r.connection_commands_per_process, server_us, clients_us, r.setup_commands_per_process);
}

int run_parent(const bench_options& o) {
  std::unique_ptr<dlock::tools::redis_process> server;
  std::string url = o.redis_url;
  if (url.empty()) {
    // A service's scheduling group, not the clients' (redis_process_options::own_session).
    server = std::make_unique<dlock::tools::redis_process>(dlock::tools::service_options());
    url = server->url();
  }
  dlock::client admin(url);
  const std::string info = admin.command({"INFO", "server"}).str;
  std::printf("dlock_bench_processes: redis %s at %s; CPU %s, %u cores\n",
              info_field(info, "redis_version").c_str(), url.c_str(), cpu_model().c_str(),
              std::thread::hardware_concurrency());
  print_idle("machine idle before the runs: ", "");
  // The RTT, measured again after the scenarios: the unit is the mean of both.
  const auto measure_rtt = [&](const char* when) {
    const double here_us = median_ping_us(endpoint_of(url), o.pings);
    const double anywhere_us = rtt_in_child(o, url, -1);
    if (server && std::thread::hardware_concurrency() >= 2 && pin(server->pid(), 0)) {
      const double same_us = rtt_in_child(o, url, 0);
      const double across_us = rtt_in_child(o, url, 1);
      pin(server->pid(), -1);
      std::printf(
          "RTT %s (median synchronous hiredis PING, client and server on different vCPUs): "
          "%.1f us\n  same vCPU: %.1f us; unpinned child process: %.1f us; this process "
          "(the unit before session 9): %.1f us\n",
          when, across_us, same_us, anywhere_us, here_us);
      return across_us;
    }
    std::printf(
        "RTT %s (median synchronous hiredis PING, unpinned child process; the server is not "
        "ours to pin): %.1f us\n  this process: %.1f us\n",
        when, anywhere_us, here_us);
    return anywhere_us;
  };
  const double rtt_before_us = measure_rtt("before the runs");
  std::printf("thread hand-off (median, condition variable, one way): %.1f us\n",
              median_thread_handoff_us(o.pings));

  // The script baselines run when `<interpreter> <script> --version` works.
  std::map<std::string, script_side> scripts;
  const auto probe = [&](const std::string& name, const std::string& interpreter,
                         const std::string& file, bool inner_set) {
    if (interpreter.empty()) {
      std::printf("%s: skipped (none)\n", name.c_str());
      return;
    }
    const script_side side{interpreter, o.baselines_dir + "/" + file, inner_set};
    try {
      const auto v = dlock::tools::run_command({side.interpreter, side.script, "--version"});
      if (v.exit_code == 0) {
        scripts[name] = side;
        std::printf("%s: %s\n", name.c_str(), v.out.substr(0, v.out.find('\n')).c_str());
      } else {
        std::printf("%s: NOT run: %s\n", name.c_str(), v.err.substr(0, v.err.find('\n')).c_str());
      }
    } catch (const std::exception& e) {
      std::printf("%s: NOT run: %s\n", name.c_str(), e.what());
    }
  };
  probe("redis-py", o.python, "redis_py_lock.py", false);
  probe("node-redlock", o.node, "redlock_lock.mjs", true);
  std::puts("");
  std::printf(
      "  scen   side            acq/s   vs naive  min/proc max/proc max/min   p50 ms   p99 ms   "
      "max ms  "
      "cmds/acq conn/proc srv us/acq cli us/acq setup/proc\n");

  struct scenario {
    std::string name;
    int processes;
    int threads;
    bool own_keys;
    int hold_ms;
    int think_ms;
  };
  std::vector<scenario> scenarios{{"a", 1, 1, false, 0, 0}, {"b", 1, o.threads, true, 0, 0}};
  std::istringstream layouts(o.layouts);
  for (std::string layout; std::getline(layouts, layout, ',');) {
    const std::size_t x = layout.find('x');
    if (x == std::string::npos) throw std::runtime_error("--layouts wants PxT items: " + layout);
    scenarios.push_back({layout, std::stoi(layout.substr(0, x)), std::stoi(layout.substr(x + 1)),
                         false, o.hold_ms, o.think_ms});
  }
  std::vector<std::string> sides{"naive", "dlock"};
  if (have_redis_plus_plus) sides.emplace_back("redis++");
  for (const auto& [name, script] : scripts)
    sides.push_back(name);
  std::map<std::string, double> a_lock_p50_us;  // by side
  double naive_a_per_second = 0;                // the naive lock's (a), for the script floor
  std::vector<std::string> against_rpp;         // one line per scenario
  for (const scenario& s : scenarios) {
    // Processes on one key also run the two handoff floors on hiredis (no threads): the seeds'
    // lock woken by pub/sub, and the grant floor. With the lock never free for long, a layout's
    // rate is 1 / (hold + handoff): theirs is the most a wake-then-attempt client, and any client
    // of a lock through Redis, reaches here.
    // (a) and (b) also run the ceiling: dlock's scripts on hiredis, one round trip per cycle.
    std::vector<std::string> here = sides;
    if (s.name != "a" && s.name != "b") here.insert(here.end(), {"floor", "grant"});
    if (s.name == "a" || s.name == "b") here.emplace_back("ceiling");
    std::map<std::string, std::vector<load_result>> runs;
    for (int round = 0; round < o.repeat; ++round) {
      for (std::size_t i = 0; i < here.size(); ++i) {  // each round starts with another side
        const std::string& side = here[(static_cast<std::size_t>(round) + i) % here.size()];
        const auto script = scripts.find(side);
        runs[side].push_back(run_load(o, url, admin, side,
                                      script == scripts.end() ? nullptr : &script->second,
                                      s.processes, s.threads, s.own_keys, s.hold_ms, s.think_ms,
                                      "bench:processes:" + s.name, server ? server->pid() : -1));
      }
    }
    const load_result naive = median_of(runs["naive"]);
    for (const std::string& side : here) {
      const load_result r = median_of(runs[side]);
      print_load(s.name.c_str(), side, r, side == "naive" ? 0 : naive.per_second, o.seconds);
      if (s.name == "a") a_lock_p50_us[side] = percentile(r.waits_us, 50);
      if (s.name == "a" && side == "naive") naive_a_per_second = r.per_second;
    }
    std::string blocked_line = "  " + s.name + ": ms in lock() + unlock() per cycle, p50 / p99:";
    for (const std::string& side : here) {
      const load_result r = median_of(runs[side]);
      if (r.blocked_us.empty()) continue;  // a script side times lock() alone
      char figures[96];
      std::snprintf(figures, sizeof figures, "  %s %.3f / %.3f", side.c_str(),
                    percentile(r.blocked_us, 50) / 1000, percentile(r.blocked_us, 99) / 1000);
      blocked_line += figures;
    }
    std::puts(blocked_line.c_str());
    if (have_redis_plus_plus) {
      const load_result mine = median_of(runs["dlock"]);
      const load_result rpp = median_of(runs["redis++"]);
      char line[160];
      std::snprintf(line, sizeof line,
                    "  %-6s acq/s %.2fx   p99 wait %.2fx   p99 in lock()+unlock() %.2fx (lower is "
                    "better)",
                    s.name.c_str(), mine.per_second / rpp.per_second,
                    percentile(mine.waits_us, 99) / percentile(rpp.waits_us, 99),
                    percentile(mine.blocked_us, 99) / percentile(rpp.blocked_us, 99));
      against_rpp.emplace_back(line);
    }
  }
  if (have_redis_plus_plus) {
    std::printf("\ndlock against redis++ (%s):\n", redis_plus_plus_source);
    for (const std::string& line : against_rpp)
      std::puts(line.c_str());
  } else {
    std::printf(
        "\nredis++ baseline skipped: configure with -DDLOCK_BENCH_REDIS_PLUS_PLUS=<a checkout of "
        "github.com/sewenew/redis-plus-plus>\n");
  }
  const double rtt_us = (rtt_before_us + measure_rtt("after the runs")) / 2;
  std::printf("RTT unit (the mean of both): %.1f us\n", rtt_us);
  for (const auto& [side, us] : a_lock_p50_us) {
    std::printf("uncontended lock() p50 (%s, scenario a): %.1f us = %.2f RTT%s\n", side.c_str(), us,
                us / rtt_us, side == "dlock" ? " (target <= 1.3)" : "");
  }
  {
    // Pinned as the RTT's child is when the server is ours (different vCPUs), else unpinned.
    const bool pinned = server && std::thread::hardware_concurrency() >= 2 && pin(server->pid(), 0);
    const auto us = child_figures_us(o, url, "script-floor", pinned ? 1 : -1);
    if (pinned) pin(server->pid(), -1);
    std::printf(
        "uncontended lock() floor (hiredis, no threads, dlock::mutex's own lock script, %s): "
        "%.1f us = %.2f RTT with the release waited for; %.1f us = %.2f RTT with the release "
        "in the same write, as (a) runs\n",
        pinned ? "client and server on different vCPUs" : "unpinned", us.at("lock_us"),
        us.at("lock_us") / rtt_us, us.at("lock_after_release_us"),
        us.at("lock_after_release_us") / rtt_us);
    if (naive_a_per_second > 0) {
      // With the release in the lock's write, that round trip is a whole (a) cycle: the most
      // cycles per second any client running dlock::mutex's scripts reaches here.
      const double floor_per_second = 1e6 / us.at("lock_after_release_us");
      std::printf(
          "(a) floor: one such round trip per cycle = %.0f cycles/s = %.2fx the naive lock's "
          "(a) (target for dlock >= 1.5x)\n",
          floor_per_second, floor_per_second / naive_a_per_second);
    }
  }
  std::vector<std::string> handoff_sides = sides;
  handoff_sides.insert(handoff_sides.end(), {"floor", "grant"});
  for (const std::string& side : handoff_sides) {
    if (scripts.count(side) != 0) continue;  // the scripts measure (h) in one process only
    std::vector<double> all;
    for (int round = 0; round < o.repeat; ++round) {
      const std::vector<double> us = run_handoff(o, url, admin, side);
      all.insert(all.end(), us.begin(), us.end());
    }
    std::printf("handoff between two processes (%s): p50 %.1f us = %.2f RTT, p99 %.1f us%s\n",
                side.c_str(), percentile(all, 50), percentile(all, 50) / rtt_us,
                percentile(all, 99),
                side == "dlock"   ? " (target p50 <= 3 RTT)"
                : side == "floor" ? " (hiredis, no threads, woken by pub/sub: the floor)"
                : side == "grant" ? " (hiredis, no threads, the release hands the lock over)"
                                  : "");
  }
  print_idle("\nmachine idle after the runs: ", "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlock::mutex in separate processes beside the naive lock on hiredis"};
  bench_options o;
  child_args child;
  std::string child_role;
  app.add_option("--redis", o.redis_url, "Redis URL (default: a private redis-server)");
  app.add_option("--seconds", o.seconds, "Length of one measured run")
      ->check(CLI::Range(0.1, 600.0));
  dlock::bench::add_whole_option(app, "--repeat", o.repeat, "Runs per scenario and side", "N", 1,
                                 100);
  dlock::bench::add_whole_option(app, "--threads", o.threads, "Threads of (b)", "N", 1, 256);
  dlock::bench::add_whole_option(app, "--hold-ms", o.hold_ms, "PxT: time held", "MS", 0, 1000);
  dlock::bench::add_whole_option(app, "--think-ms", o.think_ms, "PxT: time between unlock and lock",
                                 "MS", 0, 1000);
  dlock::bench::add_whole_option(app, "--naive-retry-ms", o.naive_retry_ms,
                                 "The naive lock's sleep between attempts", "MS", 1, 1000);
  dlock::bench::add_whole_option(app, "--handoffs", o.handoffs, "Handoffs per run of (h)", "N", 1,
                                 100000);
  dlock::bench::add_whole_option(app, "--pings", o.pings, "PINGs for the RTT", "N", 1, 1000000);
  app.add_option("--layouts", o.layouts, "Comma-separated PxT layouts on one key");
  app.add_flag("--print-commands", o.print_commands,
               "Print each run's client commands per acquisition by command name");
  app.add_option("--python", o.python,
                 "Python with redis-py for the redis-py side ('none' skips it)");
  app.add_option("--node", o.node, "Node for the node-redlock side ('none' skips it)");
  // Internal: how the benchmark runs its own child processes.
  app.add_option("--child", child_role)->group("");
  app.add_option("--side", child.side)->group("");
  app.add_option("--url", child.url)->group("");
  app.add_option("--key", child.key)->group("");
  app.add_option("--child-threads", child.threads)->group("");
  app.add_option("--own-keys", child.own_keys)->group("");
  app.add_option("--hold-us", child.hold_us)->group("");
  app.add_option("--think-us", child.think_us)->group("");
  app.add_option("--start-ns", child.start_ns)->group("");
  app.add_option("--cpu", child.cpu)->group("");
  CLI11_PARSE(app, argc, argv);
  if (o.python == "none") o.python.clear();
  if (o.node == "none") o.node.clear();
  child.seconds = o.seconds;
  child.naive_retry_ms = o.naive_retry_ms;
  child.pings = o.pings;
  try {
    if (child_role == "load") return run_load_child(child);
    if (child_role == "handoff") return run_handoff_child(child);
    if (child_role == "ping") return run_ping_child(child);
    if (child_role == "script-floor") return run_script_floor_child(child);
    return run_parent(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_processes: %s\n", e.what());
    return 1;
  }
}
