// Reading, in tests, who listens for a mutex's or plain lock's release: dlock's waiters listen on
// their own call channels (locks::call_channel), one per client in the lock's wait line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "locks/names.hpp"

namespace dlock::test {

// The connections subscribed to the call channels of the clients in `name`'s wait line, asked
// with `run` (one command, as a vector of strings, on the server, or on the slot's master with
// `sharded` pub/sub; it returns dlock::reply or the fixtures' resp_value).
template <class Run>
std::int64_t line_listeners(const Run& run, std::string_view name, bool sharded = false) {
  const auto members =
      run(std::vector<std::string>{"ZRANGE", locks::wait_line_key(name), "0", "-1"});
  std::int64_t listeners = 0;
  for (const auto& m : members.elements) {
    const auto n = run(std::vector<std::string>{"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB",
                                                locks::call_channel(name, m.str)});
    if (n.elements.size() == 2) listeners += n.elements[1].integer;
  }
  return listeners;
}

}  // namespace dlock::test
