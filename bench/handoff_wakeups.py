#!/usr/bin/env python3
"""Where a handoff between two processes waits: the thread wake-ups on its path, traced.

Runs `dlock_bench_processes`' handoff children (A holds, B waits in lock(); A unlocks, B's lock()
returns) against a private redis-server under `perf sched record`, then sorts every wake-up
among the children's threads and the server by who woke whom and whether the woken thread ran
on the waker's vCPU ("same") or on another one ("cross", on an idle vCPU: an inter-processor
interrupt, and under a hypervisor the vCPU's own wake-up). For each kind it prints how many
there were per handoff and the median delay from the wake-up to the thread running.

    python3 bench/handoff_wakeups.py [--bench BINARY] [--side dlock|floor|grant|naive]
                                     [--handoffs N]

Needs perf with the sched tracepoints, redis-server, and root (or perf_event_paranoid <= 0).
Roles: "main" is a child's main thread (the one in lock()/unlock()), "io" another thread of a
child (dlock's I/O thread), "redis" the server, "driver" this script.
"""
import argparse
import collections
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(bench, side, url, handoffs):
    """The handoff loop of dlock_bench_processes' run_handoff, in this process."""
    args = [bench, "--child", "handoff", "--side", side, "--url", url, "--key",
            "bench:wakeups:" + side, "--naive-retry-ms", "10"]
    kids = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             bufsize=1) for _ in range(2)]
    for k in kids:
        if k.stdout.readline().strip() != "ready":
            sys.exit("a handoff child did not start")
    holder, waiter = kids
    holder.stdin.write("lock\n")
    holder.stdout.readline()
    us = []
    for _ in range(handoffs):
        waiter.stdin.write("lock\n")
        time.sleep(0.005)  # let the waiter find the lock taken and wait
        holder.stdin.write("unlock\n")
        t0 = int(holder.stdout.readline().split()[1])
        t1 = int(waiter.stdout.readline().split()[1])
        us.append((t1 - t0) / 1000.0)
        holder, waiter = waiter, holder
    holder.stdin.write("unlock\n")
    holder.stdout.readline()
    for k in kids:
        k.stdin.write("quit\n")
        k.stdin.flush()
        k.wait()
    return [k.pid for k in kids], sorted(us)


EVENT = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")


def wakeups(data, children, server, driver):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    process_of = {}
    events = []
    for line in out.splitlines():
        m = EVENT.match(line)
        if m:
            _, pid, tid, cpu, t, name, rest = m.groups()
            process_of[int(tid)] = int(pid)
            events.append((float(t), int(cpu), int(tid), name, rest))
    events.sort()

    def role(tid):
        pid = process_of.get(tid)
        if pid == server:
            return "redis"
        if pid == driver:
            return "driver"
        if pid in children:
            return "main" if tid == pid else "io"
        return None

    waking = {}  # woken tid -> (time, waker's role, waker's vCPU)
    delays = collections.defaultdict(list)
    for t, cpu, tid, name, rest in events:
        if name == "sched_waking":
            woken = int(re.search(r" pid=(\d+) ", rest).group(1))
            if role(tid) and woken in process_of and role(woken):
                waking[woken] = (t, role(tid), cpu)
        elif name == "sched_switch":
            nxt = int(re.search(r"next_pid=(\d+)", rest).group(1))
            if nxt in waking:
                t0, who, where = waking.pop(nxt)
                kind = "same" if cpu == where else "cross"
                delays[(who, role(nxt), kind)].append((t - t0) * 1e6)
    return delays


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/rel/bench/dlock_bench_processes")
    p.add_argument("--side", default="dlock")
    p.add_argument("--handoffs", type=int, default=200)
    o = p.parse_args()
    bench = os.path.abspath(o.bench)
    work = tempfile.mkdtemp(prefix="handoff-wakeups-")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = "redis://127.0.0.1:%d" % port
        data = os.path.join(work, "sched.data")
        # perf follows this script's own loop through a child: record system-wide while it runs.
        recorder = subprocess.Popen(["perf", "sched", "record", "-a", "-o", data],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # perf attaches its tracepoints
        children, us = drive(bench, o.side, url, o.handoffs)
        recorder.send_signal(2)
        recorder.wait()
        delays = wakeups(data, set(children), server.pid, os.getpid())
    finally:
        server.terminate()
        server.wait()
    print("%s: %d handoffs, p50 %.1f us, p90 %.1f us (under perf)" %
          (o.side, len(us), us[len(us) // 2], us[int(len(us) * 0.9)]))
    print("%-8s %-8s %-6s %9s %13s %10s" %
          ("waker", "woken", "vCPU", "per hand.", "median delay", "p90 delay"))
    for key in sorted(delays):
        v = sorted(delays[key])
        print("%-8s %-8s %-6s %9.2f %10.1f us %7.1f us" %
              (key[0], key[1], key[2], len(v) / len(us), statistics.median(v),
               v[int(len(v) * 0.9)]))


if __name__ == "__main__":
    main()
