#!/usr/bin/env bash
# Runs dlock's fault suite (tests/fault, docs/reliability.md): worker processes take one lock in a
# loop and write to a fenced resource while workers and the lock server are killed, paused,
# restarted and stalled; the checker fails on any violation of mutual exclusion it can see.
#
#   bash scripts/fault-suite.sh                    the bounded run (~10,000 acquisitions)
#   bash scripts/fault-suite.sh --long             >= 100,000 acquisitions, >= 4 workers, every fault
#   bash scripts/fault-suite.sh --no-lock          the same workers without the lock: MUST fail
#   bash scripts/fault-suite.sh --persistence everysec   (or always) AOF on the lock server
#   DLOCK_FAULT_SUITE=/path/to/dlock_fault_suite bash scripts/fault-suite.sh ...
#
# Every argument goes to dlock_fault_suite (see its --help). Without DLOCK_FAULT_SUITE the script
# builds it in build/fault (RelWithDebInfo) first. The exit status is the suite's: 0 pass,
# 1 violation, 2 usage, 3 the run failed. The last line of the output is a JSON summary.
set -euo pipefail
cd "$(dirname "$0")/.."

suite=${DLOCK_FAULT_SUITE:-}
if [ -z "$suite" ]; then
  build=build/fault
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF \
      -DDLOCK_BUILD_CLI=OFF >/dev/null
  fi
  ninja -C "$build" dlock_fault_suite dlock_fault_worker >/dev/null
  suite=$build/tests/fault/dlock_fault_suite
fi
if [ ! -x "$suite" ]; then
  echo "fault-suite.sh: $suite is not an executable (set DLOCK_FAULT_SUITE)" >&2
  exit 3
fi

# The worker binary sits next to the suite unless the caller names one.
args=("$@")
worker_given=0
for a in "${args[@]}"; do
  case $a in --worker | --worker=*) worker_given=1 ;; esac
done
if [ "$worker_given" = 0 ] && [ -x "$(dirname "$suite")/dlock_fault_worker" ]; then
  args+=(--worker "$(dirname "$suite")/dlock_fault_worker")
fi

start=$(date +%s)
status=0
"$suite" "${args[@]}" || status=$?
echo "fault-suite.sh: exit $status after $(($(date +%s) - start)) s ($suite ${args[*]})" >&2
exit "$status"
