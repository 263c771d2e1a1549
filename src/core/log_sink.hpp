// src/core/log_sink.hpp
//
// client_options::on_log as the layers use it: emit() builds a dlock::log_record around the
// fields and calls the hook, dropping whatever it throws. Without a hook it does nothing; build
// costly field values only when enabled() says so. Thread-safe as far as the hook is.
#pragma once

#include <initializer_list>
#include <span>
#include <string_view>
#include <utility>

#include "dlock/log.hpp"

namespace dlock::core {

class log_sink {
 public:
  log_sink() = default;
  explicit log_sink(log_handler handler) : handler_(std::move(handler)) {}

  bool enabled() const noexcept { return static_cast<bool>(handler_); }

  void emit(log_level level, std::string_view message,
            std::initializer_list<log_field> fields = {}) const noexcept {
    emit(level, message, std::span<const log_field>(fields.begin(), fields.size()));
  }
  void emit(log_level level, std::string_view message,
            std::span<const log_field> fields) const noexcept {
    if (!handler_) return;
    try {
      handler_(log_record{level, message, fields});
    } catch (...) {
      // Documented: the hook must not throw; a failing logger must not break the client.
    }
  }

 private:
  log_handler handler_;
};

}  // namespace dlock::core
