#include "core/identity.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::core {
namespace {

std::mutex& listeners_mutex() {
  static std::mutex m;
  return m;
}

std::vector<thread_exit_listener*>& listeners() {
  static std::vector<thread_exit_listener*> all;
  return all;
}

std::atomic<std::uint64_t>& next_key() {
  static std::atomic<std::uint64_t> next{1};
  return next;
}

struct thread_identity {
  std::uint64_t key = next_key().fetch_add(1, std::memory_order_relaxed);

  ~thread_identity() {
    std::lock_guard lock(listeners_mutex());
    for (thread_exit_listener* l : listeners())
      l->on_thread_exit(key);
  }
};

}  // namespace

std::string random_id() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    throw error(errc::invalid_argument, "the OpenSSL CSPRNG could not produce a client id");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  id.reserve(2 * sizeof bytes);
  for (const unsigned char b : bytes) {
    id += hex[b >> 4];
    id += hex[b & 0xf];
  }
  return id;
}

std::uint64_t new_owner_key() {
  return next_key().fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t current_thread_key() {
  thread_local thread_identity identity;
  return identity.key;
}

void add_thread_exit_listener(thread_exit_listener* listener) {
  std::lock_guard lock(listeners_mutex());
  listeners().push_back(listener);
}

void remove_thread_exit_listener(thread_exit_listener* listener) {
  std::lock_guard lock(listeners_mutex());
  auto& all = listeners();
  all.erase(std::remove(all.begin(), all.end(), listener), all.end());
}

}  // namespace dlock::core
