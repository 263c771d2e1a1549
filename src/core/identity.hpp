// src/core/identity.hpp
//
// Who holds a lock: a client id (128 bits from the OS CSPRNG, so two clients never collide) and
// a thread key (a process-wide counter, never reused, so a new thread cannot inherit a dead
// thread's holds). Threads announce their exit so the lock layer stops renewing their leases.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::core {

// 32 lowercase hex digits from OpenSSL's RAND_bytes. Throws dlock::error if the CSPRNG fails.
std::string random_id();

// The calling thread's key: 1, 2, 3... in the order threads first ask.
std::uint64_t current_thread_key();

// A fresh key from the same sequence, for an owner that is not a thread (an asynchronous lease):
// it can never equal a thread's key.
std::uint64_t new_owner_key();

// Told, on the exiting thread, that a thread which asked for its key is ending.
class thread_exit_listener {
 public:
  virtual void on_thread_exit(std::uint64_t thread_key) noexcept = 0;

 protected:
  virtual ~thread_exit_listener() = default;
};

// Registration is thread-safe; remove before the listener is destroyed.
void add_thread_exit_listener(thread_exit_listener* listener);
void remove_thread_exit_listener(thread_exit_listener* listener);

}  // namespace dlock::core
