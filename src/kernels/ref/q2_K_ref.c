/* q2_K weights x q8_K activations (scalar reference), ggml's block_q2_K: 256 elements in 16 sub-blocks of 16, 2-bit
 * quants and per sub-block a 4-bit scale and a 4-bit min (scales[s]: scale in the low nibble, min in the high one),
 * f16 d and dmin. Element e = 128 n + 32 j + l (n < 2, j < 4, l < 32) is q = bits 2 j, 2 j + 1 of qs[32 n + l]; its
 * sub-block is s = e / 16. x = (d * sc_s) * q - dmin * m_s. The dot product, exact integers per super-block, then one
 * float step (q4_K's):
 *   s += (d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m,
 *   sumi_q = sum_s sc_s sum_{e in s} q_e x_e,  sumi_m = sum_s m_s sum_{e in s} x_e  */
#include "ref_util.h"

static inline int q2k_value(const ae_block_q2_K *b, int e) {
  return (b->qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
}

void ae_to_float_q2_K_ref(const void *x, float *y, int n) {
  const ae_block_q2_K *b = (const ae_block_q2_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = AE_FP16(b[i].d), dmin = AE_FP16(b[i].dmin);
    for (int e = 0; e < AE_QK_K; e++) {
      const int s = e >> 4;
      const float dl = d * (float)(b[i].scales[s] & 0x0f), ml = dmin * (float)(b[i].scales[s] >> 4);
      y[i * AE_QK_K + e] = dl * (float)q2k_value(&b[i], e) - ml;
    }
  }
}

/* Simple (non-iterative) quantiser: per sub-block the range [min(0, lo), hi] in 3 steps (scale (hi - lo) / 3, min
 * -lo >= 0), the 16 scales and mins against d = (largest scale) / 15 and dmin = (largest min) / 15 in 4 bits, then
 * each value to the nearest of 0..3. */
void ae_from_float_q2_K_ref(const float *x, void *y, int n) {
  ae_block_q2_K *b = (ae_block_q2_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    float scale[16], mn[16], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 16; s++) {
      float lo = v[16 * s], hi = v[16 * s];
      for (int l = 1; l < 16; l++) {
        lo = v[16 * s + l] < lo ? v[16 * s + l] : lo;
        hi = v[16 * s + l] > hi ? v[16 * s + l] : hi;
      }
      if (lo > 0.0f) lo = 0.0f;
      scale[s] = (hi - lo) / 3.0f;
      mn[s] = -lo;
      if (scale[s] > max_scale) max_scale = scale[s];
      if (mn[s] > max_min) max_min = mn[s];
    }
    __builtin_memset(&b[i], 0, sizeof b[i]);
    b[i].d = ae_fp32_to_fp16(max_scale / 15.0f);
    b[i].dmin = ae_fp32_to_fp16(max_min / 15.0f);
    const float df = AE_FP16(b[i].d), dminf = AE_FP16(b[i].dmin);
    for (int s = 0; s < 16; s++) {
      int sc = df > 0.0f ? ae_ref_nearest(scale[s] / df) : 0, m = dminf > 0.0f ? ae_ref_nearest(mn[s] / dminf) : 0;
      sc = sc < 0 ? 0 : sc > 15 ? 15 : sc;
      m = m < 0 ? 0 : m > 15 ? 15 : m;
      b[i].scales[s] = (uint8_t)(sc | m << 4);
      const float dl = df * (float)sc, ml = dminf * (float)m;
      for (int l = 0; l < 16; l++) {
        const int e = 16 * s + l;
        int q = dl > 0.0f ? ae_ref_nearest((v[e] + ml) / dl) : 0;
        q = q < 0 ? 0 : q > 3 ? 3 : q;
        b[i].qs[32 * (e >> 7) + (e & 31)] |= (uint8_t)(q << (2 * ((e >> 5) & 3)));
      }
    }
  }
}

void ae_vec_dot_q2_K_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q2_K *a = (const ae_block_q2_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sumi_q = 0, sumi_m = 0;
    for (int t = 0; t < 16; t++) {
      int dot = 0, xs = 0;
      for (int l = 0; l < 16; l++) {
        dot += q2k_value(&a[i], 16 * t + l) * b[i].qs[16 * t + l];
        xs += b[i].qs[16 * t + l];
      }
      sumi_q += (a[i].scales[t] & 0x0f) * dot;
      sumi_m += (a[i].scales[t] >> 4) * xs;
    }
    const float dall = AE_FP16(a[i].d) * b[i].d, dmin = AE_FP16(a[i].dmin) * b[i].d;
    sum += dall * (float)sumi_q - dmin * (float)sumi_m;
  }
  *s = sum;
}
