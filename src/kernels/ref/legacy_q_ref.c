/* Scalar references of the legacy 32-element block dtypes beyond q4_0 / q8_0 (ggml layouts and
 * reference quantisers): q5_0 (x q8_0), q4_1 and q5_1 (x q8_1), and the q8_1 activation dtype.
 * Dot products sum exact integers per block, then accumulate in float in block order:
 *   q5_0:        s += (float)sumi * (d_w * d_x)                    (sumi over q - 16)
 *   q4_1, q5_1:  s += (d_w * d_x) * (float)sumi + m_w * s_x        (ggml's vec_dot_q4_1_q8_1 order)
 * where s_x is the activation block's stored f16 d * sum(q). The SIMD kernels match bit for bit. */
#include "ref_util.h"

/* 5-bit quant e of a block with nibbles qs and high bits qh. */
static inline int q5_get(const uint8_t *qs, const uint8_t *qh, int e) {
  const int nib = e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4;
  return nib | (ae_ref_qh_bit(qh, e) << 4);
}
static inline int q4_get(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4; }
static void q5_put(uint8_t *qs, uint8_t *qh, const int q[32]) {
  uint32_t h = 0;
  for (int j = 0; j < 16; j++) {
    qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    h |= (uint32_t)((q[j] >> 4) & 1) << j;
    h |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
}

/* ---- q5_0 ---- */
void ae_to_float_q5_0_ref(const void *x, float *y, int n) {
  const ae_block_q5_0 *b = (const ae_block_q5_0 *)x;
  for (int i = 0; i < n / AE_QK5_0; i++) {
    const float d = AE_FP16(b[i].d);
    for (int e = 0; e < AE_QK5_0; e++) y[i * AE_QK5_0 + e] = (float)(q5_get(b[i].qs, b[i].qh, e) - 16) * d;
  }
}
/* ggml quantize_row_q5_0_ref: d = max / -16 (max = value of largest magnitude), q = min(31, (int8)(x/d + 16.5)). */
void ae_from_float_q5_0_ref(const float *x, void *y, int n) {
  ae_block_q5_0 *b = (ae_block_q5_0 *)y;
  for (int i = 0; i < n / AE_QK5_0; i++) {
    const float *v = x + i * AE_QK5_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < AE_QK5_0; j++)
      if (amax < __builtin_fabsf(v[j])) { amax = __builtin_fabsf(v[j]); max = v[j]; }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    int q[32];
    for (int j = 0; j < AE_QK5_0; j++) {
      const int t = (int8_t)(v[j] * id + 16.5f);
      q[j] = t > 31 ? 31 : t;
    }
    q5_put(b[i].qs, b[i].qh, q);
  }
}
void ae_vec_dot_q5_0_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q5_0 *a = (const ae_block_q5_0 *)w;
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK5_0; i++) {
    int sumi = 0;
    for (int e = 0; e < AE_QK5_0; e++) sumi += (q5_get(a[i].qs, a[i].qh, e) - 16) * (int)b[i].qs[e];
    sum += (float)sumi * (AE_FP16(a[i].d) * AE_FP16(b[i].d));
  }
  *s = sum;
}

/* ---- q4_1 ---- */
void ae_to_float_q4_1_ref(const void *x, float *y, int n) {
  const ae_block_q4_1 *b = (const ae_block_q4_1 *)x;
  for (int i = 0; i < n / AE_QK4_1; i++) {
    const float d = AE_FP16(b[i].d), m = AE_FP16(b[i].m);
    for (int e = 0; e < AE_QK4_1; e++) y[i * AE_QK4_1 + e] = (float)q4_get(b[i].qs, e) * d + m;
  }
}
/* ggml quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = min(15, (int8)((x - min)/d + 0.5)). */
void ae_from_float_q4_1_ref(const float *x, void *y, int n) {
  ae_block_q4_1 *b = (ae_block_q4_1 *)y;
  for (int i = 0; i < n / AE_QK4_1; i++) {
    const float *v = x + i * AE_QK4_1;
    float min = __FLT_MAX__, max = -__FLT_MAX__;
    for (int j = 0; j < AE_QK4_1; j++) { if (v[j] < min) min = v[j]; if (v[j] > max) max = v[j]; }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    b[i].m = ae_fp32_to_fp16(min);
    for (int j = 0; j < AE_QK4_1 / 2; j++) {
      int q0 = (int8_t)((v[j] - min) * id + 0.5f), q1 = (int8_t)((v[j + 16] - min) * id + 0.5f);
      q0 = q0 > 15 ? 15 : q0;
      q1 = q1 > 15 ? 15 : q1;
      b[i].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 << 4));
    }
  }
}
void ae_vec_dot_q4_1_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q4_1 *a = (const ae_block_q4_1 *)w;
  const ae_block_q8_1 *b = (const ae_block_q8_1 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK4_1; i++) {
    int sumi = 0;
    for (int e = 0; e < AE_QK4_1; e++) sumi += q4_get(a[i].qs, e) * (int)b[i].qs[e];
    sum += (AE_FP16(a[i].d) * AE_FP16(b[i].d)) * (float)sumi + AE_FP16(a[i].m) * AE_FP16(b[i].s);
  }
  *s = sum;
}

/* ---- q5_1 ---- */
void ae_to_float_q5_1_ref(const void *x, float *y, int n) {
  const ae_block_q5_1 *b = (const ae_block_q5_1 *)x;
  for (int i = 0; i < n / AE_QK5_1; i++) {
    const float d = AE_FP16(b[i].d), m = AE_FP16(b[i].m);
    for (int e = 0; e < AE_QK5_1; e++) y[i * AE_QK5_1 + e] = (float)q5_get(b[i].qs, b[i].qh, e) * d + m;
  }
}
/* ggml quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = (uint8)((x - min)/d + 0.5). */
void ae_from_float_q5_1_ref(const float *x, void *y, int n) {
  ae_block_q5_1 *b = (ae_block_q5_1 *)y;
  for (int i = 0; i < n / AE_QK5_1; i++) {
    const float *v = x + i * AE_QK5_1;
    float min = __FLT_MAX__, max = -__FLT_MAX__;
    for (int j = 0; j < AE_QK5_1; j++) { if (v[j] < min) min = v[j]; if (v[j] > max) max = v[j]; }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    b[i].m = ae_fp32_to_fp16(min);
    int q[32];
    for (int j = 0; j < AE_QK5_1; j++) {
      const int t = (int)((v[j] - min) * id + 0.5f);   /* in [0, 31.5]: ggml's (uint8_t) cast */
      q[j] = t > 31 ? 31 : t;
    }
    q5_put(b[i].qs, b[i].qh, q);
  }
}
void ae_vec_dot_q5_1_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q5_1 *a = (const ae_block_q5_1 *)w;
  const ae_block_q8_1 *b = (const ae_block_q8_1 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK5_1; i++) {
    int sumi = 0;
    for (int e = 0; e < AE_QK5_1; e++) sumi += q5_get(a[i].qs, a[i].qh, e) * (int)b[i].qs[e];
    sum += (AE_FP16(a[i].d) * AE_FP16(b[i].d)) * (float)sumi + AE_FP16(a[i].m) * AE_FP16(b[i].s);
  }
  *s = sum;
}

/* ---- q8_1 (activations of q4_1 / q5_1) ---- */
void ae_to_float_q8_1_ref(const void *x, float *y, int n) {
  const ae_block_q8_1 *b = (const ae_block_q8_1 *)x;
  for (int i = 0; i < n / AE_QK8_1; i++) {
    const float d = AE_FP16(b[i].d);
    for (int j = 0; j < AE_QK8_1; j++) y[i * AE_QK8_1 + j] = (float)b[i].qs[j] * d;
  }
}
/* ggml quantize_row_q8_1_ref: q8_0's d = amax / 127, q = roundf(x * (1/d)), and s = fp16((float)sum(q) * d)
 * with the f32 d (before its f16 rounding). */
void ae_from_float_q8_1_ref(const float *x, void *y, int n) {
  ae_block_q8_1 *b = (ae_block_q8_1 *)y;
  for (int i = 0; i < n / AE_QK8_1; i++) {
    const float *v = x + i * AE_QK8_1;
    float amax = 0.0f;
    for (int j = 0; j < AE_QK8_1; j++) {
      const float a = __builtin_fabsf(v[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < AE_QK8_1; j++) {
      b[i].qs[j] = (int8_t)ae_ref_round_away(v[j] * id);
      sum += b[i].qs[j];
    }
    b[i].s = ae_fp32_to_fp16((float)sum * d);
  }
}
