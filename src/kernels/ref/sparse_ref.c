/* Scalar references of the ffn-saturated kernels (src/kernels/simd128/sparse_simd128.c; contracts in
 * kernels.h): the same float operations per element in the same order, so SIMD must match bit for bit. */
#include "kernels/kernels.h"

void ae_axpy_rows_ref(ae_type t, const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt,
                      int d0, int d1, float *y) {
  for (int k = 0; k < cnt; k++) {
    const uint8_t *row = base + (size_t)idx[k] * rs;
    for (int c = d0; c < d1; c++) {
      float w, s = coef[k];
      switch (t) {
        case AE_F32: w = ((const float *)row)[c]; break;
        case AE_F16: w = ae_fp16_to_fp32(((const ae_fp16 *)row)[c]); break;
        case AE_Q8_0: {
          const ae_block_q8_0 *b = (const ae_block_q8_0 *)row + c / AE_QK8_0;
          s = coef[k] * ae_fp16_to_fp32(b->d);
          w = (float)b->qs[c % AE_QK8_0];
          break;
        }
        case AE_Q4_0: {
          const ae_block_q4_0 *b = (const ae_block_q4_0 *)row + c / AE_QK4_0;
          const int j = c % AE_QK4_0;
          s = coef[k] * ae_fp16_to_fp32(b->d);
          w = (float)((j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4) - 8);
          break;
        }
        default: return;
      }
      y[c] = y[c] + s * w;
    }
  }
}

void ae_gather_dot_ref(ae_type t, const uint8_t *const *rows, int cnt, int nb, const void *xq, float *y) {
  const ae_type_traits *tr = ae_traits_ref(t);
  if (!tr || !tr->vec_dot) return;
  for (int k = 0; k < cnt; k++) tr->vec_dot(nb * tr->blck_size, &y[k], rows[k], xq);
}
