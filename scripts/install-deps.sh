#!/usr/bin/env bash
# Installs what dlock needs to build, test and benchmark, from Debian 12's packages only.
# Idempotent: does nothing when everything is there. Needs root (or sudo) when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang clang-format   # toolchain (g++ 12, clang 14)
  clang-tidy                                               # scripts/tidy.sh
  libclang-rt-14-dev                                       # clang's sanitizer runtimes
  libasio-dev libssl-dev openssl                           # sockets, timers, TLS
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libfmt-dev
  redis-server redis-tools redis-sentinel                  # real servers for tests and demos
  python3 git                                              # scripts/check-readme-snippets.py
  libhiredis-dev pkg-config                                # bench: the naive lock on hiredis
  python3-redis                                            # plain-lock interop test (redis-py Lock)
  iproute2 nftables                                        # fault suite: namespaces, partitions
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The packaged redis-server starts a system service; dlock's tests and demos start their own.
$sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
