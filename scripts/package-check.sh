#!/usr/bin/env bash
# The Debian packages as a user gets them (CI's last step, scripts/test.sh):
#
#   bash scripts/package-check.sh BUILD_DIR     a configured and built tree (library and CLI)
#
# CPack builds the .debs from BUILD_DIR, apt-get installs them, tests/consumer is built against
# them with CMake (find_package) and, as a second program, with pkg-config, and both and the
# packaged /usr/bin/dlock talk to a private redis-server on a unix socket (no port to collide
# with). Packages this script installed are purged at the end, so a developer's machine is left
# as it was. Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: bash scripts/package-check.sh BUILD_DIR}

work=$(mktemp -d)
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -B "$work/debs" >/dev/null)
debs=("$work"/debs/*.deb)
packages=()
for deb in "${debs[@]}"; do
  packages+=("$(dpkg-deb -f "$deb" Package)")
  printf '  %s: %s\n' "${deb##*/}" "$(dpkg-deb -f "$deb" Depends)"
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
preinstalled=$(dpkg-query -W -f='${Status}\n' "${packages[@]}" 2>/dev/null |
  grep -c "install ok installed" || true)
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${debs[@]}" >/dev/null
purge() {
  if [ "$preinstalled" -eq 0 ]; then
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null
  fi
  cleanup
}
trap purge EXIT

cmake -S tests/consumer -B "$work/consumer-cmake" -G Ninja >/dev/null
cmake --build "$work/consumer-cmake" >/dev/null
# shellcheck disable=SC2046  # pkg-config prints a list of flags
c++ -std=c++20 -o "$work/consumer-pkg-config" tests/consumer/main.cpp $(pkg-config --cflags --libs dlock)

redis-server --port 0 --unixsocket "$work/redis.sock" --unixsocketperm 700 --dir "$work" \
  --save '' --appendonly no >"$work/redis.log" 2>&1 &
redis_pid=$!
# Nothing announces readiness to a shell: poll the socket, bounded (5 s).
for _ in $(seq 50); do
  redis-cli -s "$work/redis.sock" ping >/dev/null 2>&1 && break
  sleep 0.1
done
url="unix://$work/redis.sock"
/usr/bin/dlock --redis "$url" ping
"$work/consumer-cmake/consumer" "$url"
"$work/consumer-pkg-config" "$url"
echo "package-check: the packages install and work from CMake, pkg-config and /usr/bin/dlock"
