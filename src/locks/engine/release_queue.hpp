// src/locks/engine/release_queue.hpp
//
// Releases go out without the releaser waiting for them. One that meets a dead connection, a
// timeout or a server that refuses to run it for now (TRYAGAIN, CLUSTERDOWN, LOADING...) is sent
// again (at most `release_tries` times, ahead of everything not yet written):
// the protocol makes a retry idempotent (it carries the released hold's fencing token and changes
// nothing once a newer hold exists). The queue counts releases in flight so the client can give
// them a bounded time to reach the server when it stops.
//
// A retry is not sent once the same owner's next attempt on the same lock went out (supersede()).
// That attempt followed the release on its link, so the release ran before it, or the link died
// and the attempt, finding the owner's field still there, takes that hold over as a fresh one. A
// retry would run after the attempt and could end the hold it took: a thread's owner field is
// the same for each of its acquisitions, and so is a thread's permit id, and a release whose
// hold's token the client never learned (an acquisition whose reply was lost) carries none. The
// router's own re-sends of a try (after TRYAGAIN, CLUSTERDOWN, READONLY, a redirection, NOSCRIPT
// or a failed connect) stop then too: each release has a route::resend_gate that supersede()
// withdraws. If the attempt fails, its acquisition's own release (release_orphan) stands in for
// the skipped retry, also when the attempt did not run (a server error: TRYAGAIN past its
// timeout, OOM).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "locks/engine/lock_counters.hpp"
#include "locks/engine/lock_protocol.hpp"
#include "route/resend_gate.hpp"

namespace dlock::locks {

class release_queue : public std::enable_shared_from_this<release_queue> {
 public:
  // How a release goes out: written at once, or deferred until the next request written on its
  // link carries it (or a short timer; see net::connection::caller::defers).
  enum class timing { now, with_next_request };
  // Sends one script call; `done` runs once with its outcome. Throws errc::client_stopped when
  // nothing can be sent any more. `urgent` calls are never deferred. The router's own re-sends
  // of the call ask `gate` first (null: none to ask).
  using send_fn = std::function<void(const script_call& call, bool urgent, timing when,
                                     std::shared_ptr<route::resend_gate> gate,
                                     std::function<void(std::error_code, const reply&)> done)>;
  // Told of every release the server answered: whether its unlock message reached a listener
  // (lock_protocol::release_was_heard). May run on any thread.
  using heard_fn = std::function<void(const std::string& name, bool heard)>;

  static constexpr int release_tries = 5;

  release_queue(send_fn send, heard_fn heard, lock_counters& counters)
      : send_(std::move(send)), heard_(std::move(heard)), counters_(counters) {}

  // Sends `request` by `protocol` (which must outlive the queue). Throws as send_fn. A retry is
  // written at once, whatever `when` the first try had.
  void send(const lock_protocol& protocol, release_request request, timing when = timing::now);

  // Sends a call that gives something back without a hold's token to make a retry harmless (a
  // waiter leaving a server-side wait line): once, but counted in flight like a release, so
  // that drain() gives it the same time. Throws as send_fn.
  void send_once(const script_call& call);

  // The owner `owner` of `name` by `protocol` is about to send an attempt: releases of that
  // owner and lock still out are not retried, here or by the router (see the top of this file).
  // A retry being handed to the link meanwhile is waited for, so that it goes out first. Call
  // before the attempt is queued, on any thread but from inside a release's completion. Cheap
  // when no release is out. Returns whether any was: if the attempt then fails without running,
  // its sender must release the owner's field again (lock_engine::send_attempt does).
  bool supersede(const lock_protocol& protocol, std::string_view name, std::string_view owner);

  // Something that may yet send a release is waited for by drain() until expected_done(): an
  // acquisition under way when the client begins to stop may take a hold that must go back, or
  // leave a mark to take back (lock_engine::acquire, lock_engine::give_back_late_hold). An atomic
  // count, cheap on the blocking lock() path.
  void expect() noexcept { expected_.fetch_add(1); }
  void expected_done() noexcept;
  // expect() for its lifetime.
  class expecting {
   public:
    explicit expecting(release_queue& q) : q_(q) { q_.expect(); }
    expecting(const expecting&) = delete;
    expecting& operator=(const expecting&) = delete;
    ~expecting() { q_.expected_done(); }

   private:
    release_queue& q_;
  };

  // Waits up to `limit` until no release is in flight.
  void drain(std::chrono::milliseconds limit);

 private:
  // A release from its first try until it is answered or no more tries go out (guarded by
  // mutex_).
  struct outstanding {
    const lock_protocol* protocol = nullptr;
    release_request request;
    // Withdrawn when the owner's next attempt goes out: no retry, here or in the router.
    route::resend_gate gate;
    // The gate as the router holds it: it shares the entry's ownership.
    static std::shared_ptr<route::resend_gate> gate_of(const std::shared_ptr<outstanding>& e) {
      return {e, &e->gate};
    }
  };
  void send_try(const std::shared_ptr<outstanding>& entry, int tries_left, bool urgent,
                timing when);
  void forget(const std::shared_ptr<outstanding>& entry);
  void finished();

  send_fn send_;
  heard_fn heard_;
  lock_counters& counters_;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t in_flight_ = 0;
  std::vector<std::shared_ptr<outstanding>> outstanding_;
  std::atomic<std::size_t> outstanding_count_{0};  // outstanding_.size(), read without mutex_
  std::atomic<std::size_t> expected_{0};
  std::atomic<bool> draining_{false};  // drain() waits: expected_done() must notify
};

}  // namespace dlock::locks
