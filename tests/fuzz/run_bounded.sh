#!/usr/bin/env bash
# Runs a libFuzzer target for a bounded time from a copy of its seed corpus.
#   run_bounded.sh TARGET SEED_DIR SECONDS
set -euo pipefail
target=$1 seeds=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds" "$work/corpus"
status=0
"$target" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 -artifact_prefix="$work/" \
  "$work/corpus" >"$work/log" 2>&1 || status=$?
grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$work/log" || true
if [ "$status" -ne 0 ]; then
  cat "$work/log"
  for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
    [ -e "$crash" ] && echo "input (base64): $(base64 -w0 "$crash")"
  done
  exit "$status"
fi
echo "no finding in $seconds s"
