// A release that times out is sent again, but never after the same owner's next attempt on the
// same lock: that retry would run after the attempt and could end the hold it took. A thread's
// owner field (and a thread's semaphore permit id) is the same for each of its acquisitions,
// and a release for an acquisition whose reply was lost carries no token to check.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

// The clients' request_timeout. The server's pause (ALL) begins at 0. What the thread does
// first (`first` below) sends a release at `release_at` (0, or when an attempt sent at 0 timed
// out); it times out at release_at + request_timeout and is retried then. The thread's next
// attempt goes out between the two (next_at()), and the pause ends after the retry went out and
// before that attempt times out (pause_for()).
constexpr auto request_timeout = 1500ms;
constexpr std::chrono::milliseconds next_at(std::chrono::milliseconds release_at) {
  return release_at + request_timeout * 6 / 10;
}
constexpr std::chrono::milliseconds pause_for(std::chrono::milliseconds release_at) {
  return release_at + request_timeout * 13 / 10;
}

// One lock type, as one thread of one client and as another client use it.
struct lock_kind {
  std::string label;
  std::function<bool()> try_now;      // no wait
  std::function<bool()> try_waiting;  // waits past the pause
  std::function<void()> unlock;
  std::function<bool()> other_try;  // another client, no wait
};

// The kinds on clients `mine` and `other`, each on a name of its own.
std::vector<lock_kind> kinds(client& mine, client& other) {
  std::vector<lock_kind> all;
  {
    const std::string name = unique_key("mutex");
    all.push_back({"mutex", [m = mine.get_lock(name)]() mutable { return m.try_lock(); },
                   [m = mine.get_lock(name)]() mutable { return m.try_lock_for(5s); },
                   [m = mine.get_lock(name)]() mutable { m.unlock(); },
                   [o = other.get_lock(name)]() mutable { return o.try_lock(); }});
  }
  {
    const std::string name = unique_key("fair");
    all.push_back({"fair_mutex", [m = mine.get_fair_lock(name)]() mutable { return m.try_lock(); },
                   [m = mine.get_fair_lock(name)]() mutable { return m.try_lock_for(5s); },
                   [m = mine.get_fair_lock(name)]() mutable { m.unlock(); },
                   [o = other.get_fair_lock(name)]() mutable { return o.try_lock(); }});
  }
  {
    const std::string name = unique_key("rw-write");
    all.push_back({"shared_mutex (write)",
                   [m = mine.get_read_write_lock(name)]() mutable { return m.try_lock(); },
                   [m = mine.get_read_write_lock(name)]() mutable { return m.try_lock_for(5s); },
                   [m = mine.get_read_write_lock(name)]() mutable { m.unlock(); },
                   [o = other.get_read_write_lock(name)]() mutable { return o.try_lock(); }});
  }
  {
    const std::string name = unique_key("rw-read");
    all.push_back(
        {"shared_mutex (read)",
         [m = mine.get_read_write_lock(name)]() mutable { return m.try_lock_shared(); },
         [m = mine.get_read_write_lock(name)]() mutable { return m.try_lock_shared_for(5s); },
         [m = mine.get_read_write_lock(name)]() mutable { m.unlock_shared(); },
         [o = other.get_read_write_lock(name)]() mutable { return o.try_lock(); }});
  }
  {
    const std::string name = unique_key("semaphore");
    all.push_back({"semaphore",
                   [s = mine.get_semaphore(name, 1)]() mutable { return s.try_acquire(); },
                   [s = mine.get_semaphore(name, 1)]() mutable { return s.try_acquire_for(5s); },
                   [s = mine.get_semaphore(name, 1)]() mutable { s.release(); },
                   [o = other.get_semaphore(name, 1)]() mutable { return o.try_acquire(); }});
  }
  return all;
}

client_options with_request_timeout(const std::string& url) {
  client_options o = client_options::from_url(url);
  o.request_timeout = request_timeout;
  return o;
}

// What the thread does first, while the server is paused: `first` (an attempt that times out and
// whose release goes out then, or a release that times out). Then the thread's next attempt at
// `next_at`, which must get the lock and keep it. Each kind on a thread and a client of its own;
// one pause for all.
void expect_the_next_hold_kept(redis_server& server, std::chrono::milliseconds release_at,
                               const std::function<void(lock_kind&)>& prepare,
                               const std::function<void(lock_kind&)>& first) {
  const auto pause = pause_for(release_at);
  client admin{server.url()};
  std::vector<std::unique_ptr<client>> mine, other;
  std::vector<lock_kind> all;
  for (std::size_t i = 0; i < 5; ++i) {
    mine.push_back(std::make_unique<client>(with_request_timeout(server.url())));
    other.push_back(std::make_unique<client>(server.url()));
    all.push_back(std::move(kinds(*mine.back(), *other.back())[i]));
  }
  for (auto& o : other)
    (void)o->command({"PING"});  // connected before the pause
  std::vector<std::future<void>> runs;
  std::vector<std::promise<void>> prepared(all.size());
  std::promise<steady_clock::time_point> paused;
  std::shared_future<steady_clock::time_point> paused_at = paused.get_future().share();
  for (std::size_t i = 0; i < all.size(); ++i) {
    runs.push_back(std::async(std::launch::async, [&, i] {
      lock_kind& k = all[i];
      SCOPED_TRACE(k.label);
      (void)mine[i]->command({"PING"});  // connected (scripts loaded) before the pause
      prepare(k);
      prepared[i].set_value();
      const auto begun = paused_at.get();
      first(k);
      std::this_thread::sleep_until(begun + next_at(release_at));
      ASSERT_TRUE(k.try_waiting()) << "the next attempt did not get the lock";
      EXPECT_GE(steady_clock::now() - begun, pause) << "got it during the pause";
      (void)mine[i]->command({"PING"});  // on its link, behind any retry of the release
      EXPECT_FALSE(k.other_try()) << "a retried release ended the thread's new hold";
      k.unlock();
    }));
  }
  for (auto& p : prepared)
    p.get_future().wait();
  const auto begun = steady_clock::now();
  admin.command({"CLIENT", "PAUSE", std::to_string(pause.count()), "ALL"});
  paused.set_value(begun);
  for (auto& r : runs)
    r.get();
}

// An attempt that times out (it runs once the pause ends) is followed by a release without a
// token; the release times out too, and the thread's next attempt went out before its retry.
TEST(ReleaseRetry, AnOrphanReleaseIsNotRetriedAfterTheThreadsNextAttempt) {
  redis_server server;
  expect_the_next_hold_kept(
      server, request_timeout, [](lock_kind&) {},
      [](lock_kind& k) {
        try {
          EXPECT_FALSE(k.try_now()) << "acquired while the server was paused";
        } catch (const error& e) {
          EXPECT_EQ(e.code(), errc::timeout) << e.what();
        }
      });
}

// A release of a known hold that times out (a semaphore's permit carries no token: the thread's
// next permit has the same id), with the thread's next attempt out before its retry.
TEST(ReleaseRetry, AReleaseIsNotRetriedAfterTheThreadsNextAttempt) {
  redis_server server;
  expect_the_next_hold_kept(
      server, 0ms, [](lock_kind& k) { ASSERT_TRUE(k.try_now()); },
      [](lock_kind& k) { k.unlock(); });
}

}  // namespace
}  // namespace dlock
