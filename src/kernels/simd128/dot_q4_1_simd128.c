/* q4_1 weights x q8_1 activations, plus q4_1 quantise (the reference quantiser) / dequantise: the kernels of
 * q32_min_simd128.inc over blocks whose 4-bit quants (nibbles) are expanded to bytes. */
#include "q32_simd128.h"

AE_INLINE void expand(const ae_block_q4_1 *b, v128 *w0, v128 *w1) {
  const v128 qs = ae_load(b->qs);
  *w0 = ae_q32_lo(qs);
  *w1 = ae_q32_hi(qs);
}

#define AE_Q32M q4_1
#include "q32_min_simd128.inc"
