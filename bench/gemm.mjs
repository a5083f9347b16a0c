// Prefill GEMM kernel benchmark, one thread: ae_matmul (each dtype's batched kernel) on a batch of
// tokens vs the matvec per token over 16-row chunks (what ae_matmul did before the GEMM kernels, and what
// it still does for a dtype without one), same weights, same activations, hot in cache as in prefill
// (the row chunk stays in L1/L2 while the tokens pass). Reports GMAC/s and the ratio.
//   node bench/gemm.mjs [--types q8_0,q4_0] [--tokens 64] [--repeat 5] [--relaxed] [--json]
// --relaxed: the relaxed-SIMD build (kernels-test-relaxed.wasm)
// Times are CPU times, the best of --repeat runs of at least 150 ms each (on a shared machine other processes only
// ever make a run slower).
import os from 'node:os';
import v8 from 'node:v8';
import { args as cliArgs, machine } from './lib/common.mjs';
import { loadKernels, TYPE_NAMES, BLOCK, WEIGHT_TYPES, rng } from './lib/kernels.mjs';

v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { has, opt } = cliArgs();
const JSON_OUT = has('--json');
const NV = +opt('--tokens', 64), REPEAT = Math.max(1, +opt('--repeat', 5));
const TYPES = opt('--types', WEIGHT_TYPES.map((t) => TYPE_NAMES[t]).join(',')).split(',')
  .map((n) => +Object.keys(TYPE_NAMES).find((k) => TYPE_NAMES[k] === n));
const SHAPES = [['phi3-mini q/o', 3072, 3072], ['phi3-mini ffn down', 3072, 8192], ['s15m ffn up', 768, 288], ['s15m ffn down', 288, 768]];
const k = await loadKernels({ pages: 8192, relaxed: has('--relaxed') });
const X = k.x;
const r = rng(5);
const load0 = os.loadavg()[0];

// CPU time of this thread (user + system), not wall time: on the shared machine the process is descheduled
// for most of a wall-clock window, which CPU time does not count.
function cpuMs() { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }
function time(fn) {
  let best = Infinity;
  for (let rep = 0; rep < REPEAT; rep++) {
    let n = 0; const t0 = cpuMs(); let t = t0;
    do { fn(); n++; t = cpuMs(); } while (t - t0 < 150);
    best = Math.min(best, (t - t0) / n);
  }
  return best;
}

const rows = [];
for (const type of TYPES) for (const [label, R, C] of SHAPES) {
  if (C % BLOCK[type][0]) continue;
  const m = k.mark();
  const W = k.alloc(k.rowSize(type, C) * R, 64);
  // finite f16 scales / values: rewrite from the reference quantiser of random floats, row by row
  const xf = k.alloc(C * 4);
  for (let row = 0; row < R; row++) { k.f32(xf, C).set(r.floats(C)); X.kt_from_float(type, 1, xf, W + row * k.rowSize(type, C), C); }
  const vt = X.kt_traits(type, 0, 2), xs = Math.ceil(k.rowSize(vt, C) / 16) * 16;
  const xq = k.alloc(xs * NV), y = k.alloc(R * NV * 4);
  for (let b = 0; b < NV; b++) { k.f32(xf, C).set(r.floats(C)); X.kt_quantize(type, 0, xf, xq + b * xs, C); }
  const tGemm = time(() => X.kt_matmul(type, W, C, xq, xs, NV, y, R, 0, R));
  const tRows = time(() => {
    for (let rc = 0; rc < R; rc += 16) for (let b = 0; b < NV; b++) X.kt_matvec(type, 0, W, C, xq + b * xs, y + b * R * 4, rc, Math.min(R, rc + 16));
  });
  const macs = R * C * NV;
  rows.push({ type: TYPE_NAMES[type], shape: label, rows: R, cols: C, tokens: NV, gemm_gmacs: macs / tGemm / 1e6, matvec_gmacs: macs / tRows / 1e6, speedup: tRows / tGemm });
  k.release(m);
}
const host = { ...machine(), load_start: load0 };
if (JSON_OUT) { console.log(JSON.stringify({ machine: host, repeat: REPEAT, rows }, null, 1)); process.exit(0); }
console.log(`machine: ${host.cpu}, node ${host.node}, ${host.date}, 1-min load ${load0.toFixed(1)} -> ${os.loadavg()[0].toFixed(1)}; 1 thread, ${NV} tokens, best of ${REPEAT}`);
console.log('| dtype | shape (rows x cols) | matvec per token GMAC/s | GEMM GMAC/s | GEMM / matvec |');
console.log('|---|---|---|---|---|');
for (const o of rows) console.log(`| ${o.type} | ${o.shape} (${o.rows}x${o.cols}) | ${o.matvec_gmacs.toFixed(2)} | ${o.gemm_gmacs.toFixed(2)} | ${o.speedup.toFixed(2)}x |`);
