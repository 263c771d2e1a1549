// src/locks/types/latch_protocol.hpp
//
// The count-down latch's scripts and replies, with no I/O: Redisson's RCountDownLatch layout (the
// key N holds the count as a decimal string, no TTL; "0" on latch_channel(N) when it reaches zero,
// "1" for a new count or a delete). A latch holds nothing, so it is no lock_protocol: waiting is
// "re-read the count after every message on its channel" (src/locks/handles/count_down_latch.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "locks/engine/lock_protocol.hpp"

namespace dlock::locks {

class latch_protocol {
 public:
  latch_protocol();

  static constexpr std::string_view kind = "latch";

  // Each call's first key is the latch; scripts that publish name their channel second and take
  // the publish command as an argument (script_call::publish_command_arg).
  script_call count_down(std::string_view name) const;
  script_call try_set_count(std::string_view name, std::int64_t count) const;
  script_call remove(std::string_view name) const;
  script_call count(std::string_view name) const;

  // Each reader throws errc::wrong_type, naming what the key holds, when it is not a latch, and
  // errc::protocol_error for a reply the script cannot have sent.
  // The count left (0: reached zero; -1: there was no latch).
  std::int64_t read_count_down(std::string_view name, const reply& r) const;
  // Whether the count was set (false: a latch exists already).
  bool read_try_set_count(std::string_view name, const reply& r) const;
  // Whether there was a latch.
  bool read_remove(std::string_view name, const reply& r) const;
  // The count (0 when there is no latch) and whether the latch exists.
  struct count_read {
    std::int64_t count = 0;
    bool exists = false;
  };
  count_read read_count(std::string_view name, const reply& r) const;

  // The Lua sources every command connection loads when it connects.
  std::vector<std::string_view> scripts() const;

 private:
  script count_down_;
  script try_set_count_;
  script remove_;
  script count_;
};

}  // namespace dlock::locks
