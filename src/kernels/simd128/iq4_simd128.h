/* Shared pieces of the iq4_nl / iq4_xs SIMD128 kernels (dot_iq4_nl_simd128.c's matvecs and dequantisers,
 * gemm_iq4_simd128.c's prefill tiles; inline only): the value table, the codes' values, the iq4_xs sub-block scales. */
#ifndef AE_IQ4_SIMD128_H
#define AE_IQ4_SIMD128_H
#include "simd128_util.h"

/* the value table and the nibble mask, loaded through an opaque pointer (V8 would rebuild a v128.const per use) */
AE_INLINE void iq4nl_consts(v128 *lut, v128 *m) {
  static const uint8_t k[16] __attribute__((aligned(16))) = {15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15};
  const int8_t *p = AE_IQ4NL_VALUES;
  const uint8_t *q = k;
  __asm__("" : "+r"(p), "+r"(q));
  *lut = wasm_v128_load(p); *m = wasm_v128_load(q);
}

/* iq4_xs: the scale (-32..31) of sub-block ib */
AE_INLINE int iq4xs_scale(const ae_block_iq4_xs *b, int ib) {
  return (((b->scales_l[ib >> 1] >> (4 * (ib & 1))) & 0x0f) | ((b->scales_h >> (2 * ib)) & 3) << 4) - 32;
}

/* the block's values: elements 0..15 (lo), 16..31 (hi) of the 16 code bytes at qs, i8. The indices are 0..15, where the
 * relaxed swizzle is defined on every host (one pshufb in V8; the plain swizzle adds a saturating add of 0x70). */
AE_INLINE v128 iq4_swizzle(v128 lut, v128 idx) {
#if AE_RELAXED
  return ae_rswizzle(lut, idx);
#else
  return wasm_i8x16_swizzle(lut, idx);
#endif
}
AE_INLINE void iq4_values(const uint8_t *qs, v128 lut, v128 m, v128 *lo, v128 *hi) {
  const v128 q = ae_load(qs);
  *lo = iq4_swizzle(lut, wasm_v128_and(q, m));
  *hi = iq4_swizzle(lut, wasm_v128_and(wasm_u16x8_shr(q, 4), m));
}

/* iq4_xs: the 8 sub-block scales (-32..31) as i16 lanes: the low 4 bits (scales_l[ib / 2], the high nibble for odd ib)
 * interleaved by a shuffle; the high 2 (scales_h >> 2 ib) moved to bits 14, 15 of lane ib by one i16 multiply by
 * 2^(14 - 2 ib), then >> 14 (u16) */
AE_INLINE v128 iq4xs_scales8(const ae_block_iq4_xs *b) {
  const v128 L = wasm_v128_load32_zero(b->scales_l), f = wasm_i8x16_splat(0x0f);
  const v128 lo = wasm_i8x16_shuffle(wasm_v128_and(L, f), wasm_v128_and(wasm_u16x8_shr(L, 4), f), 0, 16, 1, 17, 2, 18, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0);
  const v128 hi = wasm_u16x8_shr(wasm_i16x8_mul(wasm_v128_load16_splat(&b->scales_h), wasm_i16x8_make(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)), 14);
  return wasm_i16x8_sub(wasm_v128_or(wasm_u16x8_extend_low_u8x16(lo), wasm_i16x8_shl(hi, 4)), wasm_i16x8_splat(32));
}

#endif
