#include "locks/engine/release_queue.hpp"

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::locks {
namespace {

// A release may have run when it fails this way; the protocol makes sending it again harmless. Or
// the server refused to run it for now, for as long as a slot migration, a failover or a load
// lasts, longer than the router retries within one request's timeout: a release dropped then
// would leave the lock held until its lease ends.
bool is_retryable(std::error_code ec, const reply& r) {
  if (ec == errc::server_error) {
    for (const std::string_view not_run :
         {"TRYAGAIN", "CLUSTERDOWN", "ASK ", "MOVED ", "LOADING", "MASTERDOWN", "READONLY"}) {
      if (r.str.starts_with(not_run)) return true;
    }
    return false;
  }
  return ec == errc::connection_lost || ec == errc::timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout;
}

}  // namespace

void release_queue::send(const lock_protocol& protocol, release_request request, timing when) {
  auto entry = std::make_shared<outstanding>();  // one allocation, its gate included
  entry->protocol = &protocol;
  entry->request = std::move(request);
  {
    std::lock_guard lock(mutex_);
    outstanding_.push_back(entry);
    outstanding_count_.store(outstanding_.size(), std::memory_order_release);
  }
  try {
    send_try(entry, release_tries, false, when);
  } catch (...) {
    forget(entry);
    throw;
  }
}

void release_queue::send_try(const std::shared_ptr<outstanding>& entry, int tries_left, bool urgent,
                             timing when) {
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  const script_call call = entry->protocol->release(entry->request);
  auto on_done = [weak = weak_from_this(), entry, tries_left](std::error_code ec, const reply& r) {
    auto self = weak.lock();
    if (!self) return;
    const lock_protocol& protocol = *entry->protocol;
    if (!ec && !r.is_error() && self->heard_) {
      try {
        self->heard_(entry->request.name, protocol.release_was_heard(r));
      } catch (...) {
        // Out of memory while recording it: the name's next release goes out at once.
      }
    }
    // The first try may have run: the retry is harmless all the same (the hold's token travels
    // with every try, see release_request) and goes ahead of everything not yet written; unless
    // the owner's next attempt went out meanwhile (see supersede()).
    const bool may_retry = ec && is_retryable(ec, r) && tries_left > 1;
    const route::resend_turn turn(may_retry ? &entry->gate : nullptr);
    if (may_retry && turn.allowed()) {
      ++self->counters_.release_retries;
      ++self->counters_.of(protocol.kind()).release_retries;
      bool sent = true;
      try {
        self->send_try(entry, tries_left - 1, true, timing::now);
      } catch (...) {
        sent = false;  // stopped meanwhile: the lease ends the hold
      }
      if (!sent) self->forget(entry);
    } else {
      self->forget(entry);
    }
    self->finished();
  };
  try {
    send_(call, urgent, when, outstanding::gate_of(entry), std::move(on_done));
  } catch (...) {
    finished();
    throw;
  }
}

bool release_queue::supersede(const lock_protocol& protocol, std::string_view name,
                              std::string_view owner) {
  if (outstanding_count_.load(std::memory_order_acquire) == 0) return false;
  // Mostly one release (the owner's last, deferred until this attempt carries it): no allocation.
  std::shared_ptr<outstanding> first;
  std::vector<std::shared_ptr<outstanding>> more;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& e : outstanding_) {
      if (e->protocol != &protocol || e->request.owner != owner || e->request.name != name) {
        continue;
      }
      if (first) {
        more.push_back(e);
      } else {
        first = e;
      }
    }
  }
  if (!first) return false;
  // Outside mutex_: a retry being queued takes it (send_try) before its gate lets us go.
  first->gate.withdraw();
  for (const auto& e : more)
    e->gate.withdraw();
  return true;
}

void release_queue::forget(const std::shared_ptr<outstanding>& entry) {
  std::lock_guard lock(mutex_);
  const auto at = std::find(outstanding_.begin(), outstanding_.end(), entry);
  if (at == outstanding_.end()) return;
  outstanding_.erase(at);
  outstanding_count_.store(outstanding_.size(), std::memory_order_release);
}

void release_queue::send_once(const script_call& call) {
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  try {
    send_(call, false, timing::now, nullptr,
          [weak = weak_from_this()](std::error_code, const reply&) {
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
