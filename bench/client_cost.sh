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
bin=${1:-build/rel/bench/dlock_bench_processes}
seconds=${2:-2}
[ -x "$bin" ] || { echo "client_cost: no benchmark binary at $bin" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "client_cost: valgrind is not installed" >&2; exit 2; }
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2> /dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do
  redis-cli -p "$port" PING > /dev/null 2>&1 && break
  sleep 0.1
done

# "<acquisitions> <instructions>" of one child run of $1 seconds.
client_run() {
  local out="$work/callgrind.$1" start
  # The child's clock starts at this CLOCK_MONOTONIC time (ns): after valgrind has started it.
  start=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 4 * 10**9)')
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --child load --side dlock \
    --url "redis://127.0.0.1:$port" --key "bench:client-cost:$1" --child-threads 1 --own-keys 1 \
    --seconds "$1" --hold-us 0 --think-us 0 --start-ns "$start" > "$work/out.$1" 2> /dev/null
  local acquisitions instructions
  acquisitions=$(awk '/^acquisitions/ { n += $2 } END { print n }' "$work/out.$1")
  # awk reads to the end: an early exit would kill callgrind_annotate with SIGPIPE (pipefail).
  instructions=$(callgrind_annotate "$out" |
    awk '/PROGRAM TOTALS/ && !seen { gsub(",", "", $1); print $1; seen = 1 }')
  echo "$acquisitions $instructions"
}

read -r few_n few_i < <(client_run "$seconds")
read -r many_n many_i < <(client_run "$((3 * seconds))")
echo "$(((many_i - few_i) / (many_n - few_n))) client instructions per lock + unlock" \
  "(the load child under callgrind; $few_n and $many_n cycles)"
