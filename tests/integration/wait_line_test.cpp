// The reentrant lock's wait line of clients (docs/design/contention.md): waiting clients are
// called one at a time in the order they began to wait, an unlock sends no attempt from clients
// it does not call, and a client that gives up passes its turn on.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/command_stats.hpp"
#include "support/line_listeners.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::redis_server;
using test::unique_key;

// Scheduling slack for timing assertions on a loaded 2-core CI machine.
constexpr auto timing_slack = 300ms;

std::int64_t line_length(client& admin, const std::string& name) {
  return admin.command({"ZCARD", "dlock:line:{" + name + "}"}).integer;
}

// Connections subscribed to the shared unlock channel of the reentrant lock `name`.
std::int64_t shared_listeners(client& admin, const std::string& name) {
  return admin.command({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}"})
      .elements.at(1)
      .integer;
}

std::int64_t call_listeners(client& admin, const std::string& name) {
  return test::line_listeners([&](const auto& args) { return admin.command(args); }, name);
}

// EVAL and EVALSHA calls since the last CONFIG RESETSTAT: every attempt and release is one.
std::uint64_t script_calls(client& admin) {
  return static_cast<std::uint64_t>(
      dlock::test::script_calls(admin.command({"INFO", "commandstats"}).str));
}

// `n` clients, each with one thread that waits for `name`, takes it, records its turn and
// releases it at once. Each starts waiting only once the one before stands in the line.
class waiting_clients {
 public:
  // `plain`: dlock::plain_lock instead of dlock::mutex.
  waiting_clients(redis_server& server, client& admin, const std::string& name, int n,
                  bool plain = false) {
    for (int i = 0; i < n; ++i) {
      clients_.push_back(std::make_unique<client>(server.url()));
      // The pointer, not clients_[i]: the next push_back moves the vector's elements.
      client* const mine = clients_.back().get();
      threads_.emplace_back([this, i, name, plain, mine] {
        if (plain) {
          plain_lock m = mine->get_plain_lock(name);
          m.lock();
          record(i);
          m.unlock();
          return;
        }
        mutex m = mine->get_lock(name);
        m.lock();
        {
          std::lock_guard lock(order_mutex_);
          order_.push_back(i);
        }
        m.unlock();
      });
      if (!eventually([&] { return line_length(admin, name) == i + 1; })) {
        ADD_FAILURE() << "client " << i << " never stood in the line";
      }
    }
  }
  ~waiting_clients() { join(); }
  // Every waiter made its two attempts: the one that found the lock held and the one a fresh
  // subscription asks for (a message may have been missed before it).
  bool settled() {
    return std::all_of(clients_.begin(), clients_.end(),
                       [](const auto& c) { return c->lock_metrics().attempts == 2; });
  }
  std::vector<int> join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    std::lock_guard lock(order_mutex_);
    return order_;
  }

 private:
  void record(int i) {
    std::lock_guard lock(order_mutex_);
    order_.push_back(i);
  }

  std::vector<std::unique_ptr<client>> clients_;
  std::vector<std::thread> threads_;
  std::mutex order_mutex_;
  std::vector<int> order_;
};

// A holder of `Lock` (dlock::mutex or dlock::plain_lock) releases with 4 clients in line.
template <class Lock>
void expect_called_in_order(Lock (client::*get)(std::string), bool plain) {
  redis_server server;
  client admin{server.url()};
  const std::string name = unique_key("line");
  Lock held = (admin.*get)(name);
  held.lock();
  waiting_clients waiting(server, admin, name, 4, plain);
  // Every waiter has subscribed, so no wake id is published before its client listens.
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 4; }));
  held.unlock();
  EXPECT_EQ(waiting.join(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(line_length(admin, name), 0) << "a client stayed in line after its turn";
}

TEST(WaitLine, ClientsAreCalledInTheOrderTheyBeganToWait) {
  expect_called_in_order<mutex>(&client::get_lock, false);
}

TEST(WaitLine, PlainLockClientsAreCalledInTheOrderTheyBeganToWait) {
  expect_called_in_order<plain_lock>(&client::get_plain_lock, true);
}

TEST(WaitLine, AnUnlockSendsAnAttemptOnlyFromTheClientItCalls) {
  redis_server server;
  client admin{server.url()};
  const std::string name = unique_key("line");
  mutex held = admin.get_lock(name);
  held.lock();
  constexpr int clients = 4;
  waiting_clients waiting(server, admin, name, clients);
  ASSERT_TRUE(eventually([&] { return waiting.settled(); }));
  // Behind a dlock holder each client listens on its own call channel alone: a release's call
  // reaches one process, its "0" on the shared channel none (before, every waiting process read
  // both messages of every release).
  EXPECT_EQ(call_listeners(admin, name), clients);
  EXPECT_EQ(shared_listeners(admin, name), 0);
  admin.command({"CONFIG", "RESETSTAT"});
  held.unlock();
  ASSERT_EQ(waiting.join().size(), std::size_t{clients});
  // One release here, then per client one attempt that takes the lock and one release. Waking
  // one waiter in every client per unlock would add 3 + 2 + 1 failed attempts.
  // unlock() does not wait for its release to arrive: wait for the last one.
  constexpr std::uint64_t expected = 1u + 2u * clients;
  EXPECT_TRUE(eventually([&] { return script_calls(admin) >= expected; }));
  EXPECT_EQ(script_calls(admin), expected);
}

// A Redisson holder's release only publishes "0" on the shared channel: a dlock client waiting
// behind one listens there too, and stops once its attempt finds a dlock holder again, whose
// release then calls it.
TEST(WaitLine, AWaiterListensOnTheSharedChannelOnlyWhileTheHolderDoesNotCall) {
  redis_server server;
  client admin{server.url()}, holder{server.url()}, waiter{server.url()};
  const std::string name = unique_key("line");
  const std::string redisson_field = "8743c9c0-0795-4907-87fd-6c719a6b4586:1";
  (void)admin.command({"HSET", name, redisson_field, "1"});  // as Redisson's lock script does
  (void)admin.command({"PEXPIRE", name, "30000"});
  std::promise<std::chrono::steady_clock::time_point> acquired_at;
  std::thread waiting([&] {
    mutex m = waiter.get_lock(name);
    if (m.try_lock_for(20s)) {
      acquired_at.set_value(std::chrono::steady_clock::now());
      m.unlock();
    }
  });
  ASSERT_TRUE(eventually([&] { return shared_listeners(admin, name) == 1; }))
      << "behind a Redisson holder the waiter must hear the shared channel";
  EXPECT_EQ(call_listeners(admin, name), 1);
  // A new subscription has its waiters attempt once more when it is confirmed: the server counts
  // the subscriber before that attempt is sent, and an attempt after the DEL below would take
  // the lock before the barger (seen once under TSan).
  ASSERT_TRUE(eventually([&] { return waiter.lock_metrics().attempts >= 2; }));
  // The Redisson holder's hold ends, a dlock client barges in, and Redisson's unlock message
  // comes: the waiter's attempt finds a dlock holder and leaves the shared channel.
  (void)admin.command({"DEL", name});
  mutex barger = holder.get_lock(name);
  ASSERT_TRUE(barger.try_lock());
  (void)admin.command({"PUBLISH", "redisson_lock__channel:{" + name + "}", "0"});
  ASSERT_TRUE(eventually([&] { return shared_listeners(admin, name) == 0; }))
      << "behind a dlock holder the waiter must not hear the shared channel";
  EXPECT_EQ(call_listeners(admin, name), 1);
  const auto released_at = std::chrono::steady_clock::now();
  barger.unlock();
  auto f = acquired_at.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_LT(f.get() - released_at, timing_slack) << "called, not found by a re-check";
  waiting.join();
}

TEST(WaitLine, AClientThatGivesUpLeavesTheLineAndTheNextIsCalled) {
  redis_server server;
  client admin{server.url()}, quitter{server.url()}, patient{server.url()};
  const std::string name = unique_key("line");
  mutex held = admin.get_lock(name);
  held.lock();
  auto gave_up =
      std::async(std::launch::async, [&] { return quitter.get_lock(name).try_lock_for(500ms); });
  ASSERT_TRUE(eventually([&] { return line_length(admin, name) == 1; }));
  std::promise<std::chrono::steady_clock::time_point> acquired_at;
  std::thread next([&] {
    mutex m = patient.get_lock(name);
    m.lock();
    acquired_at.set_value(std::chrono::steady_clock::now());
    m.unlock();
  });
  ASSERT_TRUE(eventually([&] { return line_length(admin, name) == 2; }));
  EXPECT_FALSE(gave_up.get());
  EXPECT_TRUE(eventually([&] { return line_length(admin, name) == 1; }))
      << "the client that gave up stayed in line";
  ASSERT_TRUE(eventually([&] { return held.status().subscribers == 1; }));
  const auto released_at = std::chrono::steady_clock::now();
  held.unlock();
  auto f = acquired_at.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  // Called at once, not after a reservation for the client that left ran out.
  EXPECT_LT(f.get() - released_at, timing_slack);
  next.join();
}

}  // namespace
}  // namespace dlock
