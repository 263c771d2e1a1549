#include "dlock/options.hpp"

#include <charconv>

#include "dlock/error.hpp"

namespace dlock {
namespace {

[[noreturn]] void bad_url(std::string_view why) {
  throw error(errc::invalid_argument, "bad Redis URL: " + std::string(why));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) bad_url("truncated %-escape in " + std::string(what));
    const int hi = hex_value(s[i + 1]);
    const int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) bad_url("invalid %-escape in " + std::string(what));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

template <typename T>
T parse_number(std::string_view s, T min, T max, std::string_view what) {
  T value{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || value < min || value > max) {
    bad_url(std::string(what) + " '" + std::string(s) + "' is not a number in [" +
            std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

int parse_database(std::string_view s) {
  return parse_number<int>(s, 0, 1 << 20, "database");
}

void parse_userinfo(std::string_view userinfo, client_options& o) {
  const auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    // redis://secret@host is how many clients spell "password only".
    o.password = percent_decode(userinfo, "password");
    return;
  }
  o.username = percent_decode(userinfo.substr(0, colon), "user name");
  o.password = percent_decode(userinfo.substr(colon + 1), "password");
}

// Parses "?db=N&sentinel_password=..." (sentinel_password only for the sentinel schemes).
void parse_query(std::string_view query, client_options& o) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (key == "db") {
      o.database = parse_database(value);
    } else if (key == "min_replicas") {
      o.locks.min_replicas = parse_number<std::uint32_t>(value, 0, 1000, "min_replicas");
    } else if (key == "replica_timeout") {
      o.locks.replica_timeout = std::chrono::milliseconds(
          parse_number<std::int64_t>(value, 1, 3600000, "replica_timeout"));
    } else if (key == "fair_wait_timeout") {
      o.locks.fair_wait_timeout = std::chrono::milliseconds(
          parse_number<std::int64_t>(value, 1, 86400000, "fair_wait_timeout"));
    } else if (key == "sentinel_password" && !o.sentinel.master_name.empty()) {
      o.sentinel.password = percent_decode(value, "sentinel_password");
    } else {
      bad_url("unknown query parameter '" + std::string(key) + "'");
    }
  }
}

// "host[:port]" or "[v6]:port".
server_address parse_host_port(std::string_view authority) {
  server_address address;
  address.port = 0;  // not given: the caller's default
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) bad_url("unterminated IPv6 address");
    address.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url("junk after IPv6 address");
      port = after.substr(1);
      if (port.empty()) bad_url("empty port");
    }
  } else {
    const auto colon = authority.find(':');
    address.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) bad_url("empty port");
    }
  }
  if (address.host.empty()) bad_url("missing host");
  if (!port.empty()) address.port = parse_number<std::uint16_t>(port, 1, 65535, "port");
  return address;
}

}  // namespace

client_options client_options::from_url(std::string_view url) {
  client_options o;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    bad_url(
        "missing scheme (redis://, rediss://, redis-sentinel://, rediss-sentinel:// or unix://)");
  const std::string_view scheme = url.substr(0, scheme_end);
  std::string_view rest = url.substr(scheme_end + 3);

  if (scheme == "redis-sentinel" || scheme == "rediss-sentinel") {
    const auto hash = rest.find('#');
    if (hash == std::string_view::npos || hash + 1 == rest.size()) {
      bad_url("a sentinel URL names its master after '#' (redis-sentinel://host:26379#mymaster)");
    }
    o.sentinel.master_name = percent_decode(rest.substr(hash + 1), "master name");
    rest = rest.substr(0, hash);
  } else if (rest.find('#') != std::string_view::npos) {
    bad_url("'#' (a master name) only goes with redis-sentinel:// or rediss-sentinel://");
  }

  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }

  if (scheme == "unix") {
    if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
      parse_userinfo(rest.substr(0, at), o);
      rest = rest.substr(at + 1);
    }
    if (rest.empty() || rest.front() != '/') bad_url("unix:// needs an absolute socket path");
    o.unix_path = std::string(rest);
    parse_query(query, o);
    return o;
  }
  const bool sentinel = !o.sentinel.master_name.empty();
  if (scheme == "rediss" || scheme == "rediss-sentinel") {
    o.tls.enabled = true;
  } else if (scheme != "redis" && scheme != "redis-sentinel") {
    bad_url("unknown scheme '" + std::string(scheme) + "'");
  }

  std::string_view authority = rest;
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    parse_userinfo(authority.substr(0, at), o);
    authority = authority.substr(at + 1);
  }

  if (authority.empty()) bad_url("missing host");
  bool first = true;
  while (true) {
    const auto comma = authority.find(',');
    server_address address = parse_host_port(authority.substr(0, comma));
    if (address.port == 0) address.port = sentinel ? 26379 : 6379;
    if (first) {
      o.host = address.host;
      o.port = address.port;
      first = false;
    } else {
      o.more_hosts.push_back(address);
    }
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  if (!path.empty()) o.database = parse_database(path);
  parse_query(query, o);
  return o;
}

std::vector<server_address> client_options::addresses() const {
  std::vector<server_address> all{{host, port}};
  all.insert(all.end(), more_hosts.begin(), more_hosts.end());
  return all;
}

std::string client_options::endpoint() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace dlock
