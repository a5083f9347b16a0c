/* q5_K weights x q8_K activations (scalar reference), ggml's block_q5_K: q4_K's super-block (d, dmin,
 * 8 6-bit scales and mins, nibbles) plus a 5th bit per element: element 32 j + l (sub-block j < 8,
 * l < 32) has its low 4 bits in qs[32 (j / 2) + l] (low nibble for even j, high for odd) and its 5th
 * bit in bit j of qh[l]; x = d * sc[j] * q - dmin * m[j]. The dot product (as q4_K's):
 *   s += (d_w * d_x) * (float)sumi_q - (dmin_w * d_x) * (float)sumi_m
 * with sumi_q = sum_j sc[j] sum_l q x, sumi_m = sum_j m[j] sum_l x (exact integers). */
#include "ref_util.h"

static inline int q5k_get(const ae_block_q5_K *b, int e) {
  const int j = e >> 5, l = e & 31;
  const uint8_t byte = b->qs[32 * (j >> 1) + l];
  return ((j & 1) ? byte >> 4 : byte & 0x0f) | (((b->qh[l] >> j) & 1) << 4);
}

void ae_to_float_q5_K_ref(const void *x, float *y, int n) {
  const ae_block_q5_K *b = (const ae_block_q5_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sc[8], m[8];
    ae_ref_k4_scales(b[i].scales, sc, m);
    const float d = AE_FP16(b[i].d), dmin = AE_FP16(b[i].dmin);
    for (int j = 0; j < 8; j++) {
      const float d1 = d * (float)sc[j], m1 = dmin * (float)m[j];
      for (int l = 0; l < 32; l++) y[i * AE_QK_K + 32 * j + l] = d1 * (float)q5k_get(&b[i], 32 * j + l) - m1;
    }
  }
}

/* The simple scale choice of q4_K (ae_ref_k4_choose, qmax 31), then the 5-bit quants. */
void ae_from_float_q5_K_ref(const float *x, void *y, int n) {
  ae_block_q5_K *b = (ae_block_q5_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    int sc[8], m[8];
    ae_ref_k4_choose(v, 31.0f, &b[i].d, &b[i].dmin, sc, m);
    const float df = AE_FP16(b[i].d), dminf = AE_FP16(b[i].dmin);
    ae_ref_k4_pack(sc, m, b[i].scales);
    __builtin_memset(b[i].qh, 0, sizeof b[i].qh);
    __builtin_memset(b[i].qs, 0, sizeof b[i].qs);
    for (int j = 0; j < 8; j++) {
      const float d1 = df * (float)sc[j], m1 = dminf * (float)m[j];
      for (int l = 0; l < 32; l++) {
        int t = d1 > 0.0f ? ae_ref_nearest((v[32 * j + l] + m1) / d1) : 0;
        t = t < 0 ? 0 : t > 31 ? 31 : t;
        b[i].qs[32 * (j >> 1) + l] |= (uint8_t)((t & 0x0f) << (4 * (j & 1)));
        b[i].qh[l] |= (uint8_t)((t >> 4) << j);
      }
    }
  }
}

void ae_vec_dot_q5_K_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q5_K *a = (const ae_block_q5_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sc[8], m[8];
    ae_ref_k4_scales(a[i].scales, sc, m);
    int sumi_q = 0, sumi_m = 0;
    for (int j = 0; j < 8; j++) {
      int dot = 0, qsum = 0;
      for (int l = 0; l < 32; l++) {
        dot += q5k_get(&a[i], 32 * j + l) * b[i].qs[32 * j + l];
        qsum += b[i].qs[32 * j + l];
      }
      sumi_q += sc[j] * dot;
      sumi_m += m[j] * qsum;
    }
    const float dall = AE_FP16(a[i].d) * b[i].d, dmin = AE_FP16(a[i].dmin) * b[i].d;
    sum += dall * (float)sumi_q - dmin * (float)sumi_m;
  }
  *s = sum;
}
