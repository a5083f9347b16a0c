// Shared by the benchmarks: command-line options, the machine description every report carries, and a
// median. Figures from these benches go into docs/PERFORMANCE.md with the command that produced them.
import v8 from 'node:v8';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `--flag value` options and bare flags of the command line. */
export function args(argv = process.argv.slice(2)) {
  return {
    argv,
    has: (flag) => argv.includes(flag),
    opt: (flag, def) => { const i = argv.indexOf(flag); return i >= 0 ? argv[i + 1] : def; },
  };
}

/** CPU model name (from /proc/cpuinfo where there is one). */
export function cpuName() {
  try {
    const m = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/);
    if (m) return m[1];
  } catch { /* not Linux */ }
  return os.cpus()[0]?.model;
}

/** Linux transparent huge pages mode ('always', 'madvise' or 'never'; null elsewhere). V8 never madvises a wasm memory,
 *  so only 'always' gives it 2 MB pages (hugePagesMB shows it): a property of the machine that changes TLB behaviour,
 *  so every report names it (on the project's VM it did not explain the swings of memory speed between processes:
 *  docs/PERFORMANCE.md "Session 20"). */
export function thpMode() {
  try { return fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').match(/\[(\w+)\]/)?.[1] ?? null; } catch { return null; }
}

/** MB of this process's memory in transparent huge pages now (Linux; null elsewhere). */
export function hugePagesMB() {
  try {
    const m = fs.readFileSync('/proc/self/smaps_rollup', 'utf8').match(/AnonHugePages:\s+(\d+) kB/);
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch { return null; }
}

/** What a report records about the run: date, Node, cores, CPU, load average now, the huge pages mode. */
export function machine() {
  return { date: new Date().toISOString(), node: process.version, nproc: os.availableParallelism?.() ?? os.cpus().length, cpu: cpuName(), loadavg: os.loadavg(), thp: thpMode() };
}

/** Median cross-core round trip in ns: the calling thread and a worker_threads worker hand a counter back and forth
 *  through one shared Int32Array slot (Atomics.store / spinning Atomics.load). What each decode step of the threaded
 *  forward pays at least twice; it has moved between ~110 and ~550 ns on the project's VMs as the host placed the two
 *  vCPUs (docs/PERFORMANCE.md "Session 25"), and small models' 2-thread decode moves with it. */
export async function crossCoreNs({ rounds = 50000, reps = 3 } = {}) {
  if ((os.availableParallelism?.() ?? os.cpus().length) < 2) return null;   // one CPU: every hand-off is a context switch
  const { Worker } = await import('node:worker_threads');
  const flag = new Int32Array(new SharedArrayBuffer(128), 64, 1);
  const w = new Worker(`
    const { workerData } = require('node:worker_threads');
    const f = new Int32Array(workerData.buf, 64, 1);
    (function loop() {
      for (;;) {
        let v;
        while (((v = Atomics.load(f, 0)) & 1) === 0) { /* spin */ }
        if (v < 0) return;
        Atomics.store(f, 0, v + 1);
      }
    })();`, { eval: true, workerData: { buf: flag.buffer } });
  let failed = null;
  w.on('error', (e) => { failed = e; });
  const times = [];
  let v = 0;
  for (let r = 0; r <= reps; r++) {   // the first rep warms up (worker start, tier-up) and is dropped
    const t0 = process.hrtime.bigint();
    let i = 0;
    for (; i < rounds; i++) {
      Atomics.store(flag, 0, ++v);
      for (let spins = 0; Atomics.load(flag, 0) === v; spins++) if (failed || spins > 1e9) throw new Error(`crossCoreNs: the worker stopped (${failed?.message ?? 'no answer'})`);
      v++;
      if ((i & 1023) === 1023 && process.hrtime.bigint() - t0 > 1000000000n) { i++; break; }   // at most ~1 s a rep
    }
    if (r > 0) times.push(Number(process.hrtime.bigint() - t0) / i);
  }
  Atomics.store(flag, 0, -1);
  await w.terminate();
  return Math.round(median(times));
}

export function median(a) { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; }

/** V8 flags of the end-to-end benches, set before any wasm compiles: optimising tier only (no Liftoff, no lazy
 *  compilation: no tier-up during the timing) and relaxed SIMD (behind a flag in Node 20), as the CLI sets them. */
export function wasmFlags() {
  for (const f of ['--no-liftoff', '--no-wasm-lazy-compilation', '--experimental-wasm-relaxed-simd']) v8.setFlagsFromString(f);
}

/** One prompt forward from position 0 after model.reset(), with the forward's time counters on: wall ms, the
 *  process's CPU usage during it ({ user, system } in us) and the counters (Engine.opTimes: per layer and global). */
export function timedPromptForward(model, ids) {
  const e = model.engine;
  model.reset();
  e.setTiming(true);
  const c = process.cpuUsage(), t = performance.now();
  e.forward(ids, 0);
  const wall = performance.now() - t, cpu = process.cpuUsage(c);
  const ops = e.opTimes();
  e.setTiming(false);
  return { wall, cpu, ops };
}
