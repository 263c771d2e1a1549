// Every pair of the lock family's kinds that can meet on one name, against a real server: a
// dlock::mutex, dlock::plain_lock, dlock::shared_mutex (both sides), dlock::semaphore or
// dlock::count_down_latch used on a name that another kind holds fails at once with
// errc::wrong_type naming both kinds, waits for nothing, and leaves the holder's data as it was.
// The one pair that cannot be told apart (a semaphore's and a latch's count are both a decimal
// string) is pinned down as documented in docs/locks.md ("Kinds on one name").
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;

// A refusal is one script call: well under this even on a loaded machine. A wrong kind taken for
// a held lock would wait the whole `attempt_wait` instead.
constexpr auto refusal_bound = 1s;
constexpr auto attempt_wait = 3s;

enum class kind { mutex, plain, read, write, semaphore, latch };

struct kind_info {
  kind k;
  const char* label;
  // How a refusal describes a key of this kind when it holds it, whoever asks.
  const char* held_as;
  // How a refusal names this kind when it asks.
  const char* asked_as;
};

const std::vector<kind_info>& kinds() {
  static const std::vector<kind_info> all{
      {kind::mutex, "mutex", "reentrant", "not a reentrant lock"},
      {kind::plain, "plain_lock", "plain lock", "not a plain lock"},
      {kind::read, "shared_mutex (read)", "read-write lock", "not a read-write lock"},
      {kind::write, "shared_mutex (write)", "read-write lock", "not a read-write lock"},
      {kind::semaphore, "semaphore", "a semaphore or a latch", "not a semaphore"},
      {kind::latch, "count_down_latch", "a semaphore or a latch", "not a count-down latch"},
  };
  return all;
}

// Both are a decimal count at the name: neither can see the other (docs/locks.md).
bool indistinguishable(kind a, kind b) {
  return (a == kind::semaphore && b == kind::latch) || (a == kind::latch && b == kind::semaphore);
}

// The two sides of one shared_mutex write the same hash: not a mix of kinds.
bool same_lock(kind a, kind b) {
  const auto rw = [](kind k) { return k == kind::read || k == kind::write; };
  return rw(a) && rw(b);
}

// Takes `k` on `name` with client `c` and keeps it until destroyed.
class holder {
 public:
  holder(client& c, kind k, const std::string& name) {
    switch (k) {
      case kind::mutex:
        lease_ = c.get_lock(name).async_try_lock_for(0ms).get();
        break;
      case kind::plain:
        lease_ = c.get_plain_lock(name).async_try_lock_for(0ms).get();
        break;
      case kind::read:
        lease_ = c.get_read_write_lock(name).async_acquire_shared({}).get();
        break;
      case kind::write:
        lease_ = c.get_read_write_lock(name).async_acquire({}).get();
        break;
      case kind::semaphore:
        lease_ = c.get_semaphore(name, 3).async_acquire({}).get();
        break;
      case kind::latch:
        if (!c.get_count_down_latch(name).try_set_count(2)) throw std::logic_error("latch exists");
        return;
    }
    if (!lease_) throw std::logic_error("the holder did not get its lock");
  }

 private:
  lock_lease lease_;
};

// One attempt of kind `k` on `name` that would wait `attempt_wait` for a holder of its own kind.
void attempt(client& c, kind k, const std::string& name) {
  switch (k) {
    case kind::mutex:
      (void)c.get_lock(name).async_try_lock_for(attempt_wait).get();
      return;
    case kind::plain:
      (void)c.get_plain_lock(name).async_try_lock_for(attempt_wait).get();
      return;
    case kind::read:
      (void)c.get_read_write_lock(name).async_acquire_shared({.wait = attempt_wait}).get();
      return;
    case kind::write:
      (void)c.get_read_write_lock(name).async_acquire({.wait = attempt_wait}).get();
      return;
    case kind::semaphore:
      (void)c.get_semaphore(name, 3).async_acquire({.wait = attempt_wait}).get();
      return;
    case kind::latch:
      (void)c.get_count_down_latch(name).wait_for(attempt_wait);
      return;
  }
}

// The key's whole content (DUMP) and whether it has a TTL: what "left as it was" means.
std::string snapshot(client& c, const std::string& name) {
  return c.command({"DUMP", name}).str +
         "|ttl:" + (c.command({"PTTL", name}).integer > 0 ? "yes" : "no");
}

TEST(KindMixing, EveryPairIsRefusedAtOnceNamingBothKindsAndTheHolderIsUntouched) {
  redis_server server;
  client owner{server.url()};
  client other{server.url()};
  int pairs = 0;
  for (const kind_info& held : kinds()) {
    for (const kind_info& asked : kinds()) {
      if (held.k == asked.k || same_lock(held.k, asked.k) || indistinguishable(held.k, asked.k)) {
        continue;
      }
      SCOPED_TRACE(std::string(asked.label) + " on a name holding a " + held.label);
      // Short enough to be shown whole (printable_name cuts at 64 bytes); one server per test.
      const std::string name = "kinds:" + std::to_string(pairs);
      holder h{owner, held.k, name};
      const std::string before = snapshot(owner, name);
      const auto start = steady_clock::now();
      try {
        attempt(other, asked.k, name);
        ADD_FAILURE() << "no error";
      } catch (const error& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.code(), errc::wrong_type) << what;
        EXPECT_NE(what.find(held.held_as), std::string::npos) << what;
        EXPECT_NE(what.find(asked.asked_as), std::string::npos) << what;
        EXPECT_NE(what.find(name), std::string::npos) << "the message names the key: " << what;
        EXPECT_EQ(what.find("WRONGTYPE"), std::string::npos) << what;
      }
      EXPECT_LT(steady_clock::now() - start, refusal_bound) << "it waited instead of refusing";
      EXPECT_EQ(snapshot(owner, name), before) << "the holder's data changed";
      ++pairs;
    }
  }
  // 6 kinds (a read-write lock's two sides count twice) minus the same lock and the count pair.
  EXPECT_EQ(pairs, 6 * 5 - 2 - 2);
}

// A hash whose field is not "<client id>:<holder number>" is someone's data, not a held lock:
// the reentrant and the fair lock refuse it at once instead of waiting for its release.
TEST(KindMixing, AHashThatHoldsDataIsRefusedByTheReentrantAndTheFairLock) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("record");
  (void)c.command({"HSET", name, "name", "bob"});
  const std::vector<std::pair<const char*, std::function<lock_lease()>>> tries{
      {"mutex", [&] { return c.get_lock(name).async_try_lock_for(attempt_wait).get(); }},
      {"fair_mutex", [&] { return c.get_fair_lock(name).async_try_lock_for(attempt_wait).get(); }},
  };
  for (const auto& [label, try_it] : tries) {
    SCOPED_TRACE(label);
    const auto start = steady_clock::now();
    try {
      (void)try_it();
      ADD_FAILURE() << "no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type) << e.what();
      EXPECT_NE(std::string(e.what()).find("a hash that is not a lock"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(steady_clock::now() - start, refusal_bound) << "it waited instead of refusing";
    EXPECT_EQ(c.command({"HGETALL", name}).elements.size(), 2U);
    EXPECT_EQ(c.command({"EXISTS", "redisson_lock_queue:{" + name + "}"}).integer, 0)
        << "it joined the fair line";
  }
}

// A plain lock's own data: foreign clients' tokens (random, never a bare short number) and
// dlock's values are taken for holders; a short decimal string is a count.
TEST(KindMixing, APlainLockTellsForeignTokensFromCounts) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("p");
  plain_lock p = c.get_plain_lock(name);
  // redis-py (uuid1().hex), node-redlock (16 random bytes as hex), redsync (base64 of 16 bytes),
  // and a 32-digit hex token that happens to have no letter: all foreign holders.
  for (const std::string token :
       {"8c1f6b9ef4a111eeb4d7acde48001122", "b1946ac92492d2347c6235b4d2611184",
        "q83vEjRWeJq83vEjRWeJqw==", "12345678901234567890123456789012"}) {
    SCOPED_TRACE(token);
    (void)c.command({"SET", name, token, "PX", "60000"});
    EXPECT_FALSE(p.try_lock());
    EXPECT_EQ(p.status().holders.at(0).owner, token);
  }
  // A count (a semaphore's or a latch's; Redis keeps them without a TTL), negative too.
  for (const std::string count : {"3", "0", "-2", "9223372036854775807"}) {
    SCOPED_TRACE(count);
    (void)c.command({"SET", name, count});
    std::error_code ec;
    EXPECT_FALSE(p.try_lock(ec));
    EXPECT_EQ(ec, errc::wrong_type);
    EXPECT_EQ(c.command({"GET", name}).str, count);
  }
}

// The pair that cannot be told apart, as documented: a semaphore reads a latch's count as its
// available permits, and a latch reads a semaphore's available permits as its count.
TEST(KindMixing, ASemaphoreAndALatchOnOneNameCannotTellEachOtherApart) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("count");
  count_down_latch latch = c.get_count_down_latch(name);
  ASSERT_TRUE(latch.try_set_count(2));
  semaphore s = c.get_semaphore(name, 5);
  EXPECT_EQ(s.available_permits(), 2) << "the latch's count read as permits";
  ASSERT_TRUE(s.try_acquire());
  EXPECT_EQ(latch.count(), 1) << "a permit taken counted the latch down";
  s.release();
  EXPECT_EQ(latch.count(), 2);
}

}  // namespace
}  // namespace dlock
