/* q5_0 weights x q8_0 activations, plus q5_0 quantise (the reference quantiser) / dequantise.
 * Per block the 5-bit quants are expanded to signed bytes q - 16 (nibbles | 5th bit from qh), the exact
 * integer dot is formed against the activation split once per column chunk (q32_simd128.h), then
 *   acc += (float)sumi * (d_w * d_x)      (block order; exactly ae_vec_dot_q5_0_ref)
 * so any row range gives the reference's bits. The matvec is the 4-rows-in-lanes one of q32_simd128.h
 * (ae_q32_matvec4: one row from each quarter of the range per lane, float step on the lanes; session 8, from DRAM:
 * 1.2-1.6x the earlier 4 consecutive rows with a scalar float step per block and row). Still compute-bound (1.5-3.6
 * GB/s against a ~9 GB/s read probe: the 5th-bit expansion costs about as much as the dot). */
#include "q32_simd128.h"

void ae_from_float_q5_0_simd128(const float *x, void *y, int n) { ae_from_float_q5_0_ref(x, y, n); }

AE_INLINE void expand(const ae_block_q5_0 *b, v128 *w0, v128 *w1) {
  v128 h0, h1;
  ae_q32_qh(b->qh, &h0, &h1);
  const v128 qs = ae_load(b->qs), sixteen = wasm_i8x16_splat(16);
  *w0 = wasm_i8x16_sub(wasm_v128_or(ae_q32_lo(qs), h0), sixteen);
  *w1 = wasm_i8x16_sub(wasm_v128_or(ae_q32_hi(qs), h1), sixteen);
}

void ae_to_float_q5_0_simd128(const void *x, float *y, int n) {
  const ae_block_q5_0 *b = (const ae_block_q5_0 *)x;
  for (int i = 0; i < n / AE_QK5_0; i++) {
    v128 w0, w1;
    expand(&b[i], &w0, &w1);
    ae_q32_store(y + i * AE_QK5_0, w0, w1, ae_h2f_s(b[i].d), 0.0f, 0);
  }
}

static void load_q5_0(const uint8_t *blk, v128 *w0, v128 *w1) { expand((const ae_block_q5_0 *)blk, w0, w1); }

void ae_matvec_rows_q5_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ae_q32_matvec4((const uint8_t *)W, sizeof(ae_block_q5_0), ncols / AE_QK5_0, (const ae_block_q8_0 *)xq, y, r0, r1, load_q5_0, 8);
}

void ae_vec_dot_q5_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q5_0_simd128(w, n, x, s, 0, 1);
}

/* ---- the load-time layout AE_Q5_0_X8 (kernels.h): 8 expansion operations instead of 17 (q32_simd128.h
 * ae_q5_0_x8_load); the same matvec, its sums divided by 2^11. */
void ae_matvec_rows_q5_0_x8_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ae_q32_matvec4((const uint8_t *)W, sizeof(ae_block_q5_0), ncols / AE_QK5_0, (const ae_block_q8_0 *)xq, y, r0, r1,
                 ae_q5_0_x8_load, 11);
}

void ae_repack_q5_0_x8(void *W, size_t nblocks) { ae_q5_x8_repack(W, nblocks, sizeof(ae_block_q5_0), 2); }
