// Holding requests on the server: a test that must give up, or destroy a client, while a lock
// attempt is still out (sent, not answered) pauses the server's writes, so that the attempt's
// script waits in the server until the pause ends. Header-only; include as
// "support/write_pause.hpp".
#pragma once

#include <chrono>
#include <ranges>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "redis_process.hpp"

namespace dlock::test {

// `CLIENT PAUSE <length> WRITE` on each server, begun at construction: write commands (every lock
// script) sent meanwhile wait in the server; reads such as INFO are served. The pause ends by
// itself. Both checks below err on the safe side: still_on() may say false while the pause still
// holds (it counts from before the first redis-cli call), over() may say false after the pause
// ended (it counts from after the last).
class write_pause {
 public:
  // `servers`: a range of pointers to tools::redis_process (raw or smart).
  template <std::ranges::range Servers>
  write_pause(const Servers& servers, std::chrono::milliseconds length)
      : length_(length), begun_(std::chrono::steady_clock::now()) {
    for (const auto& server : servers) {
      (void)server->cli({"CLIENT", "PAUSE", std::to_string(length.count()), "WRITE"});
    }
    ended_by_ = std::chrono::steady_clock::now() + length;
  }
  write_pause(tools::redis_process& server, std::chrono::milliseconds length)
      : write_pause(std::vector<tools::redis_process*>{&server}, length) {}

  // The pause still holds (a request sent now waits in the server).
  bool still_on() const { return std::chrono::steady_clock::now() - begun_ < length_; }
  // The pause has ended on every server (a request held by it has run).
  bool over() const { return std::chrono::steady_clock::now() >= ended_by_; }
  // Since before the first pause began.
  std::chrono::steady_clock::duration elapsed() const {
    return std::chrono::steady_clock::now() - begun_;
  }

  // Whether one of the server's clients waits in the pause (INFO clients' blocked_clients),
  // asked through `observer`, a client the pause does not hold. A blocking lock() counts its
  // attempt in lock_metrics() only once answered: this tells that it is out.
  static bool holds_a_client(client& observer) {
    return observer.command({"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
  }

 private:
  std::chrono::milliseconds length_;
  std::chrono::steady_clock::time_point begun_;     // before the first pause began
  std::chrono::steady_clock::time_point ended_by_;  // every pause has ended by then
};

}  // namespace dlock::test
