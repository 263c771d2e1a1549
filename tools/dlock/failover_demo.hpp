// `dlock demo failover`: the asynchronous-replication hazard of seeds 002 and 004 on a private
// Sentinel group (1 master, 1 replica, 3 sentinels). A lock granted by a master that dies before
// its replica has the write is granted again after the promotion; `min_replicas=1` refuses such a
// grant; fencing tokens make the resource refuse the stale holder's write.
#pragma once

#include <string>

namespace dlock::cli {

// Runs the three scenarios, prints progress, a table and a verdict. `redis_url` must be empty:
// the demo kills masters, so it runs only against servers it starts itself (exit_usage
// otherwise). Returns exit_ok when every row shows what it should (a second grant without
// min_replicas, none with it, the stale write refused with fencing), exit_failure otherwise, or
// another exit code on errors.
int run_failover_demo(const std::string& redis_url);

}  // namespace dlock::cli
