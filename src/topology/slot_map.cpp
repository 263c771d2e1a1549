#include "topology/slot_map.hpp"

#include <algorithm>
#include <charconv>

#include "dlock/error.hpp"

namespace dlock::topology {
namespace {

[[noreturn]] void bad_reply(const std::string& what) {
  throw error(errc::protocol_error, "unexpected cluster map reply: " + what);
}

// The value of `field` in a flat [name, value, name, value...] array, or nullptr.
const reply* field(const reply& map, std::string_view name) {
  if (!map.is_array()) return nullptr;
  for (std::size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (map.elements[i].is_string() && map.elements[i].str == name) return &map.elements[i + 1];
  }
  return nullptr;
}

// A node's host: its announced endpoint, or the asked node's host when unknown.
std::string host_or_asked(std::string_view endpoint, const server_address& asked) {
  if (endpoint.empty() || endpoint == "?") return asked.host;
  return std::string(endpoint);
}

std::uint16_t to_port(std::int64_t value) {
  if (value <= 0 || value > 65535) bad_reply("port " + std::to_string(value));
  return static_cast<std::uint16_t>(value);
}

std::int64_t to_integer(const reply& r) {
  if (r.is_integer()) return r.integer;
  if (r.is_string()) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
    if (ec == std::errc{} && end == r.str.data() + r.str.size()) return v;
  }
  bad_reply("a number was expected");
}

}  // namespace

std::int32_t slot_map::index_of(const server_address& address) {
  const auto it = std::find(masters_.begin(), masters_.end(), address);
  if (it != masters_.end()) return static_cast<std::int32_t>(it - masters_.begin());
  masters_.push_back(address);
  return static_cast<std::int32_t>(masters_.size() - 1);
}

void slot_map::assign_range(std::int64_t first, std::int64_t last, std::int32_t owner) {
  if (first < 0 || last >= core::cluster_slots || first > last) {
    bad_reply("slot range " + std::to_string(first) + "-" + std::to_string(last));
  }
  for (std::int64_t s = first; s <= last; ++s)
    owners_[static_cast<std::size_t>(s)] = owner;
}

void slot_map::assign(std::uint16_t slot, const server_address& address) {
  owners_[slot % core::cluster_slots] = index_of(address);
}

std::size_t slot_map::covered_slots() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(owners_.begin(), owners_.end(), [](std::int32_t o) { return o != no_owner; }));
}

slot_map slot_map::from_shards(const reply& r, const server_address& asked, bool tls) {
  if (!r.is_array()) bad_reply("CLUSTER SHARDS did not return an array");
  slot_map map;
  for (const reply& shard : r.elements) {
    const reply* slots = field(shard, "slots");
    const reply* nodes = field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || !slots->is_array() || !nodes->is_array()) {
      bad_reply("a shard without slots or nodes");
    }
    if (slots->elements.empty()) continue;  // a shard that serves nothing (yet)
    const reply* master = nullptr;
    for (const reply& node : nodes->elements) {
      const reply* role = field(node, "role");
      if (role != nullptr && role->str == "master") master = &node;
    }
    if (master == nullptr) continue;  // no master known right now: those slots stay unowned
    const reply* endpoint = field(*master, "endpoint");
    const reply* ip = field(*master, "ip");
    const reply* port = tls ? field(*master, "tls-port") : nullptr;
    if (port == nullptr) port = field(*master, "port");
    if (port == nullptr) bad_reply("a master without a port");
    server_address address;
    address.host = host_or_asked(endpoint != nullptr && endpoint->is_string() ? endpoint->str
                                 : ip != nullptr                              ? ip->str
                                                                              : "",
                                 asked);
    address.port = to_port(to_integer(*port));
    const std::int32_t owner = map.index_of(address);
    if (slots->elements.size() % 2 != 0) bad_reply("an odd slot range list");
    for (std::size_t i = 0; i + 1 < slots->elements.size(); i += 2) {
      map.assign_range(to_integer(slots->elements[i]), to_integer(slots->elements[i + 1]), owner);
    }
  }
  return map;
}

slot_map slot_map::from_slots(const reply& r, const server_address& asked) {
  if (!r.is_array()) bad_reply("CLUSTER SLOTS did not return an array");
  slot_map map;
  for (const reply& range : r.elements) {
    if (!range.is_array() || range.elements.size() < 3 || !range.elements[2].is_array() ||
        range.elements[2].elements.size() < 2) {
      bad_reply("a slot range without a master");
    }
    const reply& master = range.elements[2];
    server_address address;
    address.host =
        host_or_asked(master.elements[0].is_string() ? master.elements[0].str : "", asked);
    address.port = to_port(to_integer(master.elements[1]));
    map.assign_range(to_integer(range.elements[0]), to_integer(range.elements[1]),
                     map.index_of(address));
  }
  return map;
}

std::optional<redirection> parse_redirection(std::string_view text, const server_address& asked) {
  redirection out;
  if (text.starts_with("MOVED ")) {
    out.type = redirection::kind::moved;
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    out.type = redirection::kind::ask;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const std::string_view slot_text = text.substr(0, space);
  const auto [end, ec] =
      std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
  if (ec != std::errc{} || end != slot_text.data() + slot_text.size() ||
      slot >= core::cluster_slots) {
    return std::nullopt;
  }
  out.slot = static_cast<std::uint16_t>(slot);
  const std::string_view where = text.substr(space + 1);
  const auto colon = where.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  const std::string_view port_text = where.substr(colon + 1);
  const auto [pend, pec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (pec != std::errc{} || pend != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return std::nullopt;
  }
  out.target.host = host.empty() ? asked.host : std::string(host);
  out.target.port = static_cast<std::uint16_t>(port);
  return out;
}

}  // namespace dlock::topology
