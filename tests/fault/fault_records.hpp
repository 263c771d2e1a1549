// The fault suite's shared vocabulary: what a worker writes to its record file, what the driver
// knows about the faults it injected, the fenced resource's script, and the checker that reads
// them all. Header-only; used by dlock_fault_worker, dlock_fault_suite and its unit test.
//
// Times are nanoseconds of CLOCK_MONOTONIC. Every process of the suite runs on one machine, so
// they are one clock.
//
// A worker's record file (one per worker process life, append-only, one write() per line):
//   W <worker> <life> <pid> <client id>         once, before the first acquisition
//   A <acquired_ns> <token>                     the lock is held (written right after lock())
//   U <acquired_ns> <end_ns>                    the holder calls unlock() next (written before
//                                               it: the release may free the lock at once, and
//                                               a kill -9 before the R line must not stretch the
//                                               hold to the kill)
//   R <acquired_ns> <end_ns> <lost_ns> <token> <write> <unlock>
//                                               the hold ended: end_ns is when unlock() was
//                                               called, lost_ns when the hold's stop_token fired
//                                               (0: never); write is 1 accepted, 0 refused,
//                                               -1 failed; unlock is unlock_checked()'s value
//                                               (0 released, or the dlock::errc number)
//   E <ns> <text>                               a lock call failed (the error's text)
//   X <acquired_ns> <ns> <status>               `dlock exec` workers only (fault_cli_worker.cpp):
//                                               (acquired_ns 0: the last hold recorded, if still
//                                               open and begun after the previous X line)
//                                               dlock exec ended with `status` and every process
//                                               of its command was gone at <ns>. 70: dlock
//                                               reported the hold lost (the holder is told then if
//                                               it was not before); a hold with no R line (its
//                                               command was killed) ended then (137: dlock itself
//                                               was killed, counted like a killed holder)
// A hold with an A line and no R or X line belongs to a worker killed while it held: it ended, as
// far as its holder knew anything, when the driver killed it.
//
// For a `dlock exec` worker the A and R lines come from the command under the lock: "told" is the
// SIGTERM that dlock exec sends it when the lock is lost (or, failing that, dlock's exit status
// 70), and its believed hold runs from its start to its end.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::fault {

inline std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The resource: accepts a write only with a token higher than any it accepted, and appends
// "<token> <worker> <time>" to the list of accepted writes. Refused writes are counted.
//   KEYS[1] the highest accepted token   KEYS[2] the list of accepted writes
//   KEYS[3] the count of refused writes  ARGV: token, worker, time (ns)
// Returns 1 accepted, 0 refused.
inline constexpr std::string_view fenced_write_lua = R"lua(
local highest = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token <= highest then
  redis.call('incr', KEYS[3])
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('rpush', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
return 1
)lua";

inline constexpr std::string_view resource_highest_key = "fault:resource:highest";
inline constexpr std::string_view resource_list_key = "fault:resource:accepted";
inline constexpr std::string_view resource_refused_key = "fault:resource:refused";

// dlock exec's exit statuses that the reader interprets (docs/cli.md).
inline constexpr int exec_status_lock_lost = 70;
inline constexpr int exec_status_killed = 128 + 9;

// One hold as its holder saw it.
struct hold {
  int worker = 0;
  int life = 0;
  std::int64_t acquired = 0;
  std::int64_t released = 0;  // unlock() called; 0 if the worker died holding
  std::int64_t lost = 0;      // stop_token fired; 0 if never
  std::int64_t killed = 0;    // the driver killed the worker while it held; 0 if not
  std::int64_t previous = 0;  // the time of the worker's record before this hold (0: none)
  std::uint64_t token = 0;
  int write = -1;
  int unlock = 0;
  bool cli = false;  // taken by `dlock exec` (unlock then holds dlock's exit status)
  // The end of the hold as the holder believed it: told of the loss, released, or killed.
  std::int64_t believed_end() const {
    std::int64_t end = released != 0 ? released : killed;
    if (lost != 0 && (end == 0 || lost < end)) end = lost;
    return end;
  }
};

// One injected fault, as the driver logged it.
struct fault_event {
  // kill, pause, restart, sleep, client-pause, client-kill, partition, latency; on a cluster also
  // failover, master-kill, master-kill-unreplicated, migrate
  std::string kind;
  std::int64_t start = 0;
  std::int64_t end = 0;    // when the fault stopped acting (resumed, restarted, slept)
  bool forgets = false;    // the lock server may have lost acknowledged writes (restart)
  bool on_holder = false;  // kill, pause: the target held the lock at the time
  int worker = -1;         // kill, pause, partition: the target
  bool cli = false;        // the target is a `dlock exec` worker
  // partition of a holder: by then the holder must have been told of its loss (its own deadline,
  // at most 0.9 lease after the cut, plus a named slack); 0 if not checked.
  // master-kill: the same deadline for every hold the killed master had granted (its last
  // confirmed renewal was sent before the kill)
  std::int64_t tell_by = 0;
  // master-kill: the last time the driver saw the killed master's replica still a replica, a lower
  // bound of its promotion: a hold recorded before then was granted by the dead master (0: unknown)
  std::int64_t replica_until = 0;
  std::string detail;  // latency: the added delay per direction
};

// A kill -9 of the lock's master, whose replica is then promoted: "master-kill", and
// "master-kill-unreplicated" (its replication stream to the replica cut first).
inline bool is_hard_failover(std::string_view kind) {
  return kind == "master-kill" || kind == "master-kill-unreplicated";
}

// An accepted write on the resource.
struct accepted_write {
  std::uint64_t token = 0;
  int worker = 0;
  std::int64_t time = 0;
};

struct worker_file {
  int worker = 0;
  int life = 0;
  std::int64_t killed_at = 0;  // 0: ended normally
  std::string path;
  bool cli = false;  // a `dlock exec` worker
};

// What the checker found.
struct check_result {
  std::uint64_t acquisitions = 0;
  std::uint64_t acquisitions_cli = 0;  // ... taken by `dlock exec` workers
  // Acquisitions by another worker (or another life of it) than the one before: the hand-overs,
  // where two holders could overlap at all.
  std::uint64_t handoffs = 0;
  std::uint64_t holds_lost = 0;
  // ... of which the holder was told only after it had done its work and called unlock()
  std::uint64_t holds_lost_after_work = 0;
  std::uint64_t holds_killed = 0;       // the holder was killed (-9) while holding
  std::uint64_t lock_errors = 0;        // E lines
  std::uint64_t overlaps = 0;           // pairs of believed holds that overlap in time
  std::uint64_t overlaps_reported = 0;  // the earlier holder was told of its loss (late)
  // ... of which no injected fault explains: the earlier holder's worker was not paused and no
  // restart forgot its hold (a process descheduled past its lease is a pause nobody injected)
  std::uint64_t overlaps_reported_unexplained = 0;
  std::int64_t max_told_late_ns = 0;     // longest time from a newer hold's start to the old's loss
  std::uint64_t overlaps_forgotten = 0;  // neither told, but a restart forgot the first hold
  std::uint64_t overlaps_unreported = 0;  // neither told, nothing forgot: a violation
  // Neither told, and a side's worker had been stopped (SIGSTOP) past its lease around the hold:
  // it released (or was granted the lock) before its client's watchdog noticed the lease had run
  // out, so nobody told it. A dlock bug, fixed (docs/reliability.md); a violation with `strict`.
  std::uint64_t overlaps_unreported_stalled = 0;
  std::int64_t max_overlap_ns = 0;
  std::uint64_t writes_accepted = 0;
  std::uint64_t writes_refused = 0;  // as the workers saw it
  std::uint64_t writes_failed = 0;
  std::uint64_t fenced_out_of_order = 0;  // accepted writes whose token did not increase
  std::uint64_t accepted_unknown = 0;     // accepted writes no hold record explains
  // Holds never told of a loss whose token is not higher than that of a hold that ended (as its
  // holder believed) before they began: the lock's tokens must increase, across restarts too.
  std::uint64_t tokens_not_increasing = 0;
  // ... of a hold whose worker was stopped between its previous record and this acquisition (the
  // lock was granted before the stop and returned after it): the same bug.
  std::uint64_t tokens_not_increasing_stalled = 0;
  // Partitions of a holder: holds cut off from the lock server while held, and those of them
  // still believed held after the fault's tell_by (never told, or told late): a violation.
  std::uint64_t partition_holds = 0;
  std::uint64_t partition_holds_told = 0;  // ... whose belief ended by being told
  std::uint64_t partition_told_late = 0;
  // Overlaps in which the side told late had been cut off by a partition and neither a pause nor a
  // restart explains them: the holder should have been told at its own deadline, before the
  // server could let anyone else in. A violation.
  std::uint64_t overlaps_reported_partitioned = 0;
  // Hard failovers (master-kill, checked when the replica was promoted after the deadline): holds
  // the killed master had granted that were believed held at the kill or recorded after it, those
  // of them that ended by being told, and those still believed held after the fault's tell_by
  // (never told, or told late): a violation.
  std::uint64_t failover_holds = 0;
  std::uint64_t failover_holds_told = 0;
  std::uint64_t failover_told_late = 0;
  std::uint64_t failovers_unchecked = 0;  // the replica may have served before the deadline
  // Neither told, a hard failover came between the two acquisitions, and the earlier holder had
  // released by its deadline: the promoted replica lacked its grant or last renewal (asynchronous
  // replication) and it released before it could learn. Expected, like a restart that forgets.
  std::uint64_t overlaps_failover_forgotten = 0;
  bool strict = false;                // count the *_stalled ones as violations too
  std::vector<std::string> examples;  // a few violations, for the log
  bool violation() const {
    return overlaps_unreported > 0 || fenced_out_of_order > 0 || accepted_unknown > 0 ||
           tokens_not_increasing > 0 || partition_told_late > 0 ||
           overlaps_reported_partitioned > 0 || failover_told_late > 0 ||
           (strict && (overlaps_unreported_stalled > 0 || tokens_not_increasing_stalled > 0));
  }
};

// Reads one worker file into `out`. Returns false if it cannot be opened.
inline bool read_worker_file(const worker_file& file, std::vector<hold>& out,
                             std::uint64_t& errors) {
  std::ifstream in(file.path);
  if (!in) return false;
  std::map<std::int64_t, std::size_t> open;  // acquired -> index in out
  std::map<std::int64_t, std::size_t> all;   // the same for every hold of this file
  std::int64_t last_time = 0;                // of the last A, R, E or X line
  std::int64_t last_x = 0;                   // of the last X line
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "A") {
      hold h;
      h.worker = file.worker;
      h.life = file.life;
      h.cli = file.cli;
      fields >> h.acquired >> h.token;
      if (!fields) continue;
      h.previous = last_time;
      last_time = h.acquired;
      open[h.acquired] = out.size();
      all[h.acquired] = out.size();
      out.push_back(h);
    } else if (kind == "U") {
      std::int64_t acquired = 0;
      std::int64_t end = 0;
      fields >> acquired >> end;
      if (!fields) continue;
      last_time = end;
      const auto it = open.find(acquired);
      if (it == open.end()) continue;
      out[it->second].released = end;
      open.erase(it);  // no longer held by a kill; the R line still completes it
    } else if (kind == "R") {
      std::int64_t acquired = 0;
      hold r;
      fields >> acquired >> r.released >> r.lost >> r.token >> r.write >> r.unlock;
      if (!fields) continue;  // a line cut by kill -9
      last_time = r.released;
      const auto it = all.find(acquired);
      if (it == all.end()) continue;
      open.erase(acquired);
      hold& h = out[it->second];
      h.released = r.released;
      h.lost = r.lost;
      h.write = r.write;
      h.unlock = r.unlock;
    } else if (kind == "X") {
      std::int64_t acquired = 0;
      std::int64_t gone = 0;
      int status = 0;
      fields >> acquired >> gone >> status;
      if (!fields) continue;
      last_time = gone;
      // "X 0": the hold this file recorded last, if dlock ended before its command said it runs.
      if (acquired == 0 && !open.empty() && open.rbegin()->first > last_x) {
        acquired = open.rbegin()->first;
      }
      last_x = gone;
      const auto it = all.find(acquired);
      if (it == all.end()) continue;
      hold& h = out[it->second];
      h.unlock = status;
      if (status == exec_status_lock_lost && h.lost == 0) h.lost = gone;
      if (open.erase(acquired) > 0) {
        // The command never recorded its end: it was killed (by dlock's guard, or by dlock after
        // the kill grace) and was gone at `gone`.
        if (status == exec_status_killed) {
          h.killed = gone;
        } else {
          h.released = gone;
        }
      }
    } else if (kind == "E") {
      fields >> last_time;
      ++errors;
    }
  }
  for (const auto& [acquired, index] : open) {
    out[index].killed = file.killed_at != 0 ? file.killed_at : acquired;
  }
  return true;
}

inline std::string describe(const hold& h) {
  std::ostringstream s;
  s << "worker " << h.worker << "." << h.life << " token " << h.token << " [" << h.acquired / 1000
    << " us, " << h.believed_end() / 1000 << " us]" << (h.lost != 0 ? " told lost" : "")
    << (h.killed != 0 ? " killed" : "");
  return s.str();
}

// The checker. `holds` need not be sorted.
inline check_result check(std::vector<hold> holds, const std::vector<accepted_write>& accepted,
                          const std::vector<fault_event>& faults, std::uint64_t lock_errors,
                          bool strict = false) {
  check_result r;
  r.strict = strict;
  r.lock_errors = lock_errors;
  r.acquisitions = holds.size();
  std::sort(holds.begin(), holds.end(),
            [](const hold& a, const hold& b) { return a.acquired < b.acquired; });
  std::vector<std::int64_t> restarts;  // starts of faults that may forget acknowledged writes
  std::vector<const fault_event*> pauses;
  std::vector<const fault_event*> partitions;
  std::vector<const fault_event*> hard_failovers;  // in start order
  for (const fault_event& f : faults) {
    if (f.forgets) restarts.push_back(f.start);
    if (f.kind == "pause") pauses.push_back(&f);
    if (f.kind == "partition") partitions.push_back(&f);
    if (is_hard_failover(f.kind)) hard_failovers.push_back(&f);
  }
  std::sort(hard_failovers.begin(), hard_failovers.end(),
            [](const fault_event* x, const fault_event* y) { return x->start < y->start; });
  // The first hard failover that began between `from` and `to`, or nullptr.
  const auto failover_between = [&](std::int64_t from, std::int64_t to) -> const fault_event* {
    for (const fault_event* k : hard_failovers) {
      if (k->start >= from && k->start <= to) return k;
    }
    return nullptr;
  };
  std::sort(restarts.begin(), restarts.end());
  const auto restart_between = [&](std::int64_t from, std::int64_t to) {
    const auto it = std::lower_bound(restarts.begin(), restarts.end(), from);
    return it != restarts.end() && *it <= to;
  };
  // Whether `h`'s worker was stopped at some moment between `from` and `to`.
  const auto paused_between = [&](const hold& h, std::int64_t from, std::int64_t to) {
    return std::any_of(pauses.begin(), pauses.end(), [&](const fault_event* p) {
      return p->worker == h.worker && p->start <= to && p->end >= from;
    });
  };
  // Whether `h`'s worker was cut off by a partition at some moment between `from` and `to`.
  const auto partitioned_between = [&](const hold& h, std::int64_t from, std::int64_t to) {
    return std::any_of(partitions.begin(), partitions.end(), [&](const fault_event* p) {
      return p->worker == h.worker && p->start <= to && p->end >= from;
    });
  };

  // Sweep: every earlier hold whose believed end is after this hold's start overlaps it.
  std::multimap<std::int64_t, std::size_t> active;  // believed end -> index
  std::uint64_t ended_max_token = 0;                // over the holds no longer active
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const hold& b = holds[i];
    if (b.cli) ++r.acquisitions_cli;
    if (i > 0 && (holds[i - 1].worker != b.worker || holds[i - 1].life != b.life)) ++r.handoffs;
    if (b.lost != 0) ++r.holds_lost;
    if (b.lost != 0 && b.released != 0 && b.lost > b.released) ++r.holds_lost_after_work;
    if (b.killed != 0 && b.released == 0) ++r.holds_killed;
    if (b.write == 1) ++r.writes_accepted;
    if (b.write == 0) ++r.writes_refused;
    if (b.write == -1 && b.released != 0) ++r.writes_failed;
    const auto ended = active.upper_bound(b.acquired);
    for (auto it = active.begin(); it != ended; ++it)
      ended_max_token = std::max(ended_max_token, holds[it->second].token);
    active.erase(active.begin(), ended);
    // A hold told of its loss may have begun on the server long before it was recorded (its
    // worker stopped in between), so only holds never told are held to this.
    if (b.lost == 0 && b.token <= ended_max_token && paused_between(b, b.previous, b.acquired)) {
      ++r.tokens_not_increasing_stalled;
    } else if (b.lost == 0 && b.token <= ended_max_token) {
      ++r.tokens_not_increasing;
      if (r.examples.size() < 10) {
        r.examples.push_back("token not increasing: " + describe(b) + " after token " +
                             std::to_string(ended_max_token));
      }
    }
    for (const auto& [end, index] : active) {
      const hold& a = holds[index];
      ++r.overlaps;
      r.max_overlap_ns = std::max(r.max_overlap_ns, std::min(end, b.believed_end()) - b.acquired);
      if (a.lost != 0 || b.lost != 0) {
        // One side was told its hold was lost (after the overlap began: otherwise its belief
        // would have ended before). A pause of that side's worker since its previous record
        // (the hold may have begun on the server before the pause, and been recorded after it)
        // or a restart that forgot holds explains it.
        ++r.overlaps_reported;
        const hold& told = a.lost != 0 ? a : b;
        r.max_told_late_ns = std::max(r.max_told_late_ns, told.lost - b.acquired);
        const bool explained =
            (a.lost != 0 && paused_between(a, a.previous, a.lost)) ||
            (b.lost != 0 && paused_between(b, b.previous, b.lost)) ||
            restart_between(std::min(a.previous, b.previous), b.acquired) ||
            failover_between(std::min(a.previous, b.previous), b.acquired) != nullptr;
        if (!explained && partitioned_between(told, told.previous, told.lost)) {
          ++r.overlaps_reported_partitioned;
          if (r.examples.size() < 10) {
            r.examples.push_back("partitioned holder told after the next hold began: " +
                                 describe(a) + " and " + describe(b));
          }
        } else if (!explained) {
          ++r.overlaps_reported_unexplained;
        }
      } else if (restart_between(a.acquired, b.acquired)) {
        ++r.overlaps_forgotten;
      } else if (const fault_event* k = failover_between(a.previous, b.acquired);
                 k != nullptr && k->tell_by != 0 && a.believed_end() <= k->tell_by) {
        // The master was killed between the earlier hold's grant (after its worker's previous
        // record) and the later acquisition, and the earlier holder ended its hold by its own
        // deadline: the replica had not received its grant or last renewal. A holder still
        // believing past its deadline should have been told: not excused.
        ++r.overlaps_failover_forgotten;
      } else {
        if (paused_between(a, a.previous, a.believed_end()) ||
            paused_between(b, b.previous, b.believed_end())) {
          ++r.overlaps_unreported_stalled;
          if (r.examples.size() < 5) {
            r.examples.push_back("unreported overlap after a stall: " + describe(a) + " and " +
                                 describe(b));
          }
          continue;
        }
        ++r.overlaps_unreported;
        if (r.examples.size() < 5) {
          r.examples.push_back("unreported overlap: " + describe(a) + " and " + describe(b));
        }
      }
    }
    active.emplace(b.believed_end(), i);
  }

  // A holder cut off from the lock server is told by its own deadline. The hold of the target
  // worker that began last before the cut is the one (a hold that had ended before the cut, the
  // lock passing between the driver's look and the cut, is not).
  for (const fault_event* p : partitions) {
    if (p->tell_by == 0) continue;
    const hold* held = nullptr;
    for (const hold& h : holds) {
      if (h.worker == p->worker && h.acquired <= p->start) held = &h;
    }
    if (held == nullptr) continue;
    // Its belief ends when it is told, or when it stopped by itself (it called unlock() before
    // its deadline, its write having gone through before the cut): either is in time.
    const std::int64_t end = held->believed_end();
    if (end != 0 && end < p->start) continue;
    ++r.partition_holds;
    if (held->lost != 0 && held->lost == end) ++r.partition_holds_told;
    if (end == 0 || end > p->tell_by) {
      ++r.partition_told_late;
      if (r.examples.size() < 10) {
        r.examples.push_back("partitioned holder not told by its deadline: " + describe(*held) +
                             ", cut at " + std::to_string(p->start / 1000) + " us, due by " +
                             std::to_string(p->tell_by / 1000) + " us");
      }
    }
  }

  // A hard failover: every hold the killed master had granted must end (be told, or have been
  // released by its holder) by the kill + 0.9 lease + slack, as for a partition: its last
  // confirmed renewal was sent before the kill. Checked only when the replica was still a replica
  // then (a promoted replica that had the hold would renew it, legitimately). A hold recorded by
  // then was granted by the dead master (before the kill; the reply may have come after it).
  for (const fault_event* k : hard_failovers) {
    if (k->tell_by == 0 || k->replica_until < k->tell_by) {
      ++r.failovers_unchecked;
      continue;
    }
    for (const hold& h : holds) {
      if (h.acquired > k->tell_by) continue;
      const std::int64_t end = h.believed_end();
      if (end != 0 && end <= k->start) continue;  // ended before the kill
      ++r.failover_holds;
      if (h.lost != 0 && h.lost == end) ++r.failover_holds_told;
      if (end == 0 || end > k->tell_by) {
        ++r.failover_told_late;
        if (r.examples.size() < 10) {
          r.examples.push_back(
              "holder of the killed master not told by its deadline: " + describe(h) +
              ", master killed at " + std::to_string(k->start / 1000) + " us, due by " +
              std::to_string(k->tell_by / 1000) + " us");
        }
      }
    }
  }

  // The resource's own order: tokens of accepted writes strictly increase.
  std::map<std::pair<int, std::uint64_t>, const hold*> by_token;
  for (const hold& h : holds)
    by_token[{h.worker, h.token}] = &h;
  std::uint64_t previous = 0;
  for (const accepted_write& w : accepted) {
    if (w.token <= previous) {
      ++r.fenced_out_of_order;
      if (r.examples.size() < 10) {
        r.examples.push_back("accepted out of order: token " + std::to_string(w.token) + " after " +
                             std::to_string(previous));
      }
    }
    previous = std::max(previous, w.token);
    if (!by_token.contains({w.worker, w.token})) {
      ++r.accepted_unknown;
      if (r.examples.size() < 10) {
        r.examples.push_back("accepted write of no recorded hold: worker " +
                             std::to_string(w.worker) + " token " + std::to_string(w.token));
      }
    }
  }
  return r;
}

}  // namespace dlock::fault
