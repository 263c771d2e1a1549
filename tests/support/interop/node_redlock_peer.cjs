// node-redlock v5 (with ioredis) for dlock's plain-lock interop test
// (tests/integration/plain_interop_test.cpp), on one Redis server.
//
//   node node_redlock_peer.cjs NODE_MODULES hold HOST PORT KEY TTL_MS
//       acquire (retrying), print "locked <value>", wait for SIGUSR2, release, print "released"
//   node node_redlock_peer.cjs NODE_MODULES try HOST PORT KEY TTL_MS
//       one attempt: print "acquired" (then release) or "busy"
// NODE_MODULES: bench/baselines/node_modules (npm ci --prefix bench/baselines).
"use strict";
const path = require("node:path");
const { createRequire } = require("node:module");

const [modules, mode, host, port, key, ttl] = process.argv.slice(2);
const load = createRequire(path.join(modules, "noop.js"));
const Redis = load("ioredis");
const redlockModule = load("redlock");
const Redlock = redlockModule.default || redlockModule;

async function main() {
  const client = new Redis({ host, port: Number(port), lazyConnect: true });
  await client.connect();
  const retryCount = mode === "hold" ? -1 : 0;
  const redlock = new Redlock([client], { retryCount, retryDelay: 10, retryJitter: 0 });
  try {
    if (mode === "hold") {
      const released = new Promise((resolve) => process.once("SIGUSR2", resolve));
      const lock = await redlock.acquire([key], Number(ttl));
      console.log(`locked ${lock.value}`);
      await released;
      await lock.release();
      console.log("released");
    } else if (mode === "try") {
      let lock;
      try {
        lock = await redlock.acquire([key], Number(ttl));
      } catch (e) {
        console.log("busy");
      }
      if (lock) {
        console.log("acquired");
        await lock.release();
      }
    } else {
      console.error("usage: see the top of this file");
      process.exitCode = 64;
    }
  } finally {
    client.disconnect();
  }
}

main().catch((e) => {
  console.error(`node_redlock_peer: ${e.stack || e}`);
  process.exitCode = 2;
});
