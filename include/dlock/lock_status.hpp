// dlock/lock_status.hpp
//
// What an operator reads about a lock: mutex::status(), `dlock status`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock {

// One holder of a lock, as the lock's hash in Redis records it.
struct lock_holder {
  std::string owner;        // "<client id>:<thread or lease key>" (Redisson: "<uuid>:<thread id>")
  std::uint64_t count = 0;  // holds (re-entries + 1)
  // A semaphore permit's lease left, as the server sees it (-1: no expiry, or not a permit).
  std::chrono::milliseconds lease_left{-1};
};

// One waiter of a fair lock (dlock::fair_mutex), in the order it will be served.
struct lock_waiter {
  std::string owner;  // its field, as lock_holder::owner
  // Time left until the waiter is dropped as dead unless it takes the lock (or, for a dlock
  // waiter, attempts again); only meaningful when `has_deadline`.
  std::chrono::milliseconds deadline_left{0};
  bool has_deadline = false;
};

// A snapshot of a lock, read atomically from Redis (except `subscribers`, read just after).
struct lock_status {
  bool locked = false;
  std::vector<lock_holder> holders;             // empty when free
  std::chrono::milliseconds remaining_ttl{-2};  // as PTTL: -2 free, -1 no TTL
  std::uint64_t last_fencing_token = 0;  // the newest token handed out for this name; 0: none
  // Connections listening for the lock's release: on its unlock channel, for a mutex or a plain
  // lock also on the call channel of each client in its wait line, and for a fair lock on the
  // channel of each waiter in its line (one per waiting thread, dlock's as Redisson's). Otherwise
  // dlock uses one per client however many of its threads wait, so this counts waiting clients
  // (Redisson: one per waiting JVM), not threads; a dlock client waiting behind a Redisson holder
  // listens on both and counts twice.
  std::uint64_t subscribers = 0;
  // A semaphore (dlock::semaphore::status()): its permits available now and in all (available +
  // held); a lock of another kind leaves both 0. Holders are then the permits: owner = permit id.
  std::int64_t permits_available = 0;
  std::int64_t permits_total = 0;
  // Read-write locks (dlock::shared_mutex): "read" or "write" while held, empty when free or for
  // other lock types; and the dlock writers waiting, whose intent holds new readers back.
  std::string mode;
  std::uint64_t waiting_writers = 0;
  // Fair locks (dlock::fair_mutex): the waiting list, first served first (at most 1,000 shown),
  // and how many wait in all. Other lock types leave both empty.
  std::vector<lock_waiter> queue;
  std::uint64_t queue_length = 0;
};

}  // namespace dlock
