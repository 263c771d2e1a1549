#include "flash_sale_demo.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Between reading the stock and writing it back a real service does work (a payment check, a
// database call); this pause stands for it and widens the race window.
constexpr auto check_to_write_pause = 10ms;
// The explicit lease of the buyer that stalls in the fencing round: short, to keep the demo quick.
constexpr auto stalled_lease = 500ms;

// The README's fenced write ("Fencing tokens"): the stock accepts a write only with a token at
// least as new as the newest it has seen.
const dlock::script fenced_write{R"lua(
local highest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[1]) < highest then return 0 end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return 1
)lua"};

enum class sale_mode { no_lock, lock, fenced };

std::optional<sale_mode> parse_mode(std::string_view mode) {
  if (mode == "none") return sale_mode::no_lock;
  if (mode == "lock") return sale_mode::lock;
  if (mode == "fenced") return sale_mode::fenced;
  return std::nullopt;
}

std::string mode_argument(sale_mode mode) {
  switch (mode) {
    case sale_mode::no_lock:
      return "none";
    case sale_mode::lock:
      return "lock";
    case sale_mode::fenced:
      return "fenced";
  }
  return "none";
}

struct sale_keys {
  explicit sale_keys(const std::string& prefix)
      : lock(prefix + "lock"),
        stock(prefix + "stock"),
        orders(prefix + "orders"),
        fence(prefix + "stock:highest-token"),
        refused(prefix + "refused-writes") {}
  std::string lock;     // the dlock lock the buyers take
  std::string stock;    // items left
  std::string orders;   // one entry per sale
  std::string fence;    // the highest fencing token the stock has accepted
  std::string refused;  // stale writes the fenced stock refused
};

long long read_number(dlock::client& redis, const std::string& key) {
  const reply r = redis.command({"GET", key});
  return r.is_nil() ? 0 : std::stoll(r.str);
}

// Writes the stock; with a token (not 0), through the fenced write. Returns whether it was taken.
bool write_stock(dlock::client& redis, const sale_keys& k, long long value, std::uint64_t token) {
  const std::string v = std::to_string(value);
  if (token == 0) {
    redis.command({"SET", k.stock, v});
    return true;
  }
  return redis.eval(fenced_write, {k.stock, k.fence}, {std::to_string(token), v}).integer == 1;
}

// Seed 004's purchase, not atomic: GET the stock, check it, work a little, SET it one lower,
// record the order. Two buyers between the GET and the SET sell the same item.
void try_to_buy(dlock::client& redis, const sale_keys& k, int id, std::uint64_t token) {
  const long long stock = read_number(redis, k.stock);
  if (stock <= 0) return;  // sold out
  std::this_thread::sleep_for(check_to_write_pause);
  if (!write_stock(redis, k, stock - 1, token)) {
    redis.command({"INCR", k.refused});
    return;
  }
  redis.command({"RPUSH", k.orders, "buyer-" + std::to_string(id)});
}

void buy(dlock::client& redis, const sale_keys& k, sale_mode mode, int id) {
  if (mode == sale_mode::no_lock) return try_to_buy(redis, k, id, 0);
  dlock::mutex m = redis.get_lock(k.lock);
  std::unique_lock hold{m};
  try_to_buy(redis, k, id, mode == sale_mode::fenced ? m.fencing_token() : 0);
}

struct round_result {
  long long orders = 0;
  long long stock_left = 0;
  long long refused = 0;
  double seconds = 0;
};

class flash_sale {
 public:
  flash_sale(const flash_sale_options& o, const std::string& url)
      : o_(o),
        url_(url),
        redis_(url),
        prefix_(fmt::format("dlock-demo:flash-sale:{}:", ::getpid())),
        keys_(prefix_) {}

  ~flash_sale() {
    // Leave nothing behind on a server that is not ours. The lock's fencing counter is named in
    // the README ("Fencing tokens").
    try {
      redis_.command({"DEL", keys_.lock, keys_.stock, keys_.orders, keys_.fence, keys_.refused,
                      "dlock:fence:{" + keys_.lock + "}"});
    } catch (const dlock::error&) {
      // Redis went away: nothing to clean.
    }
  }
  flash_sale(const flash_sale&) = delete;
  flash_sale& operator=(const flash_sale&) = delete;

  round_result run(sale_mode mode) {
    reset();
    round_result r;
    if (mode == sale_mode::fenced) {
      r.seconds = run_with_stalled_buyer();
    } else {
      const race_split split = split_participants(o_.buyers);
      fmt::print("  {} buyers ({}) try to buy at the same moment...\n", o_.buyers, describe(split));
      std::fflush(stdout);
      r.seconds = race(mode, split).count();
    }
    r.orders = redis_.command({"LLEN", keys_.orders}).integer;
    r.stock_left = read_number(redis_, keys_.stock);
    r.refused = read_number(redis_, keys_.refused);
    fmt::print(
        "  done in {:.2f} s: {} orders, stock left {}{}\n\n", r.seconds, r.orders, r.stock_left,
        mode == sale_mode::fenced ? fmt::format(", {} stale write(s) refused", r.refused) : "");
    std::fflush(stdout);
    return r;
  }

 private:
  void reset() {
    redis_.command({"DEL", keys_.orders, keys_.fence, keys_.refused});
    redis_.command({"SET", keys_.stock, std::to_string(o_.stock)});
  }

  std::chrono::duration<double> race(sale_mode mode, const race_split& split) {
    const std::vector<std::string> worker_args{"--scenario",        "flash-sale", "--mode",
                                               mode_argument(mode), "--prefix",   prefix_};
    return run_race(url_, redis_, split, worker_args,
                    [&](dlock::client& redis, int id) { buy(redis, keys_, mode, id); });
  }

  // Buyer 1 takes the lock with a short explicit lease, reads the stock, and stalls (a GC pause,
  // a swapped-out VM) until the others are done, long after its lease ran out. It then writes
  // what it read minus one: without fencing, that would put sold items back on sale.
  double run_with_stalled_buyer() {
    const auto started = clock_type::now();
    dlock::mutex m = redis_.get_lock(keys_.lock);
    m.lock(dlock::lease_time(stalled_lease));
    const std::uint64_t token = m.fencing_token();
    const long long seen = read_number(redis_, keys_.stock);
    fmt::print(
        "  buyer 1 takes the lock with an explicit {} lease (token {}), reads stock {},\n"
        "  and stalls before writing it back, as in a long GC pause.\n",
        format_seconds(stalled_lease), token, seen);
    const race_split split = split_participants(o_.buyers - 1, 2);
    fmt::print(
        "  The other {} buyers ({}) wait for the lock;\n"
        "  it frees itself when the lease ends, and they buy with newer tokens...\n",
        o_.buyers - 1, describe(split));
    std::fflush(stdout);
    race(sale_mode::fenced, split);

    const bool reported_lost = m.stop_token().stop_requested();
    const bool accepted = write_stock(redis_, keys_, seen - 1, token);
    if (accepted) {
      redis_.command({"RPUSH", keys_.orders, "buyer-1"});
    } else {
      redis_.command({"INCR", keys_.refused});
    }
    fmt::print(
        "  buyer 1 wakes up {:.2f} s later ({}),\n"
        "  and writes stock {} with token {}: {}\n",
        std::chrono::duration<double>(clock_type::now() - started).count(),
        reported_lost ? "its stop_token says the hold was lost" : "its hold was not reported lost",
        seen - 1, token,
        accepted ? "ACCEPTED: a stale write went through"
                 : fmt::format("REFUSED, the stock has seen token {} already",
                               read_number(redis_, keys_.fence)));
    m.unlock();  // the hold is gone; this changes nothing on the server
    return std::chrono::duration<double>(clock_type::now() - started).count();
  }

  const flash_sale_options& o_;
  const std::string url_;
  dlock::client redis_;
  const std::string prefix_;
  const sale_keys keys_;
};

std::string verdict_line(bool ok, const std::string& text) {
  return fmt::format("  [{}] {}\n", ok ? " ok " : "FAIL", text);
}

}  // namespace

participant_fn flash_sale_participant(const std::string& mode, const std::string& prefix) {
  const std::optional<sale_mode> m = parse_mode(mode);
  if (!m) return nullptr;
  return [mode = *m, keys = sale_keys(prefix)](dlock::client& redis, int id) {
    buy(redis, keys, mode, id);
  };
}

int run_flash_sale_demo(const flash_sale_options& o) {
  fmt::print(
      "Flash sale (seed 004): {} buyers, {} items in stock. Each buyer reads the stock from\n"
      "Redis, checks it is above zero, works for {} ms, writes it back one lower and records an\n"
      "order: a read-check-write that is not atomic.\n\n",
      o.buyers, o.stock, check_to_write_pause.count());
  try {
    const demo_server server(o.redis_url);
    fmt::print("Redis: {}\n\n", server.url());
    flash_sale sale(o, server.url());

    fmt::print("[1/3] Without a lock\n");
    const round_result unlocked = sale.run(sale_mode::no_lock);
    fmt::print("[2/3] With dlock: each buyer holds the lock during its read-check-write\n");
    const round_result locked = sale.run(sale_mode::lock);
    fmt::print("[3/3] With dlock and fencing tokens: writes go through the fenced-write script\n");
    const round_result fenced = sale.run(sale_mode::fenced);

    const long long expected = std::min<long long>(o.buyers, o.stock);
    const long long expected_fenced = std::min<long long>(o.buyers - 1, o.stock);
    auto oversold = [&](const round_result& r) { return std::max(0LL, r.orders - o.stock); };
    fmt::print("  {:<24} {:>7} {:>11} {:>9} {:>22} {:>8}\n", "run", "orders", "stock left",
               "oversold", "stale writes refused", "time");
    auto row = [&](const char* name, const round_result& r, bool fencing) {
      fmt::print("  {:<24} {:>7} {:>11} {:>9} {:>22} {:>6.2f} s\n", name, r.orders, r.stock_left,
                 oversold(r), fencing ? std::to_string(r.refused) : std::string("-"), r.seconds);
    };
    row("without a lock", unlocked, false);
    row("with dlock", locked, false);
    row("dlock + fencing tokens", fenced, true);
    fmt::print("\n");

    const bool locked_ok = locked.orders == expected && locked.stock_left == o.stock - expected;
    const bool fenced_ok = fenced.orders == expected_fenced &&
                           fenced.stock_left == o.stock - expected_fenced && fenced.refused == 1;
    std::string verdict;
    if (oversold(unlocked) > 0) {
      verdict += verdict_line(true, fmt::format("without a lock {} orders were taken for {} "
                                                "items: oversold by {}",
                                                unlocked.orders, o.stock, oversold(unlocked)));
    } else {
      verdict += fmt::format(
          "  [info] without a lock nothing was oversold this time: the race depends on timing "
          "(and needs more buyers than items)\n");
    }
    verdict += verdict_line(locked_ok, fmt::format("with dlock exactly {} sold, stock {} left",
                                                   locked.orders, locked.stock_left));
    verdict += verdict_line(
        fenced_ok, fmt::format("with fencing {} sold, stock {} left, and the stalled buyer's "
                               "stale write refused ({} refused)",
                               fenced.orders, fenced.stock_left, fenced.refused));
    fmt::print("Verdict\n{}\n", verdict);
    fmt::print(
        "The lock makes the read-check-write exclusive. A lease cannot stop a holder that "
        "stalls\npast it; the fencing token lets the stock itself refuse that holder's late "
        "write.\n\n");
    // One line for scripts and tests.
    fmt::print(
        "result: stock={} buyers={} unlocked_orders={} locked_orders={} locked_stock_left={} "
        "fenced_orders={} fenced_stock_left={} stale_writes_refused={} verdict={}\n",
        o.stock, o.buyers, unlocked.orders, locked.orders, locked.stock_left, fenced.orders,
        fenced.stock_left, fenced.refused, locked_ok && fenced_ok ? "pass" : "fail");
    return locked_ok && fenced_ok ? exit_ok : exit_failure;
  } catch (const dlock::error& e) {
    print_error(fmt::format("flash-sale demo: {}", e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(fmt::format("flash-sale demo: {}", e.what()));
    return exit_failure;
  }
}

}  // namespace dlock::cli
