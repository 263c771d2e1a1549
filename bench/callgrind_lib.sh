# Shared by bench/client_cost.sh and bench/script_cost.sh (sourced, not run): the checks they
# make before measuring, a free loopback port, a wait for a redis-server to answer, and the
# total of a callgrind profile.

# Exits with 2 unless $2 is an executable benchmark binary and valgrind is installed; $1 names
# the calling script in the message.
require_binary_and_valgrind() {
  [ -x "$2" ] || { echo "$1: no benchmark binary at $2" >&2; exit 2; }
  command -v valgrind > /dev/null || { echo "$1: valgrind is not installed" >&2; exit 2; }
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until the redis-server on port $1 answers PING: $2 tries, $3 seconds apart.
wait_for_redis() {
  for _ in $(seq 1 "$2"); do
    redis-cli -p "$1" PING > /dev/null 2>&1 && return 0
    sleep "$3"
  done
}

# The instructions a callgrind profile $1 counted, every thread together.
callgrind_total() {
  # awk reads to the end: an early exit would kill callgrind_annotate with SIGPIPE (pipefail).
  callgrind_annotate "$1" | awk '/PROGRAM TOTALS/ && !seen { gsub(",", "", $1); print $1; seen = 1 }'
}
