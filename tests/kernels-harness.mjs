// Shared helpers for the kernel tests and bench/kernels.mjs: load kernels-test.wasm over a (shared)
// memory, bump allocation above the stacks, a seeded PRNG, block generators and pool workers.
import { readFileSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

import { DTYPE_ROWS } from '../dist/src/generated/abi.js';
import { encodeFromF32 } from '../dist/src/formats/quantize.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
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

export async function loadKernels({ st = false, pages = 256, memory = null, tid = 0 } = {}) {
  const bytes = readFileSync(modulePath(st ? 'kernels-test-st' : 'kernels-test'));
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

// ---- fp16 helpers (JS reference, exact) ----
const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
export function f32bits(f) { f32buf[0] = f; return u32buf[0]; }
export function bitsF32(u) { u32buf[0] = u; return f32buf[0]; }
export function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  if (e === 31) return m ? NaN : s * Infinity;
  if (e === 0) return s * m * 2 ** -24;
  return s * (1024 + m) * 2 ** (e - 25);
}
export function halfBitsToF32Bits(h) {   // exact incl. NaN payload
  const sign = (h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023;
  if (e === 31) return (sign | 0x7f800000 | (m << 13)) >>> 0;
  if (e === 0) return (sign | f32bits(m * 2 ** -24)) >>> 0;
  return (sign | ((e + 112) << 23) | (m << 13)) >>> 0;
}
// fp32 value -> half bits, round to nearest even (independent: exact double arithmetic)
export function floatToHalfBits(f) {
  const bits = f32bits(f), sign = (bits >>> 16) & 0x8000;
  if (Number.isNaN(f)) { let m = (bits & 0x7fffff) >>> 13; if (!m) m = 0x200; return sign | 0x7c00 | m; }
  const a = Math.abs(f);
  if (a === Infinity) return sign | 0x7c00;
  const rne = (q) => { const fl = Math.floor(q), r = q - fl; return r > 0.5 || (r === 0.5 && fl % 2 === 1) ? fl + 1 : fl; };
  if (a < 2 ** -14) return sign | rne(a * 2 ** 24);          // subnormal (may round up to 0x400)
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--; if (2 ** (e + 1) <= a) e++;
  let m = rne(a / 2 ** (e - 10));                          // in [1024, 2048]
  if (m === 2048) { m = 1024; e++; }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | (m - 1024);
}
export function randomHalf(r, lo = -2, hi = 2) {   // a random finite normal half scale
  return floatToHalfBits(Math.fround((lo + (hi - lo) * r.next()) * 2 ** r.int(-10, 0)));
}

// ---- random blocks of every dtype (valid: finite fp16 scales) ----
export function randomRow(r, type, n, scale = 0.02) {
  const [bs, ts] = BLOCK[type];
  const nb = n / bs;
  const out = new Uint8Array(nb * ts);
  const dv = new DataView(out.buffer);
  if (type === T.F32) { const f = new Float32Array(out.buffer); for (let i = 0; i < n; i++) f[i] = r.normal() * scale; return out; }
  if (type === T.F16) { for (let i = 0; i < n; i++) dv.setUint16(2 * i, floatToHalfBits(Math.fround(r.normal() * scale)), true); return out; }
  if (bs === 1) {   // other plain float dtypes: the product's encoder
    const f = new Float32Array(n);
    for (let i = 0; i < n; i++) f[i] = r.normal() * scale;
    return encodeFromF32(TYPE_NAMES[type], f).slice();
  }
  // quantised: random bytes with finite f16 scales at the registry's scale offsets
  const offs = ROW[type].scaleOffsets;
  for (let b = 0; b < nb; b++) {
    const o = b * ts;
    for (let i = 0; i < ts; i++) out[o + i] = r.u32() & 255;
    const h = () => floatToHalfBits(Math.fround(scale * (0.25 + r.next()) / 8));
    for (const so of offs) dv.setUint16(o + so, h(), true);
  }
  return out;
}

// ---- pool workers (worker_threads; self-contained, code passed with eval) ----
const WORKER_SRC = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, sp, pool, ith, gen0 } = workerData;
const inst = new WebAssembly.Instance(module, { env: { memory } });
inst.exports.__stack_pointer.value = sp;
parentPort.postMessage('ready');
inst.exports.ae_worker_main(pool, ith, gen0);
parentPort.postMessage('done');
`;

// Start nth-1 workers on kernels k (shared memory) for pool at `pool` (already ae_pool_init'ed).
// Resolves when all are ready; returns { quit(): Promise } which ends them.
export async function startWorkers(k, pool, nth) {
  const gen0 = k.i32(pool, 1)[0];
  const workers = [];
  const ready = [], done = [];
  for (let ith = 1; ith < nth; ith++) {
    const w = new Worker(WORKER_SRC, {
      eval: true,
      workerData: { module: k.module, memory: k.memory, sp: stackTop(ith), pool, ith, gen0 },
    });
    let resolveReady, resolveDone;
    ready.push(new Promise((res) => { resolveReady = res; }));
    done.push(new Promise((res) => { resolveDone = res; }));
    w.on('message', (m) => { if (m === 'ready') resolveReady(); else if (m === 'done') resolveDone(); });
    w.on('error', (e) => { resolveReady(); resolveDone(); throw e; });
    workers.push(w);
  }
  await Promise.all(ready);
  // wait until every worker is inside ae_worker_main (n_started at int32 index 9)
  const started = k.i32(pool, 16);
  while (Atomics.load(started, 9) < nth - 1) await new Promise((r) => setTimeout(r, 1));
  return {
    async quit() {
      k.x.ae_pool_quit(pool);
      await Promise.all(done);
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}
