// src/locks/engine/lock_protocol.hpp
//
// What one lock type says, with no I/O: which script an attempt, a release, a renewal, a forced
// release and a status read run, with which keys and arguments, and what their replies mean. The
// engine (lock_engine and its parts in this folder) does everything else the same way for every
// type: holds, waiting, the watchdog, release retries, loss reports, lifetime. A new lock type is
// a protocol, its scripts and a thin public handle (see docs/architecture.md, "Adding a lock
// type").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_status.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"

namespace dlock::locks {

// One script run: the script and its keys and arguments, owned. The first key routes it.
struct script_call {
  static constexpr std::size_t no_publish = static_cast<std::size_t>(-1);

  const script* code = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
  // The index in `args` of the command the script publishes with, filled in at send time with
  // "publish", or "spublish" on a Redis Cluster (sharded pub/sub); no_publish when it publishes
  // nothing.
  std::size_t publish_command_arg = no_publish;
};

// An acquisition attempt by one owner (its hash field).
struct attempt_request {
  std::string_view name;
  std::string_view owner;
  std::chrono::milliseconds lease{0};
  std::uint64_t known_holds = 0;  // the holds this client knows the owner has (0: a first hold)
  // For a type with a wait line of clients (wakes_by_line()): the caller is a queued waiter, so
  // the client may stand in the line (`in_line`), and other waiters of this client wait for the
  // same lock (`others_waiting`), so the client stays in line after taking it.
  bool in_line = false;
  bool others_waiting = false;
  // Whether the caller waits if the attempt fails (false for a try_lock() without a wait, and
  // for the last attempt at the deadline): a type with a server-side queue enqueues only then.
  bool may_wait = false;
};

// What an attempt's reply says.
struct attempt_outcome {
  enum class kind { acquired, reentered, held_by_other };
  kind status = kind::held_by_other;
  std::uint64_t token = 0;          // acquired: the new hold's fencing token
  std::uint64_t count = 0;          // acquired / reentered: the owner's hold count now
  std::int64_t holder_ttl_ms = -1;  // held_by_other: the holder's lease left (-1: no TTL)
  // held_by_other: whether the holder announces its release on the wake channel. A foreign
  // client's hold (redis-py, redsync, node-redlock on a plain lock) does not: its waiters
  // re-check with a bounded backoff instead of sleeping until a message or the lease end.
  bool holder_publishes = true;
  // held_by_other, for a type with a wait line: whether the holder's release calls the line's
  // first client on that client's own channel (lock_protocol::call_channel), as dlock's do. When
  // it does not (a Redisson holder), a waiter also listens on the shared wake channel.
  bool holder_calls = false;
};

// A release of one hold. Every try carries the released hold's fencing token, so that a try
// arriving after a newer hold of the name began (a retry, or a first try that a router held back
// while a failover went on) changes nothing.
struct release_request {
  std::string name;
  std::string owner;
  std::chrono::milliseconds lease{0};  // re-set while holds remain
  std::uint64_t remaining = 0;         // the holds the owner keeps afterwards (0: free the lock)
  std::uint64_t token = 0;             // the released hold's fencing token (0: no check)
};

// One watchdog renewal: the lock and the owner whose lease is extended.
struct renewal_target {
  std::string_view name;
  std::string_view owner;
  std::uint64_t token = 0;  // the hold's fencing token (part of a plain lock's value)
};

class lock_protocol {
 public:
  virtual ~lock_protocol() = default;

  // A short name for messages and metrics: "reentrant", "plain", ...
  virtual std::string_view kind() const noexcept = 0;

  // Whether an owner may take the lock again while it holds it. For a lock that is not, the
  // engine refuses such an attempt with errc::would_deadlock before sending anything: waiting for
  // oneself would never end.
  virtual bool reentrant() const noexcept { return true; }

  // The channel on which releases of `name` are announced; waiters listen there. Several locks
  // may share one channel (the engine wakes each lock's own waiters).
  virtual std::string wake_channel(std::string_view name) const = 0;

  // How many of this client's waiters for one lock a message `payload` on its wake channel wakes
  // (wake_everyone: all of them). The default: one per message, whatever it says.
  static constexpr std::size_t wake_everyone = static_cast<std::size_t>(-1);
  virtual std::size_t wake_ups(std::string_view payload) const {
    (void)payload;
    return 1;
  }

  // A type whose server keeps its own queue of waiting owners (the fair lock): each waiter
  // listens on its own channel (owner_wake_channel()), on which one message wakes it; it makes
  // its own attempts (never queues behind this client's other waiters without one, since the
  // server's order is the order); while waiting it attempts at least every wait_refresh(); and
  // when it ends without a hold after joining the server's queue, leave_line() runs with its own
  // field.
  virtual bool waits_by_owner() const noexcept { return false; }
  virtual std::string owner_wake_channel(std::string_view name, std::string_view owner) const {
    (void)owner;
    return wake_channel(name);
  }

  // A type whose waiting clients stand in a wait line on the server (the reentrant and plain
  // locks; see docs/design/contention.md): its release reserves the lock for the first client in
  // line and calls that client alone, on call_channel(name, its wake id), before the unlock
  // message on the shared wake_channel(). A waiting client listens on its call channel, where
  // each message wakes one waiter, and on the shared channel only while a holder that does not
  // call holds the lock (attempt_outcome::holder_calls).
  virtual bool wakes_by_line() const noexcept { return false; }
  virtual std::string call_channel(std::string_view name, std::string_view wake_id) const {
    (void)name;
    (void)wake_id;
    return {};
  }
  // How often a client's first waiter makes an attempt while it waits without a wake-up, to keep
  // the client's place in the line (zero: only at the holder's lease end).
  virtual std::chrono::milliseconds wait_refresh() const { return std::chrono::milliseconds(0); }
  // Whether an attempt may leave a mark on the server that leave_line() takes back (a place in a
  // line, a writer's intent): then the engine counts the client's acquisitions (line_uses).
  virtual bool leaves_line() const noexcept { return false; }
  // The script by which a client whose last waiter for `name` gave up leaves the line (and passes
  // on a reservation made for it); `owner` is one of the client's owner fields (for a type that
  // waits_by_owner(): the field of the owner that gave up).
  virtual std::optional<script_call> leave_line(std::string_view name,
                                                std::string_view owner) const {
    (void)name;
    (void)owner;
    return std::nullopt;
  }

  virtual script_call attempt(const attempt_request& request) const = 0;
  // Throws dlock::error(errc::protocol_error) for a reply the script cannot have sent.
  virtual attempt_outcome read_attempt(const reply& r) const = 0;

  virtual script_call release(const release_request& request) const = 0;
  // Whether a release's reply says that its unlock message reached a listener (a client waiting
  // for the lock, in this process or another): the engine then writes the name's next release at
  // once instead of letting it ride with a later request. False when the script does not say.
  virtual bool release_was_heard(const reply& r) const {
    (void)r;
    return false;
  }

  // Renews `targets` (all in one routing group) to `lease`; the reply has one answer per target.
  virtual script_call renew(std::span<const renewal_target> targets,
                            std::chrono::milliseconds lease) const = 0;
  // Checks that `targets` (one routing group) are still held, changing nothing; the reply reads
  // as a renewal's.
  virtual script_call check(std::span<const renewal_target> targets) const = 0;
  // Whether target i was renewed (or is held); throws errc::protocol_error for a malformed reply.
  virtual std::vector<bool> read_renewal(const reply& r, std::size_t targets) const = 0;

  // Deletes the lock whoever holds it and wakes its waiters.
  virtual script_call force_release(std::string_view name) const = 0;
  // Returns whether there was a lock; throws errc::wrong_type for a key of another kind.
  virtual bool read_force_release(std::string_view name, const reply& r) const = 0;

  virtual script_call status(std::string_view name) const = 0;
  virtual lock_status read_status(std::string_view name, const reply& r) const = 0;

  // The Lua sources every command connection loads when it connects.
  virtual std::vector<std::string_view> scripts() const = 0;
};

}  // namespace dlock::locks
