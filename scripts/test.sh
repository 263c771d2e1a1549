#!/usr/bin/env bash
# The README's second command and what CI runs: install what is missing, check formatting, then
# build and run every test twice (a normal build and an ASan+UBSan build), and prove that the
# Debian packages install and work from a separate project (CMake and pkg-config).
#
#   bash scripts/test.sh              everything
#   DLOCK_TEST_LABELS=unit bash ...   only tests with that CTest label (unit, integration, cluster,
#                                     sentinel, redlock, fault, slow)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Twice as many tests as cores: most of a test's time is spent waiting on servers, timers and
# child processes (on 2 cores, 4 at once kept the CPUs about 55% busy in the normal build and
# took 213 s against 387 s with 2). The fault suites count as 2 (tests/fault/CMakeLists.txt).
test_jobs=$((2 * jobs))
labels=${DLOCK_TEST_LABELS:-}
ctest_args=(--output-on-failure --timeout 300 -j "$test_jobs")
# Line tables only (-g1) in the optimised builds: enough for a sanitizer's or a debugger's
# backtrace, and a quarter less compile time than full debug information on 2 cores.
line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
[ -n "$labels" ] && ctest_args+=(-L "$labels")

step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
bash scripts/install-deps.sh

# node-redlock (and ioredis) for the plain lock's interop test (PlainInterop), pinned by
# bench/baselines/package-lock.json; the test skips, saying so, without them.
step "node-redlock for the interop test (npm ci --prefix bench/baselines)"
npm ci --prefix bench/baselines --no-audit --no-fund

step "formatting (.clang-format)"
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.h' 2>/dev/null || find include src tools tests bench examples -name '*.[ch]pp')
clang-format --dry-run --Werror "${sources[@]}"
echo "clang-format: ${#sources[@]} files clean"

step "README snippets are compiled examples"
python3 scripts/check-readme-snippets.py

step "layering (scripts/check-layers.py)"
python3 scripts/check-layers.py

# Only the files under src/ and tools/ changed since the previous commit (committed or not):
# checking all of them takes over 4 minutes on a 2-core machine (`bash scripts/tidy.sh --all`).
step "clang-tidy on changed files (scripts/tidy.sh)"
bash scripts/tidy.sh

step "normal build (g++, RelWithDebInfo, -Werror)"
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build build/test
ctest --test-dir build/test "${ctest_args[@]}"

# The second build also covers the second supported compiler: clang 14. The CLI is built so that
# its tests (Cli*) run its processes under the sanitizers too.
step "sanitizer build (clang++, ASan + UBSan)"
CXX=clang++ cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDLOCK_SANITIZE="address;undefined" \
  -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_CLI=ON -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/asan
ctest --test-dir build/asan "${ctest_args[@]}"

# ThreadSanitizer over the library's unit and integration tests (the CLI's own processes are
# single-threaded around fork/exec and run under ASan above). Tests labelled slow are left out to
# keep CI's time; they run in the two builds above.
step "thread sanitizer build (clang++, TSan): unit + integration + cluster + sentinel + redlock tests"
CXX=clang++ cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" -DDLOCK_SANITIZE=thread \
  -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_CLI=OFF -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/tsan
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1" \
  ctest --test-dir build/tsan --output-on-failure --timeout 300 -j "$test_jobs" -L "unit|integration|cluster|sentinel|redlock"

step "fuzzing: the RESP parser under libFuzzer for 60 s (tests/fuzz)"
CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_BUILD_FUZZERS=ON \
  -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_CLI=OFF -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/fuzz --target dlock_fuzz_resp
ctest --test-dir build/fuzz --output-on-failure -L fuzz

step "Debian packages: install, build tests/consumer with CMake and pkg-config, dlock ping"
bash scripts/package-check.sh build/test

step "all tests passed"
