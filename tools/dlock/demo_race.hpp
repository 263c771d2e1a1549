// The concurrency harness of the demos: participants that start together, as threads of this
// process and as threads of worker processes (this binary again, `dlock demo worker`, hidden), so
// a demo shows exclusion across threads of one client and across processes with their own
// clients, as in production.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dlock/client.hpp"

namespace dlock::cli {

// What one participant does, given its process's client and its number (1..N).
using participant_fn = std::function<void(dlock::client& redis, int id)>;

// How participants first_id .. first_id+N-1 are spread: `local` threads here, then `processes`
// workers of `per_process` threads each.
struct race_split {
  int first_id = 1;
  int local = 0;
  int processes = 0;
  int per_process = 0;
};
// About half here and half in two worker processes (all here when there are fewer than four).
race_split split_participants(int participants, int first_id = 1);

// "20 threads here and 2 processes of 10 threads".
std::string describe(const race_split& split);

// Runs the participants split as above: the local ones call `local(redis, id)` on threads of this
// process; the workers run `<this binary> --redis <url> demo worker <worker_args...>
// --first-id F --count C`, which must run the same participant. All connect first, then start at
// once. Returns how long the race took. Throws std::runtime_error when a worker fails or does not
// get ready within a bound, and rethrows the first exception of a local participant.
std::chrono::duration<double> run_race(const std::string& url, dlock::client& redis,
                                       const race_split& split,
                                       const std::vector<std::string>& worker_args,
                                       const participant_fn& local);

// The worker side (`dlock demo worker`): connects, prints "ready", waits for "go" on stdin, runs
// participants first_id .. first_id+count-1 on threads, prints "done". Returns an exit code.
int run_race_worker(const std::string& url, int first_id, int count, const participant_fn& fn);

}  // namespace dlock::cli
