// src/locks/engine/acquisition.hpp
//
// One acquisition that may wait, on the I/O thread: carries out what its acquisition_machine
// decides (send an attempt through the lock's protocol, join the lock's wait queue, arm a timer,
// finish). A blocking lock() makes its first attempt on the calling thread (no hand-off when the
// lock is free) and sleeps on one of these only when the lock is taken; an asynchronous
// acquisition runs here from the start. An unlock message turns into the next attempt on the I/O
// thread without waking any other thread first.
#pragma once

#include <asio.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "locks/engine/acquisition_machine.hpp"
#include "locks/engine/lock_engine.hpp"

namespace dlock::locks {

class acquisition : public std::enable_shared_from_this<acquisition> {
 public:
  // `done` runs once, on the I/O thread (or on the caller of refuse()): an error with its
  // detail, or whether the owner now holds the lock. It must not throw.
  using completion = std::function<void(std::error_code ec, const std::string& detail, bool held)>;

  struct params {
    lock_ref lock;
    std::uint64_t owner = 0;
    std::optional<std::chrono::milliseconds> lease;
    clock::time_point deadline;
    std::stop_token cancel;
  };

  static std::shared_ptr<acquisition> create(std::shared_ptr<lock_engine> engine, params p,
                                             completion done);
  // Use create().
  acquisition(std::shared_ptr<lock_engine> engine, params p, completion done);

  // On the I/O thread: begins with an attempt, or behind this client's earlier waiters.
  void start();
  // On the I/O thread: the blocking caller's attempt found the lock held with `ttl_ms` left
  // (`attempted`; `holder_publishes`: whether that holder announces its release; `holder_calls`:
  // whether its release calls this client on its own channel, attempt_outcome::holder_calls),
  // or the caller queues behind earlier waiters that saw that much left. `attempt_sent`: when
  // the caller's attempt was sent (nullopt: it made none).
  // `field_may_be_left`: the caller's attempt may have left the owner's field (it was lost with
  // its link), see field_may_be_left_.
  void start_waiting(std::int64_t ttl_ms, bool attempted, bool holder_publishes, bool holder_calls,
                     std::optional<clock::time_point> attempt_sent, bool field_may_be_left = false);
  // On the I/O thread: the client is stopping.
  void stop();
  // Not started because the client is stopped: on the calling thread.
  void refuse(const error& e);

 private:
  // Registers the acquisition (and its use of the line, unless a blocking caller's use is
  // `line_use_taken_over`); false when it is already cancelled (then finished).
  bool begin(bool line_use_taken_over);
  void run(const acquisition_machine::action& a);
  // Tells the wait queues of the holder `a` saw; false (and finished) when that failed.
  bool saw_holder(const acquisition_machine::action& a);
  void send_attempt();
  void on_reply(const attempt_plan& plan, clock::time_point sent_at, bool others_waiting,
                std::error_code ec, const reply& r);
  void arm_timer(clock::time_point at);
  void finish(std::error_code ec, const std::string& detail, bool held, bool give_back = false);

  const std::shared_ptr<lock_engine> engine_;
  const params p_;
  const hold_key key_;
  const std::string channel_;
  const lock_ref waits_;            // the wait queue this waiter joins (see the constructor)
  const bool uses_line_;            // its type leaves_line(): counted in the engine's line_uses
  const line_uses::line_key line_;  // the same as lock_engine::line_of()
  completion done_;
  acquisition_machine machine_;
  wait_queues::waiter waiter_;
  bool in_queue_ = false;
  bool finished_ = false;
  bool stopped_mid_attempt_ = false;  // stop() came while an attempt was out: its reply matters
  bool may_be_in_line_ = false;       // an attempt may have left a mark to undo: a place in line
                                      // or a writer's intent (protocol::leave_line())
  bool unconfirmed_ = false;          // the last attempt's hold was undone (too few replicas)
  bool retried_lost_link_ = false;    // an attempt lost with its link was tried again once
  // An earlier attempt may have left the owner's field on the server (it may have run without an
  // answer, or it withdrew releases: lock_engine::send_attempt) and none has run since: a
  // failure or a stop releases it (release_orphan).
  bool field_may_be_left_ = false;
  std::string unconfirmed_why_;
  // When the latest attempt (this machine's or the blocking caller's) was sent: a wake-up heard
  // after it, before this waiter joined its queue, is not lost (wait_queues::join).
  std::optional<clock::time_point> attempt_sent_;
  // Whether the holder the latest refused attempt saw calls this client on its own channel
  // (attempt_outcome::holder_calls): the wait queues listen on the shared channel when not.
  bool holder_calls_ = false;
  std::optional<asio::steady_timer> timer_;
  std::uint64_t timer_generation_ = 0;
  std::optional<std::stop_callback<std::function<void()>>> cancel_callback_;
};

}  // namespace dlock::locks
