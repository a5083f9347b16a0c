// Kernel benchmark: matvec of every dtype at real model shapes, 1 and 2 threads (pool + worker_threads),
// against streaming-read and copy bandwidth probes measured in the same run.
//   node bench/kernels.mjs [--quick] [--json] [--threads 1,2] [--types q8_0,q4_0 (default: every weight dtype)] [--hot] [--repeat N]
//        [--relaxed] (the relaxed-SIMD build, kernels-test-relaxed.wasm)
// --repeat N runs the whole sweep N times and keeps the best time of each measurement (and the best
// probe): on a shared machine other processes only ever make a run slower.
// Weights are cycled over enough copies to exceed the last-level cache (footprint >= 256 MiB, 64 MiB with
// --quick), as in inference where every weight comes from DRAM once per token; --hot uses one copy.
import os from 'node:os';
import v8 from 'node:v8';
import { args as cliArgs, machine } from './lib/common.mjs';
import { loadKernels, startWorkers, T, TYPE_NAMES, BLOCK, ROW, WEIGHT_TYPES, rng } from './lib/kernels.mjs';

// Measure optimised code from the first call: compile with TurboFan only (no Liftoff baseline tier).
v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { has: flag, opt } = cliArgs();
const RELAXED = flag('--relaxed');
const QUICK = flag('--quick'), JSON_OUT = flag('--json'), HOT = flag('--hot');
const REPEAT = Math.max(1, +opt('--repeat', 1));
const loadStart = os.loadavg();
const THREADS = opt('--threads', '1,2').split(',').map(Number);
const TYPES = opt('--types', WEIGHT_TYPES.map((t) => TYPE_NAMES[t]).join(',')).split(',').map((n) => +Object.keys(TYPE_NAMES).find((k) => TYPE_NAMES[k] === n));
const SHAPES = [  // [label, rows (W out), cols (W in)]
  ['phi3-mini ffn up', 8192, 3072], ['phi3-mini ffn down', 3072, 8192],
  ['qwen2.5-0.5b ffn up', 4864, 896], ['qwen2.5-0.5b ffn down', 896, 4864],
  ['stories-110m ffn', 768, 2048],
];
const MIB = 1 << 20;
const PROBE_BYTES = (QUICK ? 64 : 256) * MIB;
const FOOTPRINT = HOT ? 0 : (QUICK ? 64 : 256) * MIB;
const MIN_MS = QUICK ? 25 : 120, ROUNDS = QUICK ? 3 : 5;
const log = (...a) => { if (!JSON_OUT) console.log(...a); };

const maxMatrix = 8192 * 3072 * 4;
const region = Math.max(FOOTPRINT, maxMatrix) + maxMatrix;
const pages = Math.ceil((8 * MIB + PROBE_BYTES + region + 16 * MIB) / 65536);
const k = await loadKernels({ pages, relaxed: RELAXED });
const X = k.x;
const maxT = Math.max(...THREADS);
const pools = {};
for (const n of THREADS) { pools[n] = k.alloc(64); X.ae_pool_init(pools[n], n, 200000); }
const workers = maxT > 1 ? await startWorkers(k, pools[maxT], maxT) : null;
if (THREADS.some((n) => n > 1 && n !== maxT)) throw new Error('only one multi-thread count per run');

// ---- data ----
const probe = k.alloc(PROBE_BYTES, 4096);
const mat = k.alloc(region, 4096);
function fillRandom(p, bytes, seed) {
  const u = k.u32(p, bytes >>> 2);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < u.length; i++) { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; u[i] = s >>> 0; }
}
fillRandom(probe, PROBE_BYTES, 7);

function prepareWeights(type, rows, cols, copies) {   // random weights with sane values (no NaN/inf/denormals)
  const rs = k.rowSize(type, cols), bytes = rs * rows, total = bytes * copies;
  fillRandom(mat, total, 1234 + type);
  if (type === T.F32) {
    const u = k.u32(mat, total >>> 2);
    for (let i = 0; i < u.length; i++) { const v = u[i]; u[i] = ((v & 0x807fffff) | ((118 + ((v >>> 23) & 7)) << 23)) >>> 0; }
  } else if (type === T.F16) {
    const h = k.u16(mat, total >>> 1);
    for (let i = 0; i < h.length; i++) { const v = h[i]; h[i] = (v & 0x83ff) | ((8 + ((v >>> 10) & 7)) << 10); }
  } else {
    const [, ts] = BLOCK[type], nb = total / ts, dv = new DataView(k.buffer, mat, total);
    const offs = ROW[type].scaleOffsets;   // the registry's f16 scales
    for (let b = 0; b < nb; b++) for (const o of offs) dv.setUint16(b * ts + o, 0x1000 + (b & 0x3ff), true);   // ~2^-11
  }
  return { rs, bytes };
}

// Fastest single call (ms) over ROUNDS rounds of >= MIN_MS of back-to-back calls. The minimum (not the
// mean) because the machine may be shared: other processes only ever add time to a call.
function timeit(fn) {
  let best = Infinity;
  fn(0);
  let n = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    let t = t0;
    while (t - t0 < MIN_MS) {
      const a = performance.now();
      fn(n++);
      t = performance.now();
      best = Math.min(best, t - a);
    }
  }
  return best;
}

// ---- probes ----
const probes = { read: {}, copy: {} };
const rargs = k.alloc(16), cargs = k.alloc(16), out = k.alloc(64);
k.u32(rargs, 3).set([probe, PROBE_BYTES, out]);
k.u32(cargs, 3).set([probe + PROBE_BYTES / 2, probe, PROBE_BYTES / 2]);
// probes run before and after the matvec runs; the best of both counts (a conservative "limit")
function runProbes(tag) {
  for (const n of THREADS) {
    const rd = PROBE_BYTES / 1e9 / (timeit(() => X.ae_pool_run(pools[n], 2, rargs)) / 1e3);
    const cp = (PROBE_BYTES / 2) / 1e9 / (timeit(() => X.ae_pool_run(pools[n], 3, cargs)) / 1e3);
    probes.read[n] = Math.max(probes.read[n] ?? 0, rd);
    probes.copy[n] = Math.max(probes.copy[n] ?? 0, cp);
    log(`probe (${tag}) ${n} thread(s): streaming read ${rd.toFixed(1)} GB/s, copy ${cp.toFixed(1)} GB/s (bytes copied per s)`);
  }
}
runProbes('start');

// ---- matvec ----
const results = [];
const r = rng(99);
const xf = k.alloc(8192 * 4), xq = k.alloc(8192 * 4 + 4096), y = k.alloc(8192 * 4), args = k.alloc(32);
for (let rep = 0; rep < REPEAT; rep++) {
  if (rep) runProbes(`repeat ${rep}`);
  let idx = 0;
  for (const type of TYPES) {
    for (const [label, rows, cols] of SHAPES) {
      const rsz = k.rowSize(type, cols);
      if (!rsz) {
        if (!rep) results.push({ type: TYPE_NAMES[type], shape: `${rows}x${cols}`, label, skipped: 'cols not a multiple of the block size' });
        idx++;
        continue;
      }
      const copies = Math.max(1, Math.floor(Math.max(FOOTPRINT, rsz * rows) / (rsz * rows)));
      const { bytes } = prepareWeights(type, rows, cols, copies);
      const xv = k.f32(xf, cols);
      for (let i = 0; i < cols; i++) xv[i] = r.normal();
      X.kt_quantize(type, 0, xf, xq, cols);
      const argv32 = k.u32(args, 7);
      const row = results[idx] ?? (results[idx] = { type: TYPE_NAMES[type], shape: `${rows}x${cols}`, label, weight_bytes: bytes, copies, threads: {} });
      idx++;
      for (const n of THREADS) {
        const ms = timeit((i) => {
          argv32.set([type, mat + (i % copies) * bytes, cols, rows, xq, y, 0]);
          X.ae_pool_run(pools[n], 1, args);
        });
        if (row.threads[n] && row.threads[n].ms <= ms) continue;
        const gbs = bytes / 1e9 / (ms / 1e3);
        row.threads[n] = { ms, gbs, gflops: 2 * rows * cols / 1e9 / (ms / 1e3), pct_of_read: 100 * gbs / probes.read[n] };
      }
      if (row.threads[1] && row.threads[maxT] && maxT > 1) row.speedup = row.threads[1].ms / row.threads[maxT].ms;
      const t = THREADS.map((n) => `${n}T ${row.threads[n].ms.toFixed(3)} ms ${row.threads[n].gbs.toFixed(1)} GB/s`).join(' | ');
      log(`[${rep + 1}/${REPEAT}] ${row.type.padEnd(5)} ${row.shape.padEnd(10)} best so far: ${t}${row.speedup ? ` | x${row.speedup.toFixed(2)}` : ''}`);
    }
  }
}
runProbes('end');
for (const row of results) for (const [n, t] of Object.entries(row.threads ?? {})) t.pct_of_read = 100 * t.gbs / probes.read[n];
if (!JSON_OUT) {
  log(`\n| dtype | W (rows x cols) | bytes | ${THREADS.map((n) => `${n}T ms | ${n}T GB/s | ${n}T GFLOP/s | ${n}T % of read`).join(' | ')}${maxT > 1 ? ' | speedup' : ''} |`);
  log(`|${'---|'.repeat(3 + 4 * THREADS.length + (maxT > 1 ? 1 : 0))}`);
  for (const row of results) {
    if (row.skipped) { log(`| ${row.type} | ${row.shape} | n/a | ${THREADS.map(() => 'n/a | n/a | n/a | n/a').join(' | ')}${maxT > 1 ? ' | n/a' : ''} |`); continue; }
    const cells = THREADS.map((n) => { const t = row.threads[n]; return `${t.ms.toFixed(3)} | ${t.gbs.toFixed(1)} | ${t.gflops.toFixed(1)} | ${t.pct_of_read.toFixed(0)}%`; });
    log(`| ${row.type} | ${row.shape} | ${(row.weight_bytes / 1e6).toFixed(1)} MB | ${cells.join(' | ')}${maxT > 1 ? ` | ${row.speedup.toFixed(2)}x` : ''} |`);
  }
  log(`\nlimit (best streaming read): ${THREADS.map((n) => `${n}T ${probes.read[n].toFixed(1)} GB/s`).join(', ')}; copy: ${THREADS.map((n) => `${n}T ${probes.copy[n].toFixed(1)} GB/s`).join(', ')}`);
}
if (workers) await workers.quit();

const { loadavg: _now, ...host } = machine();
const report = {
  ...host,
  build: RELAXED ? "relaxed" : "plain", quick: QUICK, hot: HOT, repeat: REPEAT, footprint_bytes: FOOTPRINT, probe_bytes: PROBE_BYTES,
  loadavg_start: loadStart, loadavg_end: os.loadavg(), probes, results,
};
if (JSON_OUT) console.log(JSON.stringify(report, null, 1));
else log(`\n${report.build} build, ${report.date} node ${report.node} nproc ${report.nproc} cpu ${report.cpu} loadavg ${loadStart.map((v) => v.toFixed(2)).join(' ')} -> ${report.loadavg_end.map((v) => v.toFixed(2)).join(' ')}`);
process.exit(0);
