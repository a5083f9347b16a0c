/* q5_1 weights x q8_1 activations, plus q5_1 quantise (the reference quantiser) / dequantise: the kernels of
 * q32_min_simd128.inc over blocks whose 5-bit quants (nibbles | 5th bit from qh) are expanded to bytes. */
#include "q32_simd128.h"

AE_INLINE void expand(const ae_block_q5_1 *b, v128 *w0, v128 *w1) {
  const v128 qs = ae_load(b->qs);
  v128 h0, h1;
  ae_q32_qh(b->qh, &h0, &h1);
  *w0 = wasm_v128_or(ae_q32_lo(qs), h0);
  *w1 = wasm_v128_or(ae_q32_hi(qs), h1);
}

#define AE_Q32M q5_1
#include "q32_min_simd128.inc"

/* ---- the load-time layout AE_Q5_1_X8 (kernels.h): q5_0's X8 bytes after d and m (q32_simd128.h ae_q5_0_x8_load at
 * offset 2), the same matvec with its sums divided by 2^11 and 16 sum(x) added back. */
static void load_x8(const uint8_t *blk, v128 *w0, v128 *w1) { ae_q5_0_x8_load(blk + 2, w0, w1); }
void ae_matvec_rows_q5_1_x8_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
#if AE_RELAXED   /* the unsigned values through the relaxed dot (q32_simd128.h ae_q5_1_x8r_matvec4) */
  /* two specialisations: the fused dot (kernels.h ae_fused_dot; 1.1x from DRAM in Chromium 156) or the i16 one */
  if (ae_fused_dot & AE_FUSED_TILES) ae_q5_1_x8r_matvec4((const ae_block_q5_1 *)W, ncols / AE_QK5_1, (const ae_block_q8_1 *)xq, y, r0, r1, 1);
  else ae_q5_1_x8r_matvec4((const ae_block_q5_1 *)W, ncols / AE_QK5_1, (const ae_block_q8_1 *)xq, y, r0, r1, 0);
  return;
#endif
  q32m_matvec(W, ncols, xq, y, r0, r1, load_x8, 1);
}
void ae_repack_q5_1_x8(void *W, size_t nblocks) { ae_q5_x8_repack(W, nblocks, sizeof(ae_block_q5_1), 4); }
