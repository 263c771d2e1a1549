#!/usr/bin/env bash
# What dlock::mutex costs its client, in instructions per lock + unlock: the process benchmark's
# load child (one thread, one name, no hold, no think: scenario (a)) runs under callgrind
# (valgrind) against a private redis-server, once for SECONDS and once for 3 x SECONDS; the
# difference in instructions over the difference in acquisitions leaves the start, the
# connection and the script loading out. Every thread of the client counts (its I/O thread too).
# Instruction counts barely move from run to run, where this machine's times do.
#
#   bash bench/client_cost.sh [BENCH_BINARY] [SECONDS]
#
# BENCH_BINARY defaults to build/rel/bench/dlock_bench_processes, SECONDS to 2. Needs valgrind
# and redis-server. Prints "<instructions> client instructions per lock + unlock".
set -euo pipefail
. "$(dirname "$0")/callgrind_lib.sh"
bin=${1:-build/rel/bench/dlock_bench_processes}
seconds=${2:-2}
require_binary_and_valgrind client_cost "$bin"
work=$(mktemp -d)
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2> /dev/null || true; rm -rf "$work"' EXIT
wait_for_redis "$port" 50 0.1

# "<acquisitions> <instructions>" of one child run of $1 seconds.
client_run() {
  local out="$work/callgrind.$1" start
  # The child's clock starts at this CLOCK_MONOTONIC time (ns): after valgrind has started it.
  start=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 4 * 10**9)')
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --child load --side dlock \
    --url "redis://127.0.0.1:$port" --key "bench:client-cost:$1" --child-threads 1 --own-keys 1 \
    --seconds "$1" --hold-us 0 --think-us 0 --start-ns "$start" > "$work/out.$1" 2> /dev/null
  local acquisitions
  acquisitions=$(awk '/^acquisitions/ { n += $2 } END { print n }' "$work/out.$1")
  echo "$acquisitions $(callgrind_total "$out")"
}

read -r few_n few_i < <(client_run "$seconds")
read -r many_n many_i < <(client_run "$((3 * seconds))")
echo "$(((many_i - few_i) / (many_n - few_n))) client instructions per lock + unlock" \
  "(the load child under callgrind; $few_n and $many_n cycles)"
