// The relaxed-SIMD builds (<name>-relaxed.wasm, -mrelaxed-simd; docs/DESIGN.md "Relaxed SIMD"):
// - the run-time probe: Node 20 validates relaxed SIMD only with --experimental-wasm-relaxed-simd, and its baseline
//   compiler (Liftoff) gets the relaxed i8 dot wrong, so relaxed needs --no-liftoff too; without them 'auto' falls
//   back to the plain build and 'relaxed' is refused with a clear error (child processes); with both (set here
//   in-process, as the CLI does) 'auto' picks the relaxed build.
// - kernels: every quantised dtype's matvec / matmul / vec_dot in the relaxed build gives the plain build's bits
//   (the relaxed i8 dot keeps its 7-bit operand in [0, 127], so it is exact on every host), over random blocks
//   (every byte value, -128 included) and activations at +-127; activation quantisers too. f32 / f16 (no
//   relaxed_madd since the relaxed build became the default everywhere: mul + add as the plain build) too.
// - whole models: generated llama / phi3 models in f32, f16, q8_0, q4_0 and the shipped tiny-llama-a q8_0 give
//   identical logits relaxed vs plain; 1 vs 2 threads bit-identical in the relaxed build.
import test from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as TOL from './helpers/tolerances.mjs';
import { ROOT, loadKernels, rng, randomRow, QUANT_TYPES, FLOAT_TYPES, TYPE_NAMES, BLOCK, T, modulePath } from './helpers/kernels.mjs';

const ENV_JS = new URL('../dist/src/runtime/env.js', import.meta.url).href;

const V8_11_3 = process.versions.v8.startsWith('11.3.');
function probeChild(flags) {
  const src = `
    const { relaxedSimdSupported, relaxedSimdWorks, resolveSimd } = await import(${JSON.stringify(ENV_JS)});
    const { load } = await import(${JSON.stringify(new URL('../dist/src/index.js', import.meta.url).href)});
    let refused = null;
    try { resolveSimd('relaxed'); } catch (e) { refused = e.code + ': ' + e.message; }
    const m = await load(${JSON.stringify(ROOT + 'models/tiny-llama-a-q8_0.rknot')}, { simd: 'auto' });
    console.log(JSON.stringify({ valid: relaxedSimdSupported(), works: relaxedSimdWorks(), auto: resolveSimd('auto'), refused, modelSimd: m.simd }));
    m.dispose();`;
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', src], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('probe without --experimental-wasm-relaxed-simd: auto falls back to plain, relaxed is refused', { skip: !V8_11_3 && 'V8 >= 11.4 ships relaxed SIMD' }, () => {
  const out = probeChild([]);
  assert.equal(out.valid, false, 'V8 11.3 (Node 20) should not validate relaxed SIMD without the flag');
  assert.equal(out.auto, 'plain');
  assert.equal(out.modelSimd, 'plain');
  assert.match(out.refused, /^unsupported: .*does not validate.*--experimental-wasm-relaxed-simd --no-liftoff/);
});

test('probe with the flag but Liftoff on (V8 11.3 Liftoff computes the relaxed dot wrongly): plain', { skip: !V8_11_3 && 'only V8 11.3 has the Liftoff bug' }, () => {
  const out = probeChild(['--experimental-wasm-relaxed-simd']);
  assert.equal(out.valid, true);
  assert.equal(out.works, false, 'the V8 11.3 Liftoff bug is gone? then relaxedSimdWorks and this test need updating');
  assert.equal(out.auto, 'plain');
  assert.equal(out.modelSimd, 'plain');
  assert.match(out.refused, /^unsupported: .*baseline tier.*--no-liftoff/);
});

// 'auto' in Node on V8 < 11.4 (Node 20) prefers plain: the relaxed kernels measured no faster there
const AUTO = 'relaxed';   // wherever the probe passes (docs/DESIGN.md "Relaxed SIMD")

test(`probe with both flags (what the CLI sets): relaxed works; auto picks ${AUTO}`, () => {
  const out = probeChild(['--experimental-wasm-relaxed-simd', '--no-liftoff']);
  assert.deepEqual([out.valid, out.works, out.auto, out.modelSimd, out.refused], [true, true, AUTO, AUTO, null]);
});

setFlagsFromString('--experimental-wasm-relaxed-simd');
setFlagsFromString('--no-liftoff');
const { relaxedSimdWorks, resolveSimd } = await import(ENV_JS);
const { load } = await import('../dist/src/index.js');
const { generateModel } = await import('./helpers/gen-model.mjs');

test('probe with the flags: relaxed works and can be asked for, auto as measured, plain can be forced, bad values refused', () => {
  assert.equal(relaxedSimdWorks(), true);
  assert.equal(resolveSimd('relaxed'), 'relaxed');
  assert.equal(resolveSimd('auto'), AUTO);
  assert.equal(resolveSimd(undefined), AUTO);
  assert.equal(resolveSimd('plain'), 'plain');
  assert.throws(() => resolveSimd('fast'), (e) => e.code === 'invalid_argument' && /auto, relaxed, plain/.test(e.message));
});

test('relaxed builds of every module exist and use relaxed opcodes', () => {
  for (const name of ['core', 'ffn-fused', 'ffn-saturated', 'kernels-test'])
    for (const v of ['', '-st']) assert.ok(existsSync(modulePath(`${name}${v}-relaxed`)), `wasm/${name}${v}-relaxed.wasm missing (needs clang >= 16: apt-get install clang-19 lld-19)`);
  const r = spawnSync('wasm-objdump', ['-d', modulePath('core-relaxed')], { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(/i32x4\.dot_i8x16_i7x16_add_s|relaxed_dot/.test(r.stdout), 'no relaxed i8 dot in core-relaxed.wasm');
  assert.ok(!/relaxed_madd/.test(r.stdout), 'relaxed_madd in core-relaxed.wasm (f32 / f16 must give the plain build\'s bits)');
});

// ---- kernels: relaxed vs plain -----------------------------------------------------------------------
const kp = await loadKernels({ pages: 1024 });
const kr = await loadKernels({ pages: 1024, relaxed: true });
const REF = 1, SIMD = 0;
const SHAPES = [[1, 256], [3, 512], [4, 256], [5, 768], [9, 3072], [288, 768], [64, 4864], [13, 8192]];
const vdt = (type) => kp.x.kt_traits(type, 0, 2);

function put(k, bytes) { const p = k.alloc(bytes.length); k.u8(p, bytes.length).set(bytes); return p; }
/** bit for bit, except that any NaN equals any NaN (wasm leaves the payload of a NaN result to the engine: an
 * operation on two NaNs, or one making a new NaN, may give either payload, and V8 may order a commutative add's
 * operands differently in two builds) */
function bitsEqualNaN(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!(Object.is(a[i], b[i]) || (Number.isNaN(a[i]) && Number.isNaN(b[i])))) return false;
  return true;
}
function bitsEqual(a, b) { return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength)); }
/** activations with the extremes: some exactly +-amax (quantise to +-127) */
function acts(r, n) {
  const x = r.floats(n);
  for (let i = 0; i < n; i += 7) x[i] = (i & 8 ? -1 : 1) * 50;
  return x;
}

test('activation quantisers: relaxed build == plain build (bits)', () => {
  const r = rng(81);
  const types = [...new Set(QUANT_TYPES.map(vdt))];
  for (const at of types) for (const n of [256, 768, 4096]) {
    const mp = kp.mark(), mr = kr.mark();
    const x = acts(r, n);
    const xp = kp.putF32(x), xr = kr.putF32(x);
    const bytes = kp.rowSize(at, n);
    const qp = kp.alloc(bytes), qr = kr.alloc(bytes);
    kp.x.kt_quantize(at, SIMD, xp, qp, n); kr.x.kt_quantize(at, SIMD, xr, qr, n);
    assert.ok(bitsEqual(kp.u8(qp, bytes), kr.u8(qr, bytes)), `${TYPE_NAMES[at]} n=${n}`);
    kp.release(mp); kr.release(mr);
  }
});

test('quantised matvec / matmul / vec_dot: relaxed build == plain build (bits), every byte value', () => {
  const r = rng(82);
  let checked = 0;
  for (const type of QUANT_TYPES) for (const [rows, cols] of SHAPES) {
    if (cols % BLOCK[type][0]) continue;
    const mp = kp.mark(), mr = kr.mark();
    const W = randomRow(r, type, rows * cols, 0.03);
    const at = vdt(type), xb = kp.rowSize(at, cols);
    const nvec = 3, xs = Math.ceil(xb / 64) * 64;
    const xq = kp.alloc(xs * nvec);
    for (let v = 0; v < nvec; v++) kp.x.kt_quantize(at, SIMD, kp.putF32(acts(r, cols)), xq + v * xs, cols);
    const xqBytes = kp.u8(xq, xs * nvec).slice();
    const Wp = put(kp, W), Wr = put(kr, W), xqr = put(kr, xqBytes);
    const yp = kp.alloc(rows * 4 * nvec), yr = kr.alloc(rows * 4 * nvec);
    kp.x.kt_matvec(type, SIMD, Wp, cols, xq, yp, 0, rows);
    kr.x.kt_matvec(type, SIMD, Wr, cols, xqr, yr, 0, rows);
    const a = kp.f32(yp, rows), b = kr.f32(yr, rows);
    assert.ok(bitsEqual(a, b), `${TYPE_NAMES[type]} ${rows}x${cols} matvec: relaxed != plain`);
    // and == the scalar reference (the relaxed build's reference is the same C)
    const yref = kr.alloc(rows * 4);
    kr.x.kt_matvec(type, REF, Wr, cols, xqr, yref, 0, rows);
    assert.ok(bitsEqual(kr.f32(yref, rows), b), `${TYPE_NAMES[type]} ${rows}x${cols} relaxed matvec vs reference`);
    // split rows (the 1-row paths)
    kr.f32(yr, rows).fill(NaN);
    for (let a0 = 0; a0 < rows;) { const a1 = Math.min(rows, a0 + r.int(1, 6)); kr.x.kt_matvec(type, SIMD, Wr, cols, xqr, yr, a0, a1); a0 = a1; }
    assert.ok(bitsEqual(a, kr.f32(yr, rows)), `${TYPE_NAMES[type]} ${rows}x${cols} split matvec: relaxed != plain`);
    // matmul over nvec vectors (relaxed: both forms of kernels.h ae_fused_dot, e.g. q8_0's sign-moving fused tile)
    kp.x.kt_matmul(type, Wp, cols, xq, xs, nvec, yp, rows, 0, rows);
    for (const fused of [0, 1]) {
      kr.x.ae_set_fused_dot(fused);
      kr.f32(yr, rows * nvec).fill(NaN);
      kr.x.kt_matmul(type, Wr, cols, xqr, xs, nvec, yr, rows, 0, rows);
      assert.ok(bitsEqual(kp.f32(yp, rows * nvec), kr.f32(yr, rows * nvec)), `${TYPE_NAMES[type]} ${rows}x${cols} matmul (fused dot ${fused}): relaxed != plain`);
    }
    kr.x.ae_set_fused_dot(0);
    // vec_dot of the first row
    assert.equal(Object.is(kp.x.kt_vec_dot(type, SIMD, cols, Wp, xq), kr.x.kt_vec_dot(type, SIMD, cols, Wr, xqr)), true, `${TYPE_NAMES[type]} vec_dot`);
    checked++;
    kp.release(mp); kr.release(mr);
  }
  assert.ok(checked >= QUANT_TYPES.length * 4, `only ${checked} cases checked`);
});

for (const [FT, name, seed] of [[T.Q5_0, 'q5_0', 85], [T.Q5_1, 'q5_1', 86]]) test(`${name} in the load-time layout (AE_${name.toUpperCase()}_X8): relaxed matvec / matmul (q5_0: its own i16-dot GEMM tile; q5_1's matvec with and without the fused dot) == plain == the ${name} reference (bits; NaN payloads free), every byte value, inf / NaN scales, 1..9 tokens`, () => {
  const r = rng(seed);
  const X8 = kp.x[`kt_${name}_x8_type`](), bs = BLOCK[FT][1], off = FT === T.Q5_0 ? 2 : 4;
  // 16416 columns: two column chunks of the matvecs (AE_Q32_ROWS_CHUNK blocks)
  for (const [rows, cols] of [[1, 32], [5, 96], [9, 3072], [64, 896], [13, 4864], [7, 8192], [6, 16416]]) {
    const mp = kp.mark(), mr = kr.mark();
    const nb = cols / 32, W = randomRow(r, FT, rows * cols, 0.03), dv = new DataView(W.buffer);
    for (let i = 0; i < rows * nb; i++) {
      for (let j = off; j < bs; j++) if (r.next() < 0.5) W[i * bs + j] = r.int(0, 255);
      if (r.next() < 0.01) dv.setUint16(i * bs, [0x7c00, 0xfc00, 0x7e00][r.int(0, 2)], true);
    }
    const nvec = 9, xb = kp.rowSize(vdt(FT), cols), xs = Math.ceil(xb / 64) * 64;
    const xq = kp.alloc(xs * nvec);
    for (let v = 0; v < nvec; v++) kp.x.kt_quantize(FT, SIMD, kp.putF32(acts(r, cols)), xq + v * xs, cols);
    const xqBytes = kp.u8(xq, xs * nvec).slice();
    const W0 = put(kp, W), Wp = put(kp, W), Wr = put(kr, W), xqr = put(kr, xqBytes);
    kp.x[`kt_repack_${name}_x8`](SIMD, Wp, rows * nb);
    kr.x[`kt_repack_${name}_x8`](SIMD, Wr, rows * nb);
    const yref = kp.alloc(rows * 4 * nvec), yp = kp.alloc(rows * 4 * nvec), yr = kr.alloc(rows * 4 * nvec);
    for (let v = 0; v < nvec; v++) kp.x.kt_matvec(FT, REF, W0, cols, xq + v * xs, yref + v * rows * 4, 0, rows);
    kp.x.kt_matvec(X8, SIMD, Wp, cols, xq, yp, 0, rows);
    assert.ok(bitsEqualNaN(kp.f32(yp, rows), kp.f32(yref, rows)), `${rows}x${cols} plain X8 matvec vs q5_0 reference`);
    for (const fused of [0, 1]) {   // kernels.h ae_fused_dot: the q5_1 X8 matvec's i32-dot form
    assert.equal(kr.x.ae_set_fused_dot(fused), fused);
    const F = ` (fused dot ${fused})`;
    kr.x.kt_matvec(X8, SIMD, Wr, cols, xqr, yr, 0, rows);
    assert.ok(bitsEqualNaN(kr.f32(yr, rows), kp.f32(yref, rows)), `${rows}x${cols} relaxed X8 matvec vs q5_0 reference${F}`);
    {   // the relaxed matvec over arbitrary splits of the rows (4-row groups of each piece's quarters, 1-3 row tails)
      kr.f32(yr, rows).fill(7);
      let a = 0;
      while (a < rows) { const b = Math.min(rows, a + r.int(1, 6)); kr.x.kt_matvec(X8, SIMD, Wr, cols, xqr, yr, a, b); a = b; }
      assert.ok(bitsEqualNaN(kr.f32(yr, rows), kp.f32(yref, rows)), `${rows}x${cols} relaxed X8 matvec over split row ranges${F}`);
    }
    for (const nv of [2, 3, 4, 5, 9]) {
      kp.x.kt_matmul(X8, Wp, cols, xq, xs, nv, yp, rows, 0, rows);
      kr.x.kt_matmul(X8, Wr, cols, xqr, xs, nv, yr, rows, 0, rows);
      assert.ok(bitsEqualNaN(kp.f32(yp, rows * nv), kp.f32(yref, rows * nv)), `${rows}x${cols} plain X8 matmul ${nv} tokens vs reference`);
      assert.ok(bitsEqualNaN(kr.f32(yr, rows * nv), kp.f32(yref, rows * nv)), `${rows}x${cols} relaxed X8 matmul ${nv} tokens vs reference${F}`);
    }
    if (rows > 2) {   // a row range inside the matrix
      kr.f32(yr, rows * 4).fill(7);
      kr.x.kt_matmul(X8, Wr, cols, xqr, xs, 4, yr, rows, 1, rows - 1);
      for (let v = 0; v < 4; v++) assert.ok(bitsEqualNaN(kr.f32(yr + (v * rows + 1) * 4, rows - 2), kp.f32(yref + (v * rows + 1) * 4, rows - 2)), `${rows}x${cols} relaxed X8 matmul rows 1..${rows - 1}${F}`);
    }
    }
    kr.x.ae_set_fused_dot(0);
    kp.release(mp); kr.release(mr);
  }
});

test('q4_0 / q8_0: relaxed == plain (bits; NaN payloads free) with block counts not a multiple of 4 and inf / NaN block scales', () => {
  // the relaxed q4_0 matvec has two 4-row paths (segmented when the chunk's block count is a multiple of 4, else
  // interleaved) and both redo a row group with the exact fp16 conversion when a scale is inf / NaN
  const r = rng(84);
  const names = Object.fromEntries(Object.entries(TYPE_NAMES).map(([k, v]) => [v, +k]));
  for (const type of [names.q4_0, names.q8_0]) for (const [rows, cols, bad] of [[6, 96, 0], [8, 160, 0], [12, 3072, 1], [9, 4192, 1], [16, 8192, 1], [7, 224, 1]]) {
    const mp = kp.mark(), mr = kr.mark();
    const W = randomRow(r, type, rows * cols, 0.03);
    const [, bsz] = BLOCK[type], nblk = (rows * cols) / 32;
    if (bad) for (const [i, h] of [[r.int(0, nblk - 1), 0x7c00], [r.int(0, nblk - 1), 0xfc00], [r.int(0, nblk - 1), 0x7e01]]) { W[i * bsz] = h & 255; W[i * bsz + 1] = h >> 8; }
    const at = vdt(type), xb = kp.rowSize(at, cols), nvec = 5, xs = Math.ceil(xb / 64) * 64;
    const xq = kp.alloc(xs * nvec);
    for (let v = 0; v < nvec; v++) kp.x.kt_quantize(at, SIMD, kp.putF32(acts(r, cols)), xq + v * xs, cols);
    const Wp = put(kp, W), Wr = put(kr, W), xqr = put(kr, kp.u8(xq, xs * nvec).slice());
    const yp = kp.alloc(rows * 4 * nvec), yr = kr.alloc(rows * 4 * nvec);
    kp.x.kt_matvec(type, SIMD, Wp, cols, xq, yp, 0, rows);
    kr.x.kt_matvec(type, SIMD, Wr, cols, xqr, yr, 0, rows);
    assert.ok(bitsEqualNaN(kp.f32(yp, rows), kr.f32(yr, rows)), `${TYPE_NAMES[type]} ${rows}x${cols} matvec: relaxed != plain`);
    if (bad) assert.ok(kr.f32(yr, rows).some((v) => !Number.isFinite(v)), `${TYPE_NAMES[type]} ${rows}x${cols}: the inf / NaN scales reach the output`);
    kp.x.kt_matmul(type, Wp, cols, xq, xs, nvec, yp, rows, 0, rows);
    for (const fused of [0, 1]) {
      kr.x.ae_set_fused_dot(fused);
      kr.x.kt_matmul(type, Wr, cols, xqr, xs, nvec, yr, rows, 0, rows);
      assert.ok(bitsEqualNaN(kp.f32(yp, rows * nvec), kr.f32(yr, rows * nvec)), `${TYPE_NAMES[type]} ${rows}x${cols} matmul (fused dot ${fused}): relaxed != plain`);
    }
    kr.x.ae_set_fused_dot(0);
    kp.release(mp); kr.release(mr);
  }
});

test('q4_0 repacked (R4) prefill GEMM and matvec, relaxed build: the i16-dot and the fused-dot forms of the GEMM tile and of the matvec (ae_set_fused_dot) == the q4_0 reference bit for bit, 1..17 tokens, row splits, column chunks; the plain build has no fused tile', () => {
  const r = rng(87);
  const R4 = kr.x.kt_q4_0_r4_type(), Q40 = T.Q4_0, bs = BLOCK[Q40][1];
  assert.equal(kp.x.ae_set_fused_dot(1), 0, 'plain build: ae_set_fused_dot stays 0');
  assert.equal(kr.x.ae_set_fused_dot(1), 1);
  assert.equal(kr.x.ae_set_fused_dot(0), 0);
  for (const f of [0, 1]) kr.x.ae_probe_fused_dot(f, 2);   // the load-time probe runs (static zero data)
  assert.equal(kr.x.ae_set_fused_dot(0), 0, 'the probe restores the setting');
  // 1056 columns = 33 blocks: a second column chunk of the GEMM tiles (32 blocks, R4_UCB); 32 and
  // 52 rows: the matvec reads 4 groups together (8 or 13 groups), with and without a tail
  for (const [rows, cols] of [[8, 256], [12, 1056], [20, 3104], [8, 4128], [4, 16416], [32, 256], [52, 1056], [136, 256]]) {   // 136: past a 128-row GEMM chunk
    const mr = kr.mark();
    const nb = cols / 32, w = randomRow(r, Q40, rows * cols, 0.03), dv = new DataView(w.buffer);
    for (let i = 0; i < rows * nb; i++) if (r.next() < 0.5) dv.setUint16(i * bs, dv.getUint16(i * bs, true) | 0x8000, true);
    const W = put(kr, w), P = put(kr, w), tmp = kr.alloc(4 * nb * bs);
    assert.equal(kr.x.kt_repack_q4_0_r4(SIMD, P, rows, cols, tmp), 0);
    const xs = Math.ceil(kr.rowSize(T.Q8_0, cols) / 64) * 64 + 64, NV = 17;
    const xq = kr.alloc(xs * NV);
    for (let t = 0; t < NV; t++) kr.x.kt_quantize(Q40, SIMD, kr.putF32(acts(r, cols)), xq + t * xs, cols);
    const yref = kr.alloc(rows * 4 * NV), ystr = rows + 3, y = kr.alloc(ystr * 4 * NV);
    for (let t = 0; t < NV; t++) kr.x.kt_matvec(Q40, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
    for (const fused of [0, 1]) {
      kr.x.ae_set_fused_dot(fused);
      {   // the decode matvec (its fused form too): whole range and random splits (partial groups, 1-3 group tails)
        const yv = kr.alloc(rows * 4);
        kr.x.kt_matvec(R4, SIMD, P, cols, xq, yv, 0, rows);
        assert.ok(bitsEqual(kr.f32(yv, rows), kr.f32(yref, rows)), `${rows}x${cols} fused ${fused}: R4 matvec`);
        kr.f32(yv, rows).fill(NaN);
        for (let a = 0; a < rows;) { const b = Math.min(rows, a + r.int(1, 7)); kr.x.kt_matvec(R4, SIMD, P, cols, xq, yv, a, b); a = b; }
        assert.ok(bitsEqual(kr.f32(yv, rows), kr.f32(yref, rows)), `${rows}x${cols} fused ${fused}: R4 matvec over split row ranges`);
      }
      for (const nvec of [2, 4, 5, 8, 9, 16, 17]) for (const [a, b] of [[0, rows], [1, rows - 1], [4, Math.min(rows, 9)]]) {
        kr.f32(y, ystr * NV).fill(NaN);
        kr.x.kt_matmul(R4, P, cols, xq, xs, nvec, y, ystr, a, b);
        for (let t = 0; t < nvec; t++) {
          assert.ok(bitsEqual(kr.f32(y + (t * ystr + a) * 4, b - a), kr.f32(yref + (t * rows + a) * 4, b - a)), `${rows}x${cols} fused ${fused}: ${nvec} tokens, rows ${a}..${b}, token ${t}`);
          assert.ok(Number.isNaN(kr.f32(y + t * ystr * 4, rows + 3)[rows]), 'nothing written past the rows');
        }
        for (let t = nvec; t < NV; t++) assert.ok(Number.isNaN(kr.f32(y + t * ystr * 4, 1)[0]) || a > 0, 'no token past nvec written');
      }
    }
    kr.x.ae_set_fused_dot(0);
    kr.release(mr);
  }
});

test('q4_0 R4 prefill GEMM and matvec, relaxed build: extreme blocks (every nibble 0 or 15, activations all +-127 or alternating) == the q4_0 reference bit for bit (both start their i16 lanes at -8 sum(x): every partial sum must stay in i16)', () => {
  const R4 = kr.x.kt_q4_0_r4_type(), Q40 = T.Q4_0, bs = BLOCK[Q40][1], rows = 8, cols = 256, nb = cols / 32, NV = 8;
  const mr = kr.mark();
  const xs = Math.ceil(kr.rowSize(T.Q8_0, cols) / 64) * 64 + 64, xq = kr.alloc(xs * NV);
  const actPatterns = [(i) => 1, (i) => -1, (i) => (i & 1 ? -1 : 1), (i) => ((i >> 1) & 1 ? -1 : 1), (i) => ((i >> 2) & 1 ? 1 : -1)];
  for (let t = 0; t < NV; t++) { const f = actPatterns[t % actPatterns.length]; kr.x.kt_quantize(Q40, SIMD, kr.putF32(Float32Array.from({ length: cols }, (_, i) => f(i))), xq + t * xs, cols); }
  for (const nib of [0x00, 0xff, 0x0f, 0xf0, 0x5a]) {
    const w = new Uint8Array(rows * nb * bs), dv = new DataView(w.buffer);
    // scales: +-1, 0.5, 2 (rows of opposite signs, blocks of different weights: no sums cancel)
    for (let i = 0; i < rows * nb; i++) { dv.setUint16(i * bs, [0x3c00, 0x3800, 0x4000][i % 3] | ((i / nb) & 1 ? 0x8000 : 0), true); w.fill(nib, i * bs + 2, (i + 1) * bs); }
    const W = put(kr, w), P = put(kr, w), tmp = kr.alloc(4 * nb * bs);
    assert.equal(kr.x.kt_repack_q4_0_r4(SIMD, P, rows, cols, tmp), 0);
    const yref = kr.alloc(rows * 4 * NV), y = kr.alloc(rows * 4 * NV);
    for (let t = 0; t < NV; t++) kr.x.kt_matvec(Q40, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
    for (const fused of [0, 1]) {
      kr.x.ae_set_fused_dot(fused);
      kr.x.kt_matmul(R4, P, cols, xq, xs, NV, y, rows, 0, rows);
      const yv = kr.alloc(rows * 4 * NV);   // the decode matvec starts its lanes at the same offsets
      for (let t = 0; t < NV; t++) kr.x.kt_matvec(R4, SIMD, P, cols, xq + t * xs, yv + t * rows * 4, 0, rows);
      assert.ok(bitsEqual(kr.f32(yv, rows * NV), kr.f32(yref, rows * NV)), `matvec, nibbles 0x${nib.toString(16)}, fused ${fused}`);
      const nz = kr.f32(yref, rows * NV).filter((v) => v !== 0).length;
      assert.ok(nz >= (nib === 0x5a ? 8 : 3 * rows), `nibbles 0x${nib.toString(16)}: ${nz} nonzero reference sums (the all-sign activations)`);
      assert.ok(bitsEqual(kr.f32(y, rows * NV), kr.f32(yref, rows * NV)), `nibbles 0x${nib.toString(16)}, fused ${fused}`);
    }
  }
  kr.x.ae_set_fused_dot(0);
  kr.release(mr);
});

test('iq4_nl / iq4_xs prefill GEMM, relaxed build: row groups on the q8_0 R4 step (iq4_nl: chunks with finite scales; iq4_xs: its scales in the i16 dot) and the i16 tile (tails of 1-3 rows, iq4_nl chunks with an inf / NaN scale) == the reference per token bit for bit (row ranges, several row and column chunks, 2..9 tokens)', () => {
  const r = rng(97);
  for (const [type, rows, cols, a, b, bad] of [[T.IQ4_NL, 37, 768, 3, 35, false], [T.IQ4_NL, 130, 3072, 0, 130, false], [T.IQ4_NL, 130, 1056, 1, 127, true],
    [T.IQ4_NL, 64, 1024, 0, 64, true], [T.IQ4_NL, 7, 96, 0, 7, false], [T.IQ4_XS, 37, 768, 3, 35, false], [T.IQ4_XS, 70, 3072, 0, 70, true],
    [T.IQ4_XS, 66, 1024, 1, 63, true], [T.IQ4_XS, 7, 256, 0, 7, false]]) {
    const [QK, bs] = BLOCK[type], mr = kr.mark(), nb = cols / QK;
    const w = randomRow(r, type, rows * cols, 0.03), dv = new DataView(w.buffer);
    if (bad) for (const [row, h] of [[5, 0x7c00], [100 % rows, 0xfe00]]) dv.setUint16((row * nb + 3) * bs, h, true);
    const W = put(kr, w), xs = Math.ceil(kr.rowSize(kr.x.kt_traits(type, 0, 2), cols) / 64) * 64, NV = 9;
    const xq = kr.alloc(xs * NV);
    for (let t = 0; t < NV; t++) kr.x.kt_quantize(type, SIMD, kr.putF32(acts(r, cols)), xq + t * xs, cols);
    const yref = kr.alloc(rows * 4 * NV), ystr = rows + 3, y = kr.alloc(ystr * 4 * NV);
    for (let t = 0; t < NV; t++) kr.x.kt_matvec(type, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
    for (const nvec of [2, 5, 9]) {
      kr.f32(y, ystr * NV).fill(1234.5);
      kr.x.kt_matmul(type, W, cols, xq, xs, nvec, y, ystr, a, b);
      for (let t = 0; t < nvec; t++) {
        const got = kr.f32(y + t * ystr * 4, ystr);
        assert.ok(bitsEqualNaN(got.subarray(a, b), kr.f32(yref + (t * rows + a) * 4, b - a)), `${TYPE_NAMES[type]} ${rows}x${cols} rows ${a}..${b}, ${nvec} tokens, token ${t}`);
        for (let i = 0; i < ystr; i++) if (i < a || i >= b) assert.equal(got[i], 1234.5, `row ${i} outside ${a}..${b} written`);
      }
    }
    if (bad) assert.ok([...kr.f32(yref, rows * NV)].some((v) => !Number.isFinite(v)), 'the inf / NaN scales reach the output');
    kr.release(mr);
  }
});

test('iq4_nl / iq4_xs matvec and prefill GEMM, both builds: extreme blocks (every code 0 = -127 or 15 = 113, activations all +-127 or alternating) == the reference bit for bit (the relaxed matvec multiplies +-value by |x|: pair sums up to 2 x 127 x 127 must stay in i16)', () => {
  const rows = 8, cols = 256, NV = 6;
  for (const kk of [kp, kr]) for (const type of [T.IQ4_NL, T.IQ4_XS]) {
    const mr = kk.mark(), [QK, bs] = BLOCK[type], nb = cols / QK, xs = Math.ceil(kk.rowSize(kk.x.kt_traits(type, 0, 2), cols) / 64) * 64 + 64;
    const xq = kk.alloc(xs * NV);
    const actPatterns = [(i) => 1, (i) => -1, (i) => (i & 1 ? -1 : 1), (i) => ((i >> 1) & 1 ? -1 : 1), (i) => ((i >> 4) & 1 ? 1 : -1), (i) => (i % 3 ? -1 : 1)];
    for (let t = 0; t < NV; t++) { const f = actPatterns[t]; kk.x.kt_quantize(type, SIMD, kk.putF32(Float32Array.from({ length: cols }, (_, i) => f(i))), xq + t * xs, cols); }
    for (const code of [0x00, 0xff, 0x0f, 0xf0, 0x70]) {
      const w = new Uint8Array(rows * nb * bs), dv = new DataView(w.buffer);
      for (let i = 0; i < rows * nb; i++) {
        dv.setUint16(i * bs, [0x3c00, 0x3800, 0x4000][i % 3] | ((i / nb) & 1 ? 0x8000 : 0), true);   // d: +-1, 0.5, 2
        if (type === T.IQ4_XS) { dv.setUint16(i * bs + 2, 0xffff, true); w.fill(0xff, i * bs + 4, i * bs + 8); w.fill(code, i * bs + 8, (i + 1) * bs); }   // ls = 63 - 32 = 31
        else w.fill(code, i * bs + 2, (i + 1) * bs);
      }
      const W = put(kk, w), yref = kk.alloc(rows * 4 * NV), yv = kk.alloc(rows * 4 * NV), y = kk.alloc(rows * 4 * NV);
      for (let t = 0; t < NV; t++) kk.x.kt_matvec(type, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
      kk.x.kt_matmul(type, W, cols, xq, xs, NV, y, rows, 0, rows);
      const what = `${kk === kp ? 'plain' : 'relaxed'} ${TYPE_NAMES[type]} codes 0x${code.toString(16)}`;
      assert.ok(kk.f32(yref, rows * NV).filter((v) => v !== 0).length >= rows * 3, `${what}: the reference sums are not all zero`);
      for (const fused of kk === kr ? [0, 1] : [0]) {   // the relaxed matvec's two forms (kernels.h ae_fused_dot)
        kk.x.ae_set_fused_dot(fused);
        kk.f32(yv, rows * NV).fill(NaN);
        for (let t = 0; t < NV; t++) kk.x.kt_matvec(type, SIMD, W, cols, xq + t * xs, yv + t * rows * 4, 0, rows);
        assert.ok(bitsEqual(kk.f32(yv, rows * NV), kk.f32(yref, rows * NV)), `${what}: matvec, fused dot ${fused}`);
      }
      kk.x.ae_set_fused_dot(0);
      assert.ok(bitsEqual(kk.f32(y, rows * NV), kk.f32(yref, rows * NV)), `${what}: GEMM`);
    }
    kk.release(mr);
  }
});

for (const [name, seed] of [['q5_0', 88], ['q5_1', 89], ['q8_0', 90], ['q4_K', 91], ['q6_K', 92], ['q5_K', 95]]) test(`${name} in the relaxed build's row-group layout (AE_${name.toUpperCase()}_R4): repack == reference bytes, unpack restores the file bytes, matvec and prefill GEMM == the ${name} reference bit for bit (every byte value, 1..17 tokens, row splits, column chunks)${name === 'q6_K' ? ', get_rows of a repacked embedding' : ''}; the plain build's entry points for it are the reference`, () => {
  const r = rng(seed);
  const KQ = name === 'q4_K' || name === 'q5_K' || name === 'q6_K';
  const Q50 = T[name.toUpperCase()], [QK, bs] = BLOCK[Q50], AT = name === 'q5_1' ? T.Q8_1 : KQ ? T.Q8_K : T.Q8_0;
  // the f16 block scales: d at 0 (q6_K: at 208), and q5_1's m / q4_K's and q5_K's dmin at 2
  const halves = name === 'q6_K' ? [208] : name === 'q5_1' || name === 'q4_K' || name === 'q5_K' ? [0, 2] : [0];
  // k-quants: super-blocks of 256 (one column chunk of the q4_K / q5_K matvec is 64 of them: 16384 columns)
  // (68 rows: past the q4_K / q5_K GEMM's 64-row chunk of unpacked records, a lone group in the second)
  const shapes = KQ ? [[8, 256], [12, 1024], [20, 3072], [8, 4096], [4, 16640], [32, 256], [52, 1280], [68, 2304]]
    : [[8, 256], [12, 1056], [20, 3104], [8, 4128], [4, 16416], [32, 256], [52, 1056]];
  for (const kk of [kr, kp]) for (const [rows, cols] of shapes) {
    const R4 = kk.x[`kt_${name}_r4_type`](), mr = kk.mark();
    const nb = cols / QK, w = randomRow(r, Q50, rows * cols, 0.03), dv = new DataView(w.buffer);
    for (let i = 0; i < rows * nb; i++) if (r.next() < 0.5) dv.setUint16(i * bs + halves[0], dv.getUint16(i * bs + halves[0], true) | 0x8000, true);
    if (halves.length > 1) for (let i = 0; i < rows * nb; i++) if (r.next() < 0.5) dv.setUint16(i * bs + 2, dv.getUint16(i * bs + 2, true) ^ 0x8000, true);
    // subnormal block scales (below 2^-14: the d of real q5_K / q6_K files often is; the kernels convert them without a
    // subnormal float operand, ae_h4_f32) and zeros
    for (let i = 0; i < rows * nb; i++) for (const o of halves) if (r.next() < 0.15) dv.setUint16(i * bs + o, (r.next() < 0.1 ? 0 : r.int(1, 0x3ff)) | (r.next() < 0.5 ? 0x8000 : 0), true);
    if (name === 'q6_K') for (let i = 0; i < rows * nb; i++) if (r.next() < 0.2) for (let j = 0; j < 208; j++) w[i * bs + j] = r.int(0, 255);   // every value, every scale byte
    if (name === 'q5_K') for (let i = 0; i < rows * nb; i++) if (r.next() < 0.2) for (let j = 4; j < bs; j++) w[i * bs + j] = r.int(0, 255);   // every scale / 5th-bit / nibble byte
    // k-quants: the largest values in every row's first super-block (q4_K 15, q5_K 31, q6_K 63) against token 0's
    // activations all -128 (below): the widest i16 partial sums the kernels' widening schedule must hold
    if (KQ) for (let k = 0; k < rows; k++) w.fill(0xff, k * nb * bs + (name === 'q6_K' ? 0 : 16), k * nb * bs + (name === 'q6_K' ? 192 : bs));
    if (name === 'q8_0') {   // every weight byte, -128 included (the sign trick's xor takes any byte)
      const seen = new Set();
      for (let i = 0; i < rows * nb; i++) for (let j = 2; j < bs; j++) seen.add(w[i * bs + j]);
      assert.ok(seen.size === 256 || rows * nb * 32 < 4096, `${rows}x${cols}: every byte value among the q8_0 weights`);
    }
    const W = put(kk, w), P = put(kk, w), Q = put(kk, w), tmp = kk.alloc(4 * nb * bs);
    assert.equal(kk.x[`kt_repack_${name}_r4`](SIMD, P, rows, cols, tmp), 0);
    assert.equal(kk.x[`kt_repack_${name}_r4`](REF, Q, rows, cols, tmp), 0);
    assert.ok(Buffer.from(kk.u8(P, w.length)).equals(Buffer.from(kk.u8(Q, w.length))), `${rows}x${cols}: SIMD repack == reference bytes`);
    assert.ok(!Buffer.from(kk.u8(Q, w.length)).equals(Buffer.from(w)), 'the layout differs from the file\'s');
    kk.x[`kt_unpack_${name}_r4`](Q, rows, cols, tmp);
    assert.ok(Buffer.from(kk.u8(Q, w.length)).equals(Buffer.from(w)), `${rows}x${cols}: unpack restores the file bytes`);
    {   // an inf / NaN scale anywhere: nothing repacked (the kernels convert finite halves only)
      const bad = w.slice(), bi = r.int(0, rows * nb - 1);
      new DataView(bad.buffer).setUint16(bi * bs + halves[(bi >> 1) % halves.length], [0x7c00, 0xfe00][bi & 1], true);
      const B = put(kk, bad);
      for (const how of [SIMD, REF]) assert.equal(kk.x[`kt_repack_${name}_r4`](how, B, rows, cols, tmp), 1, `${rows}x${cols}: a non-finite scale refuses the repack`);
      assert.ok(Buffer.from(kk.u8(B, bad.length)).equals(Buffer.from(bad)), 'and leaves the bytes as they were');
    }
    if (name === 'q6_K') {   // get_rows of a repacked embedding: each row == the file row's to_float
      const yr = kk.alloc(cols * 4), yx = kk.alloc(cols * 4);
      for (const row of [0, 1, rows - 2, rows - 1]) {
        kk.x.kt_to_float(Q50, REF, W + row * nb * bs, yr, cols);
        for (const how of [SIMD, REF]) {
          kk.f32(yx, cols).fill(7);
          kk.x.kt_get_row(how, R4, P, row, cols, yx);
          assert.ok(bitsEqual(kk.f32(yx, cols), kk.f32(yr, cols)), `${rows}x${cols}: get_row ${row} of the R4 layout (${how === SIMD ? 'SIMD' : 'reference'})`);
        }
      }
    }
    const xs = Math.ceil(kk.rowSize(AT, cols) / 64) * 64 + 64, NV = 17;
    const xq = kk.alloc(xs * NV);
    for (let t = 0; t < NV; t++) kk.x.kt_quantize(Q50, SIMD, kk.putF32(KQ && t === 0 ? new Float32Array(cols).fill(-1) : acts(r, cols)), xq + t * xs, cols);
    const yref = kk.alloc(rows * 4 * NV), ystr = rows + 3, y = kk.alloc(ystr * 4 * NV);
    for (let t = 0; t < NV; t++) kk.x.kt_matvec(Q50, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
    const yv = kk.alloc(rows * 4);
    kk.x.kt_matvec(R4, REF, P, cols, xq, yv, 0, rows);
    assert.ok(bitsEqual(kk.f32(yv, rows), kk.f32(yref, rows)), `${rows}x${cols}: ${name} R4 reference matvec`);
    // both forms of kernels.h ae_fused_dot: q8_0's (ae_rdot_w / ae_rdot; AE_FUSED_R8 = 2), the other matvecs' (i16 dots,
    // widened / i32 dots; the k-quants' scales by i32x4.dot_i16x8 / an i32 multiply; AE_FUSED_TILES = 1)
    for (const fused of kk !== kr ? [0] : name === 'q8_0' ? [0, 2] : [0, 1]) {
      assert.equal(kk.x.ae_set_fused_dot(fused), fused);
      const F = kk === kr ? ` (fused dot ${fused})` : '';
      for (const t of [0, 1, 2]) {   // the k-quants' token 0 is all -1 (the widest sums); 1 and 2 are random activations
        kk.f32(yv, rows).fill(NaN);
        kk.x.kt_matvec(R4, SIMD, P, cols, xq + t * xs, yv, 0, rows);
        assert.ok(bitsEqual(kk.f32(yv, rows), kk.f32(yref + t * rows * 4, rows)), `${rows}x${cols}: ${name} R4 matvec, token ${t}${F}`);
      }
      kk.f32(yv, rows).fill(NaN);
      for (let a = 0; a < rows;) { const b = Math.min(rows, a + r.int(1, 7)); kk.x.kt_matvec(R4, SIMD, P, cols, xq, yv, a, b); a = b; }
      assert.ok(bitsEqual(kk.f32(yv, rows), kk.f32(yref, rows)), `${rows}x${cols}: ${name} R4 matvec over split row ranges${F}`);
      for (const nvec of [2, 4, 5, 8, 9, 16, 17]) for (const [a, b] of [[0, rows], [1, rows - 1], [4, Math.min(rows, 9)]]) {
        kk.f32(y, ystr * NV).fill(NaN);
        kk.x.kt_matmul(R4, P, cols, xq, xs, nvec, y, ystr, a, b);
        for (let t = 0; t < nvec; t++) {
          assert.ok(bitsEqual(kk.f32(y + (t * ystr + a) * 4, b - a), kk.f32(yref + (t * rows + a) * 4, b - a)), `${rows}x${cols}: ${name} R4 GEMM, ${nvec} tokens, rows ${a}..${b}, token ${t}${F}`);
          assert.ok(Number.isNaN(kk.f32(y + t * ystr * 4, rows + 3)[rows]), 'nothing written past the rows');
        }
      }
    }
    kk.x.ae_set_fused_dot(0);
    kk.release(mr);
  }
});

// The k-quant block layouts (kernels.h AE_Q3_K_X, AE_Q5_K_X, AE_Q6_K_X): the f16 scales (q3_K: d at 108; q5_K: d, dmin at
// 0, 2; q6_K: d at 208) and the bytes that stay (q3_K: scales, d at 96..109; q5_K: d, dmin, scales at 0..15; q6_K:
// scales, d at 192..209); the value bytes rewritten
for (const [name, seed, halves, keep, vals] of [['q3_K', 96, [108], [96, 110], [0, 96]], ['q5_K', 93, [0, 2], [0, 16], [16, 176]], ['q6_K', 94, [208], [192, 210], [0, 192]]]) test(`${name} in the relaxed build's block layout (AE_${name.toUpperCase()}_X): repack == reference bytes, unpack restores the file bytes, matvec and prefill GEMM == the ${name} reference bit for bit (every value, inf / NaN scales, 1..17 tokens, row splits)${name === 'q6_K' ? ', get_rows of a repacked embedding' : ''}; the plain build's entry points for it are the reference`, () => {
  const r = rng(seed);
  const FT = T[name.toUpperCase()], [QK, bs] = BLOCK[FT];
  for (const kk of [kr, kp]) for (const [rows, cols] of [[1, 256], [3, 512], [8, 256], [12, 1024], [20, 3072], [9, 4096], [52, 1280]]) {
    const X = kk.x[`kt_${name}_x_type`](), mr = kk.mark();
    const nb = cols / QK, w = randomRow(r, FT, rows * cols, 0.03), dv = new DataView(w.buffer);
    for (let i = 0; i < rows * nb; i++) {
      for (const o of halves) if (r.next() < 0.5) dv.setUint16(i * bs + o, dv.getUint16(i * bs + o, true) ^ 0x8000, true);
      if (r.next() < 0.2) for (let j = vals[0]; j < vals[1]; j++) w[i * bs + j] = r.int(0, 255);   // every value byte: every value
    }
    const special = rows * nb > 2 ? r.int(0, rows * nb - 1) : -1;   // an inf / NaN scale: the kernels take it as the file layout's do
    if (special >= 0) dv.setUint16(special * bs + halves[special % halves.length], [0x7c00, 0xfe00][r.int(0, 1)], true);
    const W = put(kk, w), P = put(kk, w), Q = put(kk, w);
    kk.x[`kt_repack_${name}_x`](SIMD, P, rows * nb);
    kk.x[`kt_repack_${name}_x`](REF, Q, rows * nb);
    assert.ok(Buffer.from(kk.u8(P, w.length)).equals(Buffer.from(kk.u8(Q, w.length))), `${rows}x${cols}: SIMD repack == reference bytes`);
    assert.ok(!Buffer.from(kk.u8(Q, w.length)).equals(Buffer.from(w)), 'the layout differs from the file\'s');
    for (let i = 0; i < rows * nb; i++) assert.ok(Buffer.from(kk.u8(P + i * bs + keep[0], keep[1] - keep[0])).equals(Buffer.from(w.subarray(i * bs + keep[0], i * bs + keep[1]))), 'the scales stay');
    kk.x[`kt_unpack_${name}_x`](Q, rows * nb);
    assert.ok(Buffer.from(kk.u8(Q, w.length)).equals(Buffer.from(w)), `${rows}x${cols}: unpack restores the file bytes`);
    if (name === 'q6_K') {   // get_rows of a repacked embedding: each row == the file row's to_float
      const yr = kk.alloc(cols * 4), yx = kk.alloc(cols * 4);
      for (const row of [0, rows - 1]) {
        kk.x.kt_to_float(FT, REF, W + row * nb * bs, yr, cols);
        for (const how of [SIMD, REF]) {
          kk.f32(yx, cols).fill(7);
          kk.x.kt_get_row(how, X, P, row, cols, yx);
          assert.ok(bitsEqualNaN(kk.f32(yx, cols), kk.f32(yr, cols)), `${rows}x${cols}: get_row ${row} of the X layout (${how === SIMD ? 'SIMD' : 'reference'})`);
        }
      }
    }
    const xs = Math.ceil(kk.rowSize(T.Q8_K, cols) / 64) * 64 + 64, NV = 17;
    const xq = kk.alloc(xs * NV);
    for (let t = 0; t < NV; t++) kk.x.kt_quantize(FT, SIMD, kk.putF32(acts(r, cols)), xq + t * xs, cols);
    const yref = kk.alloc(rows * 4 * NV), ystr = rows + 3, y = kk.alloc(ystr * 4 * NV);
    for (let t = 0; t < NV; t++) kk.x.kt_matvec(FT, REF, W, cols, xq + t * xs, yref + t * rows * 4, 0, rows);
    const yv = kk.alloc(rows * 4);
    for (const how of [SIMD, REF]) {
      kk.x.kt_matvec(X, how, P, cols, xq, yv, 0, rows);
      assert.ok(bitsEqualNaN(kk.f32(yv, rows), kk.f32(yref, rows)), `${rows}x${cols}: ${name} X matvec (${how === SIMD ? 'SIMD' : 'reference'})`);
    }
    kk.f32(yv, rows).fill(NaN);
    for (let a = 0; a < rows;) { const b = Math.min(rows, a + r.int(1, 7)); kk.x.kt_matvec(X, SIMD, P, cols, xq, yv, a, b); a = b; }
    assert.ok(bitsEqualNaN(kk.f32(yv, rows), kk.f32(yref, rows)), `${rows}x${cols}: ${name} X matvec over split row ranges`);
    for (const nvec of [1, 2, 4, 5, 9, 17]) for (const [a, b] of [[0, rows], [Math.min(1, rows - 1), rows]]) {
      kk.f32(y, ystr * NV).fill(NaN);
      kk.x.kt_matmul(X, P, cols, xq, xs, nvec, y, ystr, a, b);
      for (let t = 0; t < nvec; t++) {
        assert.ok(bitsEqualNaN(kk.f32(y + (t * ystr + a) * 4, b - a), kk.f32(yref + (t * rows + a) * 4, b - a)), `${rows}x${cols}: ${name} X GEMM, ${nvec} tokens, rows ${a}..${b}, token ${t}`);
        assert.ok(Number.isNaN(kk.f32(y + t * ystr * 4, rows + 3)[rows]), 'nothing written past the rows');
      }
    }
    kk.release(mr);
  }
});

test('q8_0 / q6_K / q4_K / q5_K / iq4_nl / iq4_xs matvec over row groups read together (halves / quarters of the row range), both builds: == reference bit for bit for any range, with inf / NaN scales in some groups', () => {
  // the q8_0 and iq4_nl / iq4_xs matvecs read 4-row groups i, i + q, i + 2q, i + 3q together and redo a group whose fp16
  // scales hold an inf / NaN with the exact conversion (the relaxed iq4 matvecs in column chunks of 16384: 16416 / 16640
  // columns cross one); q6_K reads 4-row sets the same way, the relaxed q4_K / q5_K two
  // groups from the two halves. Row counts with and without tails; ranges not aligned to the groups.
  const r = rng(915);
  for (const kk of [kp, kr]) for (const [type, cols] of [[T.Q8_0, 3072], [T.Q8_0, 160], [T.Q6_K, 768], [T.Q4_K, 512], [T.Q5_K, 256], [T.IQ4_NL, 896], [T.IQ4_NL, 96], [T.IQ4_XS, 768], [T.IQ4_NL, 16416], [T.IQ4_XS, 16640]]) for (const rows of [16, 52, 71, 133]) {
    const mark = kk.mark();
    const W = randomRow(r, type, rows * cols, 0.03), [, bsz] = BLOCK[type], nblk = (rows * cols) / BLOCK[type][0];
    const so = type === T.Q6_K ? 208 : 0;
    const bad = [T.Q8_0, T.IQ4_NL, T.IQ4_XS].includes(type) && rows > 16 ? [[r.int(0, nblk - 1), 0x7c00], [r.int(0, nblk - 1), 0xfc00], [r.int(0, nblk - 1), 0x7e01]] : [];
    for (const [i, h] of bad) { W[i * bsz + so] = h & 255; W[i * bsz + so + 1] = h >> 8; }
    const Wp = put(kk, W), xf = kk.putF32(r.floats(cols).map((v) => v * 3)), xq = kk.alloc(Math.max(64, kk.rowSize(kk.x.kt_traits(type, 0, 2), cols)));
    kk.x.kt_quantize(type, REF, xf, xq, cols);
    const y0 = kk.alloc(rows * 4), y1 = kk.alloc(rows * 4);
    kk.x.kt_matvec(type, REF, Wp, cols, xq, y0, 0, rows);
    const ref = Float32Array.from(kk.f32(y0, rows)), what = `${kk === kp ? 'plain' : 'relaxed'} ${TYPE_NAMES[type]} ${rows}x${cols}`;
    if (bad.length) assert.ok(ref.some((v) => !Number.isFinite(v)), `${what}: the inf / NaN scales reach the output`);
    // the relaxed iq4 matvecs' two forms (kernels.h ae_fused_dot; the others here have one and ignore it)
    for (const fused of kk === kr && (type === T.IQ4_NL || type === T.IQ4_XS) ? [0, 1] : [0]) {
      kk.x.ae_set_fused_dot(fused);
      for (const [a, b] of [[0, rows], [1, rows - 1], [3, rows], [5, Math.min(rows, 5 + 4 * 5)]]) {
        kk.f32(y1, rows).fill(1234.5);
        kk.x.kt_matvec(type, SIMD, Wp, cols, xq, y1, a, b);
        const got = kk.f32(y1, rows);
        assert.ok(bitsEqualNaN(got.subarray(a, b), ref.subarray(a, b)), `${what} rows ${a}..${b} != reference (fused dot ${fused})`);
        for (let i = 0; i < rows; i++) if (i < a || i >= b) assert.equal(got[i], 1234.5, `${what}: row ${i} outside ${a}..${b} written`);
      }
    }
    kk.x.ae_set_fused_dot(0);
    kk.release(mark);
  }
});

test('q6_K matvec: plain and relaxed == reference (bits; NaN payloads free): 4-row and long-row paths, row tails, 1..65 super-blocks, extreme scales and activation bytes', () => {
  // the q6_K matvec runs 4 rows at a time (float sums in lanes, 4 fp16 scales converted at once) when the row fits
  // one pass (plain: <= 16 super-blocks, relaxed: <= 64), else 8 rows per super-block; fewer than 4 rows and the
  // 1-3 rows after the 4-row groups go row by row
  const r = rng(85);
  const names = Object.fromEntries(Object.entries(TYPE_NAMES).map(([k, v]) => [v, +k]));
  const type = names.q6_K, [, bsz] = BLOCK[type];
  const HALVES = [0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x7c00, 0xfc00, 0x7e00, 0x7c01];
  let cases = 0;
  for (const [rows, nbk, extreme] of [[11, 1, 0], [7, 2, 1], [9, 3, 0], [13, 12, 1], [6, 16, 1], [10, 17, 1], [5, 33, 0], [9, 64, 1], [6, 65, 1]]) {
    const cols = 256 * nbk, nb = rows * nbk;
    const mp = kp.mark(), mr = kr.mark();
    const W = randomRow(r, type, rows * cols, 0.03);
    for (let b = 0; b < nb; b++) {
      const o = b * bsz;
      if (extreme) for (let j = 0; j < 16; j++) if (r.next() < 0.3) W[o + 192 + j] = [0x80, 0x7f, 0x81, 0][r.int(0, 3)];   // sub-block scales -128, 127, -127, 0
      if (extreme && r.next() < 0.25) { const h = HALVES[r.int(0, HALVES.length - 1)]; W[o + 208] = h & 255; W[o + 209] = h >> 8; }
    }
    // the activation written directly (q8_K: f32 d, 256 i8, 16 i16 bsums): bytes of every value, -128 and 127 often
    const at = vdt(type), xb = kp.rowSize(at, cols);
    const xq = new Uint8Array(xb), dv = new DataView(xq.buffer);
    for (let b = 0; b < nbk; b++) {
      const o = b * 292;
      dv.setFloat32(o, extreme && b % 3 === 1 ? 3e38 : (r.next() + 0.01) * 0.1, true);
      for (let j = 0; j < 256; j++) dv.setInt8(o + 4 + j, r.next() < 0.2 ? (r.next() < 0.5 ? -128 : 127) : r.int(-128, 127));
      for (let g = 0; g < 16; g++) { let s = 0; for (let j = 0; j < 16; j++) s += dv.getInt8(o + 4 + 16 * g + j); dv.setInt16(o + 260 + 2 * g, s, true); }
    }
    for (const [k, Wk, xk] of [[kp, put(kp, W), put(kp, xq)], [kr, put(kr, W), put(kr, xq)]]) {
      const y = k.alloc(rows * 4), yref = k.alloc(rows * 4);
      k.x.kt_matvec(type, REF, Wk, cols, xk, yref, 0, rows);
      const ref = Float32Array.from(k.f32(yref, rows));
      if (extreme && nbk > 1) assert.ok(ref.some((v) => !Number.isFinite(v)), `${rows}x${cols}: the inf / NaN scales reach the output`);
      for (const [a0, a1] of [[0, rows], [1, rows], [2, rows - 1], [0, 4], [3, 4], [rows - 5, rows]]) {
        k.f32(y, rows).fill(12345);
        k.x.kt_matvec(type, SIMD, Wk, cols, xk, y, a0, a1);
        const got = k.f32(y, rows);
        assert.ok(bitsEqualNaN(got.subarray(a0, a1), ref.subarray(a0, a1)), `${k === kr ? 'relaxed' : 'plain'} q6_K ${rows}x${cols} rows ${a0}..${a1} != reference`);
        assert.ok(got.subarray(0, a0).every((v) => v === 12345) && got.subarray(a1).every((v) => v === 12345), `rows outside ${a0}..${a1} written`);
      }
      assert.ok(bitsEqualNaN([k.x.kt_vec_dot(type, SIMD, cols, Wk + bsz * nbk, xk)], [ref[1]]), `${k === kr ? 'relaxed' : 'plain'} q6_K vec_dot n=${cols}`);
      cases++;
    }
    kp.release(mp); kr.release(mr);
  }
  assert.equal(cases, 18);
});

test('f32 / f16 matvec: relaxed build == plain build (bits), within the dot tolerance of the reference', () => {
  const r = rng(83);
  const report = [];
  for (const type of FLOAT_TYPES) {
    let maxRel = 0, differ = 0, total = 0;
    for (const [rows, cols] of SHAPES) {
      const mp = kp.mark(), mr = kr.mark();
      const W = randomRow(r, type, rows * cols, 0.03), x = r.floats(cols);
      const Wp = put(kp, W), Wr = put(kr, W), xp = kp.putF32(x), xr = kr.putF32(x);
      const yp = kp.alloc(rows * 4), yr = kr.alloc(rows * 4), yref = kr.alloc(rows * 4);
      kp.x.kt_matvec(type, SIMD, Wp, cols, xp, yp, 0, rows);
      kr.x.kt_matvec(type, SIMD, Wr, cols, xr, yr, 0, rows);
      kr.x.kt_matvec(type, REF, Wr, cols, xr, yref, 0, rows);
      const a = kp.f32(yp, rows), b = kr.f32(yr, rows), c = kr.f32(yref, rows);
      const wfp = kr.alloc(rows * cols * 4);
      kr.x.kt_to_float(type, REF, Wr, wfp, rows * cols);
      const wfv = kr.f32(wfp, rows * cols);
      for (let i = 0; i < rows; i++) {
        let s = 0; for (let j = 0; j < cols; j++) s += Math.abs(wfv[i * cols + j] * x[j]);
        assert.ok(Math.abs(b[i] - c[i]) <= TOL.dotTol(cols, s, c[i]), `${TYPE_NAMES[type]} ${rows}x${cols} row ${i}: relaxed ${b[i]} vs ref ${c[i]}`);
        total++;
        if (!Object.is(a[i], b[i])) { differ++; maxRel = Math.max(maxRel, Math.abs(a[i] - b[i]) / s); }
      }
      kp.release(mp); kr.release(mr);
    }
    report.push(`${TYPE_NAMES[type]}: ${differ}/${total} rows differ from plain, max |diff| / sum|w x| = ${maxRel.toExponential(2)}`);
    assert.equal(differ, 0, `${TYPE_NAMES[type]}: ${differ} of ${total} rows differ relaxed vs plain`);
  }
  console.log(`relaxed vs plain f32/f16 matvec: ${report.join('; ')}`);
});

// ---- whole models ------------------------------------------------------------------------------------
const PROMPT = [1, 17, 290, 33, 5, 260, 301];
const DECODE = [280, 12, 99, 300, 4];
async function logits(file, simd, threads = 1) {
  const model = await load(file, { threads, maxBatch: 4, simd });
  try {
    assert.equal(model.simd, simd);
    const out = [];
    model.engine.forward(PROMPT, 0);
    out.push(model.engine.logits());
    DECODE.forEach((t, i) => { model.engine.forward([t], PROMPT.length + i); out.push(model.engine.logits()); });
    return out;
  } finally { model.dispose(); }
}

for (const arch of ['llama', 'phi3']) for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) {
  test(`${arch} ${dtype} model: relaxed vs plain logits bit-identical; relaxed 1 vs 2 threads bit-identical`, async () => {
    const { file } = await generateModel(arch, dtype, 5);
    const plain = await logits(file, 'plain'), rel = await logits(file, 'relaxed'), rel2 = await logits(file, 'relaxed', 2);
    let maxDiff = 0;
    for (let s = 0; s < plain.length; s++) {
      assert.ok(bitsEqual(rel[s], rel2[s]), `step ${s}: relaxed 1 vs 2 threads differ`);
      for (let i = 0; i < plain[s].length; i++) maxDiff = Math.max(maxDiff, Math.abs(plain[s][i] - rel[s][i]));
      assert.ok(bitsEqual(plain[s], rel[s]), `step ${s}: relaxed != plain`);
    }
    assert.ok(maxDiff <= 1e-4, `max |logit diff| relaxed vs plain ${maxDiff}`);
    console.log(`${arch} ${dtype}: max |logit relaxed - plain| = ${maxDiff.toExponential(2)}`);
  });
}

test('tiny-llama-a q8_0 (shipped): relaxed vs plain greedy tokens and logits bit-identical', async () => {
  const file = ROOT + 'models/tiny-llama-a-q8_0.rknot';
  const plain = await logits(file, 'plain'), rel = await logits(file, 'relaxed');
  for (let s = 0; s < plain.length; s++) assert.ok(bitsEqual(plain[s], rel[s]), `step ${s}: relaxed != plain`);
});
