/* q8_0 weights x q8_0 activations, plus q8_0 quantise / dequantise.
 * Per block: exact integer dot, then in float
 *   acc += (float)sumi * (d_w * d_x)       (block order; exactly ae_vec_dot_q8_0_ref)
 * The matvec is q32_simd128.h's ae_q32_matvec4 (4 rows in the lanes, one from each quarter of the
 * row range, whole rows in turn; the activation split into even / odd i16 once per column chunk; a weight chunk of
 * 16 bytes w (i16 lanes b0 | b1 << 8) needs no unpacking: (w << 8) holds 256 * b0 and (w & 0xff00) holds 256 * b1,
 * so dot_i16x8(w << 8, x_even) + dot_i16x8(w & 0xff00, x_odd) = 256 * sum(w x), exact in i32; fewer than 4 rows,
 * as vec_dot: one row at a time with the same sums and float sequence). Bit-exact with the reference for any row
 * range. */
#include "q32_simd128.h"

/* ---- quantise (ggml quantize_row_q8_0: simd128_util.h ae_q8_block_quant) / dequantise ---- */
void ae_from_float_q8_0_simd128(const float *x, void *y, int n) {
  ae_block_q8_0 *b = (ae_block_q8_0 *)y;
  for (int i = 0; i < n / AE_QK8_0; i++) b[i].d = ae_fp32_to_fp16(ae_q8_block_quant(x + i * AE_QK8_0, b[i].qs, NULL));
}

void ae_to_float_q8_0_simd128(const void *x, float *y, int n) {
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  for (int i = 0; i < n / AE_QK8_0; i++) ae_q8_block_dequant(b[i].qs, ae_h2f_s(b[i].d), y + i * AE_QK8_0);
}

/* ---- dot ----
 * Both builds compile this form: a relaxed form (activations split by sign into [0, 127], 4 i32 relaxed dots per
 * block, exact) measured slower in Node 20 (V8 11.3 lowers the i32 relaxed dot to 3 instructions: 0.8-0.9x,
 * docs/PERFORMANCE.md "Relaxed SIMD") and in Chromium 156 end to end (bench/peers.mjs, s15m q8_0: 0.8x), so it was
 * removed. */
static void load_q8_0(const uint8_t *blk, v128 *w0, v128 *w1) {
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)blk;
  *w0 = ae_load(b->qs); *w1 = ae_load(b->qs + 16);
}

void ae_matvec_rows_q8_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  ae_q32_matvec4((const uint8_t *)W, sizeof(ae_block_q8_0), ncols / AE_QK8_0, (const ae_block_q8_0 *)xq, y, r0, r1, load_q8_0, 8);
}

void ae_vec_dot_q8_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q8_0_simd128(w, n, x, s, 0, 1);
}
