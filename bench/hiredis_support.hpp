// bench/hiredis_support.hpp
//
// hiredis (a plain synchronous C client; Debian libhiredis-dev, bench only) for the baselines and
// floors the benchmarks measure dlock against: connecting, one command, the PING round trip.
#pragma once

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/options.hpp"

namespace dlock::bench {

struct redis_endpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
};

inline redis_endpoint endpoint_of(const std::string& url) {
  const dlock::client_options o = dlock::client_options::from_url(url);
  return {o.host, o.port};
}

struct hiredis_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using hiredis_context = std::unique_ptr<redisContext, hiredis_deleter>;
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using hiredis_reply = std::unique_ptr<redisReply, reply_deleter>;

inline hiredis_context connect_hiredis(const redis_endpoint& at) {
  hiredis_context c(redisConnect(at.host.c_str(), at.port));
  if (!c || c->err) {
    throw std::runtime_error("hiredis: cannot connect to " + at.host + ":" +
                             std::to_string(at.port) + (c ? std::string(": ") + c->errstr : ""));
  }
  return c;
}

inline hiredis_reply run(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data()));
  if (r == nullptr) throw std::runtime_error(std::string("hiredis: ") + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) {
    std::string text(r->str, r->len);
    freeReplyObject(r);
    throw std::runtime_error("redis: " + text);
  }
  return hiredis_reply(r);
}

inline double median_ping_us(const redis_endpoint& at, int pings) {
  hiredis_context c = connect_hiredis(at);
  std::vector<double> us;
  for (int i = 0; i < pings; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(c.get(), {"PING"});
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us.empty() ? 0 : us[us.size() / 2];
}

}  // namespace dlock::bench
