#include "status.hpp"

#include <fmt/core.h>

#include <optional>
#include <string_view>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "exit_codes.hpp"
#include "json.hpp"
#include "latch.hpp"

namespace dlock::cli {
namespace {

std::string describe_ttl(std::chrono::milliseconds ttl) {
  if (ttl.count() == -1) return "none (the key never expires: not set by dlock or Redisson)";
  return format_seconds(ttl);
}

// A lock of a kind the command knows: the reentrant lock (a hash), the plain lock (a string set
// with SET NX PX, by dlock or by redis-py, redsync, node-redlock), the semaphore (a count) or the
// read-write lock (a hash with a "mode" field, dlock's or Redisson's RReadWriteLock).
// A fair lock's hash is a reentrant lock's; its waiting list tells it apart while someone waits.
enum class lock_kind { reentrant, plain, semaphore, read_write, fair };

std::string_view kind_name(lock_kind kind) {
  switch (kind) {
    case lock_kind::plain:
      return "plain";
    case lock_kind::semaphore:
      return "semaphore";
    case lock_kind::read_write:
      return "read_write";
    case lock_kind::fair:
      return "fair";
    default:
      return "reentrant";
  }
}

// Whether `name` is a hash with a "mode" field: a read-write lock (or data the library refuses).
bool is_read_write_hash(dlock::client& redis, const std::string& name) {
  return redis.command({"TYPE", name}).str == "hash" &&
         redis.command({"HEXISTS", name, "mode"}).integer == 1;
}

std::string to_json(const std::string& name, lock_kind kind, const lock_status& s) {
  std::string holders;
  for (const lock_holder& h : s.holders) {
    if (!holders.empty()) holders += ",";
    holders += kind == lock_kind::semaphore
                   ? fmt::format(R"({{"permit":{},"lease_left_ms":{}}})", json_quote(h.owner),
                                 h.lease_left.count())
                   : fmt::format(R"({{"owner":{},"count":{}}})", json_quote(h.owner), h.count);
  }
  if (kind == lock_kind::semaphore) {
    return fmt::format(R"({{"name":{},"permits_available":{},"permits_total":{},"holders":[{}],)"
                       R"("waiting_clients":{},"kind":"semaphore"}})",
                       json_quote(name), s.permits_available, s.permits_total, holders,
                       s.subscribers);
  }
  std::string read_write;
  if (kind == lock_kind::read_write) {
    read_write =
        fmt::format(R"(,"mode":{},"waiting_writers":{})", json_quote(s.mode), s.waiting_writers);
  }
  if (kind == lock_kind::fair) {
    std::string queue;
    for (const lock_waiter& w : s.queue) {
      if (!queue.empty()) queue += ",";
      queue += w.has_deadline ? fmt::format(R"({{"owner":{},"deadline_left_ms":{}}})",
                                            json_quote(w.owner), w.deadline_left.count())
                              : fmt::format(R"({{"owner":{}}})", json_quote(w.owner));
    }
    read_write = fmt::format(R"(,"queue":[{}],"queue_length":{})", queue, s.queue_length);
  }
  return fmt::format(
      R"({{"name":{},"locked":{},"holders":[{}],"remaining_ttl_ms":{},"last_fencing_token":{},)"
      R"("waiting_clients":{},"kind":"{}"{}}})",
      json_quote(name), s.locked, holders, s.remaining_ttl.count(), s.last_fencing_token,
      s.subscribers, kind_name(kind), read_write);
}

// A holder's value or field, as read from Redis, for the text output: anyone who can write to
// Redis can put bytes there, so control bytes appear as \xNN (see shown()); --json has it whole.
std::string shown_value(std::string_view value) {
  return shown(value, 256);
}

std::string semaphore_text(const std::string& name, const lock_status& s) {
  std::string out = fmt::format("semaphore '{}': {} of {} permits available\n", shown_name(name),
                                s.permits_available, s.permits_total);
  out += "  kind                semaphore (Redisson's permit-expirable semaphore)\n";
  for (const lock_holder& h : s.holders) {
    out += fmt::format("  permit              {} (lease left: {})\n", shown_value(h.owner),
                       h.lease_left.count() < 0 ? std::string("none, never expires")
                                                : format_seconds(h.lease_left));
  }
  out += fmt::format("  waiting clients     {}\n", s.subscribers);
  return out;
}

std::string to_text(const std::string& name, lock_kind kind, const lock_status& s) {
  if (kind == lock_kind::semaphore) return semaphore_text(name, s);
  std::string out = fmt::format("lock '{}': {}\n", shown_name(name), s.locked ? "locked" : "free");
  if (kind == lock_kind::plain) {
    // One holder's value: dlock's "<client id>:<owner>:<token>", or a foreign client's token.
    out +=
        "  kind                plain lock (SET NX PX: dlock --plain, redis-py, redsync, "
        "node-redlock)\n";
    for (const lock_holder& h : s.holders)
      out += fmt::format("  holder value        {}\n", shown_value(h.owner));
  }
  if (kind == lock_kind::read_write) {
    out += "  kind                read-write lock (dlock exec -s/-x, Redisson RReadWriteLock)\n";
    if (s.locked) out += fmt::format("  mode                {}\n", shown_value(s.mode));
    for (const lock_holder& h : s.holders) {
      // The writer's field ends with ":write" (Redisson's layout); every other field is a reader.
      const bool writer = h.owner.ends_with(":write");
      out += fmt::format("  {}              {} ({} hold{})\n", writer ? "writer" : "reader",
                         shown_value(writer ? h.owner.substr(0, h.owner.size() - 6) : h.owner),
                         h.count, h.count == 1 ? "" : "s");
    }
    out += fmt::format("  waiting writers     {}\n", s.waiting_writers);
  }
  if (kind == lock_kind::fair) {
    out += "  kind                fair lock (dlock exec --fair, Redisson RFairLock)\n";
  }
  if (kind == lock_kind::reentrant || kind == lock_kind::fair) {
    for (const lock_holder& h : s.holders) {
      out += fmt::format("  holder              {} ({} hold{})\n", shown_value(h.owner), h.count,
                         h.count == 1 ? "" : "s");
    }
  }
  if (s.locked) out += fmt::format("  remaining lease     {}\n", describe_ttl(s.remaining_ttl));
  out += fmt::format("  last fencing token  {}\n", s.last_fencing_token == 0
                                                       ? std::string("none yet")
                                                       : std::to_string(s.last_fencing_token));
  if (kind == lock_kind::fair) {
    out += fmt::format("  waiting             {} in line\n", s.queue_length);
    for (const lock_waiter& w : s.queue) {
      out += fmt::format("  in line             {} (dropped if not served within {})\n",
                         shown_value(w.owner),
                         w.has_deadline ? format_seconds(w.deadline_left) : std::string("never"));
    }
    return out;
  }
  out += fmt::format("  waiting clients     {}\n", s.subscribers);
  return out;
}

// Why the hash `s` describes is not a lock, or std::nullopt when it may be one. The same rule as
// force_unlock.lua: a reentrant lock (dlock's or Redisson's) has at most 64 fields
// "<client id>:<number>", each a positive hold count. The library reads any hash as a lock.
std::optional<std::string> not_a_lock_hash(const lock_status& s) {
  if (s.holders.size() > 64) return "a hash that is not a lock (too many fields)";
  for (const lock_holder& h : s.holders) {
    const auto colon = h.owner.rfind(':');
    const bool owner_like = colon != std::string::npos && colon + 1 < h.owner.size() &&
                            h.owner.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!owner_like || h.count == 0) {
      return fmt::format("a hash that is not a lock (field \"{}\")", shown_name(h.owner));
    }
  }
  return std::nullopt;
}

// For a key that holds data, not a lock: says so and returns the exit code. `detail` reads
// "the key '<name>' holds ...".
int refuse_data(std::string_view command, std::string_view detail) {
  print_error(fmt::format("{}: {}", command, detail));
  return exit_usage;
}

}  // namespace

int run_status(const std::string& redis_url, const std::string& name, bool json) {
  constexpr std::string_view command = "status";
  try {
    dlock::client redis{client_options_for(redis_url)};
    lock_status s;
    lock_kind kind = lock_kind::reentrant;
    try {
      s = redis.get_lock(name).status();
    } catch (const dlock::error& e) {
      if (e.code() == errc::wrong_type && redis.command({"TYPE", name}).str == "string") {
        // A count-down latch or a semaphore's count (whole numbers: a semaphore with permits
        // taken has their sorted set; a free one reads as a latch, as Redisson cannot tell them
        // apart either), a plain lock, or a string that holds data (the library tells the last
        // two apart).
        if (holds_latch(redis, name) && redis.get_semaphore(name, 0).status().holders.empty()) {
          return print_latch_status(redis, name, json);
        }
        try {
          s = redis.get_plain_lock(name).status();
          kind = lock_kind::plain;
        } catch (const dlock::error& plain_error) {
          if (plain_error.code() != errc::wrong_type) throw;
          // A string without a TTL: a semaphore's count (a number), or data.
          try {
            s = redis.get_semaphore(name, 0).status();
            kind = lock_kind::semaphore;
          } catch (const dlock::error& semaphore_error) {
            if (semaphore_error.code() == errc::wrong_type)
              return refuse_data(command, plain_error.detail());
            throw;
          }
        }
      } else if (e.code() == errc::wrong_type && is_read_write_hash(redis, name)) {
        try {
          s = redis.get_read_write_lock(name).status();
          kind = lock_kind::read_write;
        } catch (const dlock::error& rw_error) {
          if (rw_error.code() == errc::wrong_type) return refuse_data(command, rw_error.detail());
          throw;
        }
      } else if (e.code() == errc::wrong_type) {
        return refuse_data(command, e.detail());
      } else {
        // A hash whose values are not numbers: the library takes it for a damaged lock. Say
        // that it is not one, rather than print its contents.
        if (e.code() != errc::protocol_error || redis.command({"TYPE", name}).str != "hash") throw;
        return refuse_data(command, fmt::format("the key '{}' holds a hash that is not a lock "
                                                "(its values are not hold counts)",
                                                shown_name(name)));
      }
    }
    if (const auto what = kind == lock_kind::reentrant ? not_a_lock_hash(s) : std::nullopt) {
      return refuse_data(command, fmt::format("the key '{}' holds {}", shown_name(name), *what));
    }
    if (kind == lock_kind::reentrant) {
      // A fair lock while someone waits in its line; otherwise the two look the same.
      const lock_status fair = redis.get_fair_lock(name).status();
      if (fair.queue_length > 0) {
        s = fair;
        kind = lock_kind::fair;
      }
    }
    fmt::print("{}", json ? to_json(name, kind, s) + "\n" : to_text(name, kind, s));
    return exit_ok;
  } catch (const dlock::error& e) {
    print_error(fmt::format("status of lock '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

int run_force_unlock(const std::string& redis_url, const std::string& name) {
  try {
    dlock::client redis{client_options_for(redis_url)};
    bool released = false;
    std::string_view kind = "lock";  // or "semaphore": every permit given back
    try {
      // A fair lock with waiters: deleted by its own script, which wakes the head of its line.
      // Anything else (a key of another kind included) goes the reentrant lock's way first.
      dlock::fair_mutex fair = redis.get_fair_lock(name);
      bool fair_waiters = false;
      try {
        fair_waiters = fair.status().queue_length > 0;
      } catch (const dlock::error& e) {
        if (e.code() != errc::wrong_type) throw;
      }
      released = fair_waiters ? fair.force_unlock() : redis.get_lock(name).force_unlock();
    } catch (const dlock::error& e) {
      // A string: a plain lock (deleted), a semaphore's count or data (refused by the library as
      // well); a hash with a mode: a read-write lock.
      if (e.code() == errc::wrong_type && is_read_write_hash(redis, name)) {
        released = redis.get_read_write_lock(name).force_unlock();
      } else {
        if (e.code() != errc::wrong_type || redis.command({"TYPE", name}).str != "string") throw;
        try {
          released = redis.get_plain_lock(name).force_unlock();
        } catch (const dlock::error& plain_error) {
          // A string without a TTL: a semaphore's count (every permit is given back), or data
          // (refused by the library as well).
          if (plain_error.code() != errc::wrong_type) throw;
          try {
            released = redis.get_semaphore(name, 0).force_release();
            kind = "semaphore";
          } catch (const dlock::error& semaphore_error) {
            if (semaphore_error.code() == errc::wrong_type) throw plain_error;
            throw;
          }
        }
      }
    }
    if (released) {
      fmt::print("{} '{}' released; its waiters were woken\n", kind, shown_name(name));
    } else if (kind == "semaphore") {
      // A free semaphore, a latch and a counter all look alike here: a whole number.
      fmt::print(
          "'{}' holds a count with no permit taken (a free semaphore, a latch or a "
          "counter); nothing to release\n",
          shown_name(name));
    } else {
      fmt::print("{} '{}' was not held; nothing to release\n", kind, shown_name(name));
    }
    return exit_ok;
  } catch (const dlock::error& e) {
    // The library refused to delete a key that holds data (a string, a hash of other fields).
    if (e.code() == errc::wrong_type) return refuse_data("unlock --force", e.detail());
    print_error(fmt::format("unlock of lock '{}': {}", shown_name(name), e.what()));
    return exit_code_for(e);
  }
}

}  // namespace dlock::cli
