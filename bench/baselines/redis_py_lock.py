#!/usr/bin/env python3
"""redis-py Lock baseline for dlock_bench_lock (bench/lock_bench.cpp).

Runs one scenario with redis-py's Lock at its defaults (blocking, sleep=0.1 s between
attempts) and a 30 s lease (timeout=30, as the naive lock's PX 30000), and prints name=value
lines that dlock_bench_lock parses:
  a   one thread, lock+release cycles on one key          acquisitions=, seconds=
  b   --threads threads, each on its own key              acquisitions=, seconds=
  c2  --threads threads on one key, hold/think sleeps     acquisitions=, seconds=,
                                                          wait_p50_ms=, wait_p99_ms=
  h   handoff: A holds, B waits in acquire(); A releases  handoff_p50_ms=, handoff_p99_ms=
      at t0, B's acquire() returns at t1
All threads share one redis.Redis (one connection pool).

dlock_bench_processes (bench/process_bench.cpp) runs it as one of several processes on one key:
--start-ns starts every process's cycles at the same CLOCK_MONOTONIC time (what
time.monotonic_ns() reads on Linux, like the C++ steady_clock), and --print-waits prints every
acquisition's wait as waits_ms=w1,w2,... (in every cycle scenario).
"""
import argparse
import sys
import threading
import time

import redis


def percentile(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    rank = max(1, int(p / 100.0 * len(v) + 0.999999))
    return v[min(len(v), rank) - 1]


def run_cycles(r, keys, seconds, hold, think, record_waits, start_ns=0, print_waits=False):
    record_waits = record_waits or print_waits
    stop = threading.Event()
    counts = [0] * len(keys)
    waits = [[] for _ in keys]
    errors = []
    start = threading.Barrier(len(keys) + 1)

    def worker(i):
        lock = r.lock(keys[i], timeout=30)
        start.wait()
        n = 0
        try:
            while not stop.is_set():
                t0 = time.perf_counter()
                lock.acquire()
                if record_waits:
                    waits[i].append((time.perf_counter() - t0) * 1000)
                if hold > 0:
                    time.sleep(hold)
                lock.release()
                n += 1
                if think > 0:
                    time.sleep(think)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            errors.append(e)
            stop.set()
        counts[i] = n

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    if start_ns > 0:
        time.sleep(max(0, start_ns - time.monotonic_ns()) / 1e9)
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    print(f"acquisitions={sum(counts)}")
    print(f"seconds={took:.6f}")
    if record_waits:
        all_waits = [w for ws in waits for w in ws]
        print(f"wait_p50_ms={percentile(all_waits, 50):.6f}")
        print(f"wait_p99_ms={percentile(all_waits, 99):.6f}")
        if print_waits:
            print("waits_ms=" + ",".join(f"{w:.3f}" for w in all_waits))


def run_handoff(r, key, n, settle):
    t0s = [0.0] * n
    t1s = [0.0] * n
    b_go = threading.Semaphore(0)
    a_go = threading.Semaphore(0)
    errors = []

    def a():
        lock = r.lock(key, timeout=30)
        try:
            for i in range(n):
                lock.acquire()
                b_go.release()
                time.sleep(settle)  # B is waiting in acquire() by now
                t0s[i] = time.perf_counter()
                lock.release()
                a_go.acquire()
                if errors:
                    break
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            b_go.release()

    def b():
        lock = r.lock(key, timeout=30)
        try:
            for i in range(n):
                b_go.acquire()
                if errors:
                    break
                lock.acquire()
                t1s[i] = time.perf_counter()
                lock.release()
                a_go.release()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            a_go.release()

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    if errors:
        raise errors[0]
    d = [(t1s[i] - t0s[i]) * 1000 for i in range(n)]
    print(f"handoff_p50_ms={percentile(d, 50):.6f}")
    print(f"handoff_p99_ms={percentile(d, 99):.6f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--version", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--password", default=None)
    p.add_argument("--scenario", choices=["a", "b", "c2", "h"], default="a")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--hold-ms", type=float, default=1)
    p.add_argument("--think-ms", type=float, default=1)
    p.add_argument("--handoffs", type=int, default=200)
    p.add_argument("--key", default="bench:lock:redis-py")
    p.add_argument("--start-ns", type=int, default=0)
    p.add_argument("--print-waits", action="store_true")
    args = p.parse_args()
    if args.version:
        print(f"redis-py {redis.__version__}, Python {sys.version.split()[0]}")
        return
    r = redis.Redis(host=args.host, port=args.port, password=args.password)
    r.ping()
    timing = {"start_ns": args.start_ns, "print_waits": args.print_waits}
    if args.scenario == "a":
        run_cycles(r, [args.key], args.seconds, 0, 0, False, **timing)
    elif args.scenario == "b":
        keys = [f"{args.key}:{i}" for i in range(args.threads)]
        run_cycles(r, keys, args.seconds, 0, 0, False, **timing)
    elif args.scenario == "c2":
        keys = [args.key] * args.threads
        run_cycles(r, keys, args.seconds, args.hold_ms / 1000, args.think_ms / 1000, True, **timing)
    else:
        run_handoff(r, args.key, args.handoffs, 0.005)


if __name__ == "__main__":
    main()
