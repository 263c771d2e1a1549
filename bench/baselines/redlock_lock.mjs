// node-redlock v5 (with ioredis) baseline for dlock_bench_lock (bench/lock_bench.cpp).
//
// Same scenarios and name=value output as redis_py_lock.py. Redlock on one Redis instance, with
// its default retryDelay (200 ms) and retryJitter (100 ms) but retryCount -1 (retry until
// acquired; the default gives up after 10 retries) and a 30 s lease. Node has one thread: the
// --threads "threads" are concurrent async workers sharing one ioredis connection.
//
// --ports P1,P2,P3 runs Redlock over those masters instead (bench/redlock_bench.cpp), one ioredis
// connection each. Two more scenarios serve tests/integration/redlock_test.cpp: "hold" takes the
// lock, prints "locked", holds it --hold-ms, releases and prints "released"; "try" makes one
// attempt (retryCount 0) and prints "acquired" (then releases) or "refused".
//
// dlock_bench_processes (bench/process_bench.cpp) runs it as one of several processes on one key:
// --start-ns starts the cycles at that CLOCK_MONOTONIC time (process.hrtime.bigint() reads it on
// Linux, like the C++ steady_clock), and --print-waits prints every wait (all cycle scenarios).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { createRequire } from "node:module";
import Redis from "ioredis";
import Redlock, { ExecutionError } from "redlock";

const { values: args } = parseArgs({
  options: {
    version: { type: "boolean", default: false },
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "6379" },
    ports: { type: "string" },
    password: { type: "string" },
    scenario: { type: "string", default: "a" },
    seconds: { type: "string", default: "2" },
    threads: { type: "string", default: "8" },
    "hold-ms": { type: "string", default: "1" },
    "think-ms": { type: "string", default: "1" },
    handoffs: { type: "string", default: "50" },
    key: { type: "string", default: "bench:lock:redlock" },
    "print-waits": { type: "boolean", default: false },
    "start-ns": { type: "string", default: "0" },
  },
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(values, p) {
  if (values.length === 0) return 0;
  const v = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.floor((p / 100) * v.length + 0.999999));
  return v[Math.min(v.length, rank) - 1];
}

// redlock.acquire() with retryCount -1, except that it gives up once stop() is true: split votes
// over several masters can keep a worker retrying far past the run's end (a 30 s wait was seen),
// which would hold the whole benchmark. Tries in chunks of 10 retries (about 2-3 s each).
async function acquireUnlessStopped(redlock, key, stop) {
  for (;;) {
    try {
      return await redlock.acquire([key], 30000, { retryCount: 10 });
    } catch (e) {
      if (!(e instanceof ExecutionError)) throw e;
      if (stop()) return null;
    }
  }
}

async function runCycles(redlock, keys, seconds, hold, think, recordWaitsAsked) {
  const recordWaits = recordWaitsAsked || args["print-waits"];
  const startNs = BigInt(args["start-ns"]);
  const now = process.hrtime.bigint();
  if (startNs > now) await sleep(Number(startNs - now) / 1e6);
  let stop = false;
  let total = 0;
  const waits = [];
  const worker = async (key) => {
    while (!stop) {
      const t0 = performance.now();
      const lock = await acquireUnlessStopped(redlock, key, () => stop);
      if (recordWaits) waits.push(performance.now() - t0);
      if (lock === null) break;  // the run ended while it waited: that wait, no acquisition
      if (hold > 0) await sleep(hold);
      await lock.release();
      ++total;
      if (think > 0) await sleep(think);
    }
  };
  const t0 = performance.now();
  const workers = keys.map(worker);
  await sleep(seconds * 1000);
  stop = true;
  await Promise.all(workers);
  const took = (performance.now() - t0) / 1000;
  console.log(`acquisitions=${total}`);
  console.log(`seconds=${took.toFixed(6)}`);
  if (recordWaits) {
    console.log(`wait_p50_ms=${percentile(waits, 50).toFixed(6)}`);
    console.log(`wait_p99_ms=${percentile(waits, 99).toFixed(6)}`);
    // Every wait, so that a caller running several processes can merge them.
    if (args["print-waits"]) console.log(`waits_ms=${waits.map((w) => w.toFixed(3)).join(",")}`);
  }
}

async function runHandoff(redlock, key, n) {
  const d = [];
  for (let i = 0; i < n; ++i) {
    const a = await redlock.acquire([key], 30000);
    let t1 = 0;
    const b = redlock.acquire([key], 30000).then((lock) => {
      t1 = performance.now();
      return lock;
    });
    await sleep(5);  // B is waiting in acquire() by now
    const t0 = performance.now();
    await a.release();
    const lockB = await b;
    d.push(t1 - t0);
    await lockB.release();
  }
  console.log(`handoff_p50_ms=${percentile(d, 50).toFixed(6)}`);
  console.log(`handoff_p99_ms=${percentile(d, 99).toFixed(6)}`);
}

async function main() {
  if (args.version) {
    const require = createRequire(import.meta.url);
    const rl = require("./node_modules/redlock/package.json").version;
    const io = require("./node_modules/ioredis/package.json").version;
    console.log(`redlock ${rl.replace(/^v/, "")}, ioredis ${io}, node ${process.versions.node}`);
    return;
  }
  const ports = args.ports ? args.ports.split(",") : [args.port];
  const clients = ports.map(
    (port) =>
      new Redis({ host: args.host, port: Number(port), password: args.password, lazyConnect: true }),
  );
  for (const c of clients) {
    await c.connect();
    await c.ping();
  }
  const redlock = new Redlock(clients, { retryCount: -1 });
  const threads = Number(args.threads);
  const seconds = Number(args.seconds);
  if (args.scenario === "a") {
    await runCycles(redlock, [args.key], seconds, 0, 0, false);
  } else if (args.scenario === "b") {
    const keys = Array.from({ length: threads }, (_, i) => `${args.key}:${i}`);
    await runCycles(redlock, keys, seconds, 0, 0, false);
  } else if (args.scenario === "c2") {
    const keys = Array.from({ length: threads }, () => args.key);
    await runCycles(redlock, keys, seconds, Number(args["hold-ms"]), Number(args["think-ms"]), true);
  } else if (args.scenario === "h") {
    await runHandoff(redlock, args.key, Number(args.handoffs));
  } else if (args.scenario === "hold") {
    const lock = await redlock.acquire([args.key], 30000);
    console.log("locked");
    await sleep(Number(args["hold-ms"]));
    await lock.release();
    console.log("released");
  } else if (args.scenario === "try") {
    const once = new Redlock(clients, { retryCount: 0 });
    try {
      const lock = await once.acquire([args.key], 30000);
      console.log("acquired");
      await lock.release();
    } catch (e) {
      console.log("refused");
    }
  } else {
    throw new Error(`unknown scenario ${args.scenario}`);
  }
  for (const c of clients) c.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
