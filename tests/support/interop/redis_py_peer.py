#!/usr/bin/python3
"""A redis-py Lock for dlock's plain-lock interop test (tests/integration/plain_interop_test.cpp).

  redis_py_peer.py hold HOST PORT KEY TTL_MS   acquire (blocking), print "locked <value>", wait
                                               for SIGUSR2, release, print "released"
  redis_py_peer.py try  HOST PORT KEY TTL_MS   one attempt: print "acquired" (then release) or
                                               "busy"
Run with Debian's /usr/bin/python3 (package python3-redis).
"""
import signal
import sys

import redis


def main():
    mode, host, port, key, ttl_ms = sys.argv[1:6]
    r = redis.Redis(host=host, port=int(port))
    lock = r.lock(key, timeout=int(ttl_ms) / 1000.0)
    if mode == "hold":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        lock.acquire(blocking=True)
        print("locked", lock.local.token.decode(), flush=True)
        signal.sigwait({signal.SIGUSR2})
        lock.release()
        print("released", flush=True)
        return 0
    if mode == "try":
        if lock.acquire(blocking=False):
            print("acquired", flush=True)
            lock.release()
        else:
            print("busy", flush=True)
        return 0
    print("usage: see the docstring", file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main())
