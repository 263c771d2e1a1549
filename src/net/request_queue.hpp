// src/net/request_queue.hpp
//
// The pipeline of one connection, sans I/O: requests in the order they were issued, their encoded
// bytes, and which of them have been handed to the socket. Replies come back in request order, so
// each reply belongs to the oldest written request. Not thread-safe: the connection guards it
// with its mutex and runs completions after unlocking.
//
// A request's life:
//   unwritten --take_unwritten()--> written --match()--> completed
//       |                              |
//       +--expire()/fail_all()-->      +--expire(): completed early, keeps its slot so the late
//            completed                    reply is still matched (and dropped)
//                                      +--fail_written(): connection died, completed with error
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/reply.hpp"

namespace dlock::net {

using clock = std::chrono::steady_clock;

// Runs exactly once per request with its outcome. On failure `ec` is set and the reply is an
// error reply whose text says what happened (for errc::server_error: the server's message).
using completion = std::function<void(std::error_code ec, reply r)>;

// A completion ready to run, with its outcome. `any_thread`: the completion may run on whichever
// thread read its reply (see connection::caller); otherwise it runs on the I/O thread.
struct finished {
  completion done;
  std::error_code ec;
  reply result;
  bool any_thread = false;

  void run() {
    if (done) done(ec, std::move(result));
  }
};
using finished_list = std::vector<finished>;

class request_queue {
 public:
  // Appends a command. A null `done` means the reply is read and dropped (health-check PINGs).
  // `any_thread`: see finished.
  void push(std::span<const std::string_view> args, completion done, clock::time_point deadline,
            bool any_thread = false);

  // Queues a command ahead of every unwritten one (still after those already written): for a
  // retry that must reach the server before commands issued after the original.
  void push_front_unwritten(std::span<const std::string_view> args, completion done,
                            clock::time_point deadline);

  // Appends bytes that expect no reply of their own (pub/sub mode, where the server answers with
  // push messages instead).
  void push_unmatched(std::string_view encoded) { unwritten_bytes_ += encoded; }

  bool has_unwritten() const noexcept { return !unwritten_bytes_.empty(); }

  // Appends every unwritten byte to `out` and marks those requests written. Returns the number
  // of requests that became written.
  std::size_t take_unwritten(std::string& out);

  // Hands `r` to the oldest written request. Returns false when no written request is waiting:
  // the server sent a reply nobody asked for, which is a protocol violation.
  bool match(reply&& r, finished_list& out);

  // The connection died: every written request fails with `ec`; unwritten ones stay queued for
  // the next connection, since the server never saw them.
  void fail_written(std::error_code ec, const std::string& detail, finished_list& out);

  // Every request fails with `ec` and the queue is emptied, bytes included.
  void fail_all(std::error_code ec, const std::string& detail, finished_list& out);

  // Completes with errc::timeout every request whose deadline is at or before `now`. Written ones
  // keep their slot until their reply arrives; unwritten ones will still be sent (their bytes are
  // already encoded in order) and their replies dropped. A non-empty `unsent_reason` (why the
  // connection is down) is added to the error text of the unwritten ones.
  void expire(clock::time_point now, finished_list& out, std::string_view unsent_reason = {});

  // The earliest deadline of a request still waiting for its completion.
  std::optional<clock::time_point> next_deadline() const;

  // Whether every written request's completion may run on any thread (or has none left).
  bool written_run_anywhere() const noexcept;

  std::size_t size() const noexcept { return entries_.size(); }
  std::size_t written() const noexcept { return written_; }

 private:
  struct entry {
    completion done;  // empty once completed early (timeout) or when no reply is wanted
    clock::time_point deadline;
    bool any_thread = false;
  };

  std::deque<entry> entries_;  // [0, written_) written, [written_, size) unwritten
  std::size_t written_ = 0;
  std::string unwritten_bytes_;  // encoded bytes of the unwritten requests, in order
};

}  // namespace dlock::net
