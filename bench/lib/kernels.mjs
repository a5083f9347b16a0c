// The kernels-test harness shared by bench/kernels.mjs and the kernel tests (tests/helpers/kernels.mjs adds
// the test-only JS references): load kernels-test.wasm over a (shared) memory, bump allocation above the
// stacks, the dtype registry as the tests and benches iterate it, a seeded PRNG and pool workers.
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

import { DTYPE_ROWS, POOL } from '../../dist/src/generated/abi.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// The dtype registry (src/kernels/dtypes.inc, mirrored by npm run gen:abi): ids by C name, names and
// [block size, block bytes] by id, and the rows themselves.
export { DTYPE_ROWS };
export const T = Object.fromEntries(DTYPE_ROWS.map((d) => [d.id, d.ggmlId]));
export const TYPE_NAMES = Object.fromEntries(DTYPE_ROWS.map((d) => [d.ggmlId, d.name]));
export const BLOCK = Object.fromEntries(DTYPE_ROWS.map((d) => [d.ggmlId, [d.blockSize, d.typeSize]]));
export const ROW = Object.fromEntries(DTYPE_ROWS.map((d) => [d.ggmlId, d]));
/** Weight dtypes (ids), quantised ones (activation dtype other than f32) and float ones. */
export const WEIGHT_TYPES = DTYPE_ROWS.filter((d) => d.kind !== 'A').map((d) => d.ggmlId);
export const QUANT_TYPES = WEIGHT_TYPES.filter((t) => ROW[t].act !== 'f32');
export const FLOAT_TYPES = WEIGHT_TYPES.filter((t) => ROW[t].act === 'f32');
/** Activation dtypes other than f32 (what weights are dotted with). */
export const ACT_TYPES = [...new Set(QUANT_TYPES.map((t) => T[ROW[t].act.toUpperCase()]))];

// Memory map (DESIGN.md): static data of slot k at 0x10000 * (k + 1); from 0x80000 the host owns it.
// Here: per-thread stacks of 1 MiB from 0x80000 (up to 4 threads), heap from HEAP_BASE.
export const STACK_BASE = 0x80000;
export const STACK_SIZE = 1 << 20;
export const MAX_THREADS = 4;
export const HEAP_BASE = STACK_BASE + STACK_SIZE * MAX_THREADS;

export function modulePath(name) {
  const p = `${ROOT}wasm/${name}.wasm`;
  if (existsSync(p)) return p;
  const q = `${ROOT}wasm/${name}`; // builds whose CMake did not apply the .wasm suffix
  if (existsSync(q)) return q;
  return p;
}

export function stackTop(tid) { return STACK_BASE + STACK_SIZE * (tid + 1); }

export class Kernels {
  constructor(exports, memory, module) {
    this.x = exports;
    this.memory = memory;
    this.module = module;
    this.top = HEAP_BASE;
  }
  get buffer() { return this.memory.buffer; }
  alloc(bytes, align = 64) {
    const p = Math.ceil(this.top / align) * align;
    const end = p + bytes;
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / 65536));
    this.top = end;
    return p;
  }
  mark() { return this.top; }
  release(mark) { this.top = mark; }
  f32(p, n) { return new Float32Array(this.memory.buffer, p, n); }
  u32(p, n) { return new Uint32Array(this.memory.buffer, p, n); }
  i32(p, n) { return new Int32Array(this.memory.buffer, p, n); }
  u16(p, n) { return new Uint16Array(this.memory.buffer, p, n); }
  u8(p, n) { return new Uint8Array(this.memory.buffer, p, n); }
  putF32(arr) { const p = this.alloc(arr.length * 4); this.f32(p, arr.length).set(arr); return p; }
  putU8(arr) { const p = this.alloc(arr.length); this.u8(p, arr.length).set(arr); return p; }
  rowSize(type, n) { return this.x.kt_row_size(type, n); }
}

/** relaxed: the -relaxed build (Node 20 validates it only with --experimental-wasm-relaxed-simd). */
export async function loadKernels({ st = false, pages = 256, memory = null, tid = 0, relaxed = false } = {}) {
  // Threaded modules are compiled with the optimising tier only, as the library does (js/src/runtime/env.ts:
  // Node 20's baseline compiler corrupts state across memory.atomic.wait32, see src/core/pool.h).
  if (!st) { const v8 = await import('node:v8'); v8.setFlagsFromString('--no-liftoff'); v8.setFlagsFromString('--no-wasm-lazy-compilation'); }
  const bytes = readFileSync(modulePath(`kernels-test${st ? '-st' : ''}${relaxed ? '-relaxed' : ''}`));
  const mem = memory ?? new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: !st });
  const { module, instance } = await WebAssembly.instantiate(bytes, { env: { memory: mem } });
  instance.exports.__stack_pointer.value = stackTop(tid);
  return new Kernels(instance.exports, mem, module);
}

// ---- seeded PRNG (xorshift128+ on BigInt-free 32-bit halves: sfc32) ----
export function rng(seed) {
  let a = 0x9e3779b9 ^ seed, b = 0x243f6a88 + seed, c = 0xb7e15162 ^ (seed * 7), d = 1;
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next();
  const r = {
    next,
    u32: () => (next() * 4294967296) >>> 0,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    normal: () => {
      const u = Math.max(next(), 1e-12), v = next();
      return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    },
    // floats with mixed magnitudes: mostly N(0, s), some large / tiny / zero
    floats: (n, s = 1) => {
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) {
        const k = next();
        let v = r.normal() * s;
        if (k < 0.02) v *= 1e3;
        else if (k < 0.04) v *= 1e-4;
        else if (k < 0.05) v = 0;
        out[i] = v;
      }
      return out;
    },
    bytes: (n) => { const b = new Uint8Array(n); for (let i = 0; i < n; i++) b[i] = (next() * 256) | 0; return b; },
  };
  return r;
}

// ---- pool workers (worker_threads; self-contained, code passed with eval) ----
const WORKER_SRC = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, sp, pool, ith, gen0, maxJobs } = workerData;
const inst = new WebAssembly.Instance(module, { env: { memory } });
inst.exports.__stack_pointer.value = sp;
parentPort.postMessage('ready');
let entries = 1, seen = inst.exports.ae_worker_main(pool, ith, gen0, maxJobs);
while (!inst.exports.ae_pool_exited(pool)) { seen = inst.exports.ae_worker_resume(pool, ith, seen, maxJobs); entries++; }
parentPort.postMessage({ done: entries });
`;

// Start nth-1 workers on kernels k (shared memory) for pool at `pool` (already ae_pool_init'ed).
// Resolves when all are ready; returns { quit(): Promise } which ends them and resolves to each worker's number of
// entries into the worker loop. maxJobs > 0: the loop returns after that many jobs and is called again (pool.c).
export async function startWorkers(k, pool, nth, maxJobs = 0) {
  const gen0 = k.i32(pool, 1)[0];
  const workers = [];
  const ready = [], done = [];
  for (let ith = 1; ith < nth; ith++) {
    const w = new Worker(WORKER_SRC, {
      eval: true,
      workerData: { module: k.module, memory: k.memory, sp: stackTop(ith), pool, ith, gen0, maxJobs },
    });
    let resolveReady, resolveDone;
    ready.push(new Promise((res) => { resolveReady = res; }));
    done.push(new Promise((res) => { resolveDone = res; }));
    w.on('message', (m) => { if (m === 'ready') resolveReady(); else if (m?.done) resolveDone(m.done); });
    w.on('error', (e) => { resolveReady(); resolveDone(); throw e; });
    workers.push(w);
  }
  await Promise.all(ready);
  // wait until every worker is inside ae_worker_main (ae_pool.n_started)
  const started = k.i32(pool, POOL.SIZE / 4);
  while (Atomics.load(started, POOL.N_STARTED / 4) < nth - 1) await new Promise((r) => setTimeout(r, 1));
  return {
    async quit() {
      k.x.ae_pool_quit(pool);
      const entries = await Promise.all(done);
      await Promise.all(workers.map((w) => w.terminate()));
      return entries;
    },
  };
}
