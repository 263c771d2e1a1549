#include "net/request_queue.hpp"

#include <algorithm>

#include "dlock/error.hpp"
#include "resp/codec.hpp"

namespace dlock::net {

void request_queue::push(std::span<const std::string_view> args, completion done,
                         clock::time_point deadline, bool any_thread) {
  resp::append_command(unwritten_bytes_, args);
  entries_.push_back({std::move(done), deadline, any_thread});
}

void request_queue::push_front_unwritten(std::span<const std::string_view> args, completion done,
                                         clock::time_point deadline) {
  std::string encoded;
  resp::append_command(encoded, args);
  unwritten_bytes_.insert(0, encoded);
  entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(written_),
                  {std::move(done), deadline});
}

std::size_t request_queue::take_unwritten(std::string& out) {
  const std::size_t newly_written = entries_.size() - written_;
  out += unwritten_bytes_;
  unwritten_bytes_.clear();
  written_ = entries_.size();
  return newly_written;
}

bool request_queue::match(reply&& r, finished_list& out) {
  if (written_ == 0) return false;
  entry e = std::move(entries_.front());
  entries_.pop_front();
  --written_;
  if (!e.done) return true;  // timed out earlier, or nobody wanted the reply
  std::error_code ec;
  if (r.is_error()) ec = make_error_code(errc::server_error);
  out.push_back({std::move(e.done), ec, std::move(r), e.any_thread});
  return true;
}

void request_queue::fail_written(std::error_code ec, const std::string& detail,
                                 finished_list& out) {
  for (std::size_t i = 0; i < written_; ++i) {
    if (entries_[i].done)
      out.push_back({std::move(entries_[i].done), ec, reply::make_error(detail)});
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(written_));
  written_ = 0;
}

void request_queue::fail_all(std::error_code ec, const std::string& detail, finished_list& out) {
  for (entry& e : entries_) {
    if (e.done) out.push_back({std::move(e.done), ec, reply::make_error(detail)});
  }
  entries_.clear();
  written_ = 0;
  unwritten_bytes_.clear();
}

void request_queue::expire(clock::time_point now, finished_list& out,
                           std::string_view unsent_reason) {
  static constexpr std::string_view no_reply = "no reply within the request timeout";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    entry& e = entries_[i];
    if (!e.done || e.deadline > now) continue;
    std::string detail(no_reply);
    if (i >= written_ && !unsent_reason.empty()) {
      detail.append(" (not sent yet: ").append(unsent_reason).append(")");
    }
    out.push_back(
        {std::move(e.done), make_error_code(errc::timeout), reply::make_error(std::move(detail))});
    e.done = nullptr;
  }
}

bool request_queue::written_run_anywhere() const noexcept {
  return std::all_of(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(written_),
                     [](const entry& e) { return e.any_thread || !e.done; });
}

std::optional<clock::time_point> request_queue::next_deadline() const {
  std::optional<clock::time_point> earliest;
  for (const entry& e : entries_) {
    if (e.done && (!earliest || e.deadline < *earliest)) earliest = e.deadline;
  }
  return earliest;
}

}  // namespace dlock::net
