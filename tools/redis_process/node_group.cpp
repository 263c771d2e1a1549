#include "node_group.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "unique_fd.hpp"

namespace dlock::tools::group {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr unsigned highest_port = 65535;

// Ports a node may take without meeting an outgoing connection's local port: below the ephemeral
// range, with room for the companion port, if the range leaves room for that.
std::pair<unsigned, unsigned> port_band(unsigned companion_offset) {
  unsigned ephemeral_low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned low = 0;
  unsigned high = 0;
  if (range >> low >> high && low > 0) ephemeral_low = low;
  constexpr unsigned band_low = 10000;
  constexpr unsigned min_band = 1000;
  if (ephemeral_low > band_low + companion_offset + min_band) {
    return {band_low, ephemeral_low - companion_offset};
  }
  return {1024, highest_port - companion_offset + 1};
}

// Binds 127.0.0.1:port (no SO_REUSEADDR: a port in TIME_WAIT or merely bound by someone else is
// refused too). The socket stays open so that the port stays ours while more are picked.
unique_fd bind_probe(unsigned port) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fd;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    fd.reset();
  }
  return fd;
}

}  // namespace

std::string loopback_address(std::uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

std::string join_words(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return joined;
}

std::string info_field(std::string_view text, std::string_view field) {
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return std::string(line.substr(field.size() + 1));
    }
    begin = end + 1;
  }
  return {};
}

std::vector<std::uint16_t> pick_ports(std::string_view who, std::size_t count,
                                      const std::set<unsigned>& avoid, unsigned companion_offset) {
  const auto [low, high] = port_band(companion_offset);
  std::random_device seed;
  std::mt19937 random(seed());
  std::uniform_int_distribution<unsigned> pick(low, high - 1);
  std::vector<unique_fd> held;
  std::set<unsigned> taken = avoid;
  std::vector<std::uint16_t> ports;
  for (int tries = 0; ports.size() < count; ++tries) {
    if (tries > 10000) {
      throw std::runtime_error(std::string(who) + "no free port found" +
                               (companion_offset > 0 ? " with a free companion port" : ""));
    }
    const unsigned port = pick(random);
    if (taken.contains(port)) continue;
    if (companion_offset > 0 && taken.contains(port + companion_offset)) continue;
    unique_fd probe = bind_probe(port);
    if (!probe.valid()) continue;
    if (companion_offset > 0) {
      unique_fd companion = bind_probe(port + companion_offset);
      if (!companion.valid()) continue;
      taken.insert(port + companion_offset);
      held.push_back(std::move(companion));
    }
    taken.insert(port);
    held.push_back(std::move(probe));
    ports.push_back(static_cast<std::uint16_t>(port));
  }
  return ports;
}

void wait_until(std::string_view who, const std::string& what, clock_type::time_point deadline,
                std::chrono::milliseconds poll,
                const std::function<std::string()>& problem_or_empty) {
  const auto began = clock_type::now();
  for (;;) {
    const std::string wrong = problem_or_empty();
    if (wrong.empty()) return;
    if (clock_type::now() >= deadline) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - began);
      std::string message(who);
      message.append("waited ").append(std::to_string(waited.count())).append(" ms for ");
      message.append(what).append("; still: ").append(wrong);
      throw std::runtime_error(message);
    }
    std::this_thread::sleep_for(std::min<clock_type::duration>(poll, deadline - clock_type::now()));
  }
}

}  // namespace dlock::tools::group
