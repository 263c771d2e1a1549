#!/usr/bin/env bash
# Runs clang-tidy (the checks in .clang-tidy) on the C++ files under src/ and tools/ that changed,
# with the compile database of a build directory of its own, and fails on any warning
# (.clang-tidy makes every warning an error).
#
#   bash scripts/tidy.sh            files changed since HEAD~1, committed or not
#   bash scripts/tidy.sh BASE       files changed since BASE (git diff --name-only BASE)
#   bash scripts/tidy.sh --all      every translation unit under src/ and tools/
#   DLOCK_TIDY_BUILD=dir            build directory for the compile database (build/tidy)
#   DLOCK_TIDY_JOBS=n               clang-tidy processes at once (nproc)
#
# A changed header is checked through the translation units that include it, directly or through
# other headers: clang-tidy reports warnings in the project's headers while it checks a .cpp file.
# --all took 4.8 minutes (240 s of CPU) on a shared 2-core machine: 38 translation units, each
# one heavy with Asio. That is why CI checks only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
base=""
for arg in "$@"; do
  case "$arg" in
    --all) all=1 ;;
    -h | --help)
      sed -n '2,15p' "$0"
      exit 0
      ;;
    -*)
      echo "tidy.sh: unknown option $arg" >&2
      exit 64
      ;;
    *) base="$arg" ;;
  esac
done

tidy=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}
if [ -z "$tidy" ]; then
  echo "tidy.sh: clang-tidy not found (Debian: apt-get install clang-tidy)" >&2
  exit 1
fi
build=${DLOCK_TIDY_BUILD:-build/tidy}
jobs=${DLOCK_TIDY_JOBS:-$(nproc)}
if [ "$all" = 0 ] && [ -z "$base" ]; then
  # The merge base with the previous commit (HEAD~1 itself on a linear history); a repository
  # with a single commit checks against it.
  base=$(git merge-base HEAD HEAD~1 2>/dev/null || git rev-parse HEAD)
fi

# The compile database: clang++ flags (what clang-tidy parses), every target that owns files under
# src/ and tools/ (the CLI too), and the generated header the library includes. Nothing else is
# built.
CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_BENCH=OFF \
  -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=ON >/dev/null
cmake --build "$build" --target generated/dlock/embedded_scripts.hpp >/dev/null

# The translation units to check, one per line, after a first line that says why.
mapfile -t selection < <(python3 - "$build/compile_commands.json" "$all" "$base" <<'EOF'
import json, os, re, subprocess, sys

db, check_all, base = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
root = os.getcwd()
units = sorted({os.path.relpath(os.path.join(e["directory"], e["file"]), root)
                for e in json.load(open(db))})
units = [u for u in units if u.startswith(("src/", "tools/"))]
if check_all:
    print(f"all {len(units)} translation units under src/ and tools/")
    for u in units:
        print(u)
    sys.exit(0)

changed = subprocess.run(["git", "diff", "--name-only", base, "--", "src", "tools"],
                         check=True, capture_output=True, text=True).stdout.split()
changed = [f for f in changed if f.endswith((".cpp", ".hpp", ".h")) and os.path.isfile(f)]

# Who includes whom, among the project's files: an include names a file by a path suffix
# ("locks/engine/x.hpp", or "x.hpp" next to the includer), which is all the ambiguity there is.
files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                        "src", "tools", "include"], check=True, capture_output=True,
                       text=True).stdout.split()
files = [f for f in files if f.endswith((".cpp", ".hpp", ".h")) and os.path.isfile(f)]
include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
includers = {}  # header -> files that include it
for f in files:
    for target in include.findall(open(f, errors="replace").read()):
        for h in files:
            if h == target or h.endswith("/" + target):
                includers.setdefault(h, set()).add(f)

# A changed header reaches every unit that includes it through any chain of headers.
todo, seen = list(changed), set(changed)
while todo:
    for f in includers.get(todo.pop(), ()):
        if f not in seen:
            seen.add(f)
            todo.append(f)
picked = [u for u in units if u in seen]
short = subprocess.run(["git", "rev-parse", "--short", base], capture_output=True,
                       text=True).stdout.strip()
print(f"{len(picked)} translation units for {len(changed)} files under src/ and tools/ "
      f"changed since {short or base}")
for u in picked:
    print(u)
EOF
)
echo "clang-tidy: ${selection[0]}, $jobs at a time"
files=("${selection[@]:1}")
if [ "${#files[@]}" -eq 0 ]; then
  echo "clang-tidy: nothing to check"
  exit 0
fi

start=$(date +%s)
status=0
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -n 1 "$tidy" -p "$build" --quiet || status=$?
echo "clang-tidy: ${#files[@]} translation units in $(($(date +%s) - start)) s"
if [ "$status" -ne 0 ]; then
  echo "clang-tidy: warnings above (each one fails the check; see .clang-tidy)" >&2
  exit 1
fi
echo "clang-tidy: clean"
