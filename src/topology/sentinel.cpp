#include "topology/sentinel.hpp"

#include <utility>

#include "core/log_sink.hpp"
#include "dlock/error.hpp"

namespace dlock::topology {
namespace {

// Every sentinel announces a switch within about a second of the others; Sentinel does not fail
// the same master over again within twice its failover-timeout (3 min by default).
constexpr std::chrono::seconds duplicate_window{3};
// A sentinel link subscribed again: how often its sentinel is asked where the master is, when it
// does not answer (its command link may still be on its way back).
constexpr int check_tries = 3;

std::shared_ptr<const client_options> aimed_at(const client_options& base, std::string host,
                                               std::uint16_t port) {
  auto o = std::make_shared<client_options>(base);
  o->host = std::move(host);
  o->port = port;
  o->more_hosts.clear();
  o->unix_path.clear();
  return o;
}

// The sentinels' own connection settings: their user and password, no database.
std::shared_ptr<const client_options> sentinel_at(const client_options& base,
                                                  const server_address& a) {
  auto o = std::make_shared<client_options>(base);
  o->host = a.host;
  o->port = a.port;
  o->more_hosts.clear();
  o->username = base.sentinel.username;
  o->password = base.sentinel.password;
  o->database = 0;
  return o;
}

}  // namespace

// One search for the master: the sentinels are asked one after another.
struct sentinel::resolution {
  net::connection::address_callback done;
  std::size_t first = 0;          // the sentinel asked first
  std::size_t next = 0;           // how many were asked
  bool some_do_not_know = false;  // a sentinel answered that it monitors no such master
  bool all_do_not_know = true;    // every sentinel asked said so
  bool only_tls_failures = true;  // every sentinel asked failed the TLS handshake
  std::string failures;           // what the others said, for the error message
};

sentinel::sentinel(asio::io_context& io, const client_options& options,
                   std::shared_ptr<asio::ssl::context> tls_context,
                   std::vector<std::string_view> preload_scripts)
    : io_(io), options_(options), tls_context_(std::move(tls_context)) {
  for (const server_address& a : options.addresses()) {
    sentinel_options_.push_back(sentinel_at(options, a));
    sentinels_.push_back(
        std::make_shared<net::connection>(io, *sentinel_options_.back(), tls_context_));
  }
  // Connections are stopped before this topology goes (stop()), so `this` outlives handlers.
  auto provider = [this](net::connection::address_callback done) { resolve(std::move(done)); };
  master_ = std::make_shared<net::connection>(io, options, tls_context_);
  master_->set_preload_scripts(std::move(preload_scripts));
  master_->set_address_provider(provider);
  master_->set_handshake_probe({"ROLE"}, [this](const reply& r) -> std::string {
    if (r.is_array() && !r.elements.empty() && r.elements[0].str == "master") return {};
    const std::string role = r.is_array() && !r.elements.empty() ? r.elements[0].str : r.str;
    first_asked_ = (last_answered_ + 1) % sentinels_.size();  // ask another one first next time
    return "the sentinels named " + master_->endpoint() + " as master '" +
           options_.sentinel.master_name + "', but its ROLE is '" + role +
           "' (a stale answer during a failover); asking again";
  });
  master_->set_link_handler([this](bool up) {
    if (link_listener_) link_listener_(up);
  });

  const std::shared_ptr<const client_options> data_options(std::shared_ptr<void>(), &options_);
  subscriber_ = std::make_shared<pubsub::subscriber>(
      io, tls_context_, pubsub::subscriber::flavour::classic,
      [master = pubsub::node_ref{"master", data_options, {}, provider}](std::string_view) {
        return master;
      });
  // +switch-master from every sentinel, not from one: the one listened to may hang (its TCP
  // link open, so nothing tells the client for seconds) while the others switch the master, and
  // a client still writing to the old master when it comes back would take locks there that the
  // new master's holders hold too. Each switch then arrives once per sentinel (see last_switch_).
  // A switch announced while a link was down is lost: each time it is subscribed (again), that
  // sentinel is asked where the master is (check_master).
  for (std::size_t index = 0; index < sentinel_options_.size(); ++index) {
    const auto& sentinel_options = sentinel_options_[index];
    auto announcements = std::make_shared<pubsub::subscriber>(
        io, tls_context_, pubsub::subscriber::flavour::classic,
        [s = pubsub::node_ref{sentinel_options->endpoint(), sentinel_options, {}, {}}](
            std::string_view) { return s; });
    const std::uint64_t id = announcements->add(
        "+switch-master", {[this](std::string_view payload) { on_switch_message(payload); },
                           [this, index] { check_master(index, check_tries); }});
    switch_subscriptions_.push_back(pubsub::make_subscription(*announcements, id));
    announcements_.push_back(std::move(announcements));
  }

  for (const auto& s : sentinels_)
    s->start();
  master_->start();
}

sentinel::~sentinel() {
  stop();
}

void sentinel::stop() {
  if (stopped_.exchange(true)) return;
  master_->stop();
  subscriber_->stop();
  for (const auto& announcements : announcements_)
    announcements->stop();
  for (const auto& s : sentinels_)
    s->stop();
}

void sentinel::resolve(net::connection::address_callback done) {
  auto r = std::make_shared<resolution>();
  r->done = std::move(done);
  r->first = first_asked_;
  ask(r);
}

void sentinel::ask(const std::shared_ptr<resolution>& r) {
  if (r->next >= sentinels_.size()) {
    const std::string name = "'" + options_.sentinel.master_name + "'";
    std::string detail = r->some_do_not_know ? "no sentinel knows a master named " + name
                                             : "no sentinel answered where master " + name + " is";
    // A wrong CA or name fails every sentinel alike: say so with the code a server would give.
    const errc code = r->only_tls_failures ? errc::tls_failed : errc::connect_failed;
    nobody_knows_master_.store(r->all_do_not_know, std::memory_order_relaxed);
    r->done(make_error_code(code), detail + " (" + r->failures + ")", nullptr);
    return;
  }
  const std::size_t index = (r->first + r->next++) % sentinels_.size();
  net::connection& link = *sentinels_[index];
  const std::string_view args[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                   options_.sentinel.master_name};
  // Each sentinel gets its share of the connect timeout, so a hung one leaves time for the rest.
  const auto share = std::max(options_.connect_timeout / static_cast<int>(sentinels_.size()),
                              std::chrono::milliseconds(100));
  link.send(
      args,
      [this, r, index](std::error_code ec, reply answer) {
        const std::string who = sentinel_options_[index]->endpoint();
        if (!ec && answer.is_array() && answer.elements.size() == 2 &&
            answer.elements[0].is_string()) {
          try {
            const int port = std::stoi(answer.elements[1].str);
            if (port > 0 && port < 65536) {
              last_answered_ = index;
              resolved_ = true;
              nobody_knows_master_.store(false, std::memory_order_relaxed);
              r->done({}, {},
                      aimed_at(options_, answer.elements[0].str, static_cast<std::uint16_t>(port)));
              return;
            }
          } catch (const std::exception&) {
            // Not a port: a malformed answer, counted below.
          }
        }
        if (ec != errc::tls_failed) r->only_tls_failures = false;
        if (!ec && answer.is_nil()) {
          r->some_do_not_know = true;
          r->failures += (r->failures.empty() ? "" : "; ") + who + ": unknown master";
        } else {
          r->all_do_not_know = false;
          r->failures += (r->failures.empty() ? "" : "; ") + who + ": " +
                         (ec ? answer.str.empty() ? ec.message() : answer.str
                             : "unexpected answer " + to_string(answer));
        }
        ask(r);
      },
      share);
}

void sentinel::on_switch_message(std::string_view payload) {
  // "<master name> <old ip> <old port> <new ip> <new port>"
  const auto space = payload.find(' ');
  if (payload.substr(0, space) != options_.sentinel.master_name) return;
  // The same switch from another sentinel: followed already, if it came within a few seconds or
  // the master link is at the announced address by now. Otherwise the same words are a switch
  // back and forth again (a failover between them that the client missed).
  const auto now = std::chrono::steady_clock::now();
  if (payload == last_switch_ &&
      (now - last_switch_at_ < duplicate_window || master_is_at(payload))) {
    return;
  }
  last_switch_ = std::string(payload);
  last_switch_at_ = now;
  switches_seen_.fetch_add(1, std::memory_order_relaxed);
  if (options_.on_log) {
    core::log_sink(options_.on_log)
        .emit(log_level::warning, "master switched",
              {{"master", options_.sentinel.master_name},
               {"switch", std::string(payload.substr(space + 1))}});
  }
  follow("the sentinels switched master '" + options_.sentinel.master_name +
         "': " + std::string(payload.substr(space + 1)));
}

// A sentinel named another master than the master link's after its link subscribed again: the
// others are asked too, and the client follows only when most of the sentinels name that one.
struct sentinel::master_check {
  std::string host;
  std::string port;
  std::size_t named_by = 0;  // the sentinel that named it first
  std::size_t waiting = 0;   // answers still due
  std::size_t agree = 0;     // sentinels that name it
};

namespace {

// "host" and "port" of a GET-MASTER-ADDR-BY-NAME answer; false for anything else.
bool read_address(std::error_code ec, const reply& answer, std::string& host, std::string& port) {
  if (ec || !answer.is_array() || answer.elements.size() != 2) return false;
  host = answer.elements[0].str;
  port = answer.elements[1].str;
  return true;
}

}  // namespace

void sentinel::check_master(std::size_t index, int tries_left) {
  // Before the master link has an address from the sentinels, its resolution asks them anyway.
  if (stopped_ || !resolved_) return;
  const std::string_view args[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                   options_.sentinel.master_name};
  sentinels_[index]->send(
      args,
      [this, index, tries_left](std::error_code ec, const reply& answer) {
        if (stopped_) return;
        auto check = std::make_shared<master_check>();
        if (!read_address(ec, answer, check->host, check->port)) {
          if (tries_left <= 1 || !ec) return;  // a sentinel that knows no such master: nothing
          auto timer = std::make_shared<asio::steady_timer>(io_, options_.reconnect_delay_max);
          timer->async_wait([this, index, tries_left, timer](std::error_code) {
            check_master(index, tries_left - 1);
          });
          return;
        }
        const client_options& at = master_->current_address();
        if (check->host == at.host && check->port == std::to_string(at.port)) return;
        check->named_by = index;
        confirm_master(check);
      },
      options_.connect_timeout);
}

void sentinel::confirm_master(const std::shared_ptr<master_check>& check) {
  // Every sentinel but the one that named it; a sentinel that does not answer does not agree.
  check->agree = 1;
  check->waiting = sentinels_.size() - 1;
  const auto decide = [this, check] {
    if (check->waiting > 0 || stopped_) return;
    const std::string named = check->host + ":" + check->port;
    // Most of them, as Sentinel itself needs most of them to fail a master over.
    if (check->agree < sentinels_.size() / 2 + 1) {
      if (options_.on_log) {
        core::log_sink(options_.on_log)
            .emit(log_level::info, "master switch not confirmed",
                  {{"master", options_.sentinel.master_name},
                   {"sentinel", sentinel_options_[check->named_by]->endpoint()},
                   {"named", named},
                   {"agree", std::to_string(check->agree)}});
      }
      return;
    }
    if (options_.on_log) {
      core::log_sink(options_.on_log)
          .emit(log_level::warning, "master switch missed",
                {{"master", options_.sentinel.master_name},
                 {"sentinel", sentinel_options_[check->named_by]->endpoint()},
                 {"named", named}});
    }
    first_asked_ = check->named_by;  // the reconnect asks a sentinel that names it first
    follow(std::to_string(check->agree) + " of " + std::to_string(sentinels_.size()) +
           " sentinels name " + named + " as master '" + options_.sentinel.master_name +
           "' (a switch announced while the client's link to them was down)");
  };
  if (check->waiting == 0) return decide();
  const std::string_view args[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                   options_.sentinel.master_name};
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (i == check->named_by) continue;
    sentinels_[i]->send(
        args,
        [check, decide](std::error_code ec, const reply& answer) {
          std::string host;
          std::string port;
          if (read_address(ec, answer, host, port) && host == check->host && port == check->port) {
            ++check->agree;
          }
          --check->waiting;
          decide();
        },
        options_.connect_timeout);
  }
}

bool sentinel::master_is_at(std::string_view payload) const {
  // The announcement's last two words: the new master's ip and port.
  const auto port_at = payload.rfind(' ');
  if (port_at == std::string_view::npos || port_at == 0) return false;
  const auto host_at = payload.rfind(' ', port_at - 1);
  if (host_at == std::string_view::npos) return false;
  const client_options& address = master_->current_address();
  return payload.substr(host_at + 1, port_at - host_at - 1) == address.host &&
         payload.substr(port_at + 1) == std::to_string(address.port);
}

void sentinel::refresh_soon() {
  // A READONLY reply or an unreachable master: ask the sentinels again, once for many replies.
  if (follow_pending_.exchange(true)) return;
  asio::post(io_, [this] {
    follow_pending_ = false;
    if (options_.on_log) {
      core::log_sink(options_.on_log)
          .emit(log_level::info, "master re-resolved", {{"master", options_.sentinel.master_name}});
    }
    follow("the master refused a write or cannot be reached");
  });
}

void sentinel::follow(const std::string& why) {
  if (stopped_) return;
  master_->reconnect(why);
  subscriber_->reconnect(why);
}

}  // namespace dlock::topology
