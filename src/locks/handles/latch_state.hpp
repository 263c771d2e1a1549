// src/locks/handles/latch_state.hpp
//
// What a dlock::count_down_latch holds, opaque to users: the client's lock engine (for its way
// out to Redis and its lifetime, see engine_io.hpp), the latch's scripts and its name.
#pragma once

#include <memory>
#include <string>

#include "dlock/count_down_latch.hpp"
#include "locks/engine/lock_engine.hpp"
#include "locks/types/latch_protocol.hpp"

namespace dlock {

class count_down_latch::impl {
 public:
  impl(std::shared_ptr<locks::lock_engine> e, const locks::latch_protocol& p, std::string n)
      : engine(std::move(e)), protocol(p), name(std::move(n)) {}
  const std::shared_ptr<locks::lock_engine> engine;
  const locks::latch_protocol& protocol;
  const std::string name;
};

}  // namespace dlock
