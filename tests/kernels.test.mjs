// SIMD128 kernels vs their scalar references (src/kernels/ref), through wasm/kernels-test.wasm.
// Tolerances: tests/helpers/tolerances.mjs. Run: node --test tests/kernels.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import * as TOL from './helpers/tolerances.mjs';
import {
  loadKernels, rng, T, TYPE_NAMES, BLOCK, ROW, DTYPE_ROWS, WEIGHT_TYPES, QUANT_TYPES, FLOAT_TYPES, ACT_TYPES,
  f32bits, sameBits, assertBitsEqual, bitsF32, halfBitsToF32Bits, floatToHalfBits, randomRow,
} from './helpers/kernels.mjs';
import { decodeToF32, encodeFromF32 } from '../dist/src/formats/quantize.js';
import { unpackQ5X8 } from '../dist/src/runtime/engine.js';

const k = await loadKernels({ pages: 2048 });
const X = k.x;
const REF = 1, SIMD = 0;
// every dtype of the registry (src/kernels/dtypes.inc): quantised weights, all weights, activation-only
const QTYPES = QUANT_TYPES;
const ALL = WEIGHT_TYPES;
const ACT_ONLY = ACT_TYPES.filter((t) => !ALL.includes(t));
const ELEMWISE_N = [1, 3, 4, 5, 7, 15, 16, 17, 31, 33, 97, 288, 4096 + 3];

function ord(f) { const u = f32bits(f); return u & 0x80000000 ? -(u & 0x7fffffff) : u; }
function ulps(a, b) { return Math.abs(ord(a) - ord(b)); }
function blocksFor(type) { return BLOCK[type][0]; }
function vdt(type) { return X.kt_traits(type, 0, 2); }
// quantise (with the reference quantiser) an activation for weights of dtype `type`
function quantAct(type, x, ref = REF) {
  const n = x.length, xp = k.putF32(x), q = k.alloc(Math.max(64, k.rowSize(vdt(type), n)));
  X.kt_quantize(type, ref, xp, q, n);
  return q;
}
function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }

// ------------------------------------------------------------------------------------------------
test('traits table and row sizes (compiled tables == the registry mirror)', () => {
  for (const d of DTYPE_ROWS) {
    const t = d.ggmlId, vt = T[d.act.toUpperCase()], weight = d.kind !== 'A' ? 1 : 0;
    for (const ref of [0, 1]) {
      assert.equal(X.kt_traits(t, ref, 0), d.blockSize, `${d.name} block size`);
      assert.equal(X.kt_traits(t, ref, 1), d.typeSize, `${d.name} type size`);
      assert.equal(X.kt_traits(t, ref, 2), vt, `${d.name} vec_dot_type`);
      assert.equal(X.kt_traits(t, ref, 3), weight, `${d.name} has vec_dot`);
      assert.equal(X.kt_traits(t, ref, 4), weight, `${d.name} is_weight`);
      assert.deepEqual([X.kt_traits(t, ref, 5), X.kt_traits(t, ref, 6)].filter((o) => o >= 0), d.scaleOffsets, `${d.name} scale offsets`);
    }
    assert.equal(X.kt_traits(t, 0, 7), d.kind === 'WM' ? 1 : 0, `${d.name} batched kernel`);
    assert.equal(X.kt_row_size(t, d.blockSize * 7), d.typeSize * 7);
  }
  const unknown = [...Array(40).keys(), 99].filter((t) => !ROW[t]);
  assert.ok(unknown.length > 20);
  for (const bad of unknown) assert.equal(X.kt_traits(bad, 0, 0), -1, `id ${bad} is in no registry row`);
  assert.equal(X.kt_row_size(T.Q4_K, 100), 0, 'not a multiple of the block size');
});

test('fp16 -> fp32 exact for all 65536 halves (SIMD, reference, scalar)', () => withMark(() => {
  const h = k.alloc(65536 * 2), y = k.alloc(65536 * 4), yr = k.alloc(65536 * 4);
  const hv = k.u16(h, 65536);
  for (let i = 0; i < 65536; i++) hv[i] = i;
  X.kt_to_float(T.F16, SIMD, h, y, 65536);
  X.kt_to_float(T.F16, REF, h, yr, 65536);
  const ys = k.u32(y, 65536), yrs = k.u32(yr, 65536);
  for (let i = 0; i < 65536; i++) {
    const want = halfBitsToF32Bits(i);
    if (ys[i] !== want) assert.fail(`SIMD half 0x${i.toString(16)} -> 0x${ys[i].toString(16)}, want 0x${want.toString(16)}`);
    if (yrs[i] !== want) assert.fail(`ref half 0x${i.toString(16)} -> 0x${yrs[i].toString(16)}`);
    if (f32bits(X.kt_fp16_to_fp32(i)) !== want && !Number.isNaN(bitsF32(want))) assert.fail(`scalar half 0x${i.toString(16)}`);
  }
  // the k-quant kernels' scale conversion (ae_h4_f32: no subnormal float operand): every finite half, 4 at a time
  const h4 = k.alloc(8), y4 = k.alloc(16), hv4 = k.u16(h4, 4), yv4 = k.u32(y4, 4);
  for (let i = 0; i < 65536; i += 4) {
    for (let j = 0; j < 4; j++) hv4[j] = (i + j * 0x2001) & 0xffff;   // lanes from different binades
    X.kt_h4_f32(h4, y4);
    for (let j = 0; j < 4; j++) {
      const hj = hv4[j];
      if (((hj >> 10) & 31) === 31) continue;   // inf / nan: not a scale the repack keeps
      if (yv4[j] !== halfBitsToF32Bits(hj)) assert.fail(`ae_h4_f32 half 0x${hj.toString(16)} -> 0x${yv4[j].toString(16)}, want 0x${halfBitsToF32Bits(hj).toString(16)}`);
    }
  }
  // f16 dot of halves against x = 1 and powers of two: exact sums (incl. subnormals)
  const n = 4099, w = k.alloc(n * 2), xs = k.alloc(n * 4);
  const r = rng(11), wv = k.u16(w, n), xv = k.f32(xs, n);
  let exact = 0;
  for (let i = 0; i < n; i++) { wv[i] = r.int(0, 0x3ff) | (r.next() < 0.5 ? 0x8000 : 0); xv[i] = 1; exact += Math.fround(bitsF32(halfBitsToF32Bits(wv[i]))); }
  assert.equal(X.kt_vec_dot(T.F16, SIMD, n, w, xs), Math.fround(exact), 'subnormal halves');
}));

test('fp32 -> fp16 round to nearest even (SIMD, reference) vs JS', () => withMark(() => {
  const vals = [];
  const r = rng(5);
  for (let h = 0; h < 0x7c00; h++) {            // every finite half, the midpoints above it, +-1 ulp
    const a = bitsF32(halfBitsToF32Bits(h)), b = bitsF32(halfBitsToF32Bits(h + 1));
    const mid = (a + b) / 2, mb = f32bits(Math.fround(mid));
    vals.push(a, -a, mid, -mid, bitsF32(mb + 1), bitsF32(mb - 1), -bitsF32(mb + 1));
  }
  for (let i = 0; i < 200000; i++) vals.push(bitsF32(r.u32()));
  vals.push(0, -0, Infinity, -Infinity, NaN, 65504, 65519.99, 65520, 65536, 1e10, 2 ** -25, 2 ** -25 * 1.0000001, 2 ** -26, 1e-45);
  for (const nanBits of [0x7f800001, 0x7fc00000, 0xffc00001, 0x7f802000, 0x7fffffff]) vals.push(bitsF32(nanBits));
  const n = vals.length, xp = k.alloc(n * 4), hs = k.alloc(n * 2), hr = k.alloc(n * 2);
  const xv = k.f32(xp, n);
  const xbits = k.u32(xp, n);
  for (let i = 0; i < n; i++) xv[i] = vals[i];
  for (const nanBits of [0x7f800001, 0x7fc00000, 0xffc00001, 0x7f802000, 0x7fffffff]) xbits[n - 5 + [0x7f800001, 0x7fc00000, 0xffc00001, 0x7f802000, 0x7fffffff].indexOf(nanBits)] = nanBits;
  X.kt_from_float(T.F16, SIMD, xp, hs, n);
  X.kt_from_float(T.F16, REF, xp, hr, n);
  const s = k.u16(hs, n), rf = k.u16(hr, n);
  for (let i = 0; i < n; i++) {
    const f = xv[i], want = floatToHalfBits(f);
    if (rf[i] !== want) assert.fail(`ref ${f} (0x${xbits[i].toString(16)}) -> 0x${rf[i].toString(16)}, want 0x${want.toString(16)}`);
    if (s[i] !== want) assert.fail(`SIMD ${f} (0x${xbits[i].toString(16)}) -> 0x${s[i].toString(16)}, want 0x${want.toString(16)}`);
  }
  for (let i = 0; i < n; i += 97) assert.equal(X.kt_fp32_to_fp16(xv[i]), floatToHalfBits(xv[i]));
}));

// ---- quantisers ------------------------------------------------------------------------------------
function jsRoundAway(v) { const t = Math.trunc(v), d = v - t; return d >= 0.5 ? t + 1 : d <= -0.5 ? t - 1 : t; }
function jsRne(v) { const f = Math.floor(v), d = v - f; return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f; }
function jsQ8_0(x) {   // ggml quantize_row_q8_0
  const out = new Uint8Array(x.length / 32 * 34), dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * b + j]));
    const d = Math.fround(amax / 127), id = d ? Math.fround(1 / d) : 0;
    dv.setUint16(34 * b, floatToHalfBits(d), true);
    for (let j = 0; j < 32; j++) dv.setInt8(34 * b + 2 + j, jsRoundAway(Math.fround(x[32 * b + j] * id)));
  }
  return out;
}
function jsQ8_K(x) {   // ggml quantize_row_q8_K
  const out = new Uint8Array(x.length / 256 * 292), dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 256; b++) {
    const o = 292 * b;
    let amax = 0, max = 0;
    for (let j = 0; j < 256; j++) { const a = Math.abs(x[256 * b + j]); if (a > amax) { amax = a; max = x[256 * b + j]; } }
    if (!amax) continue;
    const is = Math.fround(-127 / max);
    const q = [];
    for (let j = 0; j < 256; j++) { q.push(Math.min(127, jsRne(Math.fround(is * x[256 * b + j])))); dv.setInt8(o + 4 + j, q[j]); }
    for (let g = 0; g < 16; g++) { let s = 0; for (let l = 0; l < 16; l++) s += q[16 * g + l]; dv.setInt16(o + 260 + 2 * g, s, true); }
    dv.setFloat32(o, Math.fround(1 / is), true);
  }
  return out;
}
function tieRow(r, n, step) {   // rows whose scaled values hit .5 exactly (amax = 127 -> d = 1 for q8_0)
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (r.int(-126, 126) + (r.next() < 0.7 ? 0.5 : 0)) * step;
  for (let b = 0; b < n; b += 32) x[b + r.int(0, 31)] = (r.next() < 0.5 ? 127 : -127) * step;
  return x;
}

function jsQ8_1(x) {   // ggml quantize_row_q8_1_ref: q8_0's quants, s = fp16((float)sum(q) * d) with the f32 d
  const out = new Uint8Array(x.length / 32 * 36), dv = new DataView(out.buffer);
  for (let b = 0; b < x.length / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * b + j]));
    const d = Math.fround(amax / 127), id = d ? Math.fround(1 / d) : 0;
    dv.setUint16(36 * b, floatToHalfBits(d), true);
    let sum = 0;
    for (let j = 0; j < 32; j++) { const q = jsRoundAway(Math.fround(x[32 * b + j] * id)); dv.setInt8(36 * b + 4 + j, q); sum += q; }
    dv.setUint16(36 * b + 2, floatToHalfBits(Math.fround(sum * d)), true);
  }
  return out;
}

// JS references of the activation quantisers, one per activation dtype of the registry
const JS_QUANT = { q8_0: jsQ8_0, q8_1: jsQ8_1, q8_K: jsQ8_K };

test('activation quantisers (q8_0, q8_1, q8_K): SIMD == reference == JS (ggml semantics), incl. rounding ties', () => {
  for (const t of ACT_TYPES) assert.ok(JS_QUANT[TYPE_NAMES[t]], `activation dtype ${TYPE_NAMES[t]}: add its JS quantiser to JS_QUANT`);
  const r = rng(21);
  for (const nb of [1, 2, 3, 8, 9, 24, 96]) {
    for (const kind of ['normal', 'ties', 'zeros', 'tiny']) withMark(() => {
      const n = 256 * nb;
      let x = kind === 'ties' ? tieRow(r, n, 1) : r.floats(n, kind === 'tiny' ? 1e-30 : 1);
      if (kind === 'zeros') { x = r.floats(n); x.fill(0, 0, 256); x.fill(0, 300, 340); }
      for (const [type, js] of ACT_TYPES.map((t) => [t, JS_QUANT[TYPE_NAMES[t]]])) {
        if (type === T.Q8_K && kind === 'ties') x = x.map((v, i) => i % 256 === 0 ? -127 : v);   // iscale = 1
        const xp = k.putF32(x), rs = k.rowSize(type, n), ys = k.alloc(rs), yr = k.alloc(rs);
        X.kt_from_float(type, SIMD, xp, ys, n);
        X.kt_from_float(type, REF, xp, yr, n);
        const a = k.u8(ys, rs), b = k.u8(yr, rs), want = js(x);
        assert.deepEqual(b, want, `${TYPE_NAMES[type]} ${kind} nb=${nb}: reference vs JS`);
        assert.deepEqual(a, b, `${TYPE_NAMES[type]} ${kind} nb=${nb}: SIMD vs reference`);
      }
    });
  }
});

test('quantisers of the quantised weight dtypes: SIMD == reference, round trip error bounded', () => {
  const r = rng(22);
  for (const type of QTYPES) withMark(() => {
    const relRms = TOL.ROUND_TRIP_REL_RMS[TYPE_NAMES[type]];
    assert.ok(relRms > 0, `${TYPE_NAMES[type]}: add its round-trip bound to ROUND_TRIP_REL_RMS (tests/helpers/tolerances.mjs)`);
    const n = 256 * 12, x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = r.normal();
    const xp = k.putF32(x), rs = k.rowSize(type, n), ys = k.alloc(rs), yr = k.alloc(rs), back = k.alloc(n * 4);
    X.kt_from_float(type, SIMD, xp, ys, n);
    X.kt_from_float(type, REF, xp, yr, n);
    assert.deepEqual(k.u8(ys, rs), k.u8(yr, rs));
    X.kt_to_float(type, REF, yr, back, n);
    const y = k.f32(back, n);
    let e2 = 0, s2 = 0;
    for (let i = 0; i < n; i++) { e2 += (y[i] - x[i]) ** 2; s2 += x[i] ** 2; }
    assert.ok(Math.sqrt(e2 / s2) < relRms, `${TYPE_NAMES[type]} rms error ${Math.sqrt(e2 / s2)}`);
  });
});

// ---- dequantise ------------------------------------------------------------------------------------
// Independent JS readers of the ggml block formats (same float operation order as the reference);
// dtypes without one here are read with the converter's decoder (js/src/formats/quantize.ts).
const f = Math.fround;
const JS_READERS = new Set([T.Q8_0, T.Q4_0, T.Q8_K, T.Q4_K, T.Q6_K, T.Q8_1]);
function jsDequant(type, bytes, n) {
  if (!JS_READERS.has(type)) return decodeToF32(TYPE_NAMES[type], bytes, n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), y = new Float32Array(n);
  const h = (o) => bitsF32(halfBitsToF32Bits(dv.getUint16(o, true)));
  const [bs, ts] = BLOCK[type];
  for (let b = 0; b < n / bs; b++) {
    const o = b * ts, Y = b * bs;
    if (type === T.Q8_0) { const d = h(o); for (let j = 0; j < 32; j++) y[Y + j] = f(dv.getInt8(o + 2 + j) * d); }
    if (type === T.Q4_0) {
      const d = h(o);
      for (let j = 0; j < 16; j++) { const q = bytes[o + 2 + j]; y[Y + j] = f(((q & 15) - 8) * d); y[Y + j + 16] = f(((q >> 4) - 8) * d); }
    }
    if (type === T.Q8_1) { const d = h(o); for (let j = 0; j < 32; j++) y[Y + j] = f(dv.getInt8(o + 4 + j) * d); }
    if (type === T.Q8_K) { const d = dv.getFloat32(o, true); for (let j = 0; j < 256; j++) y[Y + j] = f(d * dv.getInt8(o + 4 + j)); }
    if (type === T.Q4_K) {
      const d = h(o), dmin = h(o + 2), q = (i) => bytes[o + 4 + i];
      for (let j = 0; j < 8; j++) {
        const sc = j < 4 ? q(j) & 63 : (q(j + 4) & 15) | ((q(j - 4) >> 6) << 4);
        const m = j < 4 ? q(j + 4) & 63 : (q(j + 4) >> 4) | ((q(j) >> 6) << 4);
        const d1 = f(d * sc), m1 = f(dmin * m);
        for (let l = 0; l < 32; l++) {
          const byte = bytes[o + 16 + 32 * (j >> 1) + l];
          y[Y + 32 * j + l] = f(f(d1 * (j & 1 ? byte >> 4 : byte & 15)) - m1);
        }
      }
    }
    if (type === T.Q6_K) {   // ggml dequantize_row_q6_K loop structure
      const d = h(o + 208);
      for (let half = 0; half < 2; half++) {
        const ql = o + 64 * half, qh = o + 128 + 32 * half, sc = o + 192 + 8 * half;
        for (let l = 0; l < 32; l++) {
          const is = l >> 4;
          const q1 = ((bytes[ql + l] & 15) | (((bytes[qh + l] >> 0) & 3) << 4)) - 32;
          const q2 = ((bytes[ql + l + 32] & 15) | (((bytes[qh + l] >> 2) & 3) << 4)) - 32;
          const q3 = ((bytes[ql + l] >> 4) | (((bytes[qh + l] >> 4) & 3) << 4)) - 32;
          const q4 = ((bytes[ql + l + 32] >> 4) | (((bytes[qh + l] >> 6) & 3) << 4)) - 32;
          const s = (i) => dv.getInt8(sc + i);
          y[Y + 128 * half + l] = f(f(d * s(is)) * q1);
          y[Y + 128 * half + l + 32] = f(f(d * s(is + 2)) * q2);
          y[Y + 128 * half + l + 64] = f(f(d * s(is + 4)) * q3);
          y[Y + 128 * half + l + 96] = f(f(d * s(is + 6)) * q4);
        }
      }
    }
  }
  return y;
}

test('to_float: SIMD == reference == JS block readers (all dtypes), get_row', () => {
  const r = rng(31);
  for (const type of [...ALL, ...ACT_ONLY]) for (const nb of [1, 2, 3, 5, 16]) withMark(() => {
    const n = blocksFor(type) * nb * (blocksFor(type) === 1 ? 37 : 1);
    let row;
    if (ACT_ONLY.includes(type)) { row = JS_QUANT[TYPE_NAMES[type]](r.floats(n)); }
    else row = randomRow(r, type, n);
    const p = k.putU8(row), ys = k.alloc(n * 4), yr = k.alloc(n * 4);
    X.kt_to_float(type, SIMD, p, ys, n);
    X.kt_to_float(type, REF, p, yr, n);
    assertBitsEqual(k.f32(ys, n), k.f32(yr, n), `${TYPE_NAMES[type]} to_float nb=${nb}`);
    if (blocksFor(type) > 1) assertBitsEqual(k.f32(yr, n), jsDequant(type, row, n), `${TYPE_NAMES[type]} ref vs JS`);
  });
  // get_row picks row `row` of a matrix
  for (const type of ALL) withMark(() => {
    const cols = blocksFor(type) * 3 * (blocksFor(type) === 1 ? 11 : 1), rows = 5;
    const rs = k.rowSize(type, cols), W = k.putU8(randomRow(r, type, cols * rows));
    const ys = k.alloc(cols * 4), yr = k.alloc(cols * 4), yt = k.alloc(cols * 4);
    for (const row of [0, 3, 4]) {
      X.kt_get_row(0, type, W, row, cols, ys);
      X.kt_get_row(1, type, W, row, cols, yr);
      X.kt_to_float(type, REF, W + row * rs, yt, cols);
      assertBitsEqual(k.f32(ys, cols), k.f32(yt, cols), `${TYPE_NAMES[type]} get_row ${row}`);
      assertBitsEqual(k.f32(yr, cols), k.f32(yt, cols), `${TYPE_NAMES[type]} get_row_ref ${row}`);
    }
  });
});

// ---- dot products ----------------------------------------------------------------------------------
const QUANT_BLOCKS = [1, 2, 3, 4, 5, 7, 8, 9, 23, 24, 25, 64, 96, 97, 256];      // x32
const K_BLOCKS = [1, 2, 3, 5, 12, 19, 32];                                        // x256
const FLOAT_N = [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 96, 97, 288, 768, 2048, 3072, 4099, 8192];
function sizesFor(type) {
  const bs = blocksFor(type);
  if (bs === 1) return FLOAT_N;
  return (bs >= 256 ? K_BLOCKS : QUANT_BLOCKS).map((b) => b * bs);
}
function wAsFloat(type, W, n) { const y = k.alloc(n * 4); X.kt_to_float(type, REF, W, y, n); return Array.from(k.f32(y, n)); }

test('vec_dot: quantised SIMD == reference bit for bit', () => {
  const r = rng(41);
  for (const type of QTYPES) for (const n of sizesFor(type)) for (const scale of [1, 1e-3, 1e4]) withMark(() => {
    const w = k.putU8(randomRow(r, type, n, 0.05 * scale)), x = r.floats(n, scale);
    const q = quantAct(type, x);
    const a = X.kt_vec_dot(type, SIMD, n, w, q), b = X.kt_vec_dot(type, REF, n, w, q);
    assert.ok(sameBits(a, b), `${TYPE_NAMES[type]} n=${n} scale=${scale}: ${a} != ${b}`);
    assert.equal(QTOL(type), 0);
  });
});
function QTOL(type) { return TOL.QUANT_DOT_EXACT[TYPE_NAMES[type]]; }

test('vec_dot: f32 / f16 SIMD vs reference within dotTol; exact on integer data', () => {
  const r = rng(42);
  for (const type of FLOAT_TYPES) for (const n of FLOAT_N) withMark(() => {
    for (const scale of [1, 1e-3, 1e3]) {
      const w = k.putU8(randomRow(r, type, n, scale)), xv = r.floats(n), x = k.putF32(xv);
      const wf = wAsFloat(type, w, n);
      let sumAbs = 0;
      for (let i = 0; i < n; i++) sumAbs += Math.abs(wf[i] * xv[i]);
      const a = X.kt_vec_dot(type, SIMD, n, w, x), b = X.kt_vec_dot(type, REF, n, w, x);
      const tol = TOL.dotTol(n, sumAbs, b);
      assert.ok(Math.abs(a - b) <= tol, `${TYPE_NAMES[type]} n=${n}: |${a} - ${b}| > ${tol}`);
    }
    // small integers: every product and partial sum exact -> identical results
    const wi = new Float32Array(n), xi = new Float32Array(n);
    for (let i = 0; i < n; i++) { wi[i] = r.int(-16, 16); xi[i] = r.int(-16, 16); }
    const w = k.putU8(encodeFromF32(TYPE_NAMES[type], wi).slice());   // small integers: exact in every float dtype
    const x = k.putF32(xi);
    assert.equal(X.kt_vec_dot(type, SIMD, n, w, x), X.kt_vec_dot(type, REF, n, w, x), `${TYPE_NAMES[type]} n=${n} integers`);
  });
  // inf / nan weights in f16 rows: same class of result as the reference
  withMark(() => {
    const n = 40, w = k.alloc(2 * n), x = k.alloc(4 * n), hv = k.u16(w, n), xv = k.f32(x, n);
    for (let i = 0; i < n; i++) { hv[i] = floatToHalfBits(0.5); xv[i] = 1; }
    for (const [pos, h, want] of [[3, 0x7c00, Infinity], [17, 0xfc00, -Infinity], [38, 0x7e00, NaN], [9, 0x7c01, NaN]]) {
      for (let i = 0; i < n; i++) hv[i] = floatToHalfBits(0.5);
      hv[pos] = h;
      const a = X.kt_vec_dot(T.F16, SIMD, n, w, x), b = X.kt_vec_dot(T.F16, REF, n, w, x);
      assert.ok(Object.is(a, want) || (Number.isNaN(want) && Number.isNaN(a)), `f16 special 0x${h.toString(16)} at ${pos}: ${a}`);
      assert.ok(sameBits(a, b) || (Number.isNaN(a) && Number.isNaN(b)));
    }
  });
});

// ---- matvec / matmul -------------------------------------------------------------------------------
const SHAPES = [[1, 256], [3, 512], [4, 256], [5, 768], [7, 2048], [9, 3072], [288, 768], [768, 288], [896, 4864], [13, 8192], [6, 9728]];
function shapeOk(type, cols) { return cols % blocksFor(type) === 0; }

test('matvec: == vec_dot per row (bit-exact), quantised == reference, any row split == whole, matmul == matvec', () => {
  const r = rng(51);
  for (const type of ALL) for (const [rows, cols] of SHAPES) {
    if (!shapeOk(type, cols)) continue;
    withMark(() => {
      const rs = k.rowSize(type, cols), W = k.putU8(randomRow(r, type, rows * cols, 0.03));
      const xv = r.floats(cols);
      const xq = quantAct(type, xv, SIMD);
      const y = k.alloc(rows * 4), yr = k.alloc(rows * 4), yd = new Float32Array(rows);
      X.kt_matvec(type, SIMD, W, cols, xq, y, 0, rows);
      X.kt_matvec(type, REF, W, cols, xq, yr, 0, rows);
      const ys = Float32Array.from(k.f32(y, rows));
      for (let i = 0; i < rows; i++) yd[i] = X.kt_vec_dot(type, SIMD, cols, W + i * rs, xq);
      assertBitsEqual(ys, yd, `${TYPE_NAMES[type]} ${rows}x${cols} matvec vs vec_dot`);
      const yrs = k.f32(yr, rows);
      if (ROW[type].act !== 'f32') assertBitsEqual(ys, yrs, `${TYPE_NAMES[type]} ${rows}x${cols} matvec vs ref`);
      else {
        const wf = wAsFloat(type, W, rows * cols);
        for (let i = 0; i < rows; i++) {
          let s = 0; for (let j = 0; j < cols; j++) s += Math.abs(wf[i * cols + j] * xv[j]);
          assert.ok(Math.abs(ys[i] - yrs[i]) <= TOL.dotTol(cols, s, yrs[i]), `${TYPE_NAMES[type]} row ${i}`);
        }
      }
      // arbitrary splits of [0, rows), also misaligned to the 4-row groups
      const y2 = k.alloc(rows * 4);
      for (let trial = 0; trial < 3; trial++) {
        k.f32(y2, rows).fill(NaN);
        let a = 0;
        while (a < rows) { const b = Math.min(rows, a + r.int(1, 11)); X.kt_matvec(type, SIMD, W, cols, xq, y2, a, b); a = b; }
        assertBitsEqual(k.f32(y2, rows), ys, `${TYPE_NAMES[type]} ${rows}x${cols} split`);
      }
      // matmul over 3 vectors (strided) == matvec per vector
      const nvec = 3, xqs = Math.ceil(k.rowSize(vdt(type), cols) / 64) * 64 + 64, ystr = rows + 5;
      const xqm = k.alloc(xqs * nvec), ym = k.alloc(ystr * nvec * 4), yv = k.alloc(rows * 4);
      const xs = [];
      for (let b = 0; b < nvec; b++) { const xb = k.putF32(r.floats(cols)); xs.push(xb); X.kt_quantize(type, SIMD, xb, xqm + b * xqs, cols); }
      const r0 = rows > 5 ? 1 : 0;
      X.kt_matmul(type, W, cols, xqm, xqs, nvec, ym, ystr, r0, rows);
      for (let b = 0; b < nvec; b++) {
        X.kt_matvec(type, SIMD, W, cols, xqm + b * xqs, yv, r0, rows);
        assertBitsEqual(k.f32(ym + (b * ystr + r0) * 4, rows - r0), k.f32(yv + r0 * 4, rows - r0), `${TYPE_NAMES[type]} matmul vec ${b}`);
      }
    });
  }
});

test('q4_0 repacked at load (AE_Q4_0_R4): repack SIMD == reference bytes, unpack restores them; matvec / matmul == the q4_0 reference bit for bit (any rows, tokens, column chunks); inf/nan scales refused', () => {
  const r = rng(53);
  const R4 = X.kt_q4_0_r4_type(), bs = BLOCK[T.Q4_0][1];
  const halfs = [0x0000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x8001, 0x2e66, 0xae66];
  for (const [rows, cols] of [[4, 32], [8, 96], [36, 3104], [260, 256], [12, 16416], [8, 4128]]) withMark(() => {
    const nb = cols / 32, rs = nb * bs;
    const w = randomRow(r, T.Q4_0, rows * cols, 0.03), dv = new DataView(w.buffer);
    for (let i = 0; i < rows * nb; i++) {   // signs, zero, subnormal, the largest finite halves
      if (r.next() < 0.5) dv.setUint16(i * bs, dv.getUint16(i * bs, true) | 0x8000, true);
      if (r.next() < 0.05) dv.setUint16(i * bs, halfs[r.int(0, halfs.length - 1)], true);
    }
    const W = k.putU8(w), P = k.putU8(w), Q = k.putU8(w), tmp = k.alloc(4 * rs);
    assert.equal(X.kt_repack_q4_0_r4(SIMD, P, rows, cols, tmp), 0);
    assert.equal(X.kt_repack_q4_0_r4(REF, Q, rows, cols, tmp), 0);
    assert.deepEqual(k.u8(P, rows * rs), k.u8(Q, rows * rs), `${rows}x${cols}: SIMD repack == reference`);
    assert.notDeepEqual(k.u8(P, rows * rs), k.u8(W, rows * rs));
    X.kt_unpack_q4_0_r4(Q, rows, cols, tmp);
    assert.deepEqual(k.u8(Q, rows * rs), k.u8(W, rows * rs), `${rows}x${cols}: unpack restores the file bytes`);
    const xq = quantAct(T.Q4_0, r.floats(cols).map((v, i) => (i % 97 === 0 ? 1e3 : v)), SIMD);
    const y0 = k.alloc(rows * 4), y1 = k.alloc(rows * 4), y2 = k.alloc(rows * 4);
    X.kt_matvec(T.Q4_0, REF, W, cols, xq, y0, 0, rows);
    X.kt_matvec(R4, SIMD, P, cols, xq, y1, 0, rows);
    X.kt_matvec(R4, REF, P, cols, xq, y2, 0, rows);
    const ref = Float32Array.from(k.f32(y0, rows));
    assertBitsEqual(k.f32(y1, rows), ref, `${rows}x${cols} R4 matvec vs q4_0 reference`);
    assertBitsEqual(k.f32(y2, rows), ref, `${rows}x${cols} R4 reference vs q4_0 reference`);
    for (let trial = 0; trial < 3; trial++) {   // splits misaligned to the groups: only rows [a, b) are written
      k.f32(y1, rows).fill(NaN);
      let a = 0;
      while (a < rows) { const b = Math.min(rows, a + r.int(1, 7)); X.kt_matvec(R4, SIMD, P, cols, xq, y1, a, b); a = b; }
      assertBitsEqual(k.f32(y1, rows), ref, `${rows}x${cols} R4 split`);
    }
    k.f32(y1, rows).fill(NaN);
    X.kt_matvec(R4, SIMD, P, cols, xq, y1, 1, Math.max(2, rows - 1));
    assert.ok(Number.isNaN(k.f32(y1, rows)[0]) && (rows < 3 || Number.isNaN(k.f32(y1, rows)[rows - 1])), 'rows outside [r0, r1) untouched');
    if (rows > 2) assertBitsEqual(k.f32(y1 + 4, rows - 2), ref.subarray(1, rows - 1), `${rows}x${cols} R4 rows 1..${rows - 1}`);
    for (const nvec of [2, 4, 5, 9]) {
      const xqs = Math.ceil(k.rowSize(T.Q8_0, cols) / 64) * 64 + 64, ystr = rows + 3;
      const xqm = k.alloc(xqs * nvec), ym = k.alloc(ystr * nvec * 4), yv = k.alloc(rows * 4);
      for (let b = 0; b < nvec; b++) X.kt_quantize(T.Q4_0, SIMD, k.putF32(r.floats(cols)), xqm + b * xqs, cols);
      for (const [a, b] of [[0, rows], [rows > 4 ? 2 : 1, rows - 1]]) {
        X.kt_matmul(R4, P, cols, xqm, xqs, nvec, ym, ystr, a, b);
        for (let t = 0; t < nvec; t++) {
          X.kt_matvec(T.Q4_0, REF, W, cols, xqm + t * xqs, yv, a, b);
          assertBitsEqual(k.f32(ym + (t * ystr + a) * 4, b - a), k.f32(yv + a * 4, b - a), `${rows}x${cols} R4 matmul ${nvec} tokens rows ${a}..${b} token ${t}`);
        }
      }
    }
    // a block scale inf or nan: refused, nothing changed (the R4 kernels convert finite scales only)
    for (const h of [0x7c00, 0xfc00, 0x7e00]) {
      const bad = w.slice(); new DataView(bad.buffer).setUint16((rows * nb - 1) * bs, h, true);
      const B = k.putU8(bad);
      for (const ref of [SIMD, REF]) {
        assert.equal(X.kt_repack_q4_0_r4(ref, B, rows, cols, tmp), 1);
        assert.deepEqual(k.u8(B, rows * rs), bad);
      }
    }
    assert.equal(X.kt_repack_q4_0_r4(SIMD, W, rows - 1, cols, tmp), 1, 'rows % 4 != 0 refused');
  });
});

for (const [FT, name, off, seed] of [[T.Q5_0, 'q5_0', 2, 54], [T.Q5_1, 'q5_1', 4, 55]]) test(`${name} repacked at load (AE_${name.toUpperCase()}_X8): repack SIMD == reference bytes, unpack (C and JS) restores them; matvec / matmul == the ${name} reference bit for bit (any rows, tokens, column chunks, inf / nan scales)`, () => {
  const r = rng(seed);
  const X8 = X[`kt_${name}_x8_type`](), bs = BLOCK[FT][1], repack = X[`kt_repack_${name}_x8`], unpack = X[`kt_unpack_${name}_x8`];
  const halfs = [0x0000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x8001, 0x2e66, 0xae66];
  for (const [rows, cols, special] of [[1, 32, 0], [3, 64, 0], [8, 96, 0], [37, 3104, 0], [260, 256, 0], [5, 16416, 0], [9, 10272, 0], [6, 896, 1]]) withMark(() => {
    const nb = cols / 32, rs = nb * bs, n = rows * nb;
    const w = randomRow(r, FT, rows * cols, 0.03), dv = new DataView(w.buffer);
    for (let i = 0; i < n; i++) {   // every byte pattern of qh / qs; signs, zero, subnormal, the largest finite halves
      for (let j = off; j < bs; j++) if (r.next() < 0.5) w[i * bs + j] = r.int(0, 255);
      if (r.next() < 0.5) dv.setUint16(i * bs, dv.getUint16(i * bs, true) | 0x8000, true);
      if (r.next() < 0.05) dv.setUint16(i * bs, halfs[r.int(0, halfs.length - 1)], true);
      if (special && r.next() < 0.02) dv.setUint16(i * bs, [0x7c00, 0xfc00, 0x7e00][r.int(0, 2)], true);   // inf / nan scales
    }
    const W = k.putU8(w), P = k.putU8(w), Q = k.putU8(w);
    repack(SIMD, P, n);
    repack(REF, Q, n);
    assert.deepEqual(k.u8(P, rows * rs), k.u8(Q, rows * rs), `${rows}x${cols}: SIMD repack == reference`);
    assert.notDeepEqual(k.u8(P, rows * rs), k.u8(W, rows * rs));
    assert.deepEqual(unpackQ5X8(k.u8(P, rows * rs).slice(), bs, off), w, `${rows}x${cols}: JS unpack (Engine.tensorBytes) restores the file bytes`);
    unpack(Q, n);
    assert.deepEqual(k.u8(Q, rows * rs), k.u8(W, rows * rs), `${rows}x${cols}: unpack restores the file bytes`);
    const xq = quantAct(FT, r.floats(cols).map((v, i) => (i % 97 === 0 ? 1e3 : v)), SIMD);
    const y0 = k.alloc(rows * 4), y1 = k.alloc(rows * 4), y2 = k.alloc(rows * 4);
    X.kt_matvec(FT, REF, W, cols, xq, y0, 0, rows);
    X.kt_matvec(X8, SIMD, P, cols, xq, y1, 0, rows);
    X.kt_matvec(X8, REF, P, cols, xq, y2, 0, rows);
    const ref = Float32Array.from(k.f32(y0, rows));
    assertBitsEqual(k.f32(y1, rows), ref, `${rows}x${cols} X8 matvec vs ${name} reference`);
    assertBitsEqual(k.f32(y2, rows), ref, `${rows}x${cols} X8 reference vs ${name} reference`);
    for (let trial = 0; trial < 3; trial++) {
      k.f32(y1, rows).fill(NaN);
      let a = 0;
      while (a < rows) { const b = Math.min(rows, a + r.int(1, 7)); X.kt_matvec(X8, SIMD, P, cols, xq, y1, a, b); a = b; }
      assertBitsEqual(k.f32(y1, rows), ref, `${rows}x${cols} X8 split`);
    }
    for (const nvec of [2, 4, 5, 9]) {
      const xqs = Math.ceil(k.rowSize(vdt(FT), cols) / 64) * 64 + 64, ystr = rows + 3;
      const xqm = k.alloc(xqs * nvec), ym = k.alloc(ystr * nvec * 4), yv = k.alloc(rows * 4);
      for (let b = 0; b < nvec; b++) X.kt_quantize(FT, SIMD, k.putF32(r.floats(cols)), xqm + b * xqs, cols);
      for (const [a, b] of [[0, rows], [rows > 2 ? 1 : 0, rows > 2 ? rows - 1 : rows]]) {
        X.kt_matmul(X8, P, cols, xqm, xqs, nvec, ym, ystr, a, b);
        for (let t = 0; t < nvec; t++) {
          X.kt_matvec(FT, REF, W, cols, xqm + t * xqs, yv, a, b);
          assertBitsEqual(k.f32(ym + (t * ystr + a) * 4, b - a), k.f32(yv + a * 4, b - a), `${rows}x${cols} X8 matmul ${nvec} tokens rows ${a}..${b} token ${t}`);
        }
      }
    }
  });
});

test('matvec 3072x8192 (first, middle and last rows) for every dtype', () => {
  const r = rng(52);
  const cols = 8192, rowsTotal = 3072;
  for (const type of ALL) withMark(() => {
    // only materialise the rows we use: a 13-row window at rows [0,6), [1533,1538), [3070,3072)
    const rs = k.rowSize(type, cols), W = k.putU8(randomRow(r, type, 13 * cols, 0.03));
    const xq = quantAct(type, r.floats(cols), SIMD), y = k.alloc(13 * 4), yr = k.alloc(13 * 4);
    for (const [a, b] of [[0, 6], [6, 11], [11, 13]]) {
      X.kt_matvec(type, SIMD, W, cols, xq, y, a, b);
      X.kt_matvec(type, REF, W, cols, xq, yr, a, b);
    }
    if (ROW[type].act === 'f32') {
      const ys = k.f32(y, 13), yrs = k.f32(yr, 13);
      for (let i = 0; i < 13; i++) assert.ok(Math.abs(ys[i] - yrs[i]) <= 1e-4 * (Math.abs(yrs[i]) + 1), `${TYPE_NAMES[type]} row ${i}`);
    } else assertBitsEqual(k.f32(y, 13), k.f32(yr, 13), `${TYPE_NAMES[type]} 3072x8192 window`);
    assert.ok(rs * rowsTotal > 0);
  });
});

// ---- row ops ---------------------------------------------------------------------------------------
test('rmsnorm: SIMD vs reference (relative tolerance), in place', () => {
  const r = rng(61);
  for (const n of ELEMWISE_N) for (const scale of [1, 1e-3, 1e3]) withMark(() => {
    const xv = r.floats(n, scale), wv = r.floats(n);
    const x = k.putF32(xv), w = k.putF32(wv), y = k.alloc(n * 4), yr = k.alloc(n * 4);
    X.kt_rmsnorm(SIMD, y, x, w, n, 1e-5);
    X.kt_rmsnorm(REF, yr, x, w, n, 1e-5);
    const a = k.f32(y, n), b = k.f32(yr, n), tol = TOL.rmsnormRelTol(n);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol * Math.abs(b[i]) + 1e-38, `n=${n} i=${i}: ${a[i]} vs ${b[i]}`);
    X.kt_rmsnorm(SIMD, x, x, w, n, 1e-5);
    assertBitsEqual(k.f32(x, n), a, 'in place');
  });
});

test('rope_cos_sin (PyTorch float32 formula) and rope (adjacent + NEOX) bit-exact vs reference', () => {
  const r = rng(62);
  for (const theta of [10000, 500000, 1000000]) for (const rot of [2, 6, 24, 32, 64, 128]) for (const pos of [0, 1, 7, 100, 4095, 32767, 131071]) withMark(() => {
    const cs = k.alloc(rot * 4);
    X.kt_rope_cos_sin(cs, pos, rot, theta);
    const got = k.f32(cs, rot);
    for (let i = 0; i < rot / 2; i++) {
      const e = f(f(2 * i) / f(rot)), freq = f(1 / f(Math.pow(f(theta), e))), ang = f(f(pos) * freq);
      assert.ok(ulps(got[2 * i], f(Math.cos(ang))) <= TOL.ROPE_COS_SIN_ULP, `cos theta=${theta} rot=${rot} pos=${pos} i=${i}`);
      assert.ok(ulps(got[2 * i + 1], f(Math.sin(ang))) <= TOL.ROPE_COS_SIN_ULP, `sin theta=${theta} rot=${rot} pos=${pos} i=${i}`);
    }
  });
  for (const [hd, rot] of [[64, 64], [128, 128], [80, 80], [96, 32], [64, 24], [12, 6], [4, 2], [128, 64]]) for (const neox of [0, 1]) withMark(() => {
    const nh = 3, n = nh * hd, xv = r.floats(n);
    const cs = k.alloc(rot * 4);
    X.kt_rope_cos_sin(cs, 37, rot, 10000);
    const a = k.putF32(xv), b = k.putF32(xv);
    X.kt_rope(SIMD, a, nh, hd, rot, cs, neox);
    X.kt_rope(REF, b, nh, hd, rot, cs, neox);
    assertBitsEqual(k.f32(a, n), k.f32(b, n), `rope hd=${hd} rot=${rot} neox=${neox}`);
    const out = k.f32(a, n);
    for (let h = 0; h < nh; h++) for (let i = rot; i < hd; i++) assert.equal(out[h * hd + i], xv[h * hd + i], 'dims past rot_dim untouched');
  });
});

test('softmax, silu_mul, gelu, gelu_mul, softcap, add: SIMD vs reference', () => {
  const r = rng(63);
  for (const n of ELEMWISE_N) withMark(() => {
    // softmax, incl. -inf (masked) entries and a wide range
    const sv = r.floats(n, 8);
    if (n > 4) { sv[1] = -Infinity; sv[n - 1] = -Infinity; }
    const a = k.putF32(sv), b = k.putF32(sv);
    X.kt_softmax(SIMD, a, n); X.kt_softmax(REF, b, n);
    const A = k.f32(a, n), B = k.f32(b, n), st = TOL.softmaxRelTol(n);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(A[i] - B[i]) <= st * B[i] + TOL.SOFTMAX_ABS, `softmax n=${n} i=${i}: ${A[i]} vs ${B[i]}`);
    // silu(g) * u
    const g = r.floats(n, 4), u = r.floats(n);
    if (n > 8) { g[0] = 100; g[1] = -100; g[2] = 0; g[3] = -0; g[4] = 1e-30; g[5] = 89; g[6] = -89; }
    const ga = k.putF32(g), gb = k.putF32(g), up = k.putF32(u);
    X.kt_silu_mul(SIMD, ga, up, n); X.kt_silu_mul(REF, gb, up, n);
    const GA = k.f32(ga, n), GB = k.f32(gb, n);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(GA[i] - GB[i]) <= TOL.SILU_REL * Math.abs(GB[i]) + TOL.SILU_ABS, `silu n=${n} i=${i}: g=${g[i]} ${GA[i]} vs ${GB[i]}`);
    // gelu
    const gx = r.floats(n, 3);
    if (n > 8) { gx[0] = 20; gx[1] = -20; gx[2] = 0; gx[3] = 1e10; gx[4] = -1e10; gx[5] = 1e-20; }
    const xa = k.putF32(gx), xb = k.putF32(gx);
    X.kt_gelu(SIMD, xa, n); X.kt_gelu(REF, xb, n);
    const XA = k.f32(xa, n), XB = k.f32(xb, n);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(XA[i] - XB[i]) <= TOL.geluTol(gx[i], XB[i]), `gelu n=${n} x=${gx[i]}: ${XA[i]} vs ${XB[i]}`);
    // gelu(g) * u (GeGLU)
    const gma = k.putF32(gx), gmb = k.putF32(gx);
    X.kt_gelu_mul(SIMD, gma, up, n); X.kt_gelu_mul(REF, gmb, up, n);
    const GMA = k.f32(gma, n), GMB = k.f32(gmb, n);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(GMA[i] - GMB[i]) <= TOL.geluMulTol(gx[i], u[i], GMB[i]), `gelu_mul n=${n} x=${gx[i]} u=${u[i]}: ${GMA[i]} vs ${GMB[i]}`);
    // softcap: cap * tanh(x / cap), Gemma 2's caps (50 attention, 30 final) and a small one; incl. 0, tiny, huge, both tanh branches
    for (const cap of [50, 30, 0.5]) {
      const sx = r.floats(n, cap * 3);
      if (n > 8) { sx[0] = 0; sx[1] = -0; sx[2] = 1e-30; sx[3] = 1e30; sx[4] = -1e30; sx[5] = cap / 8; sx[6] = -cap / 8 * 0.999; }
      const sa = k.putF32(sx), sb = k.putF32(sx);
      X.kt_softcap(SIMD, sa, n, cap); X.kt_softcap(REF, sb, n, cap);
      const SA = k.f32(sa, n), SB = k.f32(sb, n);
      for (let i = 0; i < n; i++) {
        assert.ok(Math.abs(SA[i] - SB[i]) <= TOL.softcapTol(cap, sx[i]), `softcap cap=${cap} n=${n} x=${sx[i]}: ${SA[i]} vs ${SB[i]}`);
        assert.ok(Math.abs(SB[i] - cap * Math.tanh(f(sx[i]) / cap)) <= TOL.softcapTol(cap, sx[i]), `softcap ref vs Math.tanh x=${sx[i]}`);
        assert.ok(Math.abs(SA[i]) <= cap, 'softcap output within [-cap, cap]');
      }
    }
    // add: exact
    const ya = k.putF32(g), yb = k.putF32(g), xp = k.putF32(u);
    X.kt_add(SIMD, ya, xp, n); X.kt_add(REF, yb, xp, n);
    assertBitsEqual(k.f32(ya, n), k.f32(yb, n), `add n=${n}`);
  });
});

test('polynomial exp: <= EXP_MAX_ULP ulp over the normal range, specials, subnormal tail', () => withMark(() => {
  const n = 1 << 20, xp = k.alloc(n * 4), yp = k.alloc(n * 4);
  const xv = k.f32(xp, n);
  const lo = -87.3, hi = 88.72;
  for (let i = 0; i < n; i++) xv[i] = f(lo + (hi - lo) * i / (n - 1));
  X.kt_vexp(yp, xp, n);
  const yv = k.f32(yp, n);
  let worst = 0;
  for (let i = 0; i < n; i++) worst = Math.max(worst, ulps(yv[i], f(Math.exp(xv[i]))));
  assert.ok(worst <= TOL.EXP_MAX_ULP, `max ulp error ${worst}`);
  const sp = [NaN, Infinity, -Infinity, 0, -0, 88.7228, 88.73, 89, 1000, -87.5, -100, -103.9, -104, -200, 1e-10, -1e-10];
  const sx = k.putF32(sp), sy = k.alloc(sp.length * 4);
  X.kt_vexp(sy, sx, sp.length);
  const out = k.f32(sy, sp.length);
  assert.ok(Number.isNaN(out[0]));
  assert.equal(out[1], Infinity); assert.equal(out[2], 0); assert.equal(out[3], 1); assert.equal(out[4], 1);
  assert.ok(out[5] > 3.4e38 && out[5] < Infinity); assert.equal(out[6], Infinity); assert.equal(out[7], Infinity); assert.equal(out[8], Infinity);
  for (let i = 9; i < 14; i++) assert.ok(Math.abs(out[i] - Math.exp(sp[i])) <= 4 * 2 ** -149 + 4 * TOL.EPS * Math.exp(sp[i]), `exp(${sp[i]}) = ${out[i]}`);
  assert.equal(out[13], 0); assert.equal(out[14], 1); assert.equal(out[15], 1);
}));

test('scalar math (ae_expf, ae_logf, ae_tanhf, ae_powf, ae_sinf, ae_cosf) vs Math', () => {
  const r = rng(64);
  const cases = [
    [0, (x) => Math.exp(x), () => -100 + 190 * r.next()],
    [1, (x) => Math.log(x), () => Math.exp(-80 + 160 * r.next())],
    [2, (x) => Math.tanh(x), () => (r.next() - 0.5) * 2 * 10 ** r.int(-6, 1)],
    [4, (x) => Math.sin(x), () => (r.next() - 0.5) * 2 * 10 ** r.int(-3, 5)],
    [5, (x) => Math.cos(x), () => (r.next() - 0.5) * 2 * 10 ** r.int(-3, 5)],
  ];
  for (const [fn, ref, gen] of cases) {
    for (let i = 0; i < 20000; i++) {
      const x = f(gen()), got = X.kt_scalar(fn, x, 0), want = f(ref(x));
      assert.ok(ulps(got, want) <= TOL.SCALAR_MATH_ULP, `fn ${fn}(${x}) = ${got}, want ${want}`);
    }
  }
  for (let i = 0; i < 20000; i++) {
    const b = f(1 + 1e6 * r.next()), e = f(r.next() * 2 - 1);
    assert.ok(ulps(X.kt_scalar(3, b, e), f(Math.pow(b, e))) <= TOL.SCALAR_MATH_ULP, `pow(${b}, ${e})`);
  }
  assert.equal(X.kt_scalar(0, -Infinity, 0), 0);
  assert.equal(X.kt_scalar(0, Infinity, 0), Infinity);
  assert.equal(X.kt_scalar(2, Infinity, 0), 1);
  assert.equal(X.kt_scalar(1, 0, 0), -Infinity);
  assert.ok(Number.isNaN(X.kt_scalar(1, -1, 0)));
  assert.equal(X.kt_scalar(3, -2, 3), -8);
});

test('attention: SIMD vs reference (per-element bound), shapes incl. tails', () => {
  const r = rng(65);
  for (const [nkv, hd, stride] of [[1, 64, 64], [3, 64, 128], [4, 128, 256], [5, 80, 80], [17, 6, 12], [100, 64, 256], [1000, 128, 512], [4099, 64, 64]]) withMark(() => {
    const q = r.floats(hd), kk = r.floats(nkv * stride), vv = r.floats(nkv * stride);
    const qp = k.putF32(q), kp = k.putF32(kk), vp = k.putF32(vv);
    const o = k.alloc(hd * 4), orf = k.alloc(hd * 4), att = k.alloc(nkv * 4), attr = k.alloc(nkv * 4);
    // softcap 0 (none) and Gemma 2's 50 and a cap that saturates the scores (scale 4 makes them O(10))
    for (const [scale, softcap] of [[1 / Math.sqrt(hd), 0], [1 / Math.sqrt(hd), 50], [4, 2]]) {
      X.kt_attention(SIMD, o, qp, kp, vp, nkv, hd, stride, scale, softcap, att);
      X.kt_attention(REF, orf, qp, kp, vp, nkv, hd, stride, scale, softcap, attr);
      const p = k.f32(attr, nkv), A = k.f32(o, hd), B = k.f32(orf, hd);
      let dsMax = 0;
      for (let t = 0; t < nkv; t++) {
        let s = 0, dot = 0;
        for (let i = 0; i < hd; i++) { s += Math.abs(q[i] * kk[t * stride + i]); dot += q[i] * kk[t * stride + i]; }
        dsMax = Math.max(dsMax, TOL.attentionScoreErr(scale, hd, s) + (softcap ? TOL.softcapTol(softcap, dot * scale) : 0));
      }
      for (let i = 0; i < hd; i++) {
        let spv = 0; for (let t = 0; t < nkv; t++) spv += p[t] * Math.abs(vv[t * stride + i]);
        const tol = TOL.attentionTol(dsMax, nkv, spv);
        assert.ok(Math.abs(A[i] - B[i]) <= tol, `attention nkv=${nkv} hd=${hd} softcap=${softcap} i=${i}: ${A[i]} vs ${B[i]} (tol ${tol})`);
      }
      if (softcap) {
        // the reference's probabilities are softmax(cap tanh(s / cap)) of the f64 scores
        const sc = []; for (let t = 0; t < nkv; t++) { let d = 0; for (let i = 0; i < hd; i++) d += q[i] * kk[t * stride + i]; sc.push(softcap * Math.tanh(f(f(d) * f(scale)) / softcap)); }
        const mx = Math.max(...sc), ex = sc.map((v) => Math.exp(v - mx)), sum = ex.reduce((a, b) => a + b, 0);
        for (let t = 0; t < nkv; t++) assert.ok(Math.abs(p[t] - ex[t] / sum) <= 1e-5 * (ex[t] / sum) + 1e-9, `softcapped probability t=${t}`);
      }
    }
  });
});

test('argmax: first index of the max, ties, NaN, -inf, all sizes', () => {
  const r = rng(66);
  for (const n of ELEMWISE_N) withMark(() => {
    const cases = [];
    const v = r.floats(n); cases.push(v);
    const ties = new Float32Array(n).map(() => r.int(0, 3)); cases.push(ties);
    const nanFirst = r.floats(n); nanFirst[0] = NaN; cases.push(nanFirst);
    const nanMid = r.floats(n); nanMid[n >> 1] = NaN; cases.push(nanMid);
    cases.push(new Float32Array(n).fill(-Infinity));
    const z = new Float32Array(n).fill(-0); z[n - 1] = 0; cases.push(z);
    const last = r.floats(n); last[n - 1] = 1e30; cases.push(last);
    for (const c of cases) {
      const p = k.putF32(c);
      assert.equal(X.kt_argmax(SIMD, p, n), X.kt_argmax(REF, p, n), `n=${n}`);
      let best = 0; for (let i = 1; i < n; i++) if (c[i] > c[best]) best = i;
      assert.equal(X.kt_argmax(REF, p, n), best);
    }
  });
});

test('stack use per kernel call <= 32 KiB (guard below a 32 KiB stack stays intact)', () => withMark(() => {
  const r = rng(67);
  const STACK = 32 * 1024, GUARD = 4096;   // the q8_0 matvec keeps whole rows' activations (21.25 KiB at most)
  const base = k.alloc(GUARD + STACK, 4096), top = base + GUARD + STACK;
  const guard = k.u8(base, GUARD);
  const saved = X.__stack_pointer.value;
  const check = (what) => {
    for (let i = 0; i < GUARD; i++) if (guard[i] !== 0xa5) assert.fail(`${what}: stack overflowed a 32 KiB region (guard byte ${i})`);
  };
  guard.fill(0xa5);
  const cols = 14336;   // a long row (Llama-3-8B FFN down): several column chunks
  for (const type of ALL) {
    const W = k.putU8(randomRow(r, type, 5 * cols, 0.03)), xq = quantAct(type, r.floats(cols), SIMD), y = k.alloc(5 * 4);
    const xs = k.putF32(r.floats(cols)), q2 = k.alloc(Math.max(...ACT_TYPES.map((t) => k.rowSize(t, cols))) + cols * 4);
    X.__stack_pointer.value = top;
    try {
      X.kt_matvec(type, SIMD, W, cols, xq, y, 0, 5);
      X.kt_matvec(type, REF, W, cols, xq, y, 0, 5);
      X.kt_vec_dot(type, SIMD, cols, W, xq);
      X.kt_matmul(type, W, cols, xq, 0, 5, y, 1, 0, 1);   // 5 tokens (the same one): a tile of 4 and a lone token
      X.kt_quantize(type, SIMD, xs, q2, cols);
      X.kt_quantize(type, REF, xs, q2, cols);
      X.kt_get_row(0, type, W, 1, cols, k.alloc(cols * 4));
    } finally { X.__stack_pointer.value = saved; }
    check(TYPE_NAMES[type]);
  }
  {   // the repacked q4_0 layout's matvec / matmul / repack (8 rows: two groups)
    const R4 = X.kt_q4_0_r4_type(), rs = k.rowSize(T.Q4_0, cols);
    const W = k.putU8(randomRow(r, T.Q4_0, 8 * cols, 0.03)), tmp = k.alloc(4 * rs), xq = quantAct(T.Q4_0, r.floats(cols), SIMD), y = k.alloc(8 * 4 * 5);
    X.__stack_pointer.value = top;
    try {
      assert.equal(X.kt_repack_q4_0_r4(SIMD, W, 8, cols, tmp), 0);
      X.kt_matvec(R4, SIMD, W, cols, xq, y, 0, 8);
      X.kt_matvec(R4, SIMD, W, cols, xq, y, 1, 7);
      X.kt_matmul(R4, W, cols, xq, 0, 5, y, 8, 0, 8);
    } finally { X.__stack_pointer.value = saved; }
    check('q4_0 repacked');
  }
  for (const [FT, name] of [[T.Q5_0, 'q5_0'], [T.Q5_1, 'q5_1']]) {   // the repacked q5_0 / q5_1 layouts' matvec / matmul / repack
    const X8 = X[`kt_${name}_x8_type`]();
    const W = k.putU8(randomRow(r, FT, 8 * cols, 0.03)), xq = quantAct(FT, r.floats(cols), SIMD), y = k.alloc(8 * 4 * 5);
    X.__stack_pointer.value = top;
    try {
      X[`kt_repack_${name}_x8`](SIMD, W, 8 * cols / 32);
      X.kt_matvec(X8, SIMD, W, cols, xq, y, 0, 8);
      X.kt_matvec(X8, SIMD, W, cols, xq, y, 1, 7);
      X.kt_matmul(X8, W, cols, xq, 0, 5, y, 8, 0, 8);
    } finally { X.__stack_pointer.value = saved; }
    check(`${name} repacked`);
  }
  const n = 4099, a = k.putF32(r.floats(n)), b = k.putF32(r.floats(n)), o = k.alloc(n * 4);
  const q = k.putF32(r.floats(128)), kv = k.putF32(r.floats(128 * 300)), att = k.alloc(300 * 4), cs = k.alloc(128 * 4);
  X.__stack_pointer.value = top;
  try {
    for (const ref of [0, 1]) {
      X.kt_rmsnorm(ref, o, a, b, n, 1e-5); X.kt_softmax(ref, o, n); X.kt_silu_mul(ref, o, b, n); X.kt_gelu(ref, o, n);
      X.kt_add(ref, o, a, n); X.kt_argmax(ref, o, n);
      X.kt_attention(ref, o, q, kv, kv, 300, 128, 128, 0.088, 0, att); X.kt_attention(ref, o, q, kv, kv, 300, 128, 128, 0.088, 50, att);
      X.kt_gelu_mul(ref, o, b, n); X.kt_softcap(ref, o, n, 30);
      X.kt_rope_cos_sin(cs, 77, 128, 10000); X.kt_rope(ref, o, 4, 128, 128, cs, ref);
    }
  } finally { X.__stack_pointer.value = saved; }
  check('row ops');
}));

test('f16 matvec == vec_dot bit for bit with large, infinite and NaN activations (prescaled path guard)', () => withMark(() => {
  const r = rng(68);
  const rows = 9, cols = 1001;
  const W = k.putU8(randomRow(r, T.F16, rows * cols, 0.05)), y = k.alloc(rows * 4);
  for (const special of [65535, 65536, 1e5, -3e38, Infinity, -Infinity, NaN]) {
    const xv = r.floats(cols);
    xv[17] = special;
    const x = k.putF32(xv);
    X.kt_matvec(T.F16, SIMD, W, cols, x, y, 0, rows);
    const ys = Float32Array.from(k.f32(y, rows)), yd = new Float32Array(rows);
    for (let i = 0; i < rows; i++) yd[i] = X.kt_vec_dot(T.F16, SIMD, cols, W + i * cols * 2, x);
    assertBitsEqual(ys, yd, `f16 x[17] = ${special}`);
    if (Number.isFinite(special) && Math.abs(special) < 1e6) for (const v of ys) assert.ok(Number.isFinite(v), `finite result for x = ${special}`);
  }
}));
