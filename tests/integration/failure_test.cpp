// Faults: killed, frozen, slow and silent servers, closed ports and malformed replies. Each must
// give a clear error, never a hang, and the client must recover by itself when the server does.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <iostream>
#include <optional>
#include <thread>

#include "dlock/client.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 500ms;

template <typename F>
std::error_code error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.code();
  }
  return {};
}

// Retries `c` until a command succeeds; returns how long that took. Each try either fails fast
// (waiting to reconnect) or succeeds, so this does not sleep-wait for a state we could observe.
steady_clock::duration time_to_recover(client& c, steady_clock::duration limit) {
  const auto start = steady_clock::now();
  while (steady_clock::now() - start < limit) {
    try {
      c.command({"PING"});
      return steady_clock::now() - start;
    } catch (const error&) {
      std::this_thread::sleep_for(5ms);  // pace the retries, not a synchronisation
    }
  }
  return steady_clock::duration::max();
}

TEST(Failure, ServerKilledMidStreamFailsInFlightRequestsThenRecovers) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.reconnect_delay_max = 200ms;
  client c{o};
  const std::string key = unique_key("k");
  ASSERT_EQ(c.command({"SET", key, "1"}).str, "OK");

  // Keep many requests in flight, kill the server with SIGKILL, and collect every outcome.
  constexpr int n = 20'000;
  std::vector<std::future<reply>> futures;
  futures.reserve(n);
  for (int i = 0; i < n; ++i) {
    futures.push_back(c.async_command({"INCR", key}));
    if (i == n / 4) server.kill(SIGKILL);
  }
  int ok = 0, lost = 0, unreachable = 0, other = 0;
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "a request hung";
    const std::error_code ec = error_of([&] { f.get(); });
    if (!ec) {
      ++ok;
    } else if (ec == errc::connection_lost) {
      ++lost;
    } else if (ec == errc::connect_failed || ec == errc::connect_timeout) {
      ++unreachable;
    } else {
      ++other;
    }
  }
  EXPECT_EQ(ok + lost + unreachable, n);
  EXPECT_EQ(other, 0);
  EXPECT_GT(lost + unreachable, 0) << "the kill happened after every request completed";

  server.start();
  const auto took = time_to_recover(c, 10s);
  std::cout << "recovered " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the restart\n";
  EXPECT_LT(took, o.reconnect_delay_max + timing_slack);
  EXPECT_EQ(c.command({"SET", key, "2"}).str, "OK");
  EXPECT_EQ(c.command({"GET", key}).str, "2");
}

TEST(Failure, ClosedPortGivesConnectFailedWithinTheConnectTimeout) {
  client_options o;
  o.port = tools::find_free_port();  // nobody listens there
  o.connect_timeout = 1s;
  client c{o};
  const auto start = steady_clock::now();
  const std::error_code ec = error_of([&] { c.command({"PING"}); });
  EXPECT_EQ(ec, errc::connect_failed);
  EXPECT_LT(steady_clock::now() - start, o.connect_timeout + timing_slack);
  // A request while it waits to reconnect brings the next attempt forward (at most
  // reconnect_delay_min later) rather than waiting out the backoff, and fails with its error.
  const auto again = steady_clock::now();
  EXPECT_EQ(error_of([&] { c.command({"PING"}); }), errc::connect_failed);
  EXPECT_LT(steady_clock::now() - again, timing_slack);
}

// A listener that accepts TCP connections (the kernel completes the handshake) but never answers.
class silent_listener {
 public:
  silent_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0) {
      throw std::runtime_error("cannot listen");
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~silent_listener() { ::close(fd_); }
  int fd() const { return fd_; }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

TEST(Failure, SilentServerGivesConnectTimeout) {
  silent_listener silent;
  client_options o;
  o.port = silent.port();
  o.connect_timeout = 300ms;
  const auto start = steady_clock::now();  // the client starts connecting when constructed
  client c{o};
  EXPECT_EQ(error_of([&] { c.command({"PING"}); }), errc::connect_timeout);
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, o.connect_timeout);
  EXPECT_LT(took, o.connect_timeout + timing_slack);
}

// A keyed request waits for the first server's answer (one server or a cluster?). A client
// destroyed before it came still completes that request, with client_stopped: it was once
// left in the router's list and its handler never ran.
TEST(Failure, ARequestHeldForTheFirstAnswerCompletesWhenTheClientIsDestroyed) {
  silent_listener silent;
  client_options o;
  o.port = silent.port();
  o.connect_timeout = 10s;  // the answer, or the timeout, must not come first
  std::future<reply> held;
  {
    client c{o};
    held = c.async_command({"GET", "key"});
  }
  ASSERT_EQ(held.wait_for(timing_slack), std::future_status::ready)
      << "the request never completed";
  EXPECT_EQ(error_of([&] { held.get(); }), errc::client_stopped);
}

TEST(Failure, SlowCommandBeyondTheRequestTimeoutTimesOutAndLaterRepliesStayMatched) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.request_timeout = 200ms;
  client c{o};
  const auto start = steady_clock::now();
  auto sleeper = c.async_command({"DEBUG", "SLEEP", "1"});
  EXPECT_EQ(error_of([&] { sleeper.get(); }), errc::timeout);
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, o.request_timeout);
  EXPECT_LT(took, o.request_timeout + timing_slack);

  // The connection is kept; once the server wakes, the late "+OK" is dropped and this ECHO gets
  // its own reply, not the sleeper's.
  std::string echoed;
  for (int attempt = 0; attempt < 20 && echoed.empty(); ++attempt) {
    try {
      echoed = c.command({"ECHO", "mine"}).str;
    } catch (const error& e) {
      ASSERT_EQ(e.code(), errc::timeout);  // still asleep
    }
  }
  EXPECT_EQ(echoed, "mine");
}

TEST(Failure, FrozenServerIsDetectedByTheHealthCheckAndRecovered) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.health_check_interval = 200ms;
  o.request_timeout = 30s;  // only the health check can notice
  o.reconnect_delay_max = 200ms;
  client c{o};
  ASSERT_EQ(c.command({"PING"}).str, "PONG");

  server.kill(SIGSTOP);
  const auto start = steady_clock::now();
  auto stuck = c.async_command({"PING"});
  ASSERT_EQ(stuck.wait_for(5s), std::future_status::ready) << "health check did not fire";
  EXPECT_EQ(error_of([&] { stuck.get(); }), errc::connection_lost);
  // At most: one interval to send the PING, one more to give up, plus scheduling.
  EXPECT_LT(steady_clock::now() - start, 3 * o.health_check_interval + timing_slack);

  server.kill(SIGCONT);
  EXPECT_LT(time_to_recover(c, 10s), 2s + timing_slack);
}

// Takes the complete RESP commands (arrays of bulk strings) off the front of `buf`; returns the
// name of each.
std::vector<std::string> take_commands(std::string& buf) {
  std::vector<std::string> names;
  for (;;) {
    std::size_t pos = 0;
    auto line = [&]() -> std::optional<std::string> {
      const auto end = buf.find("\r\n", pos);
      if (end == std::string::npos) return std::nullopt;
      std::string l = buf.substr(pos, end - pos);
      pos = end + 2;
      return l;
    };
    const auto header = line();
    if (!header || header->empty() || (*header)[0] != '*') return names;
    const int count = std::stoi(header->substr(1));
    std::string name;
    for (int i = 0; i < count; ++i) {
      const auto len = line();
      if (!len) return names;
      const std::size_t n = std::stoul(len->substr(1));
      if (buf.size() < pos + n + 2) return names;
      if (i == 0) name = buf.substr(pos, n);
      pos += n + 2;
    }
    names.push_back(name);
    buf.erase(0, pos);
  }
}

TEST(Failure, MalformedReplyGivesProtocolErrorAndNoHang) {
  silent_listener fake;  // a peer that answers the handshake, then speaks garbage
  std::thread peer([&] {
    const int conn = ::accept(fake.fd(), nullptr, nullptr);
    std::string received;
    char buf[65536];
    for (bool done = false; !done;) {
      const ssize_t n = ::read(conn, buf, sizeof buf);
      if (n <= 0) break;
      received.append(buf, static_cast<std::size_t>(n));
      for (const std::string& name : take_commands(received)) {
        if (name == "PING") {
          (void)::write(conn, "?what is this\r\n", 15);  // not RESP
          done = true;
        } else {
          (void)::write(conn, "+OK\r\n", 5);  // the handshake
        }
      }
    }
    (void)::read(conn, buf, sizeof buf);  // wait for the client to hang up
    ::close(conn);
  });
  client_options o;
  o.port = fake.port();
  {
    client c{o};
    EXPECT_EQ(error_of([&] { c.command({"PING"}); }), errc::protocol_error);
  }
  peer.join();
}

TEST(Failure, DestroyingTheClientCompletesPendingRequestsWithClientStopped) {
  redis_server server;
  std::future<reply> pending;
  const auto start = steady_clock::now();
  {
    client c{server.url()};
    ASSERT_EQ(c.command({"PING"}).str, "PONG");
    pending = c.async_command({"DEBUG", "SLEEP", "2"});
  }
  EXPECT_LT(steady_clock::now() - start, 1s + timing_slack) << "destructor waited for the server";
  ASSERT_EQ(pending.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(error_of([&] { pending.get(); }), errc::client_stopped);
}

}  // namespace
}  // namespace dlock
