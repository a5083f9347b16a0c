// Block dtypes against independent float64 JS readers of ggml's layouts (ggml-common.h block_q4_0 ...
// block_q6_K, block_q8_0 / q8_1 / q8_K), and the converter's JS quantisers against the C reference
// quantisers. Complements tests/kernels.test.mjs (SIMD == reference): here the reference itself is checked
// against a float64 dot product of the dequantised weights and activations, within the bound of
// tests/helpers/tolerances.mjs (quantDotF64Tol). Run: node --test tests/kernels-dtypes.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import * as TOL from './helpers/tolerances.mjs';
import { loadKernels, rng, T, TYPE_NAMES, BLOCK, ROW, QUANT_TYPES, FLOAT_TYPES, randomRow, halfToFloat, f32bits } from './helpers/kernels.mjs';
import { encodeFromF32, decodeToF32 } from '../dist/src/formats/quantize.js';

const k = await loadKernels({ pages: 1024 });
const X = k.x;
const REF = 1, SIMD = 0;
function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }

// ---- float64 readers: per element the part proportional to the quants (wq) and the offset part (wm) ----
const u16 = (b, o) => b[o] | (b[o + 1] << 8);
const h = (b, o) => halfToFloat(u16(b, o));
const i8 = (v) => (v << 24) >> 24;
function k4scales(b, o) {   // ggml get_scale_min_k4, 12 bytes at o
  const sc = [], m = [];
  for (let j = 0; j < 8; j++) {
    if (j < 4) { sc.push(b[o + j] & 63); m.push(b[o + j + 4] & 63); }
    else { sc.push((b[o + j + 4] & 15) | ((b[o + j - 4] >> 6) << 4)); m.push((b[o + j + 4] >> 4) | ((b[o + j] >> 6) << 4)); }
  }
  return { sc, m };
}
// Returns { wq, wm, mins } (Float64Array per element; mins = per block |offset scale| for the q8_1 slack).
export function readF64(name, b, n) {
  const [bs, ts] = BLOCK[T[name.toUpperCase()]];
  const wq = new Float64Array(n), wm = new Float64Array(n), mins = new Float64Array(n / bs);
  for (let blk = 0; blk < n / bs; blk++) {
    const o = blk * ts, Y = blk * bs;
    const qh32 = (p) => (b[p] | (b[p + 1] << 8) | (b[p + 2] << 16) | (b[p + 3] << 24)) >>> 0;
    const nib = (p, e) => (e < 16 ? b[p + e] & 15 : b[p + e - 16] >> 4);
    switch (name) {
      case 'q8_0': for (let e = 0; e < 32; e++) wq[Y + e] = h(b, o) * i8(b[o + 2 + e]); break;
      case 'q4_0': for (let e = 0; e < 32; e++) wq[Y + e] = h(b, o) * (nib(o + 2, e) - 8); break;
      case 'q5_0': { const qh = qh32(o + 2); for (let e = 0; e < 32; e++) wq[Y + e] = h(b, o) * ((nib(o + 6, e) | (((qh >>> e) & 1) << 4)) - 16); break; }
      case 'q4_1': for (let e = 0; e < 32; e++) { wq[Y + e] = h(b, o) * nib(o + 4, e); wm[Y + e] = h(b, o + 2); } mins[blk] = Math.abs(h(b, o + 2)); break;
      case 'q5_1': {
        const qh = qh32(o + 4);
        for (let e = 0; e < 32; e++) { wq[Y + e] = h(b, o) * (nib(o + 8, e) | (((qh >>> e) & 1) << 4)); wm[Y + e] = h(b, o + 2); }
        mins[blk] = Math.abs(h(b, o + 2));
        break;
      }
      case 'q4_K': case 'q5_K': {
        const { sc, m } = k4scales(b, o + 4), five = name === 'q5_K', qs = o + (five ? 48 : 16);
        for (let e = 0; e < 256; e++) {
          const j = e >> 5, l = e & 31, byte = b[qs + 32 * (j >> 1) + l];
          const q = ((j & 1) ? byte >> 4 : byte & 15) | (five ? ((b[o + 16 + l] >> j) & 1) << 4 : 0);
          wq[Y + e] = h(b, o) * sc[j] * q;
          wm[Y + e] = -h(b, o + 2) * m[j];
        }
        break;
      }
      case 'q6_K': {   // element 128 g + 32 k + l: low 4 bits in ql[64 g + l + 32 (k & 1)] (k >= 2: high nibble), high 2 in qh[32 g + l] >> 2k
        for (let e = 0; e < 256; e++) {
          const g = e >> 7, kk = (e >> 5) & 3, l = e & 31, lo = b[o + 64 * g + l + 32 * (kk & 1)];
          const q = ((kk < 2 ? lo & 15 : lo >> 4) | (((b[o + 128 + 32 * g + l] >> (2 * kk)) & 3) << 4)) - 32;
          wq[Y + e] = h(b, o + 208) * i8(b[o + 192 + (e >> 4)]) * q;
        }
        break;
      }
      case 'iq4_nl': {   // element e < 16: code in the low nibble of qs[e], 16 + e: its high nibble; x = d * table[code]
        const table = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
        for (let e = 0; e < 32; e++) wq[Y + e] = h(b, o) * table[e < 16 ? b[o + 2 + e] & 15 : b[o + 2 + e - 16] >> 4];
        break;
      }
      case 'iq4_xs': {   // sub-block ib of 32: scale (ls - 32) from scales_l / scales_h, codes at qs[16 ib ..] as iq4_nl's
        const table = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], sh = b[o + 2] | (b[o + 3] << 8);
        for (let e = 0; e < 256; e++) {
          const ib = e >> 5, j = e & 31, q = b[o + 8 + 16 * ib + (j & 15)];
          const ls = ((b[o + 4 + (ib >> 1)] >> (4 * (ib & 1))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
          wq[Y + e] = h(b, o) * (ls - 32) * table[j < 16 ? q & 15 : q >> 4];
        }
        break;
      }
      case 'q2_K': {   // element 128 n + 32 j + l: q = 2 bits of qs[32 n + l] >> 2j; sub-block s: scale / min nibbles of scales[s]
        for (let e = 0; e < 256; e++) {
          const s = e >> 4, q = (b[o + 16 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
          wq[Y + e] = h(b, o + 80) * (b[o + s] & 15) * q;
          wm[Y + e] = -h(b, o + 82) * (b[o + s] >> 4);
        }
        break;
      }
      case 'q3_K': {   // element 128 n + 32 j + l: low 2 bits in qs[32 n + l] >> 2j, 3rd in hmask[l] bit 4n + j; scale s: 6 bits (offset 32)
        for (let e = 0; e < 256; e++) {
          const nn = e >> 7, j = (e >> 5) & 3, l = e & 31, s = e >> 4;
          const u = ((b[o + 32 + 32 * nn + l] >> (2 * j)) & 3) | (((b[o + l] >> (4 * nn + j)) & 1) << 2);
          const us = ((b[o + 96 + (s & 7)] >> (4 * (s >> 3))) & 15) | (((b[o + 104 + (s & 3)] >> (2 * (s >> 2))) & 3) << 4);
          wq[Y + e] = h(b, o + 108) * (us - 32) * (u - 4);
        }
        break;
      }
      default: throw new Error(`no float64 reader for ${name}`);
    }
  }
  return { wq, wm, mins };
}
// activations (q8_0, q8_1: x = q * d with d the stored f16; q8_K: f32 d)
function readActF64(name, b, n) {
  const x = new Float64Array(n);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (name === 'q8_K') { for (let blk = 0; blk < n / 256; blk++) for (let e = 0; e < 256; e++) x[256 * blk + e] = dv.getFloat32(292 * blk, true) * dv.getInt8(292 * blk + 4 + e); return x; }
  const ts = name === 'q8_1' ? 36 : 34, qo = name === 'q8_1' ? 4 : 2;
  for (let blk = 0; blk < n / 32; blk++) for (let e = 0; e < 32; e++) x[32 * blk + e] = h(b, ts * blk) * dv.getInt8(ts * blk + qo + e);
  return x;
}

test('quantised vec_dot (reference and SIMD) vs a float64 dot of the JS-dequantised weights and activations', () => {
  const r = rng(71);
  for (const type of QUANT_TYPES) {
    const name = TYPE_NAMES[type], act = ROW[type].act, bs = BLOCK[type][0];
    // q8_1 stores s = d * sum(q) as f16: activations much beyond ~1e3 overflow it to inf (as in ggml), so its
    // largest scale here is 4 (values up to ~1e4 with the 1e3x outliers of r.floats)
    const scales = act === 'q8_1' ? [1, 1e-3, 4] : [1, 1e-3, 1e3];
    for (const nb of bs === 256 ? [1, 3, 12] : [1, 5, 24, 96]) for (const scale of scales) withMark(() => {
      const n = nb * bs, wb = randomRow(r, type, n, 0.05 * scale), w = k.putU8(wb);
      const xp = k.putF32(r.floats(n, scale)), xq = k.alloc(k.rowSize(T[act.toUpperCase()], n));
      X.kt_quantize(type, REF, xp, xq, n);
      const xb = k.u8(xq, k.rowSize(T[act.toUpperCase()], n)).slice();
      const { wq, wm, mins } = readF64(name, wb, n), x = readActF64(act, xb, n);
      let exact = 0, terms = 0, slack = 0;
      for (let blk = 0; blk < nb; blk++) {
        let a = 0, c = 0, sx = 0, sumq = 0;
        for (let e = blk * bs; e < (blk + 1) * bs; e++) { a += wq[e] * x[e]; c += wm[e] * x[e]; sx += x[e]; }
        exact += a + c;
        terms += Math.abs(a) + Math.abs(c);
        if (act === 'q8_1') {
          for (let e = 0; e < 32; e++) sumq += i8(xb[36 * blk + 4 + e]);
          slack += mins[blk] * TOL.q8_1SumErr(sumq, sx);
        }
      }
      const tol = TOL.quantDotF64Tol(nb, terms) + slack;
      for (const impl of [REF, SIMD]) {
        const got = X.kt_vec_dot(type, impl, n, w, xq);
        assert.ok(Math.abs(got - exact) <= tol, `${name} ${impl === REF ? 'ref' : 'SIMD'} nb=${nb} scale=${scale}: ${got} vs float64 ${exact} (tol ${tol})`);
      }
    });
  }
});

test('float64 readers agree with the converter decoder and the C to_float (independent layout check)', () => {
  const r = rng(72);
  for (const type of QUANT_TYPES) withMark(() => {
    const name = TYPE_NAMES[type], bs = BLOCK[type][0], n = 4 * bs, wb = randomRow(r, type, n, 0.05);
    const { wq, wm } = readF64(name, wb, n), js = decodeToF32(name, wb, n);
    const y = k.alloc(4 * n);
    X.kt_to_float(type, REF, k.putU8(wb), y, n);
    const c = k.f32(y, n);
    for (let e = 0; e < n; e++) {
      const v = wq[e] + wm[e], tol = 4 * TOL.EPS * (Math.abs(wq[e]) + Math.abs(wm[e])) + 1e-38;
      assert.ok(Math.abs(js[e] - v) <= tol, `${name}[${e}]: converter ${js[e]} vs float64 ${v}`);
      assert.equal(f32bits(c[e]), f32bits(js[e]), `${name}[${e}]: C reference vs converter`);
    }
  });
});

test('converter quantisers (js/src/formats/quantize.ts) == C reference quantisers, byte for byte', () => {
  const r = rng(73);
  for (const type of [...QUANT_TYPES, ...FLOAT_TYPES]) {
    const name = TYPE_NAMES[type], bs = BLOCK[type][0];
    let probe;
    try { probe = encodeFromF32(name, new Float32Array(bs === 1 ? 4 : bs)); } catch { probe = null; }
    if (!probe) continue;   // not a conversion target (q4_K, q6_K)
    for (const kind of ['normal', 'wide', 'const', 'zeros']) withMark(() => {
      const n = bs === 1 ? 1001 : 16 * bs;
      const x = kind === 'wide' ? r.floats(n, 1) : new Float32Array(n).map(() => r.normal());
      if (kind === 'const') x.fill(0.75, 0, Math.min(n, 64));
      if (kind === 'zeros') x.fill(0, 0, Math.min(n, 64));
      const js = encodeFromF32(name, x).slice(), rs = k.rowSize(type, n), y = k.alloc(rs), ys = k.alloc(rs);
      const xp = k.putF32(x);
      X.kt_from_float(type, REF, xp, y, n);
      X.kt_from_float(type, SIMD, xp, ys, n);
      assert.deepEqual(k.u8(y, rs), js, `${name} ${kind}: C reference vs converter`);
      assert.deepEqual(k.u8(ys, rs), js, `${name} ${kind}: C SIMD vs converter`);
    });
  }
});

test('bf16: ggml round-to-nearest-even incl. ties, NaN, inf, subnormals (SIMD == reference == JS); exact to_float', () => withMark(() => {
  if (T.BF16 === undefined) return;
  const r = rng(74);
  const vals = [0, -0, 1, -1, Infinity, -Infinity, NaN, 3.4028234663852886e38, 1e-45, -1e-40, 1.00390625, 1.01171875, 1.0078125 + 2 ** -20];
  const bits = [0x3f808000, 0x3f818000, 0x3f808001, 0x7f7f8000, 0x7f7fffff, 0x7f800001, 0xffc00001, 0x7fbfffff, 0x00008000, 0x80018000];
  for (let i = 0; i < 20000; i++) vals.push(Math.fround((r.next() - 0.5) * 2 ** r.int(-140, 127)));
  const n = vals.length + bits.length, xp = k.alloc(4 * n), xu = k.u32(xp, n), xf = k.f32(xp, n);
  vals.forEach((v, i) => { xf[i] = v; });
  bits.forEach((b, i) => { xu[vals.length + i] = b; });
  const hr = k.alloc(2 * n), hs = k.alloc(2 * n);
  X.kt_from_float(T.BF16, REF, xp, hr, n);
  X.kt_from_float(T.BF16, SIMD, xp, hs, n);
  const R = k.u16(hr, n), S = k.u16(hs, n), U = Uint32Array.from(k.u32(xp, n));
  for (let i = 0; i < n; i++) {
    const u = U[i], abs = u & 0x7fffffff;
    let want;
    if (abs > 0x7f800000) want = (u >>> 16) | 64;
    else {   // exact RNE on the integer bit pattern
      const hi = u >>> 16, lo = u & 0xffff;
      want = (lo > 0x8000 || (lo === 0x8000 && (hi & 1))) ? hi + 1 : hi;
    }
    assert.equal(R[i], want & 0xffff, `ref 0x${u.toString(16)}`);
    assert.equal(S[i], want & 0xffff, `SIMD 0x${u.toString(16)}`);
  }
  const y = k.alloc(4 * n), yr = k.alloc(4 * n);
  X.kt_to_float(T.BF16, SIMD, hs, y, n);
  X.kt_to_float(T.BF16, REF, hs, yr, n);
  const Y = k.u32(y, n), YR = k.u32(yr, n), H = k.u16(hs, n);
  for (let i = 0; i < n; i++) { assert.equal(Y[i], (H[i] << 16) >>> 0); assert.equal(YR[i], (H[i] << 16) >>> 0); }
  const js = decodeToF32('bf16', k.u8(hs, 2 * n).slice(), n);
  assert.deepEqual(new Uint32Array(js.buffer), Uint32Array.from(Y));
}));
