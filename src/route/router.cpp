#include "route/router.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "core/hash_slot.hpp"
#include "dlock/error.hpp"
#include "topology/slot_map.hpp"

namespace dlock::route {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A request follows at most this many MOVED/ASK replies: more means the map keeps changing
// under it (or a misconfigured cluster sends it in circles).
constexpr int max_redirections = 5;
// TRYAGAIN, CLUSTERDOWN and unreachable nodes: the first retry after this, doubling to
// retry_delay_cap, while the request's timeout allows.
constexpr milliseconds first_retry_delay{20};

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_noscript(std::error_code ec, const reply& r) {
  return ec == errc::server_error && starts_with(r.str, "NOSCRIPT");
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return equals_ignoring_case(name, n); });
}

}  // namespace

std::vector<std::string_view> keys_of(std::span<const std::string_view> args) {
  if (args.size() < 2) return {};
  const std::string_view name = args[0];
  if (is_one_of(name, {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})) {
    std::size_t count = 0;
    if (args.size() > 2) {
      for (const char c : args[2]) {
        if (c < '0' || c > '9') return {};
        count = std::min(count * 10 + static_cast<std::size_t>(c - '0'), args.size());
      }
    }
    const std::size_t end = std::min(args.size(), 3 + count);
    const auto first = static_cast<std::ptrdiff_t>(std::min<std::size_t>(3, end));
    return {args.begin() + first, args.begin() + static_cast<std::ptrdiff_t>(end)};
  }
  if (is_one_of(name,
                {"DEL", "UNLINK", "EXISTS", "TOUCH", "MGET", "WATCH", "SINTER", "SUNION", "SDIFF",
                 "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE", "PFCOUNT", "PFMERGE"})) {
    return {args.begin() + 1, args.end()};
  }
  if (is_one_of(name, {"MSET", "MSETNX"})) {
    std::vector<std::string_view> keys;
    for (std::size_t i = 1; i < args.size(); i += 2)
      keys.push_back(args[i]);
    return keys;
  }
  if (args.size() > 2 && is_one_of(name, {"RENAME", "RENAMENX", "COPY", "SMOVE", "LMOVE",
                                          "RPOPLPUSH", "BLMOVE", "BRPOPLPUSH"})) {
    return {args[1], args[2]};
  }
  return {args[1]};
}

// One request on its way through redirections and retries (cluster only).
struct router::request {
  std::vector<std::string> args;  // owned: sent again after a redirection
  std::string routing_key;
  bool any_master = false;
  std::shared_ptr<const std::string> script_source;  // set: an EVALSHA that may fall back to EVAL
  std::vector<std::string> wait_args;  // not empty: WAIT follows the script (a confirmation)
  std::error_code script_error;        // with WAIT: the script's outcome, kept for WAIT's reply
  reply script_reply;
  net::completion done;
  clock::time_point deadline;
  bool urgent = false;
  std::shared_ptr<resend_gate> gate;  // set: re-sends go out only while it is open
  bool asking = false;                // the current try follows an ASK
  int redirections = 0;
  int retries = 0;
  std::error_code last_error;
  reply last_reply;

  target to() const { return any_master ? target::any_master() : target::key(routing_key); }
  void finish(std::error_code ec, reply r) {
    if (done) std::exchange(done, nullptr)(ec, std::move(r));
  }
};

void router::check_same_slot(std::span<const std::string_view> keys) const {
  if (mode() != topology::mode::cluster || keys.size() < 2) return;
  const std::uint16_t first = core::hash_slot(keys.front());
  for (const std::string_view k : keys.subspan(1)) {
    const std::uint16_t slot = core::hash_slot(k);
    if (slot == first) continue;
    throw error(errc::invalid_argument,
                "the keys of one command must share a hash slot on a Redis Cluster: '" +
                    std::string(keys.front().substr(0, 64)) + "' is in slot " +
                    std::to_string(first) + ", '" + std::string(k.substr(0, 64)) + "' in slot " +
                    std::to_string(slot) + " (give them one {hash tag})");
  }
}

net::connection& router::connection_for(target to) {
  return to.is_any_master() ? servers_->any_master() : servers_->master_for(to.routing_key());
}

void router::send(target to, std::span<const std::string_view> args, net::completion done,
                  std::chrono::milliseconds timeout, const send_options& options) {
  if (mode() == topology::mode::single && !follows_failovers_ && !servers_->holding()) {
    connection_for(to).send(args, std::move(done), timeout, options.urgent, options.caller_does);
    return;
  }
  try {
    check_same_slot(keys_of(args));
  } catch (const error& e) {
    if (done) done(e.code(), reply::make_error(e.what()));
    return;
  }
  auto r = std::make_shared<request>();
  r->args.assign(args.begin(), args.end());
  r->routing_key = std::string(to.routing_key());
  r->any_master = to.is_any_master();
  r->done = std::move(done);
  r->deadline = clock::now() + timeout;
  r->urgent = options.urgent;
  r->gate = options.gate;
  start(r);
}

void router::start(const std::shared_ptr<request>& r) {
  // Keyed requests wait for the first server's answer (one server or a cluster?), so that on a
  // cluster they go to the slot's master at once instead of meeting MOVED at the seed.
  if (servers_->defer_until_known([this, r] { dispatch(r, connection_for(r->to()), false); })) {
    return;
  }
  dispatch(r, connection_for(r->to()), false);
}

namespace {

std::vector<std::string> wait_command(const confirmation& c) {
  if (c.replicas == 0) return {};
  return {"WAIT", std::to_string(c.replicas), std::to_string(c.timeout.count())};
}

// The reply a confirmed script completes with: [script reply, WAIT reply (an error too)].
reply confirmed(reply script_reply, std::error_code wait_error, reply wait_reply) {
  if (wait_error && !wait_reply.is_error()) {
    wait_reply = reply::make_error(wait_reply.str.empty() ? wait_error.message() : wait_reply.str);
  }
  return reply::make_array({std::move(script_reply), std::move(wait_reply)});
}

}  // namespace

void router::eval(target to, const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args, std::chrono::milliseconds timeout,
                  net::completion done, const send_options& options) {
  // A polling caller must hear of the completion wherever it comes from: the EVAL sent after
  // NOSCRIPT, or a request routed without taking a link's turn, completes on the I/O thread
  // (the connection wraps only what it is given, here the fallback).
  if (options.polled != nullptr && done) done = options.polled->signalling(std::move(done));
  const std::string numkeys = std::to_string(keys.size());
  if (mode() != topology::mode::single || follows_failovers_ || options.confirm.replicas > 0 ||
      servers_->holding()) {
    try {
      check_same_slot(keys);
    } catch (const error& e) {
      if (done) done(e.code(), reply::make_error(e.what()));
      return;
    }
    auto r = std::make_shared<request>();
    r->args.reserve(3 + keys.size() + args.size());
    r->args.emplace_back("EVALSHA");
    r->args.emplace_back(s.sha1());
    r->args.emplace_back(numkeys);
    r->args.insert(r->args.end(), keys.begin(), keys.end());
    r->args.insert(r->args.end(), args.begin(), args.end());
    r->routing_key = std::string(to.routing_key());
    r->any_master = to.is_any_master();
    r->script_source = s.shared_source();
    r->wait_args = wait_command(options.confirm);
    r->done = std::move(done);
    r->deadline = clock::now() + timeout;
    r->urgent = options.urgent;
    r->gate = options.gate;
    start(r);
    return;
  }

  // EVALSHA sha numkeys keys... args...; the fallback (EVAL source ...) needs the arguments after
  // this returns. They are kept in one buffer: two allocations per call, not one per argument.
  struct kept_command {
    std::string bytes;                    // numkeys, keys and args back to back
    std::vector<std::string_view> views;  // [command, sha1 or source, then into bytes]
  };
  auto kept = std::make_shared<kept_command>();
  std::size_t total = numkeys.size();
  for (const auto part : {keys, args}) {
    for (const std::string_view a : part)
      total += a.size();
  }
  kept->bytes.reserve(total);  // no reallocation below: the views point into it
  kept->views.reserve(3 + keys.size() + args.size());
  kept->views.emplace_back("EVALSHA");
  kept->views.emplace_back(s.sha1());  // replaced by the source before the fallback uses it
  const std::string_view numkeys_arg = numkeys;
  for (const auto part : {std::span<const std::string_view>(&numkeys_arg, 1), keys, args}) {
    for (const std::string_view a : part) {
      const std::size_t at = kept->bytes.size();
      kept->bytes.append(a);
      kept->views.emplace_back(kept->bytes.data() + at, a.size());
    }
  }
  // Connections live as long as the topology, which outlives every completion. The fallback
  // runs on any thread where `done` may (it only queues a command).
  net::connection& link = connection_for(to);
  auto fallback = [&link, kept, source = s.shared_source(), timeout, gate = options.gate,
                   done = std::move(done)](std::error_code ec, reply r) mutable {
    if (!is_noscript(ec, r)) {
      if (done) done(ec, std::move(r));
      return;
    }
    const resend_turn turn(gate.get());
    if (!turn.allowed()) {
      if (done) done(ec, std::move(r));
      return;
    }
    kept->views[0] = "EVAL";
    kept->views[1] = *source;
    link.send(kept->views, std::move(done), timeout);
  };
  link.send(kept->views, std::move(fallback), timeout, options.urgent, options.caller_does,
            options.polled);
}

void router::dispatch(const std::shared_ptr<request>& r, net::connection& link, bool asking) {
  const auto now = clock::now();
  if (now >= r->deadline) {
    if (r->last_error) return r->finish(r->last_error, std::move(r->last_reply));
    return r->finish(make_error_code(errc::timeout),
                     reply::make_error("no reply within the request timeout"));
  }
  const auto remaining = std::chrono::ceil<milliseconds>(r->deadline - now);
  r->asking = asking;
  std::vector<std::string_view> views(r->args.begin(), r->args.end());
  if (r->wait_args.empty()) {
    auto on_done = [this, r, &link](std::error_code ec, reply answer) {
      on_reply(r, link, ec, std::move(answer));
    };
    if (asking) {
      link.send_asking(views, std::move(on_done), remaining);
    } else {
      link.send(views, std::move(on_done), remaining, r->urgent);
    }
    return;
  }
  // Confirmed: the script's reply waits for WAIT's, queued right behind it on the same link (a
  // command of another caller in between only adds writes for WAIT to cover).
  auto keep = [r](std::error_code ec, reply answer) {
    r->script_error = ec;
    r->script_reply = std::move(answer);
  };
  if (asking) {
    link.send_asking(views, std::move(keep), remaining);
  } else {
    link.send(views, std::move(keep), remaining, r->urgent);
  }
  std::vector<std::string_view> wait(r->wait_args.begin(), r->wait_args.end());
  link.send(
      wait,
      [this, r, &link](std::error_code ec, reply answer) {
        if (r->script_error) {
          return on_reply(r, link, r->script_error, std::move(r->script_reply));
        }
        on_reply(r, link, {}, confirmed(std::move(r->script_reply), ec, std::move(answer)));
      },
      remaining);
}

void router::on_reply(const std::shared_ptr<request>& r, net::connection& link, std::error_code ec,
                      reply answer) {
  if (ec == errc::server_error) {
    if (is_noscript(ec, answer) && r->script_source && r->args[0] == "EVALSHA") {
      r->args[0] = "EVAL";
      r->args[1] = *r->script_source;
      r->script_source.reset();
      return resend(r, link, r->asking, ec, std::move(answer));
    }
    const server_address asked{link.current_address().host, link.current_address().port};
    if (const auto redirect = topology::parse_redirection(answer.str, asked)) {
      if (++r->redirections > max_redirections) return r->finish(ec, std::move(answer));
      if (redirect->type == topology::redirection::kind::moved) {
        moved_.fetch_add(1, std::memory_order_relaxed);
        servers_->moved(*redirect);
        return resend(r, servers_->node(redirect->target), false, ec, std::move(answer));
      }
      asked_.fetch_add(1, std::memory_order_relaxed);
      return resend(r, servers_->node(redirect->target), true, ec, std::move(answer));
    }
    const bool failover_reply = follows_failovers_ && (starts_with(answer.str, "READONLY") ||
                                                       starts_with(answer.str, "LOADING") ||
                                                       starts_with(answer.str, "MASTERDOWN"));
    if (starts_with(answer.str, "TRYAGAIN") || starts_with(answer.str, "CLUSTERDOWN") ||
        failover_reply) {
      if (!starts_with(answer.str, "TRYAGAIN")) servers_->refresh_soon();
      r->last_error = ec;
      r->last_reply = std::move(answer);
      return retry_later(r);
    }
  } else if ((ec == errc::connect_failed || ec == errc::connect_timeout) &&
             (mode() == topology::mode::cluster || follows_failovers_) &&
             servers_->connect_may_succeed_soon()) {
    // Never written: safe to send again, to whoever serves the slot by then.
    servers_->refresh_soon();
    r->last_error = ec;
    r->last_reply = std::move(answer);
    return retry_later(r);
  }
  r->finish(ec, std::move(answer));
}

routing_metrics router::metrics() const noexcept {
  routing_metrics m;
  switch (servers_->mode()) {
    case topology::mode::unknown:
      m.deployment = deployment_kind::unknown;
      break;
    case topology::mode::single:
      m.deployment = deployment_kind::single;
      break;
    case topology::mode::cluster:
      m.deployment = deployment_kind::cluster;
      break;
  }
  m.moved = moved_.load(std::memory_order_relaxed);
  m.asked = asked_.load(std::memory_order_relaxed);
  m.retries = retries_.load(std::memory_order_relaxed);
  m.map_refreshes = servers_->map_refreshes();
  return m;
}

void router::retry_later(const std::shared_ptr<request>& r) {
  const milliseconds delay =
      std::min(first_retry_delay * (1 << std::min(r->retries++, 8)), retry_delay_cap);
  if (clock::now() + delay >= r->deadline) {
    return r->finish(r->last_error, std::move(r->last_reply));
  }
  retries_.fetch_add(1, std::memory_order_relaxed);
  // Each try starts from the slot's owner with the whole redirection budget: a slot being
  // migrated answers every try with ASK and then TRYAGAIN (a multi-key script whose keys are not
  // all on the target yet), and counting those hops across tries ended the request after five
  // tries with the raw ASK error, long before its deadline. max_redirections bounds a loop within
  // one try; the deadline bounds the tries.
  r->redirections = 0;
  auto timer = std::make_shared<asio::steady_timer>(io_, delay);
  timer->async_wait([this, r, timer](std::error_code) {
    resend(r, connection_for(r->to()), false, r->last_error, r->last_reply);
  });
}

void router::resend(const std::shared_ptr<request>& r, net::connection& link, bool asking,
                    std::error_code ec, reply answer) {
  const resend_turn turn(r->gate.get());
  if (!turn.allowed()) return r->finish(ec, std::move(answer));
  dispatch(r, link, asking);
}

}  // namespace dlock::route
