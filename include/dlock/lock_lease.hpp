// dlock/lock_lease.hpp
//
// dlock::lock_lease: one hold of a lock taken by the asynchronous API (mutex::async_lock,
// plain_lock::async_lock and friends). It belongs to no thread: move it into a callback, a
// coroutine frame or another thread, and release it there. Destroying it releases the hold, as
// std::unique_lock does.
//
//   m.async_lock([](std::error_code ec, dlock::lock_lease lease) {
//     if (ec) return;                        // Redis failed; `lease` holds nothing
//     hand_to_worker(std::move(lease));      // released by whichever thread drops it
//   });
//
// Each lease is its own owner in Redis (field "<client id>:<lease key>"), so leases are not
// reentrant: a second asynchronous acquisition of the same name waits for the first lease, even
// on the same thread, and a lease and a thread's dlock::mutex hold exclude each other.
//
// A lease is not safe for concurrent use by several threads (as std::unique_lock); different
// leases are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>

namespace dlock {

class lock_lease {
 public:
  // An empty lease: holds nothing (what a timed-out acquisition delivers).
  lock_lease() noexcept;
  // For dlock's internals (the hold's state is opaque to users).
  class impl;
  explicit lock_lease(std::unique_ptr<impl> state) noexcept;
  lock_lease(lock_lease&& other) noexcept;
  // Releases the hold this lease had (as release()), then takes `other`'s.
  lock_lease& operator=(lock_lease&& other) noexcept;
  lock_lease(const lock_lease&) = delete;
  lock_lease& operator=(const lock_lease&) = delete;
  // Releases the hold, if any. Never throws.
  ~lock_lease();

  // lock_lease::owns_lock()
  // Whether this lease has a hold that was not released. A hold that was lost (see stop_token())
  // still counts until release(); it no longer excludes anyone.
  bool owns_lock() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }

  // lock_lease::release()
  // Gives the hold up; callable from any thread, never throws; the lease is empty afterwards.
  // Returns {} released; errc::lock_lost the hold had been lost before; errc::not_owner the lease
  // was empty; errc::client_stopped the client is gone (its holds were reported lost already).
  // As mutex::unlock(), the release is queued without waiting and retried idempotently.
  std::error_code release() noexcept;

  // lock_lease::stop_token()
  // Stopped when the hold is lost: the lease ran out (explicit), renewal found the lock gone or
  // taken, Redis could not be reached before the lease end, or the client was destroyed. Attach
  // a std::stop_callback to be told; it runs on the thread that noticed (usually the client's I/O
  // thread) and must not block. Never stops for an empty lease.
  std::stop_token stop_token() const noexcept;
  // lock_lease::lost(): stop_token().stop_requested().
  bool lost() const noexcept { return stop_token().stop_requested(); }

  // The fencing token of this hold (see dlock/mutex.hpp, "Fencing"); 0 for an empty lease.
  std::uint64_t fencing_token() const noexcept;
  // The lock hash field that records this hold in Redis (for a plain_lock: the start of the key's
  // value, "<owner_id()>:<fencing_token()>"); empty for an empty lease.
  const std::string& owner_id() const noexcept;
  // The lock's name; empty for an empty lease.
  const std::string& name() const noexcept;

 private:
  std::unique_ptr<impl> state_;
};

}  // namespace dlock
