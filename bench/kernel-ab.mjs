#!/usr/bin/env node
// A/B of one quantised matvec kernel between git revisions, interleaved in ONE process (same memory, same
// weights, same activation), with a bit-for-bit check of every version against the scalar reference.
//   node bench/kernel-ab.mjs [--type q4_0|q4_0_r4|q8_0|q5_0|q5_0_x8|q4_K|q6_K|...] [--shape ROWSxCOLS] [--mode hot|cold] [--relaxed]
//                            [--revs HEAD~1,work] [--rounds 9] [--tokens N] [--cold-mib 256] [--fused-dot] [--browser] [--wall]
// --type q4_0_r4 / q5_0_r4 / q5_1_r4 / q8_0_r4 / q4_K_r4 / q5_K_r4 / q6_K_r4 / q5_0_x8 / q5_1_x8 / q5_K_x / q6_K_x: the load-time repacked q4_0 / q5_0 / q5_1 /
//   q8_0 / q4_K layouts (kernels.h; the q5, q8_0 and q4_K R4 ones: the relaxed build's), checked against the file dtype's
//   reference. Several types of one file dtype (--type q5_0,q5_0_x8): each type's kernels of every revision, on the
//   same weights (a copy set per layout), interleaved in the same rounds.
// --fused-dot: kernels.h's ae_fused_dot = 1 for every revision (the relaxed build's fused-dot GEMM tile, where one exists).
// --browser: the same module and measurement in Debian's Chromium (wall time), whose V8 lowers relaxed SIMD differently;
//   KAB_JSFLAGS replaces its V8 flags (default --js-flags=--no-liftoff; add --perf-prof --perf-prof-annotate-wasm to
//   read its code with perf). --wall: wall time in Node too (default: CPU time).
// --subnormal-scales: every f16 block scale a subnormal half (below 2^-14), as the d of real q5_K / q6_K files often is
//   (and bench/gen-gguf.mjs's q5_K, q6_K and iq4_xs files always are); default: normal halves 2^-12 .. 2^-7.
// REV@FLAGS in --revs: that revision's kernel files compiled with these clang flags too (space-separated), e.g.
//   --revs 'HEAD,HEAD@-mllvm -disable-lsr' (an A/B of a compiler flag on the same source).
// KAB_CFLAGS: more clang flags (space-separated) for every revision's module, e.g. '-mllvm -disable-lsr' (an experiment:
//   0.69x on q4_K_r4).
// --tokens N (N > 1): the prefill GEMM instead, ae_matmul_rows_<type>_simd128 of each revision's gemm_*_simd128.c on
//   N tokens (types f32, bf16 and the quantised ones; a revision without the file: the matvec per token over 16-row
//   chunks, what ae_matmul does without a batched kernel), every token bit for bit against the reference.
// Each revision's src/kernels/simd128/dot_<type>_simd128.c (+ its simd128_util.h and kernels.h, from `git show`;
// 'work' = the working tree) is compiled into a standalone module (clang; --relaxed: -mrelaxed-simd with the
// newest clang-N >= 16, as the CMake build) with renamed entry points, next to the working tree's scalar
// references. Times are CPU time (process.cpuUsage) of back-to-back calls, best round: other processes on a
// shared machine add wall time but not this process's CPU time. --mode cold cycles the weights over 256 MiB
// copies (every call reads DRAM, as decode does) and adds the streaming-read probe of docs/PERFORMANCE.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { args, repoRoot, thpMode } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
const { has, opt } = args();
const types = String(opt('--type', 'q4_0')).split(',');
// block bytes, block size, activation dtype, offsets of the f16 scales (written as normal halves)
const TYPES = { q2_K: [84, 256, 'q8_K', [80, 82]], iq4_xs: [136, 256, 'q8_K', [0]], iq4_nl: [18, 32, 'q8_0', [0]], q3_K: [110, 256, 'q8_K', [108]], q3_K_x: [110, 256, 'q8_K', [108]], q4_0: [18, 32, 'q8_0', [0]], q8_0: [34, 32, 'q8_0', [0]], q4_K: [144, 256, 'q8_K', [0, 2]], q5_K: [176, 256, 'q8_K', [0, 2]],
  q6_K: [210, 256, 'q8_K', [208]], q5_0: [22, 32, 'q8_0', [0]], q5_0_x8: [22, 32, 'q8_0', [0]], q4_1: [20, 32, 'q8_1', [0, 2]], q5_1: [24, 32, 'q8_1', [0, 2]], q5_1_x8: [24, 32, 'q8_1', [0, 2]], f32: [4, 1, 'f32', []], bf16: [2, 1, 'f32', []], q4_0_r4: [18, 32, 'q8_0', [0]], q5_0_r4: [22, 32, 'q8_0', [0]], q5_1_r4: [24, 32, 'q8_1', [0, 2]], q8_0_r4: [34, 32, 'q8_0', [0]], q4_K_r4: [144, 256, 'q8_K', [0, 2]], q5_K_x: [176, 256, 'q8_K', [0, 2]], q6_K_x: [210, 256, 'q8_K', [208]], q6_K_r4: [210, 256, 'q8_K', [208]], q5_K_r4: [176, 256, 'q8_K', [0, 2]] };
// load-time repacked layouts (kernels.h AE_Q4_0_R4): weights generated in the file dtype's layout, the reference run on
// them, then every copy repacked in place with the scalar repack (ae_repack_<type>_ref) before the kernels run
const REPACKED = { q3_K_x: 'q3_K', q5_K_r4: 'q5_K', q6_K_r4: 'q6_K', q6_K_x: 'q6_K', q5_K_x: 'q5_K', q4_K_r4: 'q4_K', q8_0_r4: 'q8_0', q4_0_r4: 'q4_0', q5_0_x8: 'q5_0', q5_1_x8: 'q5_1', q5_0_r4: 'q5_0', q5_1_r4: 'q5_1' };
// the kernel file of a type (default dot_<type>_simd128.c) and the scalar repack's call (W, rows, cols, tmp)
const KFILE = { iq4_xs: 'dot_iq4_nl', iq4_nl: 'dot_iq4_nl', q3_K_x: 'dot_q3_K', q5_K_r4: 'dot_q4_K_r4', q6_K_x: 'dot_q6_K', q5_K_x: 'dot_q5_K_x', q5_0_x8: 'dot_q5_0', q5_1_x8: 'dot_q5_1', q5_0_r4: 'dot_q4_0_r4', q5_1_r4: 'dot_q4_0_r4' };
const REPACK_CALL = { q3_K_x: 'ae_repack_q3_K_x_ref(W, (size_t)r * (c / 256)); return 0;', q5_K_r4: 'return ae_repack_q5_K_r4_ref(W, r, c, t);', q6_K_r4: 'return ae_repack_q6_K_r4_ref(W, r, c, t);', q6_K_x: 'ae_repack_q6_K_x_ref(W, (size_t)r * (c / 256)); return 0;', q5_K_x: 'ae_repack_q5_K_x_ref(W, (size_t)r * (c / 256)); return 0;', q4_K_r4: 'return ae_repack_q4_K_r4_ref(W, r, c, t);', q8_0_r4: 'return ae_repack_q8_0_r4_ref(W, r, c, t);', q4_0_r4: 'return ae_repack_q4_0_r4_ref(W, r, c, t);', q5_0_r4: 'return ae_repack_q5_0_r4_ref(W, r, c, t);', q5_1_r4: 'return ae_repack_q5_1_r4_ref(W, r, c, t);', q5_0_x8: 'ae_repack_q5_0_x8_ref(W, (size_t)r * (c / 32)); return 0;',
  q5_1_x8: 'ae_repack_q5_1_x8_ref(W, (size_t)r * (c / 32)); return 0;' };
const GEMM_FILE = { q2_K: 'gemm_k', q3_K: 'gemm_k', q3_K_x: 'gemm_k', iq4_nl: 'gemm_iq4', iq4_xs: 'gemm_iq4', q5_K_r4: 'dot_q4_K_r4', q6_K_r4: 'dot_q6_K_r4', q6_K_x: 'gemm_k', q5_K_x: 'gemm_k', q4_K_r4: 'dot_q4_K_r4', q8_0_r4: 'dot_q8_0_r4', q4_0_r4: 'dot_q4_0_r4', q5_0_r4: 'dot_q4_0_r4', q5_1_r4: 'dot_q4_0_r4', q5_0: 'gemm_q32', q5_0_x8: 'gemm_q32', q4_1: 'gemm_q32', q5_1: 'gemm_q32', q5_1_x8: 'gemm_q32', q4_0: 'gemm_q8act', q8_0: 'gemm_q8act', q4_K: 'gemm_k', q5_K: 'gemm_k', q6_K: 'gemm_k', f32: 'gemm_f32', bf16: 'gemm_f32' };
const ALL_TYPES = ['q2_K', 'iq4_xs', 'iq4_nl', 'q3_K_x', 'q3_K', 'q5_K_r4', 'q6_K_r4', 'q6_K_x', 'q5_K_x', 'q4_K_r4', 'q8_0_r4', 'q4_0_r4', 'q5_0_r4', 'q5_1_r4', 'q5_0_x8', 'q5_1_x8', 'f32', 'f16', 'bf16', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q8_0', 'q4_K', 'q5_K', 'q6_K'];
const NV = Number(opt('--tokens', 1));
for (const type of types) if (!TYPES[type]) throw new Error(`--type: one of ${Object.keys(TYPES).join(', ')}`);
const base = REPACKED[types[0]] ?? types[0];   // the dtype whose scalar reference the kernels must equal
if (types.some((t) => (REPACKED[t] ?? t) !== base)) throw new Error('--type: several types must share one file dtype');
const [bs, QK, act, scaleOffs] = TYPES[base];
const actBytes = act === 'q8_0' ? 34 : act === 'q8_1' ? 36 : act === 'q8_K' ? 292 : 4 * QK;
const refFiles = [{ q2_K: 'q2_K_ref.c', iq4_xs: 'iq4_xs_ref.c', iq4_nl: 'iq4_nl_ref.c', q3_K: 'q3_K_ref.c', q5_K: 'q5_K_ref.c', bf16: 'bf16_ref.c', q5_0: 'legacy_q_ref.c', q4_1: 'legacy_q_ref.c', q5_1: 'legacy_q_ref.c' }[base], types.some((t) => REPACKED[t]) ? 'repack_ref.c' : null,
  ...(base === 'iq4_nl' || base === 'iq4_xs' ? [base === 'iq4_nl' ? 'iq4_xs_ref.c' : 'iq4_nl_ref.c'] : [])].filter(Boolean);   // one kernel file for both, one table
const [rows, cols] = String(opt('--shape', '8192x3072')).split('x').map(Number);
const mode = opt('--mode', 'cold');
const relaxed = has('--relaxed');
const revs = String(opt('--revs', 'HEAD,work')).split(',');
const rounds = Number(opt('--rounds', 9));

function findClang() {
  if (!relaxed) return 'clang';
  for (let v = 30; v >= 16; v--) { try { execFileSync(`clang-${v}`, ['--version'], { stdio: 'ignore' }); return `clang-${v}`; } catch { /* next */ } }
  throw new Error('--relaxed needs clang >= 16 (apt-get install clang-19 lld-19)');
}
const cc = findClang();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-kab-'));
const flags = ['--target=wasm32-wasi', '-O3', '-msimd128', '-mbulk-memory', '-mmutable-globals', '-mnontrapping-fptoint', '-msign-ext',
  '-ffp-contract=off', '-fno-math-errno', '-fvisibility=hidden', '-std=gnu11', ...(relaxed ? ['-mrelaxed-simd'] : []),
  ...(process.env.KAB_CFLAGS ? process.env.KAB_CFLAGS.split(' ') : [])];
const show = (rev, p) => rev === 'work' ? fs.readFileSync(path.join(repoRoot, p), 'utf8') : execFileSync('git', ['-C', repoRoot, 'show', `${rev}:${p}`], { encoding: 'utf8', maxBuffer: 1 << 26 });
const objs = [];
function compile(src, name, inc, extra = []) {
  const c = path.join(tmp, `${name}.c`), o = path.join(tmp, `${name}.o`);
  fs.writeFileSync(c, src);
  execFileSync(cc, [...flags, ...extra, `-I${inc}`, '-c', c, '-o', o], { stdio: 'inherit' });
  objs.push(o);
}
// the working tree's references and a few helpers
compile(`#include "kernels/kernels.h"
#include <wasm_simd128.h>
AE_EXPORT void kab_ref(const void *W, int ncols, const void *x, float *y, int r0, int r1) {
  for (int r = r0; r < r1; r++) ae_vec_dot_${base}_ref(ncols, y + r, (const char *)W + (size_t)r * (ncols / ${QK}) * ${bs}, x);
}
AE_EXPORT void kab_quant(const float *x, void *y, int n) { ae_from_float_${act}_ref(x, y, n); }
int ae_fused_dot = ${has('--fused-dot') ? 1 : 0};   /* kernels.h: the relaxed fused-dot GEMM tile (--fused-dot) */
${types.filter((t) => REPACKED[t]).map((t) => `AE_EXPORT int kab_repack_${t}(void *W, int r, int c, void *t) { ${REPACK_CALL[t]} }`).join('\n')}
AE_EXPORT int kab_probe(const void *p, int bytes) {
  const v128_t *v = (const v128_t *)p;
  v128_t a = wasm_i32x4_splat(0), b = a, c = a, d = a;
  for (int i = 0; i < bytes / 16; i += 4) { a = wasm_v128_xor(a, v[i]); b = wasm_v128_xor(b, v[i + 1]); c = wasm_v128_xor(c, v[i + 2]); d = wasm_v128_xor(d, v[i + 3]); }
  return wasm_i32x4_extract_lane(wasm_v128_xor(wasm_v128_xor(a, b), wasm_v128_xor(c, d)), 0);
}`, 'ref', path.join(repoRoot, 'src'));
for (const f of ['quants_ref.c', 'fp16_ref.c', ...refFiles]) compile(fs.readFileSync(path.join(repoRoot, 'src/kernels/ref', f), 'utf8').replace('#include "ref_util.h"', '#include "kernels/ref/ref_util.h"'), f.replace('.c', ''), path.join(repoRoot, 'src'));
const entries = types.flatMap((type) => revs.map((rev) => ({ type, rev })));
const label = (e) => (types.length > 1 ? `${e.type} ${e.rev}` : e.rev);
entries.forEach(({ type, rev: spec }, i) => {
  const [rev, ex] = [spec.split('@')[0], spec.includes('@') ? spec.slice(spec.indexOf('@') + 1).split(' ').filter(Boolean) : []];
  const inc = path.join(tmp, `rev${i}`);
  // the headers and shared .inc files next to the kernels (simd128_util.h, k45_simd128.inc, ...) at that revision
  const local = (rev === 'work' ? fs.readdirSync(path.join(repoRoot, 'src/kernels/simd128'))
    : execFileSync('git', ['-C', repoRoot, 'ls-tree', '--name-only', `${rev}:src/kernels/simd128`], { encoding: 'utf8' }).split('\n'))
    .filter((f) => /\.(h|inc)$/.test(f));
  for (const p of ['src/kernels/kernels.h', 'src/kernels/dtypes.inc', 'src/core/common.h', ...local.map((f) => `src/kernels/simd128/${f}`)]) {
    fs.mkdirSync(path.dirname(path.join(inc, p)), { recursive: true });
    fs.writeFileSync(path.join(inc, p), show(rev, p));
  }
  const fix = (src) => src.replace(/#include "([\w.]+\.(?:h|inc))"/g, (m, f) => (local.includes(f) ? `#include "kernels/simd128/${f}"` : m));
  const k = fix(show(rev, `src/kernels/simd128/${KFILE[type] ?? `dot_${type}`}_simd128.c`));
  // every SIMD entry point renamed per revision (a GEMM file defines several dtypes' kernels)
  const ren = ALL_TYPES.flatMap((t) => ['matvec_rows', 'vec_dot', 'from_float', 'to_float', 'matmul_rows'].map((f) => `#define ae_${f}_${t}_simd128 kab${i}_${f}_${t}`))
    .concat(Object.keys(REPACKED).map((t) => `#define ae_repack_${t} kab${i}_repack_${t}`), [`#define ae_matmul_rows_iq4_nl_r8 kab${i}_iq4_nl_r8`, `#define ae_matmul_rows_iq4_xs_r8 kab${i}_iq4_xs_r8`]).join('\n');
  compile(`${ren}\n${k}\nAE_EXPORT void kab_mv${i}(const void *W, int c, const void *x, float *y, int a, int b) { kab${i}_matvec_rows_${type}(W, c, x, y, a, b); }\n`, `rev${i}`, path.join(inc, 'src'), ex);
  if (NV > 1) {
    let g = null;
    try { g = fix(show(rev, `src/kernels/simd128/${GEMM_FILE[type]}_simd128.c`)); } catch { /* no GEMM file at this revision */ }
    if (g && GEMM_FILE[type] === (KFILE[type] ?? `dot_${type}`)) g = '';   // the matvec's file holds the GEMM (compiled above)
    if (g && !g.includes(`ae_matmul_rows_${type}_simd128(`)) g = null;
    const body = g !== null ? `kab${i}_matmul_rows_${type}(W, c, x, xs, nv, y, ys, a, b);`
      : `for (int rc = a; rc < b; rc += 16) for (int t = 0; t < nv; t++) kab${i}_matvec_rows_${type}(W, c, (const char *)x + (size_t)t * xs, y + (size_t)t * ys, rc, rc + 16 < b ? rc + 16 : b);`;
    compile(`${ren}\n#include "kernels/kernels.h"\n${g ?? ''}\n${g === '' ? `void kab${i}_matmul_rows_${type}(const void *, int, const void *, size_t, int, float *, int, int, int);` : ''}\nAE_EXPORT void kab_mm${i}(const void *W, int c, const void *x, size_t xs, int nv, float *y, int ys, int a, int b) { ${body} }\n`, `gemm${i}`, path.join(inc, 'src'), ex);
    if (g === null) process.stderr.write(`${rev}: no ae_matmul_rows_${type}_simd128, timing the matvec per token over 16-row chunks\n`);
    // the iq4_nl GEMM runs its finite row chunks on the q8_0 R4 tiles (dot_q8_0_r4_simd128.c), at revisions that have it
    if (g && (g.includes('ae_matmul_rows_iq4_nl_r8(') || g.includes('ae_matmul_rows_iq4_xs_r8('))) compile(`${ren}\n${fix(show(rev, 'src/kernels/simd128/dot_q8_0_r4_simd128.c'))}\n`, `r8${i}`, path.join(inc, 'src'), ex);
  }
});
const wasm = path.join(tmp, 'kab.wasm');
execFileSync(cc, ['--target=wasm32-wasi', '-nostdlib', '-Wl,--no-entry', '-Wl,--export-dynamic', '-Wl,--import-memory', '-Wl,--allow-undefined',
  '-Wl,--max-memory=4294967296', '-Wl,-z,stack-size=1048576', ...objs, '-o', wasm], { stdio: 'inherit' });

// The measurement itself, self-contained (it runs in Node or, with --browser, in Chromium's page): the module's
// bytes and the configuration in, [name, ms per call] out. Times: CPU time in Node, wall time (performance.now) in
// the browser.
async function runAB(bytes, cfg) {
  const { rows, cols, NV, QK, bs, actBytes, scaleOffs, mode, types, REPACKED, base, entries, rounds } = cfg;
  const label = (e) => (types.length > 1 ? `${e.type} ${e.rev}` : e.rev);
  const now = typeof process !== 'undefined' && process.cpuUsage && !cfg.wall
    ? () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; } : () => performance.now();
  const mem = new WebAssembly.Memory({ initial: 8192, maximum: 65536 });   // grows to the copies (4 GiB at most)
  const mod = new WebAssembly.Module(bytes);
  const imports = { env: { memory: mem } };
  for (const im of WebAssembly.Module.imports(mod)) if (im.kind === 'function') (imports[im.module] ??= {})[im.name] = () => { throw new Error(`kernel-ab: ${im.name} called (not linked)`); };
  const X = new WebAssembly.Instance(mod, imports).exports;
  const nb = cols / QK, matBytes = rows * nb * bs, NT = Math.max(1, NV);
  const coldMiB = cfg.coldMiB;   // cold: the weights' copies span this much (> the last-level cache)
  const copies = mode === 'hot' ? 1 : Math.max(1, Math.ceil(coldMiB * 2 ** 20 / matBytes));
  const xStride = Math.ceil(nb * actBytes / 16) * 16;
  const xf = 2 << 20, xq = xf + cols * 4, y0 = xq + NT * xStride + 64, y1 = y0 + NT * rows * 4 + 64;
  const W = (y1 + NT * rows * 4 + 4095) & ~4095;
  // a copy set per layout: the file layout's at W, then one per repacked type (each repacked from the file layout's)
  const layouts = [...new Set(types.map((t) => (REPACKED[t] ? t : base)))].sort((a, b) => (a === base ? -1 : b === base ? 1 : 0));
  if (layouts[0] !== base) layouts.unshift(base);
  const setOf = (t) => W + layouts.indexOf(REPACKED[t] ? t : base) * copies * matBytes;
  const end = W + layouts.length * copies * matBytes;
  if (end > mem.buffer.byteLength) mem.grow(Math.ceil((end - mem.buffer.byteLength) / 65536));
  const u8 = new Uint8Array(mem.buffer), dv = new DataView(mem.buffer), fv = new DataView(new ArrayBuffer(4));
  let s = 12345;
  const rnd = () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return (s >>> 0) / 4294967296; };
  const xs = new Float32Array(mem.buffer, xf, cols);
  for (let t = 0; t < NT; t++) {
    for (let i = 0; i < cols; i++) xs[i] = (rnd() - 0.5) * 4;
    X.kab_quant(xf, xq + t * xStride, cols);
  }
  for (let c = 0; c < copies; c++) {
    const o = W + c * matBytes;
    if (QK === 1) {   // f32 / bf16: random floats in [-1, 1) (random bytes would give NaN and subnormal weights)
      for (let i = 0; i < rows * cols; i++) {
        fv.setFloat32(0, rnd() * 2 - 1, true);
        if (bs === 4) dv.setUint32(o + 4 * i, fv.getUint32(0, true), true); else dv.setUint16(o + 2 * i, fv.getUint16(2, true), true);
      }
      continue;
    }
    for (let i = 0; i < matBytes; i++) u8[o + i] = (rnd() * 256) | 0;
    // normal halves 2^-12 .. 2^-7, or with --subnormal-scales halves below 2^-14 (as real q5_K / q6_K files' d often are)
    for (let b = 0; b < rows * nb; b++) for (const so of scaleOffs) dv.setUint16(o + b * bs + so, (rnd() < 0.5 ? 0x8000 : 0) | (cfg.subnormal ? 0 : (3 + ((rnd() * 6) | 0)) << 10) | (1 + ((rnd() * 1023) | 0)), true);
  }
  // f32 / bf16: the SIMD kernels sum in another order than the scalar reference (close to it, not bit-identical), so
  // the reference is the first revision's matvec per token, which every revision's kernel must equal bit for bit
  for (let t = 0; t < NT; t++) {
    if (QK === 1) X.kab_mv0(W, cols, xq + t * xStride, y0 + t * rows * 4, 0, rows);
    else X.kab_ref(W, cols, xq + t * xStride, y0 + t * rows * 4, 0, rows);
  }
  const ref = new Uint32Array(mem.buffer, y0, NT * rows).slice();
  for (const t of layouts.filter((l) => l !== base)) {   // every copy into its repacked layout (the reference ran on the file layout)
    const tmpW = end, need = tmpW + 4 * nb * bs + 64;
    if (need > mem.buffer.byteLength) mem.grow(Math.ceil((need - mem.buffer.byteLength) / 65536));
    const u = new Uint8Array(mem.buffer);
    for (let c = 0; c < copies; c++) {
      u.copyWithin(setOf(t) + c * matBytes, W + c * matBytes, W + (c + 1) * matBytes);
      if (X[`kab_repack_${t}`](setOf(t) + c * matBytes, rows, cols, tmpW)) throw new Error('repack refused');
    }
  }
  const check = (rev, f, a, b) => {
    new Uint32Array(mem.buffer, y1, NT * rows).fill(0xdeadbeef);
    f(a, b);
    const got = new Uint32Array(mem.buffer, y1, NT * rows);
    for (let t = 0; t < NT; t++) for (let r = a; r < b; r++)
      if (got[t * rows + r] !== ref[t * rows + r]) throw new Error(`${rev}: token ${t} row ${r} (rows ${a}..${b}) differs from the reference`);
  };
  const fns = entries.map((e, i) => [label(e), setOf(e.type), NV > 1
    ? (w, a, b) => X[`kab_mm${i}`](w, cols, xq, xStride, NV, y1, rows, a, b)
    : (w, a, b) => X[`kab_mv${i}`](w, cols, xq, y1, a, b)]);
  for (const [name, w0, f] of fns) for (const [a, b] of [[0, rows], [1, rows - 1], [3, 9], [0, 1], [5, 6]]) check(name, (a, b) => f(w0, a, b), a, b);
  if (mode !== 'hot') fns.push(['read probe', W, (w) => X.kab_probe(w, matBytes)]);
  const best = new Map();
  let ci = 0;
  for (let r = 0; r < rounds; r++) for (const [name, w0, f] of fns) {
    const c0 = now();
    const cpu = () => now() - c0;
    let k = 0;
    while (cpu() < 40) { f(w0 + (ci++ % copies) * matBytes, 0, rows); k++; }
    best.set(name, Math.min(best.get(name) ?? Infinity, cpu() / k));
  }
  return [...best];
}
const cfg = { rows, cols, NV, QK, bs, actBytes, scaleOffs, mode, types, REPACKED, base, entries, rounds, coldMiB: Number(opt('--cold-mib', 256)), wall: has('--wall'), subnormal: has('--subnormal-scales') };
const bytes = fs.readFileSync(wasm);
fs.rmSync(tmp, { recursive: true, force: true });
let best, host = 'Node ' + process.version + (has('--wall') ? ', wall time' : ', CPU time');
if (has('--browser')) {
  // the same module and measurement in Debian's Chromium (its V8 may lower relaxed SIMD differently from Node's)
  const { launchChromium, CHROMIUM } = await import('../scripts/chromium.mjs');
  const { page, close } = await launchChromium({ prefix: 'aether-kab-chromium-', args: [process.env.KAB_JSFLAGS ?? '--js-flags=--no-liftoff'] });
  try {
    page.on('console', (m) => process.stderr.write(`chromium: ${m.text()}\n`));
    best = new Map(await page.evaluate(async ({ src, b64, cfg }) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      return (0, eval)(`(${src})`)(bytes, cfg);
    }, { src: runAB.toString(), b64: bytes.toString('base64'), cfg }));
    host = `Chromium (${CHROMIUM}: ${await page.evaluate(() => navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0])}), wall time`;
  } finally { await close(); }
} else best = new Map(await runAB(bytes, cfg));
console.log(`${types.join(', ')} ${rows}x${cols}${NV > 1 ? ` GEMM x ${NV} tokens` : ''} ${mode}, ${relaxed ? 'relaxed' : 'plain'} build (${cc}), 1 thread, best of ${rounds} interleaved rounds, ${host}; load ${os.loadavg()[0].toFixed(1)}, THP ${thpMode() ?? 'n/a'}; every revision bit-identical to the ${QK === 1 ? `${revs[0]} matvec per token` : 'reference'}`);
const matBytes = rows * (cols / QK) * bs, NT = Math.max(1, NV);
for (const [name, ms] of best) {
  console.log(`  ${name.padEnd(12)} ${ms.toFixed(3)} ms  ${(matBytes / ms / 1e6).toFixed(1)} GB/s${name !== 'read probe' ? `  ${(rows * cols * NT / ms / 1e6).toFixed(2)} GMAC/s` : ''}`);
}
