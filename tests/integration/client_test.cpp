// The client against a real redis-server: replies, ordering under concurrency, scripts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <atomic>
#include <functional>
#include <future>
#include <latch>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/embedded_scripts.hpp"
#include "support/command_stats.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using test::redis_server;
using test::unique_key;

class ClientTest : public ::testing::Test {
 protected:
  redis_server server;
  client c{server.url()};
};

// Sockets of this process that a started program would inherit.
int inheritable_sockets() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target.string().rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(entry.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) ++n;
  }
  return n;
}

TEST_F(ClientTest, ConnectionsAreNotInheritedByStartedPrograms) {
  const int before = inheritable_sockets();
  client other{server.url()};
  other.command({"PING"});
  std::promise<void> subscribed;
  auto sub = other.subscribe(
      "some-channel", [](std::string_view) {}, [&] { subscribed.set_value(); });
  ASSERT_EQ(subscribed.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(inheritable_sockets(), before) << "a Redis socket lacks FD_CLOEXEC";
}

TEST_F(ClientTest, RepliesOfEveryType) {
  const std::string key = unique_key("k");
  EXPECT_EQ(c.command({"SET", key, "v"}), reply::make_simple("OK"));
  EXPECT_EQ(c.command({"GET", key}), reply::make_bulk("v"));
  EXPECT_TRUE(c.command({"GET", unique_key("missing")}).is_nil());
  EXPECT_EQ(c.command({"INCR", unique_key("n")}), reply::make_integer(1));
  const std::string list = unique_key("list");
  c.command({"RPUSH", list, "a", "b"});
  EXPECT_EQ(c.command({"LRANGE", list, "0", "-1"}),
            reply::make_array({reply::make_bulk("a"), reply::make_bulk("b")}));
}

TEST_F(ClientTest, ErrorReplyThrowsServerErrorWithTheServersMessage) {
  const std::string key = unique_key("text");
  c.command({"SET", key, "abc"});
  try {
    c.command({"INCR", key});
    FAIL() << "INCR on text succeeded";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
    EXPECT_NE(std::string(e.what()).find("not an integer"), std::string::npos) << e.what();
  }
  // The connection is still usable and in step.
  EXPECT_EQ(c.command({"GET", key}), reply::make_bulk("abc"));
}

TEST_F(ClientTest, BinarySafeArguments) {
  const std::string key = unique_key(std::string("bin\0\r\n", 6));
  const std::string value("\0\r\n$3\r\n*\xff", 10);
  c.command({"SET", key, value});
  EXPECT_EQ(c.command({"GET", key}).str, value);
}

TEST_F(ClientTest, EmptyCommandIsRejectedBeforeAnyIo) {
  try {
    c.command(std::vector<std::string>{});
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

// Durations a client cannot work with are refused when it is made, naming the setting: before,
// milliseconds::max() overflowed the deadlines (every request failed at once as timed out) and
// zero reconnect delays retried a refused port in a busy loop.
TEST(ClientOptions, OutOfRangeDurationsAreRefusedWhenTheClientIsMade) {
  using std::chrono::milliseconds;
  static constexpr milliseconds huge = milliseconds::max();
  const std::vector<std::pair<std::string, std::function<void(client_options&)>>> bad = {
      {"connect_timeout", [](client_options& o) { o.connect_timeout = huge; }},
      {"connect_timeout", [](client_options& o) { o.connect_timeout = milliseconds(0); }},
      {"request_timeout", [](client_options& o) { o.request_timeout = huge; }},
      {"request_timeout", [](client_options& o) { o.request_timeout = milliseconds(-5); }},
      {"health_check_interval", [](client_options& o) { o.health_check_interval = huge; }},
      {"health_check_interval",
       [](client_options& o) { o.health_check_interval = milliseconds(-1); }},
      {"reconnect_delay_min", [](client_options& o) { o.reconnect_delay_min = milliseconds(0); }},
      {"reconnect_delay_max",
       [](client_options& o) {
         o.reconnect_delay_min = milliseconds(100);
         o.reconnect_delay_max = milliseconds(50);
       }},
      {"reconnect_delay_max", [](client_options& o) { o.reconnect_delay_max = huge; }},
      {"replica_timeout", [](client_options& o) { o.locks.replica_timeout = milliseconds(-1); }},
      {"watchdog_timeout", [](client_options& o) { o.locks.watchdog_timeout = milliseconds(0); }},
      {"slow_acquisition", [](client_options& o) { o.slow_acquisition = huge; }},
  };
  for (const auto& [name, spoil] : bad) {
    client_options o = client_options::from_url("redis://127.0.0.1:1");
    spoil(o);
    try {
      client c{o};
      ADD_FAILURE() << name << ": accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << name;
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  // The bounds themselves are fine (a day, zero where zero means "off").
  client_options edge = client_options::from_url("redis://127.0.0.1:1");
  edge.request_timeout = std::chrono::hours(24);
  edge.health_check_interval = milliseconds(0);
  edge.reconnect_delay_min = edge.reconnect_delay_max = milliseconds(1);
  EXPECT_NO_THROW(client{edge});
}

// 8 threads x 10,000 INCRs, each thread on its own counter: every reply must be the next number,
// which fails if any reply reached the wrong caller or arrived out of order.
TEST_F(ClientTest, EightThreadsShareOneConnectionAndGetTheirOwnRepliesInOrder) {
  constexpr int threads = 8;
  constexpr int per_thread = 10'000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, key = unique_key("counter" + std::to_string(t))] {
      for (int i = 1; i <= per_thread; ++i) {
        if (c.command({"INCR", key}).integer != i) ++wrong;
      }
    });
  }
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(c.command({"GET", unique_key("counter" + std::to_string(t))}).str,
              std::to_string(per_thread));
  }
  // One command connection served all of them (the subscriber never started).
  const std::string clients = server.cli({"CLIENT", "LIST"});
  std::size_t dlock_connections = 0;
  for (std::size_t pos = 0; (pos = clients.find("name=dlock ", pos)) != std::string::npos; ++pos) {
    ++dlock_connections;
  }
  EXPECT_EQ(dlock_connections, 1u) << clients;
}

TEST_F(ClientTest, BlockingCallFromACallbackIsRefusedInsteadOfDeadlocking) {
  std::promise<std::error_code> inner;
  c.async_command({"PING"}, [&](std::error_code, reply) {
    try {
      c.command({"PING"});
      inner.set_value({});
    } catch (const error& e) {
      inner.set_value(e.code());
    }
  });
  auto result = inner.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "deadlocked";
  EXPECT_EQ(result.get(), errc::would_deadlock);
}

TEST_F(ClientTest, AsyncRequestsInFlightCompleteInIssueOrder) {
  constexpr int n = 50'000;
  const std::string key = unique_key("async");
  std::vector<std::int64_t> seen(n, -1);
  std::atomic<int> errors{0};
  std::latch all_done(n);
  for (int i = 0; i < n; ++i) {
    c.async_command({"INCR", key}, [&, i](std::error_code ec, reply r) {
      if (ec) ++errors;
      seen[i] = r.integer;
      all_done.count_down();
    });
  }
  all_done.wait();
  EXPECT_EQ(errors.load(), 0);
  int out_of_order = 0;
  for (int i = 0; i < n; ++i)
    out_of_order += seen[i] != i + 1;
  EXPECT_EQ(out_of_order, 0);
}

TEST_F(ClientTest, FutureApiDeliversValuesAndErrors) {
  const std::string key = unique_key("f");
  auto ok = c.async_command({"SET", key, "x"});
  auto bad = c.async_command({"HGET", key, "field"});  // WRONGTYPE
  EXPECT_EQ(ok.get(), reply::make_simple("OK"));
  try {
    bad.get();
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
    EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos);
  }
}

std::int64_t command_calls(redis_server& s, const std::string& command) {
  return dlock::test::command_calls(s.cli({"INFO", "commandstats"}), command);
}

TEST_F(ClientTest, EvalShaFallsBackToEvalOnNoscriptThenUsesTheCache) {
  const script echo{"return ARGV[1] .. KEYS[1]"};
  server.cli({"SCRIPT", "FLUSH"});
  EXPECT_EQ(c.eval(echo, {"k"}, {"v"}), reply::make_bulk("vk"));
  EXPECT_EQ(command_calls(server, "eval"), 1);  // NOSCRIPT, then EVAL
  EXPECT_EQ(server.cli({"SCRIPT", "EXISTS", echo.sha1()}), "1");
  EXPECT_EQ(c.eval(echo, {"k"}, {"w"}), reply::make_bulk("wk"));
  EXPECT_EQ(command_calls(server, "eval"), 1);  // cached now: EVALSHA only
  EXPECT_EQ(command_calls(server, "evalsha"), 2);
}

TEST_F(ClientTest, ScriptErrorsAreServerErrors) {
  const script broken{"return redis.call('nosuchcommand')"};
  try {
    c.eval(broken, {}, {});
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
  }
}

// The plain lock's release, embedded from src/locks/scripts/compare_and_delete.lua at build time.
TEST_F(ClientTest, EmbeddedCompareAndDeleteReleasesOnlyTheHoldersToken) {
  const script release{std::string(scripts::compare_and_delete)};
  const std::string key = unique_key("plain");
  c.command({"SET", key, "token-a", "NX", "PX", "10000"});
  EXPECT_EQ(c.eval(release, {key}, {"token-b"}).integer, 0);
  EXPECT_EQ(c.command({"GET", key}).str, "token-a");
  EXPECT_EQ(c.eval(release, {key}, {"token-a"}).integer, 1);
  EXPECT_TRUE(c.command({"GET", key}).is_nil());
  EXPECT_EQ(c.eval(release, {key}, {"token-a"}).integer, 0);
}

TEST(ClientOptionsTest, SelectsTheDatabaseAndNamesTheConnection) {
  redis_server server;
  client_options o = client_options::from_url(server.url() + "/3");
  o.client_name = "orders-service";
  client c{o};
  const std::string key = unique_key("db");
  c.command({"SET", key, "in-three"});
  EXPECT_EQ(server.cli({"-n", "3", "GET", key}), "in-three");
  EXPECT_EQ(server.cli({"-n", "0", "EXISTS", key}), "0");
  EXPECT_EQ(c.command({"CLIENT", "GETNAME"}).str, "orders-service");
}

TEST(ClientOptionsTest, UnixSocket) {
  tools::redis_process_options po;
  po.unix_socket = true;
  redis_server server{po};
  client c{"unix://" + server.unix_path()};
  EXPECT_EQ(c.command({"PING"}), reply::make_simple("PONG"));
}

}  // namespace
}  // namespace dlock
