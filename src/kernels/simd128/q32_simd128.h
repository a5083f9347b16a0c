/* Shared pieces of the SIMD128 kernels of the 32-element block dtypes q5_0, q4_1, q5_1 (dot_q5_0_simd128.c,
 * dot_q4_1_simd128.c, dot_q5_1_simd128.c; inline only): the activation block (q8_0 / q8_1 quants) split
 * into even / odd i16 once per column chunk, the expansion of 4/5-bit weights to bytes, and the exact
 * integer block dot. */
#ifndef AE_Q32_SIMD128_H
#define AE_Q32_SIMD128_H
#include "simd128_util.h"

#define AE_Q32_CHUNK 128   /* blocks per column chunk: 128 * (64 + 8) B = 9 KiB of stack */

/* even / odd i16 of activation quants 0..15 (e0, o0) and 16..31 (e1, o1) */
typedef struct { v128 e0, o0, e1, o1; } ae_q32x;

AE_INLINE void ae_q32_prep(const int8_t *qs, ae_q32x *x) {
  const v128 a = ae_load(qs), c = ae_load(qs + 16);
  x->e0 = ae_i8_even(a); x->o0 = ae_i8_odd(a);
  x->e1 = ae_i8_even(c); x->o1 = ae_i8_odd(c);
}

/* Exact sum(w x) of one block: w0, w1 = signed bytes of elements 0..15 and 16..31 (|w| < 128). With i16
 * lanes b0 | b1 << 8, (w << 8) = 256 b0 and (w & 0xff00) = 256 b1, so the i16 dots give 256 sum(w x). */
AE_INLINE int32_t ae_q32_dot(v128 w0, v128 w1, const ae_q32x *x) {
  const v128 hi = wasm_i16x8_splat((int16_t)0xff00);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(w0, 8), x->e0), wasm_i32x4_dot_i16x8(wasm_v128_and(w0, hi), x->o0));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(w1, 8), x->e1), wasm_i32x4_dot_i16x8(wasm_v128_and(w1, hi), x->o1));
  return ae_hsum_i32(wasm_i32x4_add(s0, s1)) >> 8;
}

/* Low nibbles (elements 0..15) and high nibbles (16..31) of 16 packed bytes. */
AE_INLINE v128 ae_q32_lo(v128 qs) { return wasm_v128_and(qs, wasm_i8x16_splat(0x0f)); }
AE_INLINE v128 ae_q32_hi(v128 qs) { return wasm_u8x16_shr(qs, 4); }

/* 5th bits: bit e of the little-endian u32 at qh as 0x10 in byte e of h0 (e < 16) / h1 (e - 16). */
AE_INLINE void ae_q32_qh(const uint8_t *qh, v128 *h0, v128 *h1) {
  const v128 v = wasm_v128_load32_splat(qh);
  const v128 bits = wasm_i8x16_const(1, 2, 4, 8, 16, 32, 64, (int8_t)128, 1, 2, 4, 8, 16, 32, 64, (int8_t)128);
  const v128 a = wasm_i8x16_shuffle(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const v128 b = wasm_i8x16_shuffle(v, v, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const v128 s = wasm_i8x16_splat(0x10);
  *h0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(a, bits), bits), s);
  *h1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(b, bits), bits), s);
}

/* Dequantise one block of expanded bytes w0, w1 (signed, elements 0..15 / 16..31): o[e] = w[e] * d + m
 * (with_min) or w[e] * d, in f32 (the reference's operations per element). */
AE_INLINE void ae_q32_store(float *o, v128 w0, v128 w1, float d, float m, int with_min) {
  const v128 dv = wasm_f32x4_splat(d), mv = wasm_f32x4_splat(m);
  const v128 h[4] = {wasm_i16x8_extend_low_i8x16(w0), wasm_i16x8_extend_high_i8x16(w0),
                     wasm_i16x8_extend_low_i8x16(w1), wasm_i16x8_extend_high_i8x16(w1)};
  for (int k = 0; k < 4; k++) {
    v128 a = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h[k])), dv);
    v128 b = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h[k])), dv);
    if (with_min) { a = wasm_f32x4_add(a, mv); b = wasm_f32x4_add(b, mv); }
    ae_store(o + 8 * k, a);
    ae_store(o + 8 * k + 4, b);
  }
}

#endif
