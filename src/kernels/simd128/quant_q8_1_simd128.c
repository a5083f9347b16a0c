/* q8_1 (activation dtype of q4_1 / q5_1): ggml quantize_row_q8_1_ref semantics, bit-exact with the
 * reference: q8_0's d = amax / 127 and q = roundf(x * (1/d)), plus s = fp16((float)sum(q) * d) with the
 * f32 d (simd128_util.h ae_q8_block_quant / ae_q8_block_dequant, shared with q8_0). */
#include "simd128_util.h"

void ae_from_float_q8_1_simd128(const float *x, void *y, int n) {
  ae_block_q8_1 *b = (ae_block_q8_1 *)y;
  for (int i = 0; i < n / AE_QK8_1; i++) {
    v128 sum;
    const float d = ae_q8_block_quant(x + i * AE_QK8_1, b[i].qs, &sum);
    b[i].d = ae_fp32_to_fp16(d);
    b[i].s = ae_fp32_to_fp16((float)ae_hsum_i32(sum) * d);
  }
}

void ae_to_float_q8_1_simd128(const void *x, float *y, int n) {
  const ae_block_q8_1 *b = (const ae_block_q8_1 *)x;
  for (int i = 0; i < n / AE_QK8_1; i++) ae_q8_block_dequant(b[i].qs, ae_h2f_s(b[i].d), y + i * AE_QK8_1);
}
