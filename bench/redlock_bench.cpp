// bench/redlock_bench.cpp
//
// dlock::redlock beside node-redlock v5 (bench/baselines/redlock_lock.mjs, ioredis) over the same
// 3 private redis-servers, in the same run, sides interleaved round by round:
//   (a)  one thread: lock + unlock of one name, back to back, for --seconds;
//   (c2) 8 threads in 2 processes (4 each; node: 4 async workers per process) on one name, holding
//        --hold-ms and thinking --think-ms between acquisitions: acquisitions/s and the wait of
//        each acquisition (p50, p99 over both processes);
//   (h)  handoff: A holds, B waits in another redlock (node: another acquire()), A unlocks; the
//        time from A's unlock call to B holding, also in loopback round trips (RTT below).
// The medians of --repeat rounds are printed, with dlock / node-redlock ratios.
//
// Beside them, for (a) and (h): the floor, what threads with no I/O thread of their own do on
// hiredis with dlock's own lock and release scripts (the N requests written at once, a majority's
// replies read by polling the N sockets, the release written right behind and its replies read
// before the next attempt's; in (h) the waiter sleeps in poll() on its N subscriptions); and, for
// (a), the CPU time per acquisition of the 3 servers together (/proc/<pid>/stat) and of the client
// (this process for dlock and the floor, the node process for node-redlock).
// RTT: the median synchronous hiredis PING of a child process to the first master, the two pinned
// to different vCPUs (as the sides mostly run), before and after the rounds; the unit is the mean.
//
//   dlock_bench_redlock [--seconds 2] [--repeat 3] [--handoffs 50] [--node node]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "dlock/embedded_scripts.hpp"
#include "hiredis_support.hpp"
#include "locks/names.hpp"
#include "locks/types/wait_line.hpp"
#include "redis_process.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using ms_double = std::chrono::duration<double, std::milli>;

struct options {
  double seconds = 2;
  int repeat = 3;
  int handoffs = 50;
  int hold_ms = 1;
  int think_ms = 1;
  std::string node = "node";
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size()) + 0.999999);
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 50);
}

std::map<std::string, std::string> parse_kv(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

std::vector<double> parse_list(const std::string& text) {
  std::vector<double> v;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) v.push_back(std::stod(item));
  }
  return v;
}

struct result {
  double rate = 0;  // acquisitions per second
  std::vector<double> waits_ms;
  double p50_ms = 0, p99_ms = 0;
};

// --- dlock side ---------------------------------------------------------------------------------

result dlock_cycles(const std::vector<std::string>& urls, const std::string& name, int threads,
                    double seconds, int hold_ms, int think_ms) {
  dlock::redlock rl{urls};
  std::atomic<bool> stop{false};
  std::atomic<long> total{0};
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  const auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      dlock::redlock_mutex m = rl.get_lock(name);
      while (!stop.load()) {
        const auto w0 = clock_type::now();
        m.lock();
        waits[static_cast<std::size_t>(t)].push_back(ms_double(clock_type::now() - w0).count());
        if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        m.unlock();
        ++total;
        if (think_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers)
    w.join();
  result r;
  r.rate = static_cast<double>(total.load()) /
           std::chrono::duration<double>(clock_type::now() - t0).count();
  for (auto& w : waits)
    r.waits_ms.insert(r.waits_ms.end(), w.begin(), w.end());
  return r;
}

result dlock_handoff(const std::vector<std::string>& urls, const std::string& name, int n) {
  dlock::redlock a_side{urls}, b_side{urls};
  dlock::redlock_mutex a = a_side.get_lock(name);
  std::vector<double> d;
  for (int i = 0; i < n; ++i) {
    a.lock();
    clock_type::time_point t1;
    std::thread b([&] {
      dlock::redlock_mutex m = b_side.get_lock(name);
      m.lock();
      t1 = clock_type::now();
      m.unlock();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // B is waiting by now
    const auto t0 = clock_type::now();
    a.unlock();
    b.join();
    d.push_back(ms_double(t1 - t0).count());
  }
  result r;
  r.p50_ms = percentile(d, 50);
  r.p99_ms = percentile(d, 99);
  return r;
}

// --- the floor ----------------------------------------------------------------------------------

// One hiredis link per master with dlock's Redlock scripts loaded: the floor's I/O, done by the
// calling thread alone (requests appended per link, written together, replies read by polling).
class floor_links {
 public:
  explicit floor_links(const std::vector<std::string>& urls) {
    const std::string lock_source = dlock::locks::with_wait_line(dlock::scripts::plain_lock);
    const std::string unlock_source = dlock::locks::with_wait_line(dlock::scripts::plain_unlock);
    for (const auto& url : urls) {
      links_.push_back({dlock::bench::connect_hiredis(dlock::bench::endpoint_of(url)), 0});
      lock_sha_ = dlock::bench::run(links_.back().c.get(), {"SCRIPT", "LOAD", lock_source})->str;
      unlock_sha_ =
          dlock::bench::run(links_.back().c.get(), {"SCRIPT", "LOAD", unlock_source})->str;
    }
  }

  std::size_t size() const { return links_.size(); }
  std::size_t quorum() const { return links_.size() / 2 + 1; }

  // Writes an attempt of `owner` (a dlock owner, "<32 hex digits>:<n>") to every master.
  void attempt(const std::string& name, const std::string& owner, const std::string& nonce) {
    const std::string fence = dlock::locks::fence_key(name);
    for (auto& l : links_)
      append(l, {"EVALSHA", lock_sha_, "2", name, fence, "30000", owner, nonce, "0"});
    flush();
  }
  // Writes the release of `owner`'s hold `nonce` to every master (its unlock message published).
  void release(const std::string& name, const std::string& owner, const std::string& nonce) {
    const std::string channel = dlock::locks::plain_unlock_channel(name);
    for (auto& l : links_)
      append(l, {"EVALSHA", unlock_sha_, "2", name, channel, owner + ":" + nonce, "publish"});
    flush();
  }
  // Reads until at least `links_done` links have no reply due; returns the grants read.
  std::size_t read_until(std::size_t links_done) {
    std::size_t granted = 0;
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<link*> due;
      for (auto& l : links_) {
        if (l.pending > 0) {
          fds.push_back({l.c->fd, POLLIN, 0});
          due.push_back(&l);
        }
      }
      if (links_.size() - due.size() >= links_done) return granted;
      ::poll(fds.data(), fds.size(), -1);
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (redisBufferRead(due[i]->c.get()) != REDIS_OK) throw std::runtime_error("floor: read");
        void* r = nullptr;
        while (due[i]->pending > 0 && redisGetReplyFromReader(due[i]->c.get(), &r) == REDIS_OK &&
               r != nullptr) {
          const auto* reply = static_cast<redisReply*>(r);
          if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
              reply->element[0]->type == REDIS_REPLY_INTEGER && reply->element[0]->integer == 1) {
            ++granted;
          }
          freeReplyObject(r);
          --due[i]->pending;
        }
      }
    }
  }

 private:
  struct link {
    dlock::bench::hiredis_context c;
    int pending = 0;  // replies not yet read
  };
  static void append(link& l, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisAppendCommandArgv(l.c.get(), static_cast<int>(args.size()), argv.data(), lengths.data());
    ++l.pending;
  }
  void flush() {
    for (auto& l : links_) {
      int done = 0;
      while (done == 0) {
        if (redisBufferWrite(l.c.get(), &done) != REDIS_OK)
          throw std::runtime_error("floor: write");
      }
    }
  }

  std::vector<link> links_;
  std::string lock_sha_, unlock_sha_;
};

const std::string floor_owner_a = "0123456789abcdef0123456789abcdef:1";
const std::string floor_owner_b = "fedcba9876543210fedcba9876543210:2";

// (a) on hiredis, one thread, dlock's scripts: see the top of this file. Returns cycles per second.
double floor_cycles(const std::vector<std::string>& urls, const std::string& name, double seconds) {
  floor_links links(urls);
  std::size_t granted = 0;  // lock replies that granted, to check the floor did the work
  long cycles = 0;
  const auto t0 = clock_type::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (clock_type::now() < end) {
    const std::string nonce = std::to_string(cycles);
    links.attempt(name, floor_owner_a, nonce);
    granted += links.read_until(links.quorum());
    links.release(name, floor_owner_a, nonce);
    ++cycles;
  }
  granted += links.read_until(links.size());
  const double took = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (granted < static_cast<std::size_t>(cycles) * links.quorum()) {
    throw std::runtime_error("floor: " + std::to_string(granted) + " grants in " +
                             std::to_string(cycles) + " cycles");
  }
  return static_cast<double>(cycles) / took;
}

// (h) on hiredis with dlock's scripts, as dlock_handoff() has it (A holds, B waits in a thread of
// the same process, A unlocks at t0, B holds at t1), with no I/O thread on either side: B attempts
// once, then sleeps in poll() on its subscriptions to the N unlock channels, and at the first
// message writes its attempt to every master and polls until a majority answered.
result floor_handoff(const std::vector<std::string>& urls, const std::string& name, int n) {
  floor_links a(urls), b(urls);
  std::vector<dlock::bench::hiredis_context> subscribers;
  for (const auto& url : urls) {
    subscribers.push_back(dlock::bench::connect_hiredis(dlock::bench::endpoint_of(url)));
    dlock::bench::run(subscribers.back().get(),
                      {"SUBSCRIBE", dlock::locks::plain_unlock_channel(name)});
  }
  // Reads every message that has come on the subscriptions; waits for one first if `wait`.
  const auto drain = [&](bool wait) {
    std::vector<pollfd> fds;
    for (auto& s : subscribers)
      fds.push_back({s->fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), wait ? -1 : 0) < 0) throw std::runtime_error("floor: poll");
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (redisBufferRead(subscribers[i].get()) != REDIS_OK)
        throw std::runtime_error("floor: read");
      void* r = nullptr;
      while (redisGetReplyFromReader(subscribers[i].get(), &r) == REDIS_OK && r != nullptr)
        freeReplyObject(r);
    }
  };
  std::vector<double> d;
  for (int i = 0; i < n; ++i) {
    const std::string nonce = std::to_string(i);
    a.attempt(name, floor_owner_a, nonce);
    if (a.read_until(a.size()) < a.size()) throw std::runtime_error("floor: A not granted");
    drain(false);  // the previous round's messages
    clock_type::time_point t1;
    std::atomic<bool> waiting{false};
    std::string failed;
    std::thread waiter([&] {
      try {
        b.attempt(name, floor_owner_b, nonce);
        std::size_t granted = b.read_until(b.size());
        waiting = true;
        while (granted < b.quorum()) {
          if (granted > 0) {  // a minority's grants: given back, as Redlock does
            b.release(name, floor_owner_b, nonce);
            b.read_until(b.size());
          }
          drain(true);
          b.attempt(name, floor_owner_b, nonce);
          granted = b.read_until(b.quorum());
        }
        t1 = clock_type::now();
        b.read_until(b.size());
        b.release(name, floor_owner_b, nonce);
        b.read_until(b.size());
      } catch (const std::exception& e) {
        failed = e.what();
        waiting = true;
      }
    });
    while (!waiting.load())
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // B sleeps in poll() by now
    const auto t0 = clock_type::now();
    a.release(name, floor_owner_a, nonce);
    a.read_until(a.size());
    waiter.join();
    if (!failed.empty()) throw std::runtime_error(failed);
    d.push_back(ms_double(t1 - t0).count());
  }
  result r;
  r.p50_ms = percentile(d, 50);
  r.p99_ms = percentile(d, 99);
  return r;
}

// --- node-redlock side --------------------------------------------------------------------------

std::vector<std::string> node_argv(const options& o, const std::string& ports,
                                   const std::string& scenario, const std::string& key,
                                   int threads) {
  return {o.node,         std::string(DLOCK_BENCH_BASELINES_DIR) + "/redlock_lock.mjs",
          "--ports",      ports,
          "--scenario",   scenario,
          "--seconds",    std::to_string(o.seconds),
          "--threads",    std::to_string(threads),
          "--hold-ms",    std::to_string(o.hold_ms),
          "--think-ms",   std::to_string(o.think_ms),
          "--handoffs",   std::to_string(o.handoffs),
          "--key",        key,
          "--print-waits"};
}

std::map<std::string, std::string> run_checked(const std::vector<std::string>& argv,
                                               double seconds) {
  const auto res = dlock::tools::run_command(
      argv, std::chrono::milliseconds(static_cast<long>(seconds * 1000) + 300'000));
  if (res.timed_out || res.exit_code != 0) {
    throw std::runtime_error(argv[0] + " " + argv[1] + " failed: " + res.err + res.out);
  }
  return parse_kv(res.out);
}

// (c2) from two processes at once; each prints acquisitions, seconds and every wait.
result two_processes(const std::vector<std::string>& argv0, const std::vector<std::string>& argv1,
                     double seconds) {
  std::map<std::string, std::string> kv[2];
  std::string failed[2];
  const auto run = [&](int i, const std::vector<std::string>& argv) {
    try {
      kv[i] = run_checked(argv, seconds);
    } catch (const std::exception& e) {
      failed[i] = e.what();
    }
  };
  std::thread second([&] { run(1, argv1); });
  run(0, argv0);
  second.join();  // before any throw: a joinable thread's destructor would end the program
  for (const std::string& f : failed)
    if (!f.empty()) throw std::runtime_error(f);
  result r;
  for (auto& k : kv) {
    r.rate += std::stod(k.at("acquisitions")) / std::stod(k.at("seconds"));
    const auto w = parse_list(k["waits_ms"]);
    r.waits_ms.insert(r.waits_ms.end(), w.begin(), w.end());
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::string worker_urls, worker_name, worker_ping;
  int worker_cpu = -1;
  int worker_threads = 0;
  CLI::App app{"dlock::redlock beside node-redlock over the same 3 private redis-servers"};
  app.add_option("--seconds", o.seconds, "Seconds per timed run (default 2)")
      ->check(dlock::bench::number_range(0.1, 600));
  app.add_option("--repeat", o.repeat, "Rounds; medians reported (default 3)")
      ->check(CLI::Range(1, 100));
  app.add_option("--handoffs", o.handoffs, "Handoffs per (h) run (default 50)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--node", o.node, "Node for the baseline (default: node; 'none' skips it)");
  // Internal: one (c2) process of the dlock side.
  app.add_option("--worker-c2", worker_urls)->group("");
  // Internal: the RTT child (prints rtt_us=<median hiredis PING to this URL>).
  app.add_option("--worker-ping", worker_ping)->group("");
  app.add_option("--worker-cpu", worker_cpu)->group("");  // the vCPU it pins itself to
  app.add_option("--worker-name", worker_name)->group("");
  app.add_option("--worker-threads", worker_threads)->group("");
  CLI11_PARSE(app, argc, argv);

  if (!worker_ping.empty()) {
    if (worker_cpu >= 0 && !dlock::bench::pin(0, worker_cpu)) return 1;
    std::cout << "rtt_us="
              << dlock::bench::median_ping_us(dlock::bench::endpoint_of(worker_ping), 2000) << "\n";
    return 0;
  }
  if (!worker_urls.empty()) {
    std::vector<std::string> urls;
    std::istringstream in(worker_urls);
    for (std::string u; std::getline(in, u, ' ');)
      urls.push_back(u);
    const result r =
        dlock_cycles(urls, worker_name, worker_threads, o.seconds, o.hold_ms, o.think_ms);
    std::ostringstream waits;
    for (double w : r.waits_ms)
      waits << w << ",";
    std::cout << "acquisitions=" << static_cast<long>(r.rate * o.seconds)
              << "\nseconds=" << o.seconds << "\nwaits_ms=" << waits.str() << "\n";
    return 0;
  }
  if (o.node == "none") o.node.clear();

  try {
    std::vector<std::unique_ptr<dlock::tools::redis_process>> masters;
    std::vector<std::string> urls;
    std::string ports, joined;
    for (int i = 0; i < 3; ++i) {
      masters.push_back(
          std::make_unique<dlock::tools::redis_process>(dlock::tools::service_options()));
      urls.push_back(masters.back()->url());
      ports += (i ? "," : "") + std::to_string(masters.back()->port());
      joined += (i ? " " : "") + masters.back()->url();
    }
    dlock::client probe{urls[0]};
    const std::string self = argv[0];
    // On two vCPUs or more: the first master on one, the child on another (the sides' processes
    // mostly run apart from a server: see docs/benchmarks.md, "Session 9").
    const auto child_rtt_ms = [&] {
      const bool pinned =
          std::thread::hardware_concurrency() >= 2 && dlock::bench::pin(masters[0]->pid(), 0);
      const auto kv =
          run_checked({self, "--worker-ping", urls[0], "--worker-cpu", pinned ? "1" : "-1"}, 10);
      if (pinned) dlock::bench::pin(masters[0]->pid(), -1);
      return std::stod(kv.at("rtt_us")) / 1000;
    };
    const double rtt_before_ms = child_rtt_ms();
    std::vector<double> rtt;
    for (int i = 0; i < 2000; ++i) {
      const auto t0 = clock_type::now();
      probe.command({"PING"});
      rtt.push_back(ms_double(clock_type::now() - t0).count());
    }
    const double in_process_ms = percentile(rtt, 50);
    dlock::bench::print_idle("", "before");
    std::printf(
        "3 masters: redis-server %s on 127.0.0.1 ports %s\n"
        "RTT before the rounds (median synchronous hiredis PING, child process on another vCPU "
        "than the first master): %.1f us\n"
        "  (a dlock::client PING in this process, the unit until session 9: %.1f us)\n",
        dlock::bench::info_field(probe.command({"INFO", "server"}).str, "redis_version").c_str(),
        ports.c_str(), rtt_before_ms * 1000, in_process_ms * 1000);
    std::vector<pid_t> pids;
    for (const auto& m : masters)
      pids.push_back(m->pid());
    const auto servers_cpu = [&] {
      double total = 0;
      for (const pid_t pid : pids)
        total += dlock::bench::cpu_seconds_of(pid);
      return total;
    };
    // Runs one (a) side; records its rate and the CPU microseconds per acquisition.
    const auto measured = [&](bool child, const auto& run_side) {
      const double servers0 = servers_cpu();
      const double client0 =
          child ? dlock::bench::children_cpu_seconds() : dlock::bench::own_cpu_seconds();
      const auto [rate, seconds] = run_side();
      const double servers = servers_cpu() - servers0;
      const double client =
          (child ? dlock::bench::children_cpu_seconds() : dlock::bench::own_cpu_seconds()) -
          client0;
      return std::tuple{rate, servers * 1e6 / (rate * seconds), client * 1e6 / (rate * seconds)};
    };
    if (!o.node.empty()) {
      const auto v = dlock::tools::run_command(
          {o.node, std::string(DLOCK_BENCH_BASELINES_DIR) + "/redlock_lock.mjs", "--version"});
      std::printf("baseline: %s", v.exit_code == 0 ? v.out.c_str() : "not runnable\n");
      if (v.exit_code != 0) o.node.clear();
    }

    std::map<std::string, std::vector<double>> figures;  // "<side> <metric>" -> one per round
    for (int round = 0; round < o.repeat; ++round) {
      const std::string suffix = ":" + std::to_string(round);
      // (a)
      const auto record_a = [&](const std::string& side, const auto& figures_of_run) {
        const auto [rate, servers_us, client_us] = figures_of_run;
        figures[side + " a"].push_back(rate);
        figures[side + " a srv"].push_back(servers_us);
        figures[side + " a cli"].push_back(client_us);
      };
      record_a("dlock", measured(false, [&] {
                 return std::pair{dlock_cycles(urls, "bench:a" + suffix, 1, o.seconds, 0, 0).rate,
                                  o.seconds};
               }));
      record_a("floor", measured(false, [&] {
                 return std::pair{floor_cycles(urls, "bench:fa" + suffix, o.seconds), o.seconds};
               }));
      if (!o.node.empty()) {
        record_a("node", measured(true, [&] {
                   const auto kv =
                       run_checked(node_argv(o, ports, "a", "bench:na" + suffix, 1), o.seconds);
                   const double seconds = std::stod(kv.at("seconds"));
                   return std::pair{std::stod(kv.at("acquisitions")) / seconds, seconds};
                 }));
      }
      // (c2)
      const std::vector<std::string> worker{self,
                                            "--worker-c2",
                                            joined,
                                            "--worker-name",
                                            "bench:c2" + suffix,
                                            "--worker-threads",
                                            "4",
                                            "--seconds",
                                            std::to_string(o.seconds)};
      const result c2 = two_processes(worker, worker, o.seconds);
      figures["dlock c2"].push_back(c2.rate);
      figures["dlock c2 p50"].push_back(percentile(c2.waits_ms, 50));
      figures["dlock c2 p99"].push_back(percentile(c2.waits_ms, 99));
      if (!o.node.empty()) {
        const auto argv_node = node_argv(o, ports, "c2", "bench:nc2" + suffix, 4);
        const result n = two_processes(argv_node, argv_node, o.seconds);
        figures["node c2"].push_back(n.rate);
        figures["node c2 p50"].push_back(percentile(n.waits_ms, 50));
        figures["node c2 p99"].push_back(percentile(n.waits_ms, 99));
      }
      // (h)
      const result h = dlock_handoff(urls, "bench:h" + suffix, o.handoffs);
      figures["dlock h p50"].push_back(h.p50_ms);
      figures["dlock h p99"].push_back(h.p99_ms);
      const result fh = floor_handoff(urls, "bench:fh" + suffix, o.handoffs);
      figures["floor h p50"].push_back(fh.p50_ms);
      figures["floor h p99"].push_back(fh.p99_ms);
      if (!o.node.empty()) {
        const auto kv = run_checked(node_argv(o, ports, "h", "bench:nh" + suffix, 1), o.seconds);
        figures["node h p50"].push_back(std::stod(kv.at("handoff_p50_ms")));
        figures["node h p99"].push_back(std::stod(kv.at("handoff_p99_ms")));
      }
    }
    const auto m = [&](const std::string& k) {
      return figures.count(k) != 0U ? median(figures[k]) : 0.0;
    };
    const auto ratio = [&](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::printf("\nmedians of %d rounds, %.1f s each\n", o.repeat, o.seconds);
    std::printf("%-34s %14s %14s %8s\n", "scenario", "dlock", "node-redlock", "ratio");
    const double rtt_ms = (rtt_before_ms + child_rtt_ms()) / 2;
    std::printf("RTT unit (the mean of the child's PING before and after the rounds): %.1f us\n",
                rtt_ms * 1000);
    std::printf("%-34s %14.0f %14.0f %7.2fx\n", "(a) 1 thread, acquisitions/s", m("dlock a"),
                m("node a"), ratio(m("dlock a"), m("node a")));
    if (figures.count("node a") != 0U) {
      // The rounds' own ratios (the sides interleaved round by round): how far one round's
      // ratio, what a single run reports, strays from the median.
      std::vector<double> per_round;
      for (std::size_t i = 0; i < figures["dlock a"].size(); ++i)
        per_round.push_back(ratio(figures["dlock a"][i], figures["node a"][i]));
      std::sort(per_round.begin(), per_round.end());
      std::printf("%-34s", "(a) ratio per round, sorted");
      for (const double r : per_round)
        std::printf(" %.2fx", r);
      std::printf("  (median %.2fx)\n", median(per_round));
    }
    std::printf("%-34s %14.1f %14.1f\n", "(a) servers' CPU us/acquisition", m("dlock a srv"),
                m("node a srv"));
    std::printf("%-34s %14.1f %14.1f\n", "(a) client CPU us/acquisition", m("dlock a cli"),
                m("node a cli"));
    std::printf(
        "(a) floor (hiredis, one thread, dlock's scripts): %.0f/s = %.2fx node-redlock, "
        "dlock = %.2fx the floor; CPU us/acquisition: servers %.1f, client %.1f\n",
        m("floor a"), ratio(m("floor a"), m("node a")), ratio(m("dlock a"), m("floor a")),
        m("floor a srv"), m("floor a cli"));
    std::printf("%-34s %14.0f %14.0f %7.2fx\n", "(c2) 8 thr/2 proc, acquisitions/s", m("dlock c2"),
                m("node c2"), ratio(m("dlock c2"), m("node c2")));
    std::printf("%-34s %14.2f %14.2f\n", "(c2) wait p50 ms", m("dlock c2 p50"), m("node c2 p50"));
    std::printf("%-34s %14.2f %14.2f\n", "(c2) wait p99 ms", m("dlock c2 p99"), m("node c2 p99"));
    std::printf("%-34s %14.3f %14.3f\n", "(h) handoff p50 ms", m("dlock h p50"), m("node h p50"));
    std::printf("%-34s %14.3f %14.3f\n", "(h) handoff p99 ms", m("dlock h p99"), m("node h p99"));
    std::printf("%-34s %14.1f %14.1f\n", "(h) handoff p50 in RTTs", m("dlock h p50") / rtt_ms,
                m("node h p50") / rtt_ms);
    std::printf(
        "(h) floor (hiredis, no I/O threads, dlock's scripts, woken by pub/sub): p50 %.3f ms = "
        "%.1f RTT, p99 %.3f ms; dlock = %.2fx the floor's p50\n",
        m("floor h p50"), m("floor h p50") / rtt_ms, m("floor h p99"),
        ratio(m("dlock h p50"), m("floor h p50")));
    dlock::bench::print_idle("", "after");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_redlock: %s\n", e.what());
    return 1;
  }
  return 0;
}
