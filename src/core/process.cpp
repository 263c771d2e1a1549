#include "core/process.hpp"

#include <pthread.h>

#include <atomic>
#include <mutex>

#include "dlock/error.hpp"

namespace dlock::core {
namespace {

std::atomic<std::uint64_t> generation{0};

void on_fork_child() {
  generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::uint64_t fork_generation() noexcept {
  return generation.load(std::memory_order_relaxed);
}

void watch_forks() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pthread_atfork(nullptr, nullptr, &on_fork_child) != 0) {
      throw error(errc::invalid_argument, "pthread_atfork failed: cannot detect fork()");
    }
  });
}

void check_same_process(std::uint64_t made_in) {
  if (made_in != fork_generation()) {
    throw error(errc::forked,
                "this client was made before fork() and cannot be used in the child process; "
                "make a new client there");
  }
}

}  // namespace dlock::core
