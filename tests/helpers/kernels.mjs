// Test helpers of the kernel tests: the shared kernels-test harness (bench/lib/kernels.mjs) plus exact
// JS fp16 references and random blocks of every registry dtype.
import assert from 'node:assert/strict';
import { encodeFromF32 } from '../../dist/src/formats/quantize.js';
import { BLOCK, ROW, T, TYPE_NAMES, loadKernels } from '../../bench/lib/kernels.mjs';

export * from '../../bench/lib/kernels.mjs';

// ---- fp16 helpers (JS reference, exact) ----
const f32buf = new Float32Array(1), u32buf = new Uint32Array(f32buf.buffer);
export function f32bits(f) { f32buf[0] = f; return u32buf[0]; }
/** Same float32 bits (any NaN equals any NaN). */
export function sameBits(a, b) { return (Number.isNaN(a) && Number.isNaN(b)) || f32bits(a) === f32bits(b); }
/** Fails on the first element whose bits differ, naming it and both values (with their bits). */
export function assertBitsEqual(a, b, what) {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++)
    if (!sameBits(a[i], b[i])) assert.fail(`${what}: element ${i}: ${a[i]} (0x${f32bits(a[i]).toString(16)}) != ${b[i]} (0x${f32bits(b[i]).toString(16)})`);
}
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


/**
 * An `encode` for generateModel (tests/helpers/gen-model.mjs): the bytes of `dtypes` (the ones the JS converter cannot
 * produce: q3_K, q4_K, q5_K, q6_K) from the C reference quantiser; undefined for the others (the converter's own).
 */
export async function cEncoder(dtypes) {
  const k = await loadKernels({ pages: 512 });
  const want = new Set(dtypes);
  return (dtype, values) => {
    if (!want.has(dtype)) return undefined;
    const t = +Object.keys(TYPE_NAMES).find((id) => TYPE_NAMES[id] === dtype), mk = k.mark();
    try {
      const x = k.putF32(values), rs = k.rowSize(t, values.length), y = k.alloc(rs);
      k.x.kt_from_float(t, 1, x, y, values.length);
      return k.u8(y, rs).slice();
    } finally { k.release(mk); }
  };
}
