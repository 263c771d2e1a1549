// tools/redis_process/node_group.hpp
//
// What redis_cluster and redis_sentinel_group both need to run a group of private nodes: free
// loopback ports picked together, INFO fields, and a wait that polls a condition and says, when it
// gives up, what was still wrong. Internal to tools/redis_process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::tools::group {

// "127.0.0.1:<port>".
std::string loopback_address(std::uint16_t port);

// The words separated by single spaces (a command as logs and errors show it).
std::string join_words(const std::vector<std::string>& words);

// The value of `field` in INFO (or CLUSTER INFO) text, "" if absent.
std::string info_field(std::string_view text, std::string_view field);

// pick_ports()
//
// `count` distinct ports, each free on 127.0.0.1 when tested and none in `avoid`. With
// `companion_offset` > 0, port + companion_offset is free too and both stay clear of `avoid` (a
// cluster node's bus port). Ports come from below the ephemeral range when it leaves room, so
// that an outgoing connection's local port cannot take one; random starting points keep
// concurrent test processes apart (a collision anyway shows when the node starts). Throws
// std::runtime_error (prefixed with `who`) when none is found.
std::vector<std::uint16_t> pick_ports(std::string_view who, std::size_t count,
                                      const std::set<unsigned>& avoid,
                                      unsigned companion_offset = 0);

// wait_until()
//
// Calls `problem_or_empty` every `poll` until it returns "" (done) or `deadline` passes; then
// throws std::runtime_error "<who>waited N ms for <what>; still: <problem>".
void wait_until(std::string_view who, const std::string& what,
                std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds poll,
                const std::function<std::string()>& problem_or_empty);

}  // namespace dlock::tools::group
