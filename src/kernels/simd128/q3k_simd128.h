/* Shared pieces of the q3_K SIMD128 kernels (dot_q3_K_simd128.c's matvec, gemm_k_simd128.c's prefill tile; inline
 * only; q2_K's matvec shares q3k_sc16): the 16 sub-block scales, the values u = value + 4 (0..7) of 16 elements from the file layout's two planes or
 * from the relaxed build's AE_Q3_K_X groups (kernels.h), and their masks. */
#ifndef AE_Q3K_SIMD128_H
#define AE_Q3K_SIMD128_H
#include "simd128_util.h"

/* the 16 signed scales (-32..31) of a block as i8 lanes (lane s: sub-block s): byte s of `lo` = the low 4 bits
 * (scales[s % 8], the high nibble for s >= 8); the high 2 bits: byte s of the i32 splat of scales[8..11] is
 * scales[8 + s % 4], and i32 lane g (s = 4 g ..) times 4^(3 - g) puts its bits 2 g, 2 g + 1 at bits 6, 7 of the same
 * byte (lower bytes' bits move only up to bit 5 of the next), >> 6 (u32) and & 3 keep them. */
AE_INLINE v128 q3k_scales(const uint8_t *q) {
  const v128 L = wasm_v128_load64_zero(q), m4 = wasm_i8x16_splat(0x0f);
  const v128 lo = wasm_i8x16_shuffle(wasm_v128_and(L, m4), wasm_v128_and(wasm_u16x8_shr(L, 4), m4), 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const v128 B = wasm_v128_load32_splat(q + 8);
  const v128 hi = wasm_v128_and(wasm_u32x4_shr(wasm_i32x4_mul(B, wasm_i32x4_make(64, 16, 4, 1)), 6), wasm_i8x16_splat(3));
  return wasm_i8x16_sub(wasm_v128_or(lo, wasm_i16x8_shl(hi, 4)), wasm_i8x16_splat(32));   /* hi < 4: no carry */
}
/* the same as i16 in sc[16] (16-byte aligned) */
AE_INLINE void q3k_scales16(const uint8_t *q, int16_t sc[16]) {
  const v128 us = q3k_scales(q);
  wasm_v128_store(sc, wasm_i16x8_extend_low_i8x16(us));
  wasm_v128_store(sc + 8, wasm_i16x8_extend_high_i8x16(us));
}
/* u (0..7) of the 16 elements 128 n + 32 j + 16 half + (0..15): Q = qs[32 n + 16 half ..], H = hmask[16 half ..];
 * m3, m4 = bytes 3 and 4 (q3k_masks) */
AE_INLINE v128 q3k_u(v128 Q, v128 H, int n, int j, v128 m3, v128 m4) {
  const int k = 4 * n + j;
  const v128 low = wasm_v128_and(wasm_u16x8_shr(Q, 2 * j), m3);
  const v128 hb = k <= 2 ? wasm_i16x8_shl(H, 2 - k) : wasm_u16x8_shr(H, k - 2);
  return wasm_v128_or(low, wasm_v128_and(hb, m4));
}
/* the masks, loaded once per call through an opaque pointer (V8 would rebuild a v128.const at every use) */
AE_INLINE void q3k_masks(v128 *m3, v128 *m4) {
  static const uint8_t k[32] __attribute__((aligned(16))) = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
  const uint8_t *p = k;
  __asm__("" : "+r"(p));
  *m3 = ae_load(p); *m4 = ae_load(p + 16);
}

/* U_t of a group g (A, B, C at g, g + 16, g + 32); m7, m3, m4: bytes 7, 3, 4 */
AE_INLINE v128 q3kx_u(const uint8_t *g, int t, v128 m7, v128 m3, v128 m4) {
  switch (t) {
    case 0: return wasm_v128_and(ae_load(g), m7);
    case 1: return wasm_v128_and(wasm_u16x8_shr(ae_load(g), 3), m7);
    case 2: return wasm_v128_and(ae_load(g + 16), m7);
    case 3: return wasm_v128_and(wasm_u16x8_shr(ae_load(g + 16), 3), m7);
    case 4: return wasm_v128_and(ae_load(g + 32), m7);
    case 5: return wasm_v128_and(wasm_u16x8_shr(ae_load(g + 32), 3), m7);
    case 6: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(ae_load(g), 6), m3), wasm_v128_and(wasm_u16x8_shr(ae_load(g + 32), 4), m4));
    default: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(ae_load(g + 16), 6), m3), wasm_v128_and(wasm_u16x8_shr(ae_load(g + 32), 5), m4));
  }
}
AE_INLINE void q3kx_masks(v128 *m7, v128 *m3, v128 *m4) {
  static const uint8_t k[48] __attribute__((aligned(16))) = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
                                                             4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
  const uint8_t *p = k;
  __asm__("" : "+r"(p));
  *m7 = ae_load(p); *m3 = ae_load(p + 16); *m4 = ae_load(p + 32);
}

/* acc + sc sum(u x) over 16 values (q2_K / q3_K matvecs): u unsigned (0..7), sc the i16 scale at *scp (one broadcast
 * load). Relaxed: ae_rdot16 (u the 7-bit operand) against the activation bytes xv, then sc by i32x4.dot_i16x8. Plain:
 * even / odd i16 lanes of x (xe, xo) and u, two i32x4.dot_i16x8, times sc in i32. */
AE_INLINE v128 q3k_sc16(v128 acc, v128 xv, v128 xe, v128 xo, v128 u, const int16_t *scp) {
#if AE_RELAXED
  (void)xe; (void)xo;
  return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(ae_rdot16(xv, u), wasm_v128_load16_splat(scp)));
#else
  (void)xv;
  const v128 d = wasm_i32x4_add(wasm_i32x4_dot_i16x8(xe, wasm_v128_and(u, wasm_i16x8_splat(0x00ff))), wasm_i32x4_dot_i16x8(xo, wasm_u16x8_shr(u, 8)));
  return wasm_i32x4_add(acc, wasm_i32x4_mul(d, wasm_i32x4_extend_low_i16x8(wasm_v128_load16_splat(scp))));
#endif
}

/* The 4 rows' sub-block loop of the q2_K / q3_K matvecs (row k's unsigned values of 16-value sub-block s = 8 nn + 2 j +
 * half are VALUE, an expression of k, nn, j and half): per sub-block the activation vector loaded once (plain: split
 * into even / odd i16 once) for the 4 rows, acc[k] = q3k_sc16(.., sc[k] + s), the 4 sums stored to the volatile sink
 * after each sub-block (keeps the compilers from hoisting every load: spills). */
#if AE_RELAXED
#define Q3K_XSPLIT(xv, xe, xo) const v128 xe = xv, xo = xv   /* unused */
#else
#define Q3K_XSPLIT(xv, xe, xo) const v128 xe = ae_i8_even(xv), xo = ae_i8_odd(xv)
#endif
#define Q3K_SUBBLOCKS4(x, sc, acc, sink, VALUE)                                                                   \
  _Pragma("clang loop unroll(full)")                                                                              \
  for (int nn = 0; nn < 2; nn++)                                                                                  \
    _Pragma("clang loop unroll(full)")                                                                            \
    for (int j = 0; j < 4; j++)                                                                                   \
      _Pragma("clang loop unroll(full)")                                                                          \
      for (int half = 0; half < 2; half++) {                                                                      \
        const int s = 8 * nn + 2 * j + half;                                                                      \
        const v128 xv = ae_load((x)->qs + 16 * s);                                                                \
        Q3K_XSPLIT(xv, xe, xo);                                                                                   \
        _Pragma("clang loop unroll(full)")                                                                        \
        for (int k = 0; k < 4; k++) (acc)[k] = q3k_sc16((acc)[k], xv, xe, xo, (VALUE), (sc)[k] + s);              \
        (sink)[0] = (acc)[0]; (sink)[1] = (acc)[1]; (sink)[2] = (acc)[2]; (sink)[3] = (acc)[3];                   \
      }

#endif
