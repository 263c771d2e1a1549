#!/usr/bin/env bash
# The README's first command: install what is missing, build the dlock tool, and run the demo
# against a private redis-server that the demo starts and stops itself: `dlock demo flash-sale`,
# the oversell scenario (without a lock, with dlock, with dlock and fencing tokens).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/release --target dlock_cli
exec build/release/tools/dlock/dlock demo flash-sale "$@"
