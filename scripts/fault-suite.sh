#!/usr/bin/env bash
# Runs dlock's fault suite (tests/fault, docs/reliability.md): worker processes take one lock in a
# loop (with the library, and with `dlock exec`) and write to a fenced resource while workers and
# the lock server are killed, paused, restarted and stalled, workers are cut off by network
# partitions and the lock server is slowed down by a delay proxy; the checker fails on any
# violation of mutual exclusion it can see. Partitions need root (network namespaces, nftables):
# without them the suite says why and skips only partitions. With --topology cluster the lock
# server is a private Redis Cluster whose master of the lock's slot is also failed over, killed
# and has its slot migrated.
#
#   bash scripts/fault-suite.sh                    the bounded run (~10,000 acquisitions)
#   bash scripts/fault-suite.sh --long             >= 100,000 acquisitions, >= 4 library workers
#                                                  and a `dlock exec` one, every fault
#   bash scripts/fault-suite.sh --no-lock          the same workers without the lock: MUST fail
#   bash scripts/fault-suite.sh --persistence everysec   (or always) AOF on the lock server
#   bash scripts/fault-suite.sh --topology cluster        the lock server a Redis Cluster (3 masters
#                                                  + 3 replicas): failover, master-kill and
#                                                  migrate of the lock's master besides the rest
#   bash scripts/fault-suite.sh --long --topology cluster
#   DLOCK_FAULT_SUITE=/path/to/dlock_fault_suite bash scripts/fault-suite.sh ...
#
# Every argument goes to dlock_fault_suite (see its --help). Without DLOCK_FAULT_SUITE the script
# builds it, its workers, its delay proxy and the dlock command in build/fault (RelWithDebInfo)
# first. The exit status is the suite's: 0 pass, 1 violation, 2 usage, 3 the run failed. The last
# line of the output is a JSON summary.
set -euo pipefail
cd "$(dirname "$0")/.."

suite=${DLOCK_FAULT_SUITE:-}
if [ -z "$suite" ]; then
  build=build/fault
  # The dlock command is needed for the `dlock exec` workers (older build/fault had it off).
  if [ ! -f "$build/build.ninja" ] || ! grep -q '^DLOCK_BUILD_CLI:BOOL=ON' "$build/CMakeCache.txt"; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF \
      -DDLOCK_BUILD_CLI=ON >/dev/null
  fi
  ninja -C "$build" dlock_fault_suite dlock_fault_worker dlock_fault_cli_worker \
    dlock_fault_delay_proxy dlock_cli >/dev/null
  suite=$build/tests/fault/dlock_fault_suite
fi
if [ ! -x "$suite" ]; then
  echo "fault-suite.sh: $suite is not an executable (set DLOCK_FAULT_SUITE)" >&2
  exit 3
fi

# The other programs sit next to the suite (the dlock command in tools/dlock of the same build)
# unless the caller names them.
args=("$@")
dir=$(dirname "$suite")
add_default() { # option, path
  local a
  for a in "${args[@]}"; do
    case $a in "$1" | "$1"=*) return ;; esac
  done
  [ -x "$2" ] && args+=("$1" "$2")
  return 0
}
add_default --worker "$dir/dlock_fault_worker"
add_default --cli-worker "$dir/dlock_fault_cli_worker"
add_default --delay-proxy "$dir/dlock_fault_delay_proxy"
add_default --cli "$dir/../../tools/dlock/dlock"

start=$(date +%s)
status=0
"$suite" "${args[@]}" || status=$?
echo "fault-suite.sh: exit $status after $(($(date +%s) - start)) s ($suite ${args[*]})" >&2
exit "$status"
