// A second process for the integration tests: holds a lock until killed, or runs counting
// workers under a lock. Prints its results on stdout.
//
//   dlock_test_lock_worker hold  URL NAME WATCHDOG_MS
//       takes NAME with a WATCHDOG_MS watchdog lease, prints "locked <token>", then waits to be
//       killed (the watchdog keeps renewing meanwhile).
//   dlock_test_lock_worker count URL NAME COUNTER THREADS ITERATIONS
//       THREADS threads each do ITERATIONS times: lock, GET COUNTER, SET COUNTER n+1, unlock;
//       prints "tokens_not_increasing <n>" (tokens seen by this process must only grow).
//   dlock_test_lock_worker plain-count URL NAME COUNTER THREADS ITERATIONS
//       the same with dlock::plain_lock.
//   dlock_test_lock_worker rw-hold-read URL NAME WATCHDOG_MS
//       takes a read hold of the read-write lock NAME, prints "locked", waits to be killed.
//   dlock_test_lock_worker rw-count URL NAME COUNTER THREADS ITERATIONS
//       THREADS threads each do ITERATIONS holds of the read-write lock NAME, every third a write
//       hold (a non-atomic increment of COUNTER), the others read holds of a few milliseconds.
//       Both sides count themselves in Redis (COUNTER:readers, COUNTER:writers) and check the
//       other side on entry; prints "violations <n> max_readers <m> tokens_not_increasing <k>".
//   dlock_test_lock_worker fair-hold URL NAME WATCHDOG_MS
//       takes the fair lock NAME, prints "locked <token>", waits to be killed.
//   dlock_test_lock_worker fair-wait URL NAME WAIT_MS
//       with a thread wait time (lock_options::fair_wait_timeout) of WAIT_MS, prints
//       "waiting <owner field>" and waits for the fair lock NAME (to be killed while it waits).
//   dlock_test_lock_worker fair-run URL NAME COUNTER THREADS MILLIS GRANTS
//       THREADS threads each take the fair lock NAME again and again until MILLIS have passed
//       (at least once), each hold a non-atomic increment of COUNTER and, unless GRANTS is "-",
//       an RPUSH of the thread's owner field to GRANTS (the order of the grants); prints
//       "holds <n1> <n2> ... wait_p99_us <p> wait_max_us <m> tokens_not_increasing <k>".
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

namespace {

// THREADS threads of ITERATIONS non-atomic increments of COUNTER under the lock `get(c)` gives.
template <typename GetLock>
int count(const std::vector<std::string>& args, GetLock get) {
  dlock::client c{args[1]};
  const std::string name = args[2], counter = args[3];
  const int threads = std::stoi(args[4]), iterations = std::stoi(args[5]);
  std::mutex token_mutex;
  std::uint64_t last_token = 0;
  std::atomic<int> not_increasing{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      auto m = get(c, name);
      for (int i = 0; i < iterations; ++i) {
        std::unique_lock guard{m};
        {
          std::lock_guard l(token_mutex);
          if (m.fencing_token() <= last_token) ++not_increasing;
          last_token = m.fencing_token();
        }
        const dlock::reply v = c.command({"GET", counter});
        const long long n = v.is_nil() ? 0 : std::stoll(v.str);
        c.command({"SET", counter, std::to_string(n + 1)});
      }
    });
  }
  for (auto& w : workers)
    w.join();
  std::cout << "tokens_not_increasing " << not_increasing.load() << std::endl;
  return 0;
}

// Exclusion checked across processes through the server's own order: a reader INCRs the readers
// and then reads the writers, a writer INCRs the writers and then reads the readers, so of a
// reader and a writer that overlap at least one sees the other (and two writers see each other).
int rw_count(const std::vector<std::string>& args) {
  dlock::client c{args[1]};
  const std::string name = args[2], counter = args[3];
  const std::string readers = counter + ":readers", writers = counter + ":writers";
  const int threads = std::stoi(args[4]), iterations = std::stoi(args[5]);
  std::atomic<int> violations{0}, not_increasing{0};
  std::atomic<long long> max_readers{0};
  std::mutex token_mutex;
  std::uint64_t last_token = 0;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      dlock::shared_mutex rw = c.get_read_write_lock(name);
      for (int i = 0; i < iterations; ++i) {
        if ((i + t) % 3 == 0) {
          std::unique_lock guard{rw};
          {
            std::lock_guard l(token_mutex);
            if (rw.fencing_token() <= last_token) ++not_increasing;
            last_token = rw.fencing_token();
          }
          if (c.command({"INCR", writers}).integer != 1) ++violations;
          const dlock::reply r = c.command({"GET", readers});
          if (!r.is_nil() && r.str != "0") ++violations;
          const dlock::reply v = c.command({"GET", counter});
          const long long n = v.is_nil() ? 0 : std::stoll(v.str);
          c.command({"SET", counter, std::to_string(n + 1)});
          c.command({"DECR", writers});
        } else {
          std::shared_lock guard{rw};
          const long long inside = c.command({"INCR", readers}).integer;
          long long seen = max_readers.load();
          while (inside > seen && !max_readers.compare_exchange_weak(seen, inside)) {
          }
          const dlock::reply w = c.command({"GET", writers});
          if (!w.is_nil() && w.str != "0") ++violations;
          std::this_thread::sleep_for(std::chrono::milliseconds(3));  // room for other readers
          c.command({"DECR", readers});
        }
      }
    });
  }
  for (auto& w : workers)
    w.join();
  std::cout << "violations " << violations.load() << " max_readers " << max_readers.load()
            << " tokens_not_increasing " << not_increasing.load() << std::endl;
  return 0;
}

// Fair lock: threads that keep coming back, their holds counted per thread and their waits
// measured (the time lock() took).
int fair_run(const std::vector<std::string>& args) {
  dlock::client c{args[1]};
  const std::string name = args[2], counter = args[3], grants = args[6];
  const int threads = std::stoi(args[4]);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::stoi(args[5]));
  std::mutex m;
  std::uint64_t last_token = 0;
  int not_increasing = 0;
  std::vector<long long> waits_us;
  std::vector<int> holds(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      dlock::fair_mutex f = c.get_fair_lock(name);
      std::vector<long long> mine;
      do {
        const auto asked = std::chrono::steady_clock::now();
        std::unique_lock guard{f};
        mine.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - asked)
                           .count());
        {
          std::lock_guard l(m);
          if (f.fencing_token() <= last_token) ++not_increasing;
          last_token = f.fencing_token();
        }
        const dlock::reply v = c.command({"GET", counter});
        const long long n = v.is_nil() ? 0 : std::stoll(v.str);
        c.command({"SET", counter, std::to_string(n + 1)});
        if (grants != "-") c.command({"RPUSH", grants, f.owner_id()});
        ++holds[static_cast<std::size_t>(t)];
      } while (std::chrono::steady_clock::now() < until);
      std::lock_guard l(m);
      waits_us.insert(waits_us.end(), mine.begin(), mine.end());
    });
  }
  for (auto& w : workers)
    w.join();
  std::sort(waits_us.begin(), waits_us.end());
  const std::size_t p99 = waits_us.empty() ? 0 : (waits_us.size() * 99 + 99) / 100 - 1;
  std::cout << "holds";
  for (int h : holds)
    std::cout << ' ' << h;
  std::cout << " wait_p99_us " << (waits_us.empty() ? 0 : waits_us[p99]) << " wait_max_us "
            << (waits_us.empty() ? 0 : waits_us.back()) << " tokens_not_increasing "
            << not_increasing << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "hold") {
      dlock::client_options o = dlock::client_options::from_url(args[1]);
      o.locks.watchdog_timeout = std::chrono::milliseconds(std::stoll(args[3]));
      dlock::client c{o};
      dlock::mutex m = c.get_lock(args[2]);
      m.lock();
      std::cout << "locked " << m.fencing_token() << std::endl;
      for (;;)
        ::pause();
    }
    if (args.size() == 4 && args[0] == "rw-hold-read") {
      dlock::client_options o = dlock::client_options::from_url(args[1]);
      o.locks.watchdog_timeout = std::chrono::milliseconds(std::stoll(args[3]));
      dlock::client c{o};
      dlock::shared_mutex rw = c.get_read_write_lock(args[2]);
      rw.lock_shared();
      std::cout << "locked" << std::endl;
      for (;;)
        ::pause();
    }
    if (args.size() == 6 && args[0] == "rw-count") return rw_count(args);
    if (args.size() == 4 && args[0] == "fair-hold") {
      dlock::client_options o = dlock::client_options::from_url(args[1]);
      o.locks.watchdog_timeout = std::chrono::milliseconds(std::stoll(args[3]));
      dlock::client c{o};
      dlock::fair_mutex f = c.get_fair_lock(args[2]);
      f.lock();
      std::cout << "locked " << f.fencing_token() << std::endl;
      for (;;)
        ::pause();
    }
    if (args.size() == 4 && args[0] == "fair-wait") {
      dlock::client_options o = dlock::client_options::from_url(args[1]);
      o.locks.fair_wait_timeout = std::chrono::milliseconds(std::stoll(args[3]));
      dlock::client c{o};
      dlock::fair_mutex f = c.get_fair_lock(args[2]);
      std::cout << "waiting " << f.owner_id() << std::endl;
      f.lock();
      std::cout << "locked" << std::endl;
      for (;;)
        ::pause();
    }
    if (args.size() == 7 && args[0] == "fair-run") return fair_run(args);
    if (args.size() == 6 && args[0] == "plain-count") {
      return count(
          args, [](dlock::client& c, const std::string& name) { return c.get_plain_lock(name); });
    }
    if (args.size() == 6 && args[0] == "count") {
      return count(args,
                   [](dlock::client& c, const std::string& name) { return c.get_lock(name); });
    }
  } catch (const dlock::error& e) {
    std::cerr << "lock_worker: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: see tests/support/lock_worker.cpp\n";
  return 64;
}
