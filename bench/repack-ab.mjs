#!/usr/bin/env node
// The load-time repacked q4_0 layout (AE_Q4_0_R4, docs/DESIGN.md "Repacked weights") against the file layout, in ONE
// process on the same weights and activations: matvec (decode) and, with --gemm, the 4-token prefill GEMM per token.
//   node bench/repack-ab.mjs [--relaxed] [--shape ROWSxCOLS] [--mode cold|hot] [--rounds 5] [--gemm] [--tokens 4]
// (--tokens N: the GEMM's token count; prefill runs 64-token batches, where the GEMM is compute-bound)
// Compiles the working tree's q4_0 kernels (dot_q4_0_simd128.c, gemm_q8act_simd128.c) and the R4 ones
// (dot_q4_0_r4_simd128.c) with the references into one module (clang; --relaxed: the newest clang-N >= 16 with -mrelaxed-simd, as the
// build), checks bit for bit: SIMD repack == scalar repack, unpack == original, R4 matvec / GEMM (misaligned row
// ranges, 1-7 tokens) == the q4_0 reference; then times CPU time (process.cpuUsage) of back-to-back calls, best of
// 3 x 150 ms per round; --mode cold cycles >= 256 MiB of copies (every call from DRAM, as decode) and adds the
// streaming-read probe (v128 loads xor-summed) of the same memory.
import { execFileSync } from 'node:child_process';
import { repoRoot } from './lib/common.mjs';
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path'; import v8 from 'node:v8';
v8.setFlagsFromString('--no-liftoff'); v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const argv = process.argv.slice(2); const opt = (f, d) => { const i = argv.indexOf(f); return i >= 0 ? argv[i + 1] : d; };
const relaxed = argv.includes('--relaxed'); const root = opt('--root', repoRoot);
const [rows, cols] = opt('--shape', '8192x3072').split('x').map(Number); const mode = opt('--mode', 'cold'); const rounds = +opt('--rounds', 5);
function findClang() {   // as bench/kernel-ab.mjs: the newest clang-N >= 16 for the relaxed build
  if (!relaxed) return 'clang';
  for (let v = 30; v >= 16; v--) { try { execFileSync(`clang-${v}`, ['--version'], { stdio: 'ignore' }); return `clang-${v}`; } catch { /* next */ } }
  throw new Error('--relaxed needs clang >= 16 (apt-get install clang-19 lld-19)');
}
const cc = findClang();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'r4ab-'));
const flags = ['--target=wasm32-wasi', '-O3', '-msimd128', '-mbulk-memory', '-mmutable-globals', '-mnontrapping-fptoint', '-msign-ext', '-ffp-contract=off', '-fno-math-errno', '-fvisibility=hidden', '-std=gnu11', `-I${root}/src`, `-I${root}/src/kernels/simd128`, ...(relaxed ? ['-mrelaxed-simd'] : [])];
const objs = [];
const comp = (f) => { const o = path.join(tmp, path.basename(f) + '.o'); execFileSync(cc, [...flags, '-c', f, '-o', o], { stdio: 'inherit' }); objs.push(o); };
for (const f of ['ref/quants_ref.c', 'ref/fp16_ref.c', 'ref/repack_ref.c', 'simd128/dot_q4_0_simd128.c', 'simd128/dot_q4_0_r4_simd128.c', 'simd128/gemm_q8act_simd128.c']) comp(`${root}/src/kernels/${f}`);
fs.writeFileSync(path.join(tmp, 'x.c'), `#include "kernels/kernels.h"
#include <wasm_simd128.h>
AE_EXPORT void x_q4(const float *x, void *y, int n) { ae_from_float_q4_0_ref(x, y, n); }
AE_EXPORT void x_q8(const float *x, void *y, int n) { ae_from_float_q8_0_ref(x, y, n); }
AE_EXPORT void x_ref(const void *W, int c, const void *x, float *y, int a, int b) { for (int r = a; r < b; r++) ae_vec_dot_q4_0_ref(c, y + r, (const char *)W + (size_t)r * (c / 32) * 18, x); }
AE_EXPORT void x_mv(const void *W, int c, const void *x, float *y, int a, int b) { ae_matvec_rows_q4_0_simd128(W, c, x, y, a, b); }
AE_EXPORT void x_mm(const void *W, int c, const void *x, int xs, int nv, float *y, int ys, int a, int b) { ae_matmul_rows_q4_0_simd128(W, c, x, xs, nv, y, ys, a, b); }
AE_EXPORT void x_r4mv(const void *W, int c, const void *x, float *y, int a, int b) { ae_matvec_rows_q4_0_r4_simd128(W, c, x, y, a, b); }
AE_EXPORT void x_r4ref(const void *W, int c, const void *x, float *y, int a, int b) { ae_matvec_q4_0_r4_ref(W, c, x, y, a, b); }
AE_EXPORT void x_r4mm(const void *W, int c, const void *x, int xs, int nv, float *y, int ys, int a, int b) { ae_matmul_rows_q4_0_r4_simd128(W, c, x, xs, nv, y, ys, a, b); }
AE_EXPORT int x_repack(void *W, int r, int c, void *t) { return ae_repack_q4_0_r4(W, r, c, t); }
AE_EXPORT int x_repack_ref(void *W, int r, int c, void *t) { return ae_repack_q4_0_r4_ref(W, r, c, t); }
AE_EXPORT void x_unpack(void *W, int r, int c, void *t) { ae_unpack_q4_0_r4(W, r, c, t); }
AE_EXPORT int x_probe(const void *p, int bytes) { const v128_t *v = (const v128_t *)p; v128_t a = wasm_i32x4_splat(0), b = a, c = a, d = a;
  for (int i = 0; i < bytes / 16; i += 4) { a = wasm_v128_xor(a, v[i]); b = wasm_v128_xor(b, v[i + 1]); c = wasm_v128_xor(c, v[i + 2]); d = wasm_v128_xor(d, v[i + 3]); }
  return wasm_i32x4_extract_lane(wasm_v128_xor(wasm_v128_xor(a, b), wasm_v128_xor(c, d)), 0); }
`); comp(path.join(tmp, 'x.c'));
const wasm = path.join(tmp, 'x.wasm');
execFileSync(cc, ['--target=wasm32-wasi', '-nostdlib', '-Wl,--no-entry', '-Wl,--export-dynamic', '-Wl,--import-memory', '-Wl,--max-memory=4294967296', '-Wl,-z,stack-size=1048576', ...objs, '-o', wasm], { stdio: 'inherit' });
const mem = new WebAssembly.Memory({ initial: 8192, maximum: 65536 });
const X = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(wasm)), { env: { memory: mem } }).exports;
let top = 2 << 20; const alloc = (n) => { const p = top; top += Math.ceil(n / 64) * 64 + 64; if (top > mem.buffer.byteLength) mem.grow(Math.ceil((top - mem.buffer.byteLength) / 65536) + 1); return p; };
const nb = cols / 32, rs = nb * 18, mat = rows * rs;
let seed = 1; const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 2 ** 32 - 0.5; };
const fx = alloc(cols * 4 * 8), W = alloc(mat), T = alloc(4 * rs);
{ const f = new Float32Array(mem.buffer, fx, cols); for (let r = 0; r < rows; r++) { for (let i = 0; i < cols; i++) f[i] = rnd() * (1 + (r % 7)); X.x_q4(fx, W + r * rs, cols); } }
const GT = +opt('--tokens', 4), NV = Math.max(7, GT), xq = alloc(NV * nb * 34);
{ const f = new Float32Array(mem.buffer, fx, cols); for (let t = 0; t < NV; t++) { for (let i = 0; i < cols; i++) f[i] = rnd() * 4; X.x_q8(fx, xq + t * nb * 34, cols); } }
const R = alloc(mat), R2 = alloc(mat);
new Uint8Array(mem.buffer).copyWithin(R, W, W + mat); new Uint8Array(mem.buffer).copyWithin(R2, W, W + mat);
if (X.x_repack(R, rows, cols, T)) throw new Error('repack refused'); X.x_repack_ref(R2, rows, cols, T);
const u8 = () => new Uint8Array(mem.buffer);
const eqBytes = (a, b, n) => { const m = u8(); for (let i = 0; i < n; i++) if (m[a + i] !== m[b + i]) return i; return -1; };
let d = eqBytes(R, R2, mat); if (d >= 0) throw new Error(`SIMD repack != ref repack at byte ${d}`);
const U = alloc(mat); u8().copyWithin(U, R, R + mat); X.x_unpack(U, rows, cols, T); d = eqBytes(U, W, mat); if (d >= 0) throw new Error(`unpack != original at ${d}`);
const y0 = alloc(rows * 4 * NV), y1 = alloc(rows * 4 * NV), y2 = alloc(rows * 4 * NV);
const f32 = (p, n) => new Float32Array(mem.buffer, p, n);
const same = (a, b, n, what) => { const A = new Uint32Array(mem.buffer, a, n), B = new Uint32Array(mem.buffer, b, n); for (let i = 0; i < n; i++) if (A[i] !== B[i]) throw new Error(`${what}: differs at ${i}: ${f32(a, n)[i]} vs ${f32(b, n)[i]}`); };
X.x_ref(W, cols, xq, y0, 0, rows); X.x_mv(W, cols, xq, y1, 0, rows); same(y0, y1, rows, 'q4_0 simd vs ref');
f32(y1, rows).fill(NaN); X.x_r4mv(R, cols, xq, y1, 0, rows); same(y0, y1, rows, 'r4 matvec vs ref');
f32(y2, rows).fill(NaN); X.x_r4ref(R, cols, xq, y2, 0, rows); same(y0, y2, rows, 'r4 ref vs ref');
for (const [a, b] of [[1, 3], [2, 9], [5, 6], [3, 17], [0, 5], [7, 8], [rows - 5, rows], [6, rows - 1]]) { f32(y1, rows).fill(NaN); f32(y0, rows).fill(NaN); X.x_ref(W, cols, xq, y0, a, b); X.x_r4mv(R, cols, xq, y1, a, b); same(y0 + 4 * a, y1 + 4 * a, b - a, `r4 matvec rows ${a}..${b}`); const Y1 = f32(y1, rows); if (a > 0 && !Number.isNaN(Y1[a - 1])) throw new Error('wrote below r0'); if (b < rows && !Number.isNaN(Y1[b])) throw new Error('wrote past r1'); }
for (const nv of [...new Set([1, 2, 4, 5, 7, GT])]) for (const [a, b] of [[0, rows], [2, Math.min(70, rows)], [4, 8], [1, 3]]) {
  f32(y1, rows * NV).fill(NaN); f32(y0, rows * NV).fill(NaN);
  for (let t = 0; t < nv; t++) X.x_ref(W, cols, xq + t * nb * 34, y0 + t * rows * 4, a, b);
  X.x_r4mm(R, cols, xq, nb * 34, nv, y1, rows, a, b);
  for (let t = 0; t < nv; t++) same(y0 + t * rows * 4 + 4 * a, y1 + t * rows * 4 + 4 * a, b - a, `r4 gemm nv ${nv} rows ${a}..${b} token ${t}`);
}
console.log(`bit checks OK (${relaxed ? 'relaxed' : 'plain'}, ${rows}x${cols})`);
// timing
const copies = mode === 'hot' ? 1 : Math.max(1, Math.ceil(256 * 2 ** 20 / mat));
const Wc = [W], Rc = [R];
for (let i = 1; i < copies; i++) { const a = alloc(mat), b = alloc(mat); u8().copyWithin(a, W, W + mat); u8().copyWithin(b, R, R + mat); Wc.push(a); Rc.push(b); }
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const time = (fn) => { let best = Infinity; for (let k = 0; k < 3; k++) { let n = 0; const t0 = cpu(); while (cpu() - t0 < 150) { fn(n % copies); n++; } best = Math.min(best, (cpu() - t0) / n); } return best; };
const res = { q4_0: [], r4: [], probe: [], q4_0_mm: [], r4_mm: [] };
for (let r = 0; r < rounds; r++) {
  res.q4_0.push(time((i) => X.x_mv(Wc[i], cols, xq, y1, 0, rows)));
  res.r4.push(time((i) => X.x_r4mv(Rc[i], cols, xq, y1, 0, rows)));
  if (mode === 'cold') res.probe.push(time((i) => X.x_probe(Wc[i], mat)));
  if (argv.includes('--gemm')) { res.q4_0_mm.push(time((i) => X.x_mm(Wc[i], cols, xq, nb * 34, GT, y1, rows, 0, rows)) / GT); res.r4_mm.push(time((i) => X.x_r4mm(Rc[i], cols, xq, nb * 34, GT, y1, rows, 0, rows)) / GT); }
}
const best = (a) => Math.min(...a); const gbs = (ms) => (mat / 1e6 / ms).toFixed(1);
console.log(`${relaxed ? 'relaxed' : 'plain'} ${rows}x${cols} ${mode}: q4_0 ${best(res.q4_0).toFixed(3)} ms (${gbs(best(res.q4_0))} GB/s), r4 ${best(res.r4).toFixed(3)} ms (${gbs(best(res.r4))} GB/s), r4/q4_0 speed ${(best(res.q4_0) / best(res.r4)).toFixed(2)}x` + (res.probe.length ? `, probe ${gbs(best(res.probe))} GB/s` : '') + (res.r4_mm.length ? `; gemm (${GT} tokens) per token q4_0 ${best(res.q4_0_mm).toFixed(3)} r4 ${best(res.r4_mm).toFixed(3)} ms (${(best(res.q4_0_mm) / best(res.r4_mm)).toFixed(2)}x)` : '') + `; load ${os.loadavg()[0].toFixed(1)}`);
fs.rmSync(tmp, { recursive: true, force: true });
