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
