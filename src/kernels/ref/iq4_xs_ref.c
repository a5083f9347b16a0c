/* iq4_xs weights x q8_K activations (scalar reference), ggml's block_iq4_xs: 256 elements in 8 sub-blocks of 32, each
 * with a 6-bit scale ls (offset 32: low 4 bits in scales_l[ib / 2] (the high nibble for odd ib), high 2 in
 * scales_h >> 2 ib) and iq4_nl's 4-bit codes (sub-block ib at qs[16 ib ..]: element j < 16 in the low nibble of
 * qs[16 ib + j], 16 + j in its high nibble) into the same 16-value table (AE_IQ4NL_VALUES); an f16 d per block.
 * x = (d * (ls - 32)) * value. The dot product, exact integers per block, then one float step:
 *   s += (d_w * d_x) * (float)sumi,  sumi = sum_ib (ls_ib - 32) sum_{e in ib} value_e x_e  */
#include "ref_util.h"

static inline int iq4xs_scale(const ae_block_iq4_xs *b, int ib) {
  return (((b->scales_l[ib >> 1] >> (4 * (ib & 1))) & 0x0f) | ((b->scales_h >> (2 * ib)) & 3) << 4) - 32;
}
static inline int iq4xs_value(const ae_block_iq4_xs *b, int e) {
  const int ib = e >> 5, j = e & 31;
  const uint8_t q = b->qs[16 * ib + (j & 15)];
  return AE_IQ4NL_VALUES[j < 16 ? q & 0x0f : q >> 4];
}

void ae_to_float_iq4_xs_ref(const void *x, float *y, int n) {
  const ae_block_iq4_xs *b = (const ae_block_iq4_xs *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = AE_FP16(b[i].d);
    for (int ib = 0; ib < 8; ib++) {
      const float dl = d * (float)iq4xs_scale(&b[i], ib);
      for (int j = 0; j < 32; j++) y[i * AE_QK_K + 32 * ib + j] = dl * (float)iq4xs_value(&b[i], 32 * ib + j);
    }
  }
}

/* Simple (non-iterative) quantiser: per sub-block the value of largest magnitude maps to -127 (scale m / -127), the 8
 * scales against d = (largest scale) / -32 in 6 bits (-32..31), then each value to the nearest code. */
void ae_from_float_iq4_xs_ref(const float *x, void *y, int n) {
  ae_block_iq4_xs *b = (ae_block_iq4_xs *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    float scale[8], max_scale = 0.0f, amax_scale = 0.0f;
    for (int ib = 0; ib < 8; ib++) {
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < 32; j++) {
        const float a = __builtin_fabsf(v[32 * ib + j]);
        if (a > amax) { amax = a; max = v[32 * ib + j]; }
      }
      scale[ib] = max / -127.0f;
      if (__builtin_fabsf(scale[ib]) > amax_scale) { amax_scale = __builtin_fabsf(scale[ib]); max_scale = scale[ib]; }
    }
    __builtin_memset(&b[i], 0, sizeof b[i]);
    b[i].d = ae_fp32_to_fp16(max_scale / -32.0f);
    const float d = AE_FP16(b[i].d);
    for (int ib = 0; ib < 8; ib++) {
      int ls = d != 0.0f ? ae_ref_nearest(scale[ib] / d) : 0;
      ls = ls < -32 ? -32 : ls > 31 ? 31 : ls;
      b[i].scales_l[ib >> 1] |= (uint8_t)(((ls + 32) & 0x0f) << (4 * (ib & 1)));
      b[i].scales_h |= (uint16_t)(((ls + 32) >> 4) << (2 * ib));
      const float dl = d * (float)ls, id = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 0; j < 32; j++) {
        const float t = v[32 * ib + j] * id;
        int best = 0;
        float bd = __builtin_fabsf(t - (float)AE_IQ4NL_VALUES[0]);
        for (int k = 1; k < 16; k++) {
          const float dk = __builtin_fabsf(t - (float)AE_IQ4NL_VALUES[k]);
          if (dk < bd) { bd = dk; best = k; }
        }
        b[i].qs[16 * ib + (j & 15)] |= (uint8_t)(j < 16 ? best : best << 4);
      }
    }
  }
}

void ae_vec_dot_iq4_xs_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_iq4_xs *a = (const ae_block_iq4_xs *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sumi = 0;
    for (int ib = 0; ib < 8; ib++) {
      int dot = 0;
      for (int j = 0; j < 32; j++) dot += iq4xs_value(&a[i], 32 * ib + j) * b[i].qs[32 * ib + j];
      sumi += iq4xs_scale(&a[i], ib) * dot;
    }
    sum += (AE_FP16(a[i].d) * b[i].d) * (float)sumi;
  }
  *s = sum;
}
