#include "locks/engine/release_queue.hpp"

#include "dlock/error.hpp"

namespace dlock::locks {
namespace {

// A release may have run when it fails this way; the protocol makes sending it again harmless.
bool is_retryable(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout;
}

}  // namespace

void release_queue::send(const lock_protocol& protocol, release_request request, timing when) {
  send_try(protocol, std::move(request), release_tries, false, when);
}

void release_queue::send_try(const lock_protocol& protocol, release_request request, int tries_left,
                             bool urgent, timing when) {
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  const script_call call = protocol.release(request);
  auto on_done = [weak = weak_from_this(), &protocol, request = std::move(request), tries_left](
                     std::error_code ec, const reply& r) mutable {
    auto self = weak.lock();
    if (!self) return;
    if (!ec && !r.is_error() && self->heard_) {
      try {
        self->heard_(request.name, protocol.release_was_heard(r));
      } catch (...) {
        // Out of memory while recording it: the name's next release goes out at once.
      }
    }
    // The first try may have run: the retry is harmless all the same (the hold's token travels
    // with every try, see release_request) and goes ahead of everything not yet written.
    if (ec && is_retryable(ec) && tries_left > 1) {
      ++self->counters_.release_retries;
      ++self->counters_.of(protocol.kind()).release_retries;
      try {
        self->send_try(protocol, std::move(request), tries_left - 1, true, timing::now);
      } catch (...) {
        // Stopped meanwhile: the lease ends the hold.
      }
    }
    self->finished();
  };
  try {
    send_(call, urgent, when, std::move(on_done));
  } catch (...) {
    finished();
    throw;
  }
}

void release_queue::send_once(const script_call& call) {
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  try {
    send_(call, false, timing::now, [weak = weak_from_this()](std::error_code, const reply&) {
      if (auto self = weak.lock()) self->finished();
    });
  } catch (...) {
    finished();
    throw;
  }
}

void release_queue::expected_done() noexcept {
  // Sequentially consistent with drain(): either it sees this decrement when it checks, or this
  // sees it draining and notifies under the mutex (so not between its check and its sleep).
  if (expected_.fetch_sub(1) != 1 || !draining_.load()) return;
  { const std::lock_guard lock(mutex_); }
  idle_.notify_all();
}

void release_queue::finished() {
  {
    std::lock_guard lock(mutex_);
    --in_flight_;
  }
  idle_.notify_all();
}

void release_queue::drain(std::chrono::milliseconds limit) {
  draining_.store(true);
  std::unique_lock lock(mutex_);
  idle_.wait_for(lock, limit, [&] { return in_flight_ == 0 && expected_.load() == 0; });
}

}  // namespace dlock::locks
