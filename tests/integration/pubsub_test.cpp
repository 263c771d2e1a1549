// The subscriber connection: one SUBSCRIBE per channel however many listeners, unsubscribing
// with the last one, and resubscribing after the server comes back.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "dlock/client.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::redis_server;
using test::unique_key;

// Counts events from the I/O thread and lets the test wait for a count.
class event_counter {
 public:
  void add() {
    std::lock_guard lock(mutex_);
    ++count_;
    cv_.notify_all();
  }
  bool wait_for(int at_least, std::chrono::milliseconds limit = 5s) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return count_ >= at_least; });
  }
  int count() {
    std::lock_guard lock(mutex_);
    return count_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
};

std::int64_t numsub(client& c, const std::string& channel) {
  return c.command({"PUBSUB", "NUMSUB", channel}).elements.at(1).integer;
}

// PUBSUB NUMSUB is the server's view; UNSUBSCRIBE travels asynchronously, so wait for it to land
// by asking the server again (bounded), there being no event for "the server has processed it".
bool numsub_becomes(client& c, const std::string& channel, std::int64_t expected) {
  for (int i = 0; i < 200; ++i) {
    if (numsub(c, channel) == expected) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(PubSub, ListenerGetsMessagesAfterConfirmation) {
  redis_server server;
  client c{server.url()};
  const std::string channel = unique_key("ch");
  event_counter subscribed, received;
  std::vector<std::string> payloads;
  auto sub = c.subscribe(
      channel,
      [&](std::string_view p) {
        payloads.emplace_back(p);
        received.add();
      },
      [&] { subscribed.add(); });
  ASSERT_TRUE(subscribed.wait_for(1));
  EXPECT_EQ(c.command({"PUBLISH", channel, "hello"}).integer, 1);
  EXPECT_EQ(c.command({"PUBLISH", channel, std::string("bi\0n", 4)}).integer, 1);
  ASSERT_TRUE(received.wait_for(2));
  EXPECT_EQ(payloads, (std::vector<std::string>{"hello", std::string("bi\0n", 4)}));
}

TEST(PubSub, ManyListenersShareOneServerSubscription) {
  redis_server server;
  client c{server.url()};
  const std::string channel = unique_key("shared");
  event_counter subscribed, received;
  std::vector<subscription> subs;
  for (int i = 0; i < 50; ++i) {
    subs.push_back(c.subscribe(
        channel, [&](std::string_view) { received.add(); }, [&] { subscribed.add(); }));
  }
  ASSERT_TRUE(subscribed.wait_for(50));
  EXPECT_EQ(numsub(c, channel), 1);  // one connection subscribed once, not 50 times
  EXPECT_EQ(c.command({"PUBLISH", channel, "x"}).integer, 1);
  ASSERT_TRUE(received.wait_for(50));

  subs.resize(1);  // drop 49 listeners: still subscribed
  EXPECT_EQ(c.command({"PUBLISH", channel, "y"}).integer, 1);
  ASSERT_TRUE(received.wait_for(51));
  EXPECT_EQ(numsub(c, channel), 1);

  subs.clear();  // the last one unsubscribes
  EXPECT_TRUE(numsub_becomes(c, channel, 0));
}

TEST(PubSub, OneSubscriberConnectionForManyChannels) {
  redis_server server;
  client c{server.url()};
  event_counter subscribed;
  std::vector<subscription> subs;
  for (int i = 0; i < 100; ++i) {
    subs.push_back(c.subscribe(
        unique_key("many" + std::to_string(i)), [](std::string_view) {},
        [&] { subscribed.add(); }));
  }
  ASSERT_TRUE(subscribed.wait_for(100));
  const std::string clients = server.cli({"CLIENT", "LIST"});
  EXPECT_NE(clients.find("sub=100 "), std::string::npos) << clients;
}

TEST(PubSub, ResubscribesAfterTheServerRestarts) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.reconnect_delay_max = 200ms;
  client c{o};
  const std::string channel = unique_key("restart");
  event_counter subscribed, received;
  auto sub = c.subscribe(
      channel, [&](std::string_view) { received.add(); }, [&] { subscribed.add(); });
  ASSERT_TRUE(subscribed.wait_for(1));

  server.kill(SIGKILL);
  server.start();
  ASSERT_TRUE(subscribed.wait_for(2)) << "no resubscription after the restart";
  EXPECT_EQ(c.command({"PUBLISH", channel, "back"}).integer, 1);
  EXPECT_TRUE(received.wait_for(1));
}

TEST(PubSub, LateListenerOfAConfirmedChannelIsToldAtOnce) {
  redis_server server;
  client c{server.url()};
  const std::string channel = unique_key("late");
  event_counter first, second;
  auto a = c.subscribe(
      channel, [](std::string_view) {}, [&] { first.add(); });
  ASSERT_TRUE(first.wait_for(1));
  auto b = c.subscribe(
      channel, [](std::string_view) {}, [&] { second.add(); });
  EXPECT_TRUE(second.wait_for(1));
  EXPECT_EQ(first.count(), 1);
}

TEST(PubSub, EmptyChannelIsRejected) {
  redis_server server;
  client c{server.url()};
  try {
    (void)c.subscribe("", [](std::string_view) {});
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

}  // namespace
}  // namespace dlock
