// dlock::count_down_latch against a real redis-server: the key and the messages Redisson's
// RCountDownLatch uses, waking by pub/sub (threads, 100 waiters, 2 child processes), no false
// wake-up on a stray "0" or a reset, re-reading after a resubscription, kind mixing, and interop
// both ways with Redisson's latch scripts run as a foreign client.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "core/hash_slot.hpp"
#include "dlock/dlock.hpp"
#include "locks/names.hpp"
#include "locks/types/latch_protocol.hpp"
#include "redis_process.hpp"
#include "support/command_stats.hpp"
#include "support/lock_name_cases.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::eventually;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine: a waiter returns within
// this much after the count-down that opened its latch.
constexpr auto wake_bound = 500ms;
// How long a test watches a waiter that must not return (no event marks "did not happen").
constexpr auto no_wake_window = 300ms;

std::string redisson_channel(const std::string& name) {
  return "redisson_countdownlatch__channel__{" + name + "}";
}

// The messages published on a channel, as a Redisson CountDownLatchPubSub would hear them.
class channel_recorder {
 public:
  channel_recorder(client& c, const std::string& channel) {
    std::promise<void> subscribed;
    auto ready = subscribed.get_future();
    sub_ = c.subscribe(
        channel,
        [this](std::string_view payload) {
          {
            std::lock_guard lock(mutex_);
            messages_.emplace_back(payload);
          }
          cv_.notify_all();
        },
        [p = std::make_shared<std::promise<void>>(std::move(subscribed))] {
          try {
            p->set_value();
          } catch (const std::future_error&) {  // a resubscription
          }
        });
    if (ready.wait_for(5s) != std::future_status::ready) throw std::runtime_error("no subscribe");
  }
  // Waits until `n` messages arrived (up to 5 s) and returns them all.
  std::vector<std::string> wait_for(std::size_t n) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, 5s, [&] { return messages_.size() >= n; });
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> messages_;
  subscription sub_;
};

// A waiter on its own thread: whether and when wait_for() returned.
struct waiter_result {
  bool opened = false;
  steady_clock::time_point at;
  std::int64_t count_after = -1;  // the count read right after it returned
};

std::future<waiter_result> start_waiter(count_down_latch latch, std::chrono::milliseconds limit) {
  return std::async(std::launch::async, [latch, limit] {
    waiter_result r;
    r.opened = latch.wait_for(limit);
    r.at = steady_clock::now();
    r.count_after = latch.count();
    return r;
  });
}

// Waits until `subscribers` clients listen on the latch's channel: only then is a waiter
// certainly past its first read (server state with no event of its own).
void wait_until_listening(client& c, const std::string& name, std::int64_t subscribers = 1) {
  ASSERT_TRUE(eventually([&] {
    return c.command({"PUBSUB", "NUMSUB", locks::latch_channel(name)}).elements.at(1).integer >=
           subscribers;
  }));
}

// Scripts the server has run (EVALSHA and EVAL): a waiter's reads of the count are scripts.
std::int64_t script_calls(client& c) {
  return test::script_calls(c.command({"INFO", "commandstats"}).str);
}

// --- names --------------------------------------------------------------------------------------

TEST(LatchNames, RedissonsChannelWhenInTheNamesSlotElseTheSlotTagForm) {
  EXPECT_EQ(locks::latch_channel("boot"), "redisson_countdownlatch__channel__{boot}");
  EXPECT_EQ(locks::latch_channel("a{b"), "redisson_countdownlatch__channel__{a{b}");
  // Redisson's form for "{t}:x" hashes on "{t": the fallback keeps the name's slot.
  EXPECT_EQ(locks::latch_channel("{t}:x"),
            "redisson_countdownlatch__channel__{" +
                std::string(locks::slot_tag(core::hash_slot("{t}:x"))) + "}:{t}:x");
  for (const std::string& name : test::lock_name_cases()) {
    EXPECT_EQ(core::hash_slot(locks::latch_channel(name)), core::hash_slot(name)) << name;
  }
}

TEST(LatchProtocol, RepliesTheScriptsCannotSendAreProtocolErrors) {
  const locks::latch_protocol protocol;
  const auto array = [](std::vector<reply> elements) {
    return reply::make_array(std::move(elements));
  };
  const auto code_of = [](auto&& read) {
    try {
      read();
    } catch (const error& e) {
      return e.code();
    }
    return std::error_code{};
  };
  const reply nil;
  EXPECT_EQ(code_of([&] { protocol.read_count("n", nil); }), errc::protocol_error);
  EXPECT_EQ(code_of([&] { protocol.read_count_down("n", array({})); }), errc::protocol_error);
  // A count that is not a number.
  EXPECT_EQ(code_of([&] {
              protocol.read_count("n", array({reply::make_integer(1), reply::make_bulk("x1"),
                                              reply::make_integer(1)}));
            }),
            errc::protocol_error);
  EXPECT_EQ(protocol
                .read_count("n", array({reply::make_integer(1), reply::make_bulk("-7"),
                                        reply::make_integer(1)}))
                .count,
            -7);
  EXPECT_EQ(code_of([&] {
              protocol.read_remove("n", array({reply::make_integer(-1), reply::make_bulk("set")}));
            }),
            errc::wrong_type);
  EXPECT_EQ(code_of([&] { (void)protocol.try_set_count("n", -1); }), errc::invalid_argument);
}

// --- the scripts: data and messages ----------------------------------------------------------

TEST(LatchScripts, RedissonsKeyAndMessagesFromSetToZero) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  channel_recorder heard{c, redisson_channel(name)};
  count_down_latch latch = c.get_count_down_latch(name);

  EXPECT_EQ(latch.count(), 0);
  EXPECT_TRUE(latch.try_set_count(3));
  // A plain decimal string without TTL, and "1" (new count) on Redisson's channel.
  EXPECT_EQ(c.command({"GET", name}).str, "3");
  EXPECT_EQ(c.command({"PTTL", name}).integer, -1);
  EXPECT_EQ(heard.wait_for(1), std::vector<std::string>{"1"});
  EXPECT_FALSE(latch.try_set_count(5));
  EXPECT_EQ(latch.count(), 3);

  EXPECT_EQ(latch.count_down(), 2);
  EXPECT_EQ(latch.count_down(), 1);
  EXPECT_EQ(c.command({"GET", name}).str, "1");
  EXPECT_EQ(latch.count_down(), 0);
  // At zero the key goes and "0" is published, once.
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_EQ(heard.wait_for(2), (std::vector<std::string>{"1", "0"}));
  // A missing latch stays missing and publishes nothing (Redisson's DECR then DEL).
  EXPECT_EQ(latch.count_down(), -1);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  EXPECT_EQ(latch.count(), 0);

  // delete: "1", as Redisson's.
  EXPECT_TRUE(latch.try_set_count(2));
  EXPECT_EQ(latch.status().count, 2);
  EXPECT_TRUE(latch.status().exists);
  EXPECT_TRUE(latch.delete_latch());
  EXPECT_FALSE(latch.delete_latch());
  EXPECT_FALSE(latch.status().exists);
  // The order here proves that the second count_down published nothing.
  EXPECT_EQ(heard.wait_for(4), (std::vector<std::string>{"1", "0", "1", "1"}));
}

TEST(LatchScripts, ACountOfZeroIsAnOpenLatchThatExists) {
  redis_server server;
  client c{server.url()};
  count_down_latch latch = c.get_count_down_latch(unique_key("latch"));
  EXPECT_TRUE(latch.try_set_count(0));
  EXPECT_EQ(latch.count(), 0);
  EXPECT_TRUE(latch.status().exists);
  EXPECT_TRUE(latch.wait_for(0ms));
  EXPECT_FALSE(latch.try_set_count(1));
  EXPECT_EQ(latch.count_down(), -1);
  EXPECT_FALSE(latch.status().exists);
}

TEST(LatchScripts, KindMixingIsWrongTypeNamingBothKinds) {
  redis_server server;
  client c{server.url()};
  const std::string lock_name = unique_key("lock");
  mutex m = c.get_lock(lock_name);
  m.lock();
  count_down_latch on_lock = c.get_count_down_latch(lock_name);
  const auto expect_wrong_type = [](auto&& call, std::string_view holds) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type) << e.what();
      EXPECT_NE(std::string(e.what()).find(holds), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a count-down latch"), std::string::npos)
          << e.what();
    }
  };
  expect_wrong_type([&] { (void)on_lock.count(); }, "a hash (a reentrant");
  expect_wrong_type([&] { (void)on_lock.count_down(); }, "a hash");
  expect_wrong_type([&] { (void)on_lock.try_set_count(2); }, "a hash");
  expect_wrong_type([&] { (void)on_lock.delete_latch(); }, "a hash");
  expect_wrong_type([&] { (void)on_lock.wait_for(1s); }, "a hash");
  // The lock is untouched.
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_TRUE(m.is_locked());
  m.unlock();

  // A plain lock's string (not a number) is no latch either, and stays as it is.
  const std::string plain_name = unique_key("plain");
  plain_lock p = c.get_plain_lock(plain_name);
  ASSERT_TRUE(p.try_lock());
  count_down_latch on_plain = c.get_count_down_latch(plain_name);
  expect_wrong_type([&] { (void)on_plain.count_down(); }, "a string that is not a count");
  expect_wrong_type([&] { (void)on_plain.delete_latch(); }, "string");
  EXPECT_TRUE(p.is_held_by_current_thread());
  EXPECT_TRUE(p.is_locked());
  p.unlock();

  // A lock on a latch's key: wrong_type naming both kinds (a count reads as a semaphore's too).
  const std::string latch_name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(latch_name);
  ASSERT_TRUE(latch.try_set_count(2));
  mutex on_latch = c.get_lock(latch_name);
  try {
    (void)on_latch.try_lock();
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type) << e.what();
    EXPECT_NE(std::string(e.what()).find("a semaphore or a latch (a string count), not a "
                                         "reentrant lock"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(latch.count(), 2);
}

TEST(LatchScripts, BadInputIsInvalidArgument) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  // Negative, or past the integers the server's Lua holds exactly (count_down() then answered a
  // rounded count).
  for (const std::int64_t bad : {std::int64_t{-1}, max_count + 1}) {
    try {
      (void)latch.try_set_count(bad);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
    }
  }
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
  for (const std::string& bad : {std::string(), std::string("a\nb"), std::string(70000, 'x')}) {
    try {
      (void)c.get_count_down_latch(bad);
      ADD_FAILURE() << "no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
    }
  }
}

// --- waiting -------------------------------------------------------------------------------------

TEST(CountDownLatch, ThreadsCountDownAndTheWaiterWakesRightAfterTheLast) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  constexpr int workers = 8;
  ASSERT_TRUE(latch.try_set_count(workers));
  auto waiter = start_waiter(c.get_count_down_latch(name), 20s);
  wait_until_listening(c, name);

  // All but one count down: the waiter must still wait.
  std::vector<std::thread> threads;
  for (int i = 0; i < workers - 1; ++i)
    threads.emplace_back([&] { latch.count_down(); });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(latch.count(), 1);
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);

  EXPECT_EQ(latch.count_down(), 0);
  const auto opened_at = steady_clock::now();
  ASSERT_EQ(waiter.wait_for(wake_bound), std::future_status::ready);
  const waiter_result r = waiter.get();
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.count_after, 0);
  EXPECT_LT(r.at - opened_at, wake_bound);
  std::cout << "latch: waiter returned "
            << std::chrono::duration<double, std::milli>(r.at - opened_at).count()
            << " ms after the last count_down's reply\n";
}

TEST(CountDownLatch, WaitForTimesOutWithTheCountAboveZero) {
  redis_server server;
  client c{server.url()};
  count_down_latch latch = c.get_count_down_latch(unique_key("latch"));
  ASSERT_TRUE(latch.try_set_count(2));
  latch.count_down();
  const auto start = steady_clock::now();
  EXPECT_FALSE(latch.wait_for(300ms));
  const auto waited = steady_clock::now() - start;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 300ms + wake_bound);
  EXPECT_EQ(latch.count(), 1);
  EXPECT_FALSE(latch.wait_until(std::chrono::system_clock::now() + 50ms));
  EXPECT_FALSE(latch.wait_for(0s));
  EXPECT_FALSE(latch.wait_for(-1s));
  latch.count_down();
  EXPECT_TRUE(latch.wait_for(0s));
  latch.wait();  // open: returns at once
}

TEST(CountDownLatch, AStrayZeroOrAResetAfterZeroWakesNobody) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  auto waiter = start_waiter(latch, 20s);
  wait_until_listening(c, name);

  // "0" while the count is 1: the waiter re-reads and keeps waiting.
  c.command({"PUBLISH", locks::latch_channel(name), "0"});
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);
  // Zero and at once a new count (one script, so no waiter can read in between): the "0" and
  // "1" both arrive, the waiter reads 5 and keeps waiting.
  const script zero_then_reset{R"(
    redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], '0')
    redis.call('set', KEYS[1], '5'); redis.call('publish', KEYS[2], '1'))"};
  c.eval(zero_then_reset, {name, locks::latch_channel(name)}, {});
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);
  EXPECT_EQ(latch.count(), 5);

  ASSERT_TRUE(latch.delete_latch());
  ASSERT_EQ(waiter.wait_for(wake_bound), std::future_status::ready);
  const waiter_result r = waiter.get();
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.count_after, 0);
}

TEST(CountDownLatch, AHundredWaitersShareOneSubscriptionAndAllWakeOnOneZero) {
  redis_server server;
  client c{server.url()};
  client counter{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  constexpr int waiters = 100;
  std::atomic<int> started{0}, early{0}, opened{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&] {
      ++started;
      const bool ok = latch.wait_for(30s);
      if (latch.count() != 0) ++early;
      if (ok) ++opened;
    });
  }
  // One subscription per client, however many threads wait.
  wait_until_listening(c, name);
  ASSERT_TRUE(eventually([&] { return started.load() == waiters; }));
  // Every thread is in wait_for() now (or about to be): none returns while the count is 1.
  std::this_thread::sleep_for(no_wake_window);
  EXPECT_EQ(opened.load(), 0);
  EXPECT_EQ(latch.status().subscribers, 1u);
  const auto start = steady_clock::now();
  EXPECT_EQ(counter.get_count_down_latch(name).count_down(), 0);
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(opened.load(), waiters);
  EXPECT_EQ(early.load(), 0);
  const auto all_woken = steady_clock::now() - start;
  EXPECT_LT(all_woken, wake_bound * 2);
  std::cout << "latch: " << waiters << " waiters returned within "
            << std::chrono::duration<double, std::milli>(all_woken).count()
            << " ms of the count_down call\n";
  // The last waiter unsubscribed.
  EXPECT_TRUE(eventually([&] { return latch.status().subscribers == 0; }));
}

TEST(CountDownLatch, AResubscriptionMakesWaitersReadTheCountAgain) {
  redis_server server;
  client c{server.url()};
  client admin{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  EXPECT_EQ(latch.count(), 1);  // the count's script is loaded: each read is one script call
  const std::int64_t scripts_before = script_calls(admin);
  auto waiter = start_waiter(latch, 20s);
  wait_until_listening(admin, name);
  // The subscription's confirmation brings a second read of the count: the latch may open without
  // a message only after it, or that read finds it open (seen under TSan with 4 tests at once).
  ASSERT_TRUE(eventually([&] { return script_calls(admin) >= scripts_before + 2; }));
  // The latch opens without a message (as if "0" had been published while disconnected).
  admin.command({"DEL", name});
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);
  // The connection is lost and comes back: the waiter re-reads and finds it open.
  EXPECT_GE(admin.command({"CLIENT", "KILL", "TYPE", "pubsub"}).integer, 1);
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiter.get().opened);
}

TEST(CountDownLatch, AWaiterOutlivesAServerRestartAndReadsTheCountAgain) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  auto waiter = start_waiter(latch, 30s);
  wait_until_listening(c, name);
  // The restarted server has no data: the latch is gone (open), and nothing was published.
  server.kill();
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);
  server.start();
  ASSERT_EQ(waiter.wait_for(20s), std::future_status::ready);
  const waiter_result r = waiter.get();
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.count_after, 0);
}

TEST(CountDownLatch, AWaitOnADestroyedClientEndsWithClientStopped) {
  redis_server server;
  auto c = std::make_unique<client>(server.url());
  const std::string name = unique_key("latch");
  count_down_latch latch = c->get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  auto waiter = std::async(std::launch::async, [latch] { latch.wait(); });
  client admin{server.url()};
  wait_until_listening(admin, name);
  c.reset();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  try {
    waiter.get();
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::client_stopped) << e.what();
  }
  EXPECT_EQ(admin.get_count_down_latch(name).count(), 1);
}

TEST(CountDownLatch, BlockingCallsFromACallbackAreRefused) {
  redis_server server;
  client c{server.url()};
  count_down_latch latch = c.get_count_down_latch(unique_key("latch"));
  std::promise<std::error_code> from_callback;
  c.async_command({"PING"}, [&](std::error_code, reply) {
    try {
      (void)latch.wait_for(1s);
      from_callback.set_value({});
    } catch (const error& e) {
      from_callback.set_value(e.code());
    }
  });
  auto result = from_callback.get_future();
  ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(result.get(), errc::would_deadlock);
}

TEST(CountDownLatchAsync, WaitsWithoutAThreadAndOpensOnZeroOnly) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(2));
  constexpr int waiters = 100;
  std::vector<std::future<bool>> waits;
  for (int i = 0; i < waiters; ++i)
    waits.push_back(latch.async_wait(20s));
  wait_until_listening(c, name);
  // A stray "0" and a count-down that leaves 1 open nothing.
  c.command({"PUBLISH", locks::latch_channel(name), "0"});
  EXPECT_EQ(latch.count_down(), 1);
  EXPECT_EQ(waits.front().wait_for(no_wake_window), std::future_status::timeout);
  EXPECT_EQ(latch.count_down(), 0);
  const auto opened_at = steady_clock::now();
  for (auto& w : waits) {
    ASSERT_EQ(w.wait_for(wake_bound), std::future_status::ready);
    EXPECT_TRUE(w.get());
  }
  EXPECT_LT(steady_clock::now() - opened_at, wake_bound);
  // The listener went with the last wait.
  EXPECT_TRUE(eventually([&] { return latch.status().subscribers == 0; }));
  // Open already: at once.
  auto open = latch.async_wait(0ms);
  ASSERT_EQ(open.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(open.get());
}

TEST(CountDownLatchAsync, TimesOutAndReportsErrors) {
  redis_server server;
  client c{server.url()};
  count_down_latch latch = c.get_count_down_latch(unique_key("latch"));
  ASSERT_TRUE(latch.try_set_count(1));
  const auto start = steady_clock::now();
  auto timed = latch.async_wait(200ms);
  ASSERT_EQ(timed.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(timed.get());
  EXPECT_GE(steady_clock::now() - start, 200ms);

  const std::string lock_name = unique_key("lock");
  c.command({"HSET", lock_name, "f", "1"});
  auto wrong = c.get_count_down_latch(lock_name).async_wait(1s);
  try {
    (void)wrong.get();
    ADD_FAILURE() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("not a count-down latch"), std::string::npos) << e.what();
  }
}

TEST(CountDownLatchAsync, ADestroyedClientCompletesItsWaitsWithClientStopped) {
  redis_server server;
  auto c = std::make_unique<client>(server.url());
  const std::string name = unique_key("latch");
  count_down_latch latch = c->get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<std::error_code> during;
  latch.async_wait(std::nullopt, [&](std::error_code ec, bool) { during.set_value(ec); });
  client admin{server.url()};
  wait_until_listening(admin, name);
  c.reset();  // waits for the wait to finish (within a second)
  auto ended = during.get_future();
  ASSERT_EQ(ended.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(ended.get(), errc::client_stopped);
  // A wait started afterwards completes at once, on this thread.
  std::error_code after;
  latch.async_wait(1s, [&](std::error_code ec, bool) { after = ec; });
  EXPECT_EQ(after, errc::client_stopped);
}

TEST(CountDownLatchProcesses, TwoProcessesOfFourThreadsOpenTheLatchForAWaiter) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("latch");
  count_down_latch latch = c.get_count_down_latch(name);
  constexpr int processes = 2, threads = 4;
  ASSERT_TRUE(latch.try_set_count(processes * threads));
  auto waiter = start_waiter(latch, 60s);
  wait_until_listening(c, name);
  auto run = [&] {
    return tools::run_command(
        {DLOCK_TEST_LATCH_WORKER, "count-down", server.url(), name, std::to_string(threads)}, 60s);
  };
  auto first = std::async(std::launch::async, run);
  auto second = std::async(std::launch::async, run);
  steady_clock::time_point last_done{};
  for (auto* result : {&first, &second}) {
    const tools::command_result r = result->get();
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(r.out.starts_with("done ")) << r.out;
    const steady_clock::time_point done{std::chrono::nanoseconds(std::stoll(r.out.substr(5)))};
    last_done = std::max(last_done, done);
  }
  ASSERT_EQ(waiter.wait_for(wake_bound), std::future_status::ready);
  const waiter_result r = waiter.get();
  EXPECT_TRUE(r.opened);
  // It never returned while the count was above zero, and woke soon after the last count-down
  // (the message may reach it before the reply reaches the worker).
  EXPECT_EQ(r.count_after, 0);
  EXPECT_LT(r.at - last_done, wake_bound);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

// --- interop with Redisson's scripts -------------------------------------------------------------

// Redisson's RCountDownLatch as a foreign client, written from its semantics at commit 66863978
// (redisson/src/main/java/org/redisson/RedissonCountDownLatch.java): countDown, lines 253-260
// (DECR; <= 0: DEL; == 0: publish ZERO_COUNT_MESSAGE 0); trySetCount, lines 286-297 (when the key
// is missing: SET count, publish NEW_COUNT_MESSAGE 1; returns 1 or 0); delete, lines 300-310
// (DEL; if deleted, publish 1); getCount, lines 276-278 (GET, missing 0); channel, lines 266-268.
// KEYS and ARGV are those Redisson passes.
struct redisson_latch {
  client& c;
  std::string name;

  std::string channel() const { return redisson_channel(name); }
  void count_down() {
    static const script s{R"(
      local left = redis.call('decr', KEYS[1])
      if left <= 0 then redis.call('del', KEYS[1]) end
      if left == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end)"};
    c.eval(s, {name, channel()}, {"0", "publish"});
  }
  bool try_set_count(std::int64_t count) {
    static const script s{R"(
      if redis.call('exists', KEYS[1]) == 1 then return 0 end
      redis.call('set', KEYS[1], ARGV[2])
      redis.call(ARGV[3], KEYS[2], ARGV[1])
      return 1)"};
    return c.eval(s, {name, channel()}, {"1", std::to_string(count), "publish"}).integer == 1;
  }
  bool remove() {
    static const script s{R"(
      if redis.call('del', KEYS[1]) == 0 then return 0 end
      redis.call(ARGV[2], KEYS[2], ARGV[1])
      return 1)"};
    return c.eval(s, {name, channel()}, {"1", "publish"}).integer == 1;
  }
  std::int64_t count() {
    const reply r = c.command({"GET", name});
    return r.is_nil() ? 0 : std::stoll(r.str);
  }
};

TEST(LatchInterop, RedissonSetsAndCountsDownAndEveryDlockWaiterWakesOnItsZero) {
  redis_server server;
  client java{server.url()};
  client c{server.url()};
  const std::string name = unique_key("latch");
  redisson_latch foreign{java, name};
  ASSERT_TRUE(foreign.try_set_count(2));
  count_down_latch latch = c.get_count_down_latch(name);
  EXPECT_EQ(latch.count(), 2);
  EXPECT_FALSE(latch.try_set_count(9));

  constexpr int waiters = 100;
  std::atomic<int> early{0}, opened{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&] {
      const bool ok = latch.wait_for(30s);
      if (latch.count() != 0) ++early;
      if (ok) ++opened;
    });
  }
  wait_until_listening(java, name);
  foreign.count_down();
  EXPECT_EQ(latch.count(), 1);
  // A Redisson trySetCount on an existing latch changes nothing and publishes nothing; its "1"
  // on a new latch wakes nobody falsely (checked by `early`).
  EXPECT_FALSE(foreign.try_set_count(7));
  foreign.count_down();
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(opened.load(), waiters);
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(java.command({"EXISTS", name}).integer, 0);
}

TEST(LatchInterop, DlocksCountDownReachesARedissonSubscriberAndItsDeleteOpensDlockWaiters) {
  redis_server server;
  client java{server.url()};
  client c{server.url()};
  const std::string name = unique_key("latch");
  redisson_latch foreign{java, name};
  channel_recorder redisson_listener{java, foreign.channel()};
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(2));
  EXPECT_EQ(foreign.count(), 2);
  latch.count_down();
  EXPECT_EQ(foreign.count(), 1);
  latch.count_down();
  EXPECT_EQ(foreign.count(), 0);
  // What Redisson's CountDownLatchPubSub decodes as NEW_COUNT then ZERO_COUNT.
  EXPECT_EQ(redisson_listener.wait_for(2), (std::vector<std::string>{"1", "0"}));

  // Redisson's delete publishes "1": a dlock waiter re-reads and finds the latch open.
  ASSERT_TRUE(foreign.try_set_count(3));
  auto waiter = start_waiter(latch, 20s);
  wait_until_listening(java, name, 2);
  EXPECT_TRUE(foreign.remove());
  ASSERT_EQ(waiter.wait_for(wake_bound), std::future_status::ready);
  EXPECT_TRUE(waiter.get().opened);
}

// --- the dlock command ---------------------------------------------------------------------------

#ifdef DLOCK_CLI
tools::command_result run_cli(const std::string& url, std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_CLI, "--redis", url});
  return tools::run_command(args, 20s);
}

TEST(LatchCli, SetCountDownWaitAndStatus) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("boot");
  EXPECT_EQ(run_cli(server.url(), {"latch", "set", name, "2"}).exit_code, 0);
  const tools::command_result again = run_cli(server.url(), {"latch", "set", name, "5"});
  EXPECT_EQ(again.exit_code, 75);
  EXPECT_NE(again.err.find("exists already (count 2)"), std::string::npos) << again.err;

  const tools::command_result text = run_cli(server.url(), {"status", name});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("count-down latch"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("count               2"), std::string::npos) << text.out;
  const tools::command_result json = run_cli(server.url(), {"status", "--json", name});
  EXPECT_NE(json.out.find(R"("kind":"latch","count":2,"waiting_clients":0)"), std::string::npos)
      << json.out;

  const tools::command_result timed_out =
      run_cli(server.url(), {"latch", "wait", "--timeout", "0.2", name});
  EXPECT_EQ(timed_out.exit_code, 75);
  EXPECT_NE(timed_out.err.find("still at 2"), std::string::npos) << timed_out.err;

  auto waiter = std::async(std::launch::async, [&] {
    return run_cli(server.url(), {"latch", "wait", "--timeout", "15", name});
  });
  wait_until_listening(c, name);
  const tools::command_result first = run_cli(server.url(), {"latch", "count-down", name});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("1 left"), std::string::npos) << first.out;
  EXPECT_EQ(waiter.wait_for(no_wake_window), std::future_status::timeout);
  const tools::command_result last = run_cli(server.url(), {"latch", "count-down", name});
  EXPECT_NE(last.out.find("reached zero"), std::string::npos) << last.out;
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get().exit_code, 0);
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0);
}

TEST(LatchCli, AKeyOfAnotherKindIsAUsageError) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("hash");
  c.command({"HSET", name, "f", "1"});
  const tools::command_result r = run_cli(server.url(), {"latch", "count-down", name});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("not a count-down latch"), std::string::npos) << r.err;
  EXPECT_EQ(c.command({"HGET", name, "f"}).str, "1");
  EXPECT_EQ(run_cli(server.url(), {"latch", "set", name, "-1"}).exit_code, 64);
}
#endif

}  // namespace
}  // namespace dlock
