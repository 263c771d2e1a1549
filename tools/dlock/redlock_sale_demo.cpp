// `dlock demo flash-sale --redlock`: seed 004's oversell scenario under Redlock. Five private
// masters hold the lock, a sixth private server holds the stock; buyers (threads of four
// dlock::redlock objects, standing for four services) run the non-atomic read-check-write. The
// locked run kills two masters in the middle of the sale and must still sell exactly the stock.
#include "redlock_sale_demo.hpp"

#include <fmt/core.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "redis_process.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t master_count = 5;
constexpr std::size_t services = 4;
// Between reading the stock and writing it back a real service does work; this widens the race.
constexpr auto check_to_write_pause = 10ms;

struct sale_result {
  long long orders = 0;
  long long stock_left = 0;
  std::size_t fewest_holding = master_count;  // fewest masters seen holding the lock at a sale
  std::size_t most_holding = 0;
  int killed = 0;
  double seconds = 0;
};

class redlock_sale {
 public:
  explicit redlock_sale(const flash_sale_options& o) : o_(o) {
    for (std::size_t i = 0; i < master_count; ++i) {
      alive_[i] = true;
      masters_.push_back(std::make_unique<tools::redis_process>());
      urls_.push_back(masters_.back()->url());
    }
    stock_server_ = std::make_unique<tools::redis_process>();
    stock_ = std::make_unique<dlock::client>(stock_server_->url());
  }

  sale_result run(bool locked) {
    stock_->command({"SET", "stock", std::to_string(o_.stock)});
    stock_->command({"DEL", "orders"});
    sale_result r;
    std::mutex result_mutex;
    std::atomic<int> sold{0};
    std::vector<std::unique_ptr<dlock::redlock>> rls;
    if (locked) {
      for (std::size_t s = 0; s < services; ++s)
        rls.push_back(std::make_unique<dlock::redlock>(urls_));
    }
    const auto started = clock_type::now();
    std::vector<std::thread> buyers;
    buyers.reserve(static_cast<std::size_t>(o_.buyers));
    for (int b = 0; b < o_.buyers; ++b) {
      buyers.emplace_back([&, b] {
        if (!locked) {
          if (try_to_buy(b)) ++sold;
          return;
        }
        dlock::redlock_mutex m = rls[static_cast<std::size_t>(b) % services]->get_lock("sale");
        std::unique_lock hold{m};
        const std::size_t holding = masters_holding();
        {
          std::lock_guard l(result_mutex);
          r.fewest_holding = std::min(r.fewest_holding, holding);
          r.most_holding = std::max(r.most_holding, holding);
        }
        if (try_to_buy(b)) ++sold;
      });
    }
    if (locked) {
      // Two masters die in the middle of the sale (kill -9, no persistence).
      while (sold.load() < o_.stock / 2 && clock_type::now() - started < 30s)
        std::this_thread::sleep_for(1ms);
      for (const std::size_t i : {std::size_t{1}, std::size_t{3}}) {
        alive_[i] = false;  // first: a buyer that asks now counts it out
        masters_[i]->kill();
      }
      r.killed = 2;
    }
    for (auto& t : buyers)
      t.join();
    r.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    r.orders = stock_->command({"LLEN", "orders"}).integer;
    r.stock_left = std::stoll(stock_->command({"GET", "stock"}).str);
    if (!locked) r.fewest_holding = r.most_holding = 0;
    return r;
  }

 private:
  // Seed 004's purchase: GET the stock, check, work, SET one lower, record the order.
  bool try_to_buy(int id) {
    const long long stock = std::stoll(stock_->command({"GET", "stock"}).str);
    if (stock <= 0) return false;
    std::this_thread::sleep_for(check_to_write_pause);
    stock_->command({"SET", "stock", std::to_string(stock - 1)});
    stock_->command({"RPUSH", "orders", "buyer-" + std::to_string(id)});
    return true;
  }
  // How many living masters hold the lock now (the holder asks while it holds).
  std::size_t masters_holding() {
    std::size_t n = 0;
    for (std::size_t i = 0; i < masters_.size(); ++i) {
      if (!alive_[i]) continue;
      try {
        if (masters_[i]->cli({"EXISTS", "sale"}, 2s) == "1") ++n;
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): just died: not holding
      }
    }
    return n;
  }

  flash_sale_options o_;
  std::vector<std::unique_ptr<tools::redis_process>> masters_;
  // Which masters still run, for the buyers' threads (a redis_process is not thread-safe: its
  // kill() and running() must not race).
  std::array<std::atomic<bool>, master_count> alive_{};
  std::vector<std::string> urls_;
  std::unique_ptr<tools::redis_process> stock_server_;
  std::unique_ptr<dlock::client> stock_;
};

}  // namespace

int run_redlock_flash_sale_demo(const flash_sale_options& o) {
  if (!o.redis_url.empty()) {
    print_error("demo flash-sale --redlock starts its own 5 masters (it kills two); omit --redis");
    return exit_usage;
  }
  try {
    fmt::print(
        "Starting 5 private redis-server masters and a stock server on free loopback "
        "ports...\n");
    std::fflush(stdout);
    redlock_sale sale{o};
    fmt::print("{} buyers (threads of {} services), stock {}\n", o.buyers, services, o.stock);
    const sale_result open = sale.run(false);
    const sale_result locked = sale.run(true);
    fmt::print("\n  {:<34} {:>7} {:>11} {:>9} {:>16} {:>8}\n", "run", "orders", "stock left",
               "oversold", "held on (living)", "time");
    const auto row = [](const char* name, const sale_result& r, long long stock) {
      const std::string holding =
          r.most_holding == 0 ? "-" : fmt::format("{}-{} of 5", r.fewest_holding, r.most_holding);
      fmt::print("  {:<34} {:>7} {:>11} {:>9} {:>16} {:>6.2f} s\n", name, r.orders, r.stock_left,
                 std::max(0LL, r.orders - stock), holding, r.seconds);
    };
    row("without a lock", open, o.stock);
    row("Redlock, 2 of 5 masters killed", locked, o.stock);
    const bool exact = locked.orders == o.stock && locked.stock_left == 0;
    fmt::print(
        "\nRedlock {} exactly the stock ({} orders for {} items) with 2 of its 5 masters "
        "killed mid-sale.\n'held on (living)': living masters holding the lock during each sale; "
        "a hold granted by 3 of 5 stays safe when one of those dies (no one else can gather 3).\n",
        exact ? "sold" : "did NOT sell", locked.orders, o.stock);
    return exact ? exit_ok : exit_failure;
  } catch (const dlock::error& e) {
    print_error(fmt::format("demo flash-sale --redlock: {}", e.what()));
    return exit_code_for(e);
  } catch (const std::exception& e) {
    print_error(fmt::format("demo flash-sale --redlock: {}", e.what()));
    return exit_failure;
  }
}

}  // namespace dlock::cli
