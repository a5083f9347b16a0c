/**
 * Element conversions and ggml block (de)quantisers, bit-identical to ggml's reference C code
 * (quantize_row_q8_0_ref / quantize_row_q4_0_ref, GGML_FP32_TO_FP16 round-to-nearest-even):
 * every float32 operation of the C code is reproduced with Math.fround.
 *
 * Byte order: little-endian (typed arrays are used directly; every JS/wasm target we run on is LE).
 */
import { AetherError } from '../errors.js';
import { DTYPES, type DTypeName } from './dtypes.js';

/** Source element types the converter reads: the rknot dtypes plus bf16 (safetensors). */
export type SourceDType = DTypeName | 'bf16';

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** float32 bit pattern -> IEEE half bit pattern, round to nearest even (as F16C / ggml_compute_fp32_to_fp16). */
export function f32BitsToF16(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  const mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1) !== 0)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++; // a carry into the exponent is correct (-> inf at the top)
  return sign | h;
}

export function f32ToF16(x: number): number {
  f32buf[0] = x;
  return f32BitsToF16(u32buf[0]);
}

let F16_TABLE: Float32Array | undefined;
/** 65536-entry half -> float table. */
export function f16Table(): Float32Array {
  if (F16_TABLE) return F16_TABLE;
  const t = new Float32Array(65536);
  const tu = new Uint32Array(t.buffer);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    if (exp === 0) {
      t[h] = (mant / 1024) * 2 ** -14 * (sign ? -1 : 1);
      if (mant === 0) tu[h] = sign >>> 0;
    } else if (exp === 31) {
      tu[h] = (sign | 0x7f800000 | (mant << 13)) >>> 0;
    } else {
      tu[h] = (sign | ((exp - 15 + 127) << 23) | (mant << 13)) >>> 0;
    }
  }
  F16_TABLE = t;
  return t;
}

export function f16ToF32(h: number): number {
  return f16Table()[h & 0xffff];
}

/** View `bytes` as elements of a typed array, copying only if the view would be misaligned. */
function viewAs<T>(bytes: Uint8Array, ctor: { new(b: ArrayBufferLike, o: number, n: number): T; BYTES_PER_ELEMENT: number }, n: number): T {
  const need = n * ctor.BYTES_PER_ELEMENT;
  if (bytes.length < need) throw new AetherError('format_error', `buffer of ${bytes.length} bytes is shorter than ${n} elements (${need} bytes)`);
  if (bytes.byteOffset % ctor.BYTES_PER_ELEMENT === 0) return new ctor(bytes.buffer, bytes.byteOffset, n);
  const copy = new Uint8Array(need);
  copy.set(bytes.subarray(0, need));
  return new ctor(copy.buffer, 0, n);
}

/** Error for a non-finite or out-of-range input value (caller adds the tensor name). */
export class ValueError extends Error {
  constructor(readonly index: number, readonly value: number, readonly what: string) {
    super(`${what}: value ${value} at element ${index}`);
  }
}

/** f32 -> f16 bytes. Throws ValueError if a finite value overflows the f16 range (|x| > 65504 after rounding). */
export function encodeF16(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const out = dst ? new Uint16Array(dst.buffer, dst.byteOffset, src.length) : new Uint16Array(src.length);
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) {
    const h = f32BitsToF16(bits[i]);
    if ((h & 0x7c00) === 0x7c00 && Number.isFinite(src[i])) throw new ValueError(i, src[i], 'overflows the f16 range');
    out[i] = h;
  }
  return new Uint8Array(out.buffer, out.byteOffset, src.length * 2);
}

const fround = Math.fround;

/** C roundf: half away from zero, for |x| small (exact in double). */
function roundf(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5);
}

function checkFinite(src: Float32Array, what: string): void {
  for (let i = 0; i < src.length; i++) {
    const v = src[i];
    if (v !== v || v === Infinity || v === -Infinity) throw new ValueError(i, v, what);
  }
}

/** ggml quantize_row_q8_0_ref. src.length must be a multiple of 32. */
export function quantizeQ8_0(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const nb = src.length / 32;
  if (!Number.isInteger(nb)) throw new AetherError('invalid_argument', `q8_0: ${src.length} elements is not a multiple of 32`);
  checkFinite(src, 'non-finite input to q8_0');
  const out = dst ?? new Uint8Array(nb * 34);
  for (let b = 0; b < nb; b++) {
    const x = b * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) {
      const v = Math.abs(src[x + j]);
      if (v > amax) amax = v;
    }
    const d = fround(amax / 127);
    const id = d !== 0 ? fround(1 / d) : 0;
    const o = b * 34;
    const h = f32ToF16(d);
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < 32; j++) out[o + 2 + j] = roundf(fround(src[x + j] * id)) & 0xff;
  }
  return out;
}

/** ggml quantize_row_q4_0_ref. Low nibbles hold elements 0..15 of a block, high nibbles 16..31. */
export function quantizeQ4_0(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const nb = src.length / 32;
  if (!Number.isInteger(nb)) throw new AetherError('invalid_argument', `q4_0: ${src.length} elements is not a multiple of 32`);
  checkFinite(src, 'non-finite input to q4_0');
  const out = dst ?? new Uint8Array(nb * 18);
  for (let b = 0; b < nb; b++) {
    const x = b * 32;
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const v = src[x + j];
      const a = Math.abs(v);
      if (amax < a) { amax = a; max = v; }
    }
    const d = fround(max / -8);
    const id = d !== 0 ? fround(1 / d) : 0;
    const o = b * 18;
    const h = f32ToF16(d);
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < 16; j++) {
      const x0 = fround(src[x + j] * id);
      const x1 = fround(src[x + 16 + j] * id);
      const xi0 = Math.min(15, Math.trunc(fround(x0 + 8.5)));
      const xi1 = Math.min(15, Math.trunc(fround(x1 + 8.5)));
      out[o + 2 + j] = xi0 | (xi1 << 4);
    }
  }
  return out;
}

/** ggml quantize_row_q5_0_ref: d = max / -16 (max = value of largest magnitude), q = min(31, (int8)(x/d + 16.5)). */
export function quantizeQ5_0(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const nb = src.length / 32;
  if (!Number.isInteger(nb)) throw new AetherError('invalid_argument', `q5_0: ${src.length} elements is not a multiple of 32`);
  checkFinite(src, 'non-finite input to q5_0');
  const out = dst ?? new Uint8Array(nb * 22);
  const q = new Int32Array(32);
  for (let b = 0; b < nb; b++) {
    const x = b * 32;
    let amax = 0, max = 0;
    for (let j = 0; j < 32; j++) {
      const v = src[x + j], a = Math.abs(v);
      if (amax < a) { amax = a; max = v; }
    }
    const d = fround(max / -16);
    const id = d !== 0 ? fround(1 / d) : 0;
    for (let j = 0; j < 32; j++) q[j] = Math.min(31, Math.trunc(fround(fround(src[x + j] * id) + 16.5)));
    putQ5(out, b * 22, f32ToF16(d), -1, q);
  }
  return out;
}

/** ggml quantize_row_q4_1_ref / q5_1_ref: d = (max - min) / (2^bits - 1), m = min, q = (int)((x - min) / d + 0.5). */
function quantizeMin(src: Float32Array, bits: 4 | 5, dst?: Uint8Array): Uint8Array {
  const name = bits === 4 ? 'q4_1' : 'q5_1', ts = bits === 4 ? 20 : 24, top = (1 << bits) - 1;
  const nb = src.length / 32;
  if (!Number.isInteger(nb)) throw new AetherError('invalid_argument', `${name}: ${src.length} elements is not a multiple of 32`);
  checkFinite(src, `non-finite input to ${name}`);
  const out = dst ?? new Uint8Array(nb * ts);
  const q = new Int32Array(32);
  for (let b = 0; b < nb; b++) {
    const x = b * 32;
    let min = 3.4028234663852886e38, max = -3.4028234663852886e38;
    for (let j = 0; j < 32; j++) { const v = src[x + j]; if (v < min) min = v; if (v > max) max = v; }
    const d = fround(fround(max - min) / top);
    const id = d !== 0 ? fround(1 / d) : 0;
    for (let j = 0; j < 32; j++) q[j] = Math.min(top, Math.trunc(fround(fround(fround(src[x + j] - min) * id) + 0.5)));
    const o = b * ts;
    if (bits === 4) {
      const h = f32ToF16(d), m = f32ToF16(min);
      out[o] = h & 0xff; out[o + 1] = h >>> 8; out[o + 2] = m & 0xff; out[o + 3] = m >>> 8;
      for (let j = 0; j < 16; j++) out[o + 4 + j] = q[j] | (q[j + 16] << 4);
    } else putQ5(out, o, f32ToF16(d), f32ToF16(min), q);
  }
  return out;
}
export function quantizeQ4_1(src: Float32Array, dst?: Uint8Array): Uint8Array { return quantizeMin(src, 4, dst); }
export function quantizeQ5_1(src: Float32Array, dst?: Uint8Array): Uint8Array { return quantizeMin(src, 5, dst); }

/** One q5_0 (m < 0) or q5_1 block at out[o]: d, [m], qh (5th bits, little-endian u32), nibbles. */
function putQ5(out: Uint8Array, o: number, d: number, m: number, q: Int32Array): void {
  out[o] = d & 0xff; out[o + 1] = d >>> 8;
  if (m >= 0) { out[o + 2] = m & 0xff; out[o + 3] = m >>> 8; o += 2; }
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    out[o + 6 + j] = (q[j] & 0xf) | ((q[j + 16] & 0xf) << 4);
    qh |= ((q[j] >>> 4) & 1) << j;
    qh |= ((q[j + 16] >>> 4) & 1) << (j + 16);
  }
  out[o + 2] = qh & 0xff; out[o + 3] = (qh >>> 8) & 0xff; out[o + 4] = (qh >>> 16) & 0xff; out[o + 5] = (qh >>> 24) & 0xff;
}

/** Round to nearest, ties to even (ggml nearest_int). */
function rne(v: number): number {
  const f = Math.floor(v), d = v - f;
  return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
}

/**
 * q5_K with the project's simple (non-iterative) quantiser, bit-identical to ae_from_float_q5_K_ref
 * (src/kernels/ref/q5_K_ref.c): per 32-element sub-block offset = min(0, min x), scale = (max - offset) / 31;
 * d, dmin = largest scale / offset over 63, 6-bit sub-block scales and mins. Not ggml's search-based
 * make_qkx2_quants (which picks slightly better scales); the block layout is ggml's.
 */
export function quantizeQ5_K(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const nb = src.length / 256;
  if (!Number.isInteger(nb)) throw new AetherError('invalid_argument', `q5_K: ${src.length} elements is not a multiple of 256`);
  checkFinite(src, 'non-finite input to q5_K');
  const out = dst ?? new Uint8Array(nb * 176);
  const scale = new Float64Array(8), mn = new Float64Array(8), sc = new Int32Array(8), m = new Int32Array(8);
  const t16 = f16Table();
  for (let b = 0; b < nb; b++) {
    const x = b * 256, o = b * 176;
    let maxScale = 0, maxMin = 0;
    for (let j = 0; j < 8; j++) {
      let lo = 0, hi = src[x + 32 * j];
      for (let l = 0; l < 32; l++) { const t = src[x + 32 * j + l]; if (t < lo) lo = t; if (t > hi) hi = t; }
      scale[j] = fround(fround(hi - lo) / 31);
      mn[j] = -lo;
      if (scale[j] > maxScale) maxScale = scale[j];
      if (mn[j] > maxMin) maxMin = mn[j];
    }
    const dh = f32ToF16(fround(maxScale / 63)), mh = f32ToF16(fround(maxMin / 63));
    out[o] = dh & 0xff; out[o + 1] = dh >>> 8; out[o + 2] = mh & 0xff; out[o + 3] = mh >>> 8;
    const df = t16[dh], dminf = t16[mh];
    for (let j = 0; j < 8; j++) {
      sc[j] = df > 0 ? Math.max(0, Math.min(63, rne(fround(scale[j] / df)))) : 0;
      m[j] = dminf > 0 ? Math.max(0, Math.min(63, rne(fround(mn[j] / dminf)))) : 0;
    }
    for (let j = 0; j < 4; j++) {
      out[o + 4 + j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
      out[o + 8 + j] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
      out[o + 12 + j] = (sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4);
    }
    out.fill(0, o + 16, o + 176);
    for (let j = 0; j < 8; j++) {
      const d1 = fround(df * sc[j]), m1 = fround(dminf * m[j]);
      for (let l = 0; l < 32; l++) {
        let t = d1 > 0 ? rne(fround(fround(src[x + 32 * j + l] + m1) / d1)) : 0;
        t = t < 0 ? 0 : t > 31 ? 31 : t;
        out[o + 48 + 32 * (j >> 1) + l] |= (t & 0xf) << (4 * (j & 1));
        out[o + 16 + l] |= (t >> 4) << j;
      }
    }
  }
  return out;
}

/** f32 -> bf16 bytes as ggml's GGML_FP32_TO_BF16 (round to nearest even; NaN -> quiet NaN). */
export function encodeBF16(src: Float32Array, dst?: Uint8Array): Uint8Array {
  const out = dst ? new Uint16Array(dst.buffer, dst.byteOffset, src.length) : new Uint16Array(src.length);
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) {
    const u = bits[i];
    out[i] = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 64 : ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return new Uint8Array(out.buffer, out.byteOffset, src.length * 2);
}

function u16(b: Uint8Array, o: number): number {
  return b[o] | (b[o + 1] << 8);
}

/** Decode `n` elements of `dtype` from `bytes` to float32 (dequantise block formats as ggml's dequantize_row_*). */
export function decodeToF32(dtype: SourceDType, bytes: Uint8Array, n: number, out?: Float32Array): Float32Array {
  const y = out ?? new Float32Array(n);
  switch (dtype) {
    case 'f32': {
      y.set(viewAs(bytes, Float32Array, n));
      return y;
    }
    case 'f16': {
      const t = f16Table();
      const h = viewAs(bytes, Uint16Array, n);
      for (let i = 0; i < n; i++) y[i] = t[h[i]];
      return y;
    }
    case 'bf16': {
      const h = viewAs(bytes, Uint16Array, n);
      const yu = new Uint32Array(y.buffer, y.byteOffset, n);
      for (let i = 0; i < n; i++) yu[i] = h[i] << 16;
      return y;
    }
    case 'q8_0': {
      const t = f16Table();
      const nb = n / 32;
      for (let b = 0; b < nb; b++) {
        const o = b * 34;
        const d = t[u16(bytes, o)];
        for (let j = 0; j < 32; j++) y[b * 32 + j] = fround(d * ((bytes[o + 2 + j] << 24) >> 24));
      }
      return y;
    }
    case 'q4_0': {
      const t = f16Table();
      const nb = n / 32;
      for (let b = 0; b < nb; b++) {
        const o = b * 18;
        const d = t[u16(bytes, o)];
        for (let j = 0; j < 16; j++) {
          const q = bytes[o + 2 + j];
          y[b * 32 + j] = fround(((q & 0xf) - 8) * d);
          y[b * 32 + 16 + j] = fround(((q >>> 4) - 8) * d);
        }
      }
      return y;
    }
    case 'q5_0': case 'q5_1': case 'q4_1': {
      // ggml dequantize_row_q5_0 / q5_1 / q4_1: x = (q - 16) * d, or q * d + m
      const t = f16Table();
      const dn: string = dtype, five = dn !== 'q4_1', min = dn !== 'q5_0';
      const ts = dn === 'q5_0' ? 22 : dn === 'q5_1' ? 24 : 20;
      const nb = n / 32;
      for (let b = 0; b < nb; b++) {
        const o = b * ts;
        const d = t[u16(bytes, o)], m = min ? t[u16(bytes, o + 2)] : 0;
        const qo = o + (min ? 4 : 2);
        const qh = five ? (bytes[qo] | (bytes[qo + 1] << 8) | (bytes[qo + 2] << 16) | (bytes[qo + 3] << 24)) >>> 0 : 0;
        const qs = qo + (five ? 4 : 0);
        for (let j = 0; j < 16; j++) {
          const q0 = (bytes[qs + j] & 0xf) | (((qh >>> j) & 1) << 4), q1 = (bytes[qs + j] >>> 4) | (((qh >>> (j + 16)) & 1) << 4);
          if (min) { y[b * 32 + j] = fround(fround(q0 * d) + m); y[b * 32 + 16 + j] = fround(fround(q1 * d) + m); }
          else { y[b * 32 + j] = fround((q0 - 16) * d); y[b * 32 + 16 + j] = fround((q1 - 16) * d); }
        }
      }
      return y;
    }
    case 'q5_K': {
      // ggml dequantize_row_q5_K: q4_K's scales, 5th bit of element 32 j + l in bit j of qh[l]
      const t = f16Table();
      const nb = n / 256;
      for (let b = 0; b < nb; b++) {
        const o = b * 176, sc = o + 4, qh = o + 16, qs = o + 48;
        const d = t[u16(bytes, o)], dmin = t[u16(bytes, o + 2)];
        for (let j = 0; j < 8; j++) {
          const s = j < 4 ? bytes[sc + j] & 63 : (bytes[sc + j + 4] & 0xf) | ((bytes[sc + j - 4] >>> 6) << 4);
          const mm = j < 4 ? bytes[sc + j + 4] & 63 : (bytes[sc + j + 4] >>> 4) | ((bytes[sc + j] >>> 6) << 4);
          const d1 = fround(d * s), m1 = fround(dmin * mm);
          for (let l = 0; l < 32; l++) {
            const byte = bytes[qs + 32 * (j >> 1) + l];
            const q = ((j & 1) ? byte >>> 4 : byte & 0xf) | (((bytes[qh + l] >>> j) & 1) << 4);
            y[b * 256 + 32 * j + l] = fround(fround(d1 * q) - m1);
          }
        }
      }
      return y;
    }
    case 'iq4_nl': {
      // ggml dequantize_row_iq4_nl: x = d * kvalues_iq4nl[code], codes as q4_0's nibbles (src/kernels/ref/iq4_nl_ref.c)
      const t = f16Table();
      const V = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
      for (let b = 0; b < n / 32; b++) {
        const o = b * 18, d = t[u16(bytes, o)];
        for (let j = 0; j < 16; j++) {
          y[b * 32 + j] = fround(d * V[bytes[o + 2 + j] & 15]);
          y[b * 32 + 16 + j] = fround(d * V[bytes[o + 2 + j] >>> 4]);
        }
      }
      return y;
    }
    case 'iq4_xs': {
      // ggml dequantize_row_iq4_xs: sub-block ib of 32: (d * (ls - 32)) * kvalues_iq4nl[code] (src/kernels/ref/iq4_xs_ref.c)
      const t = f16Table();
      const V = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
      for (let b = 0; b < n / 256; b++) {
        const o = b * 136, d = t[u16(bytes, o)], sh = u16(bytes, o + 2);
        for (let ib = 0; ib < 8; ib++) {
          const ls = ((bytes[o + 4 + (ib >> 1)] >>> (4 * (ib & 1))) & 15) | (((sh >>> (2 * ib)) & 3) << 4);
          const dl = fround(d * (ls - 32));
          for (let j = 0; j < 16; j++) {
            const q = bytes[o + 8 + 16 * ib + j];
            y[b * 256 + 32 * ib + j] = fround(dl * V[q & 15]);
            y[b * 256 + 32 * ib + 16 + j] = fround(dl * V[q >>> 4]);
          }
        }
      }
      return y;
    }
    case 'q2_K': {
      // ggml dequantize_row_q2_K: element 128 n + 32 j + l = (d * sc_s) * q - dmin * m_s, q = 2 bits of qs[32 n + l] >> 2j,
      // sc_s / m_s the low / high nibble of scales[s], s = e / 16 (src/kernels/ref/q2_K_ref.c)
      const t = f16Table();
      for (let b = 0; b < n / 256; b++) {
        const o = b * 84, d = t[u16(bytes, o + 80)], dmin = t[u16(bytes, o + 82)];
        for (let s = 0; s < 16; s++) {
          const dl = fround(d * (bytes[o + s] & 15)), ml = fround(dmin * (bytes[o + s] >>> 4));
          for (let i = 0; i < 16; i++) {
            const e = 16 * s + i, q = (bytes[o + 16 + 32 * (e >> 7) + (e & 31)] >>> (2 * ((e >> 5) & 3))) & 3;
            y[b * 256 + e] = fround(fround(dl * q) - ml);
          }
        }
      }
      return y;
    }
    case 'q3_K': {
      // ggml dequantize_row_q3_K: element 128 n + 32 j + l = (d * (us - 32)) * (u - 4), u = 2 bits of qs[32 n + l] >> 2j
      // | bit 4n + j of hmask[l] << 2, us the 6-bit scale of sub-block e / 16 (src/kernels/ref/q3_K_ref.c)
      const t = f16Table();
      const nb = n / 256;
      for (let b = 0; b < nb; b++) {
        const o = b * 110, d = t[u16(bytes, o + 108)];
        for (let s = 0; s < 16; s++) {
          const us = ((bytes[o + 96 + (s & 7)] >>> (4 * (s >> 3))) & 15) | (((bytes[o + 104 + (s & 3)] >>> (2 * (s >> 2))) & 3) << 4);
          const dl = fround(d * (us - 32));
          for (let i = 0; i < 16; i++) {
            const e = 16 * s + i, nn = e >> 7, j = (e >> 5) & 3, l = e & 31;
            const u = ((bytes[o + 32 + 32 * nn + l] >>> (2 * j)) & 3) | (((bytes[o + l] >>> (4 * nn + j)) & 1) << 2);
            y[b * 256 + e] = fround(dl * (u - 4));
          }
        }
      }
      return y;
    }
    case 'q4_K': {
      const t = f16Table();
      const nb = n / 256;
      for (let b = 0; b < nb; b++) {
        const o = b * 144;
        const d = t[u16(bytes, o)];
        const dmin = t[u16(bytes, o + 2)];
        const sc = o + 4;   // 12 bytes of packed 6-bit scales and mins
        let q = o + 16;     // 128 bytes of nibbles
        let yi = b * 256;
        for (let j = 0, is = 0; j < 256; j += 64, is += 2) {
          for (let k = 0; k < 2; k++) {
            const jj = is + k;
            let s: number, m: number;
            if (jj < 4) {
              s = bytes[sc + jj] & 63;
              m = bytes[sc + jj + 4] & 63;
            } else {
              s = (bytes[sc + jj + 4] & 0xf) | ((bytes[sc + jj - 4] >>> 6) << 4);
              m = (bytes[sc + jj + 4] >>> 4) | ((bytes[sc + jj] >>> 6) << 4);
            }
            const d1 = fround(d * s);
            const m1 = fround(dmin * m);
            for (let l = 0; l < 32; l++) {
              const nib = k === 0 ? bytes[q + l] & 0xf : bytes[q + l] >>> 4;
              y[yi++] = fround(fround(d1 * nib) - m1);
            }
          }
          q += 32;
        }
      }
      return y;
    }
    case 'q6_K': {
      const t = f16Table();
      const nb = n / 256;
      for (let b = 0; b < nb; b++) {
        const o = b * 210;
        const d = t[u16(bytes, o + 208)];
        let ql = o;
        let qh = o + 128;
        let sc = o + 192;
        let yi = b * 256;
        for (let half = 0; half < 2; half++) {
          for (let l = 0; l < 32; l++) {
            const is = l >> 4;
            const h = bytes[qh + l];
            const q1 = ((bytes[ql + l] & 0xf) | ((h & 3) << 4)) - 32;
            const q2 = ((bytes[ql + l + 32] & 0xf) | (((h >>> 2) & 3) << 4)) - 32;
            const q3 = ((bytes[ql + l] >>> 4) | (((h >>> 4) & 3) << 4)) - 32;
            const q4 = ((bytes[ql + l + 32] >>> 4) | (((h >>> 6) & 3) << 4)) - 32;
            const s = (i: number) => (bytes[sc + i] << 24) >> 24;
            y[yi + l] = fround(fround(d * s(is)) * q1);
            y[yi + l + 32] = fround(fround(d * s(is + 2)) * q2);
            y[yi + l + 64] = fround(fround(d * s(is + 4)) * q3);
            y[yi + l + 96] = fround(fround(d * s(is + 6)) * q4);
          }
          yi += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
      }
      return y;
    }
  }
  throw new AetherError('unsupported', `cannot decode ${dtype}`);
}

/**
 * Encode float32 values as `dtype` (every weight dtype but q4_K / q6_K can be produced; q5_K with a simple quantiser), into `dst` when given
 * (at least the encoded size; the result is a view of it).
 */
export function encodeFromF32(dtype: DTypeName, src: Float32Array, dst?: Uint8Array): Uint8Array {
  switch (dtype) {
    case 'f32': return new Uint8Array(src.buffer, src.byteOffset, src.length * 4);
    case 'f16': return encodeF16(src, dst);
    case 'q8_0': return quantizeQ8_0(src, dst?.subarray(0, src.length / 32 * 34));
    case 'q4_0': return quantizeQ4_0(src, dst?.subarray(0, src.length / 32 * 18));
    case 'q5_0': return quantizeQ5_0(src, dst?.subarray(0, src.length / 32 * 22));
    case 'q4_1': return quantizeQ4_1(src, dst?.subarray(0, src.length / 32 * 20));
    case 'q5_1': return quantizeQ5_1(src, dst?.subarray(0, src.length / 32 * 24));
    case 'q5_K': return quantizeQ5_K(src, dst?.subarray(0, src.length / 256 * 176));
    case 'bf16': return encodeBF16(src, dst);
    default: throw new AetherError('unsupported', `cannot quantise to ${dtype} (the converter produces f32, f16, bf16, q8_0, q5_0, q5_1, q4_0, q4_1, q5_K)`);
  }
}

/** Byte size of n elements of a source dtype (n a multiple of the block size). */
export function sourceBytes(dtype: SourceDType, n: number): number {
  if (dtype === 'bf16') return n * 2;
  const t = DTYPES[dtype];
  return (n / t.blockSize) * t.typeSize;
}

/**
 * Convert `n` elements from `from` to `to`. Same dtype: the bytes are returned unchanged (no requantisation).
 */
export function convertElements(from: SourceDType, to: DTypeName, bytes: Uint8Array, n: number, scratch?: ConvertScratch): Uint8Array {
  if (from === to) return bytes;
  if (!scratch) return encodeFromF32(to, decodeToF32(from, bytes, n));
  const f = from === 'f32' && bytes.byteOffset % 4 === 0 ? new Float32Array(bytes.buffer, bytes.byteOffset, n) : decodeToF32(from, bytes, n, scratch.f32(n));
  return encodeFromF32(to, f, to === 'f32' ? undefined : scratch.out(n * 4));
}

/**
 * Reusable buffers for chunked conversion: fresh allocations cost page faults on every chunk (expensive
 * on some VMs), so the converter reuses these. A result of convertElements that is a view of a scratch
 * buffer is valid until the next call.
 */
export class ConvertScratch {
  private a = new Float32Array(0);
  private b = new Uint8Array(0);
  private c = new Uint8Array(0);
  f32(n: number): Float32Array {
    if (this.a.length < n) this.a = new Float32Array(n);
    return this.a.subarray(0, n);
  }
  out(bytes: number): Uint8Array {
    if (this.b.length < bytes) this.b = new Uint8Array(bytes);
    return this.b.subarray(0, bytes);
  }
  input(bytes: number): Uint8Array {
    if (this.c.length < bytes) this.c = new Uint8Array(bytes);
    return this.c.subarray(0, bytes);
  }
}

/**
 * Index of the first block whose f16 scale(s) are NaN or Inf, scanning blocks [fromBlock, toBlock) of a
 * buffer that starts at block 0; -1 if all are finite. Non-block dtypes: always -1.
 */
export function findBadScale(dtype: DTypeName, bytes: Uint8Array, fromBlock = 0, toBlock = -1): number {
  const t = DTYPES[dtype];
  const offs = t.scaleOffsets;
  if (!offs) return -1;
  const end = toBlock < 0 ? Math.floor(bytes.length / t.typeSize) : toBlock;
  const ts = t.typeSize;
  if (offs.length === 1) {
    const so = offs[0];
    for (let b = fromBlock, o = fromBlock * ts + so; b < end; b++, o += ts) {
      if ((bytes[o + 1] & 0x7c) === 0x7c) return b;
    }
    return -1;
  }
  for (let b = fromBlock; b < end; b++) {
    for (const so of offs) if ((bytes[b * ts + so + 1] & 0x7c) === 0x7c) return b;
  }
  return -1;
}
