#include "route/router.hpp"

#include <memory>
#include <string>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::route {
namespace {

bool is_noscript(std::error_code ec, const reply& r) {
  return ec == errc::server_error && r.str.compare(0, 8, "NOSCRIPT") == 0;
}

}  // namespace

net::connection& router::connection_for(target to) {
  return to.is_any_master() ? servers_->any_master() : servers_->master_for(to.routing_key());
}

void router::send(target to, std::span<const std::string_view> args, net::completion done,
                  std::chrono::milliseconds timeout, bool urgent) {
  connection_for(to).send(args, std::move(done), timeout, urgent);
}

void router::eval(target to, const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args, std::chrono::milliseconds timeout,
                  net::completion done, bool urgent) {
  // EVALSHA sha numkeys keys... args...; the fallback needs the arguments after this returns.
  auto owned = std::make_shared<std::vector<std::string>>();
  owned->reserve(3 + keys.size() + args.size());
  owned->emplace_back("EVALSHA");
  owned->emplace_back(s.sha1());
  owned->emplace_back(std::to_string(keys.size()));
  owned->insert(owned->end(), keys.begin(), keys.end());
  owned->insert(owned->end(), args.begin(), args.end());
  std::vector<std::string_view> views(owned->begin(), owned->end());

  net::connection& link = connection_for(to);
  auto fallback = [&link, owned, source = s.source(), timeout, done = std::move(done)](
                      std::error_code ec, reply r) mutable {
    if (!is_noscript(ec, r)) {
      if (done) done(ec, std::move(r));
      return;
    }
    (*owned)[0] = "EVAL";
    (*owned)[1] = std::move(source);
    std::vector<std::string_view> retry(owned->begin(), owned->end());
    link.send(retry, std::move(done), timeout);
  };
  link.send(views, std::move(fallback), timeout, urgent);
}

}  // namespace dlock::route
