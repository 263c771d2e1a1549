// src/locks/handles/handle_state.hpp
//
// What the public handles hold, opaque to users: the engine and the lock (dlock::mutex), or one
// hold of it (dlock::lock_lease); dlock::plain_lock as dlock::mutex.
#pragma once

#include <memory>
#include <stop_token>
#include <string>

#include "dlock/lock_lease.hpp"
#include "dlock/mutex.hpp"
#include "dlock/plain_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "locks/engine/lock_engine.hpp"
#include "locks/types/semaphore_protocol.hpp"

namespace dlock {

class mutex::impl {
 public:
  impl(std::shared_ptr<locks::lock_engine> e, locks::lock_ref l)
      : engine(std::move(e)), lock(std::move(l)) {}
  const std::shared_ptr<locks::lock_engine> engine;
  const locks::lock_ref lock;
};

class plain_lock::impl {
 public:
  impl(std::shared_ptr<locks::lock_engine> e, locks::lock_ref l)
      : engine(std::move(e)), lock(std::move(l)) {}
  const std::shared_ptr<locks::lock_engine> engine;
  const locks::lock_ref lock;
};

class semaphore::impl {
 public:
  impl(std::shared_ptr<locks::lock_engine> e, const locks::semaphore_protocol& p, std::string name)
      : engine(std::move(e)), protocol(p), lock{&p, std::move(name)} {}
  const std::shared_ptr<locks::lock_engine> engine;
  const locks::semaphore_protocol& protocol;
  const locks::lock_ref lock;
};

class shared_mutex::impl {
 public:
  impl(std::shared_ptr<locks::lock_engine> e, locks::lock_ref r, locks::lock_ref w)
      : engine(std::move(e)), read(std::move(r)), write(std::move(w)) {}
  const std::shared_ptr<locks::lock_engine> engine;
  const locks::lock_ref read;   // shared holds
  const locks::lock_ref write;  // the exclusive hold
};

class lock_lease::impl {
 public:
  std::shared_ptr<locks::lock_engine> engine;
  locks::lock_ref lock;
  std::uint64_t owner = 0;
  std::string owner_field;
  std::uint64_t token = 0;
  std::stop_token stop;
};

}  // namespace dlock
