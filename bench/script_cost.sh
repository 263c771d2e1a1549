#!/usr/bin/env bash
# What dlock::mutex's scripts cost the server, in instructions: the redis-server under callgrind
# (valgrind) serves the process benchmark's script-floor child, which runs 2 x PINGS uncontended
# cycles of dlock's own lock and release scripts (a free lock taken, then released; the calls
# dlock::mutex makes), once with PINGS and once with 3 x PINGS; the difference over the extra
# cycles leaves the server's start, the connection and the script loading out. Instruction
# counts repeat from run to run whatever else the machine does, where its time does not.
#
#   bash bench/script_cost.sh [BENCH_BINARY] [PINGS]
#
# BENCH_BINARY defaults to build/rel/bench/dlock_bench_processes, PINGS to 500. Needs valgrind
# and redis-server. Prints "<instructions> server instructions per lock + release".
set -euo pipefail
. "$(dirname "$0")/callgrind_lib.sh"
bin=${1:-build/rel/bench/dlock_bench_processes}
pings=${2:-500}
require_binary_and_valgrind script_cost "$bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Instructions the server ran while the child made 2 x $1 cycles.
server_instructions() {
  local port out pid
  port=$(free_port)
  out="$work/callgrind.$1"
  valgrind --tool=callgrind --callgrind-out-file="$out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    > "$work/server.log" 2>&1 &
  pid=$!
  wait_for_redis "$port" 150 0.2
  "$bin" --child script-floor --url "redis://127.0.0.1:$port" --key bench:script-cost \
    --pings "$1" > /dev/null
  redis-cli -p "$port" SHUTDOWN NOSAVE > /dev/null 2>&1 || true
  wait "$pid" || true
  callgrind_total "$out"
}

few=$(server_instructions "$pings")
many=$(server_instructions $((3 * pings)))
echo "$(((many - few) / (4 * pings))) server instructions per lock + release" \
  "(redis-server under callgrind; $((2 * pings)) and $((6 * pings)) cycles)"
