// src/topology/slot_map.hpp
//
// Which master serves each of a Redis Cluster's 16384 slots, read from CLUSTER SHARDS (Redis 7)
// or CLUSTER SLOTS (older servers), and the parsing of MOVED/ASK redirections. Pure data and
// parsing, no I/O: unit-tested with canned replies.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/hash_slot.hpp"
#include "dlock/options.hpp"
#include "dlock/reply.hpp"

namespace dlock::topology {

class slot_map {
 public:
  static constexpr std::int32_t no_owner = -1;

  // Parses a CLUSTER SHARDS reply. `asked` is the node that answered (a node whose endpoint is
  // unknown, "?" or empty, is that node); `tls`: use each node's tls-port when it has one.
  // Throws dlock::error(errc::protocol_error) for a reply that is not a shard list.
  static slot_map from_shards(const reply& r, const server_address& asked, bool tls);
  // The same from a CLUSTER SLOTS reply.
  static slot_map from_slots(const reply& r, const server_address& asked);

  // The masters, each once, in the order first seen.
  const std::vector<server_address>& masters() const noexcept { return masters_; }
  // The index in masters() of the master serving `slot`, or no_owner.
  std::int32_t owner_of(std::uint16_t slot) const noexcept { return owners_[slot]; }
  // How many slots have an owner (16384 when the cluster is fully covered).
  std::size_t covered_slots() const noexcept;

  // Makes `address` the owner of `slot` (a MOVED reply said so), adding it as a master if new.
  void assign(std::uint16_t slot, const server_address& address);

  friend bool operator==(const slot_map&, const slot_map&) = default;

 private:
  std::int32_t index_of(const server_address& address);
  void assign_range(std::int64_t first, std::int64_t last, std::int32_t owner);

  std::vector<server_address> masters_;
  std::array<std::int32_t, core::cluster_slots> owners_ = make_empty();

  static std::array<std::int32_t, core::cluster_slots> make_empty() {
    std::array<std::int32_t, core::cluster_slots> a{};
    a.fill(no_owner);
    return a;
  }
};

// A redirection reply: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
struct redirection {
  enum class kind { moved, ask };
  kind type = kind::moved;
  std::uint16_t slot = 0;
  server_address target;
};

// The redirection an error reply carries, if it is one. An empty host ("MOVED 3999 :6380",
// sent by a node whose endpoint is unknown) is `asked`'s host.
std::optional<redirection> parse_redirection(std::string_view error_text,
                                             const server_address& asked);

}  // namespace dlock::topology
