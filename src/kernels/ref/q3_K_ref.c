/* q3_K weights x q8_K activations (scalar reference), ggml's block_q3_K: 256 elements, 3-bit quants in two planes
 * and 16 sub-blocks of 16 with a 6-bit scale each. Element e = 128 n + 32 j + l (n < 2, j < 4, l < 32): its low 2 bits
 * are bits 2 j, 2 j + 1 of qs[32 n + l], its 3rd bit h is bit 4 n + j of hmask[l]; its value is u - 4 with
 * u = low | h << 2 (0..7). Sub-block s = e / 16 has the 6-bit scale us = low 4 bits in scales[s % 8] (the high nibble
 * for s >= 8) | high 2 bits from scales[8 + s % 4] >> 2 (s / 4); its scale is us - 32. x = (d * (us - 32)) * (u - 4).
 * The dot product, exact integers per super-block, then one float step:
 *   s += (d_w * d_x) * (float)sumi,  sumi = sum_s (us_s - 32) sum_{e in s} (u_e - 4) x_e  */
#include "ref_util.h"

/* the 16 signed scales of a block */
static inline void q3k_scales(const uint8_t *q, int sc[16]) {
  for (int s = 0; s < 16; s++) {
    const int lo = (q[s & 7] >> (4 * (s >> 3))) & 0x0f, hi = (q[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
    sc[s] = (lo | hi << 4) - 32;
  }
}
/* the 256 values u - 4 of a block (-4..3) */
static inline void q3k_values(const ae_block_q3_K *b, int8_t v[AE_QK_K]) {
  for (int n = 0; n < 2; n++)
    for (int j = 0; j < 4; j++)
      for (int l = 0; l < 32; l++) {
        const int low = (b->qs[32 * n + l] >> (2 * j)) & 3, h = (b->hmask[l] >> (4 * n + j)) & 1;
        v[128 * n + 32 * j + l] = (int8_t)((low | h << 2) - 4);
      }
}

void ae_to_float_q3_K_ref(const void *x, float *y, int n) {
  const ae_block_q3_K *b = (const ae_block_q3_K *)x;
  int8_t v[AE_QK_K];
  int sc[16];
  for (int i = 0; i < n / AE_QK_K; i++) {
    q3k_scales(b[i].scales, sc);
    q3k_values(&b[i], v);
    const float d = AE_FP16(b[i].d);
    for (int e = 0; e < AE_QK_K; e++) y[i * AE_QK_K + e] = (d * (float)sc[e / 16]) * (float)v[e];
  }
}

/* Simple (non-iterative) quantiser: per sub-block the value of largest magnitude m maps to -4 (scale m / -4), the
 * 16 scales against d = (largest scale) / -32 in 6 bits (-32..31), then each value to the nearest of -4..3. */
void ae_from_float_q3_K_ref(const float *x, void *y, int n) {
  ae_block_q3_K *b = (ae_block_q3_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    float scale[16], max_scale = 0.0f, amax_scale = 0.0f;
    for (int s = 0; s < 16; s++) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; l++) {
        const float a = __builtin_fabsf(v[16 * s + l]);
        if (a > amax) { amax = a; max = v[16 * s + l]; }
      }
      scale[s] = max / -4.0f;
      if (__builtin_fabsf(scale[s]) > amax_scale) { amax_scale = __builtin_fabsf(scale[s]); max_scale = scale[s]; }
    }
    __builtin_memset(&b[i], 0, sizeof b[i]);
    int sc[16], u[AE_QK_K];
    if (amax_scale == 0.0f) {
      for (int s = 0; s < 16; s++) sc[s] = 0;
      for (int e = 0; e < AE_QK_K; e++) u[e] = 4;
    } else {
      const float iscale = -32.0f / max_scale;
      b[i].d = ae_fp32_to_fp16(1.0f / iscale);
      const float df = AE_FP16(b[i].d);
      for (int s = 0; s < 16; s++) {
        const int q = ae_ref_nearest(iscale * scale[s]);
        sc[s] = q > 31 ? 31 : q < -32 ? -32 : q;
        const float d1 = df * (float)sc[s];
        for (int l = 0; l < 16; l++) {
          int t = d1 != 0.0f ? ae_ref_nearest(v[16 * s + l] / d1) : 0;
          t = t < -4 ? -4 : t > 3 ? 3 : t;
          u[16 * s + l] = t + 4;
        }
      }
    }
    for (int s = 0; s < 16; s++) {
      const int us = sc[s] + 32;
      b[i].scales[s & 7] |= (uint8_t)((us & 0x0f) << (4 * (s >> 3)));
      b[i].scales[8 + (s & 3)] |= (uint8_t)((us >> 4) << (2 * (s >> 2)));
    }
    for (int nn = 0; nn < 2; nn++)
      for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
          const int q = u[128 * nn + 32 * j + l];
          b[i].qs[32 * nn + l] |= (uint8_t)((q & 3) << (2 * j));
          b[i].hmask[l] |= (uint8_t)((q >> 2) << (4 * nn + j));
        }
  }
}

void ae_vec_dot_q3_K_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q3_K *a = (const ae_block_q3_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  int8_t v[AE_QK_K];
  int sc[16];
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    q3k_scales(a[i].scales, sc);
    q3k_values(&a[i], v);
    int sumi = 0;
    for (int t = 0; t < 16; t++) {
      int dot = 0;
      for (int l = 0; l < 16; l++) dot += v[16 * t + l] * b[i].qs[16 * t + l];
      sumi += sc[t] * dot;
    }
    sum += (AE_FP16(a[i].d) * b[i].d) * (float)sumi;
  }
  *s = sum;
}
