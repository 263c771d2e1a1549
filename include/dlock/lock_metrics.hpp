// dlock/lock_metrics.hpp
//
// What a client's locks have done since it was created (client::lock_metrics()).
#pragma once

#include <cstdint>

namespace dlock {

// Each counter only grows.
struct lock_metrics {
  std::uint64_t attempts = 0;   // acquisition attempts sent (a script each; failed ones too)
  std::uint64_t acquired = 0;   // first holds taken (blocking and asynchronous)
  std::uint64_t reentered = 0;  // re-entries of a hold this thread had
  std::uint64_t waited = 0;     // acquisitions that found the lock taken and waited
  // Acquisitions that ended refused when their wait ran out (a try without a wait that is
  // refused counts here too).
  std::uint64_t timed_out = 0;
  std::uint64_t released = 0;  // holds given up by their last unlock / release
  std::uint64_t lost = 0;      // holds lost (see lock_options::on_lock_lost)
  // Watchdog rounds' scripts, each renewing many leases; counted when handed to the connection,
  // so rounds while the server is unreachable count too.
  std::uint64_t renewal_scripts = 0;
  std::uint64_t leases_renewed = 0;   // leases the watchdog confirmed renewed
  std::uint64_t release_retries = 0;  // releases sent again after a lost connection or timeout
  std::uint64_t unconfirmed = 0;      // first holds undone: fewer than min_replicas acknowledged
  // Releases held back to ride with the next request on their connection (or written by a timer
  // within about a millisecond): nobody was seen to wait for the lock.
  std::uint64_t releases_deferred = 0;
};

}  // namespace dlock
