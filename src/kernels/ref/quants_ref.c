/* Scalar reference kernels per dtype: dequantise (to_float), quantise (from_float), dot product
 * (vec_dot). Block layouts and meanings are ggml's. Quantised dot products sum exact integers per
 * block, then accumulate in float in block order:
 *   q8_0, q4_0: s += (float)sumi * (d_w * d_x)
 *   q4_K:       s += (d_w * d_x) * (float)sumi_q - (dmin_w * d_x) * (float)sumi_min
 *   q6_K:       s += (d_w * d_x) * (float)sumi
 * The SIMD kernels reproduce exactly this arithmetic, so they match bit for bit. f32 / f16 dot
 * products accumulate exact double products in double (near-exact specification; SIMD is compared
 * with a tolerance). */
#include "kernels/kernels.h"
#include "ref_util.h"

#define FP16(h) ae_fp16_to_fp32(h)

static inline float round_half_away(float v) {       /* C roundf */
  float t = __builtin_truncf(v);
  const float d = v - t;                             /* exact */
  if (d >= 0.5f) t += 1.0f;
  else if (d <= -0.5f) t -= 1.0f;
  return t;
}
static inline int nearest_int(float v) { return (int)__builtin_nearbyintf(v); }  /* ties to even */

/* ---- f32 ---- */
void ae_to_float_f32_ref(const void *x, float *y, int n) {
  const float *s = (const float *)x;
  for (int i = 0; i < n; i++) y[i] = s[i];
}
void ae_from_float_f32_ref(const float *x, void *y, int n) {
  float *d = (float *)y;
  for (int i = 0; i < n; i++) d[i] = x[i];
}
void ae_vec_dot_f32_ref(int n, float *s, const void *w, const void *x) {
  const float *a = (const float *)w, *b = (const float *)x;
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += (double)a[i] * (double)b[i];
  *s = (float)sum;
}

/* ---- f16 ---- */
void ae_to_float_f16_ref(const void *x, float *y, int n) {
  const ae_fp16 *h = (const ae_fp16 *)x;
  for (int i = 0; i < n; i++) y[i] = FP16(h[i]);
}
void ae_from_float_f16_ref(const float *x, void *y, int n) {
  ae_fp16 *h = (ae_fp16 *)y;
  for (int i = 0; i < n; i++) h[i] = ae_fp32_to_fp16(x[i]);
}
void ae_vec_dot_f16_ref(int n, float *s, const void *w, const void *x) {
  const ae_fp16 *a = (const ae_fp16 *)w;
  const float *b = (const float *)x;
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += (double)FP16(a[i]) * (double)b[i];
  *s = (float)sum;
}

/* ---- q8_0 ---- */
void ae_to_float_q8_0_ref(const void *x, float *y, int n) {
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  for (int i = 0; i < n / AE_QK8_0; i++) {
    const float d = FP16(b[i].d);
    for (int j = 0; j < AE_QK8_0; j++) y[i * AE_QK8_0 + j] = (float)b[i].qs[j] * d;
  }
}
/* ggml quantize_row_q8_0: d = amax / 127, q = roundf(x * (1/d)). */
void ae_from_float_q8_0_ref(const float *x, void *y, int n) {
  ae_block_q8_0 *b = (ae_block_q8_0 *)y;
  for (int i = 0; i < n / AE_QK8_0; i++) {
    const float *v = x + i * AE_QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < AE_QK8_0; j++) {
      const float a = __builtin_fabsf(v[j]);
      amax = amax > a ? amax : a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    for (int j = 0; j < AE_QK8_0; j++) b[i].qs[j] = (int8_t)round_half_away(v[j] * id);
  }
}
void ae_vec_dot_q8_0_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q8_0 *a = (const ae_block_q8_0 *)w, *b = (const ae_block_q8_0 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK8_0; i++) {
    int sumi = 0;
    for (int j = 0; j < AE_QK8_0; j++) sumi += (int)a[i].qs[j] * (int)b[i].qs[j];
    sum += (float)sumi * (FP16(a[i].d) * FP16(b[i].d));
  }
  *s = sum;
}

/* ---- q4_0 ---- */
void ae_to_float_q4_0_ref(const void *x, float *y, int n) {
  const ae_block_q4_0 *b = (const ae_block_q4_0 *)x;
  for (int i = 0; i < n / AE_QK4_0; i++) {
    const float d = FP16(b[i].d);
    for (int j = 0; j < AE_QK4_0 / 2; j++) {
      y[i * AE_QK4_0 + j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
      y[i * AE_QK4_0 + j + AE_QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
/* ggml quantize_row_q4_0: d = max / -8 (max = the value of largest magnitude), q = min(15, (int8)(x/d + 8.5)). */
void ae_from_float_q4_0_ref(const float *x, void *y, int n) {
  ae_block_q4_0 *b = (ae_block_q4_0 *)y;
  for (int i = 0; i < n / AE_QK4_0; i++) {
    const float *v = x + i * AE_QK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < AE_QK4_0; j++) {
      if (amax < __builtin_fabsf(v[j])) { amax = __builtin_fabsf(v[j]); max = v[j]; }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    for (int j = 0; j < AE_QK4_0 / 2; j++) {
      int q0 = (int8_t)(v[j] * id + 8.5f), q1 = (int8_t)(v[j + AE_QK4_0 / 2] * id + 8.5f);
      if (q0 > 15) q0 = 15;
      if (q1 > 15) q1 = 15;
      b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}
void ae_vec_dot_q4_0_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q4_0 *a = (const ae_block_q4_0 *)w;
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK4_0; i++) {
    int sumi = 0;
    for (int j = 0; j < AE_QK4_0 / 2; j++) {
      sumi += ((a[i].qs[j] & 0x0f) - 8) * (int)b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * (int)b[i].qs[j + AE_QK4_0 / 2];
    }
    sum += (float)sumi * (FP16(a[i].d) * FP16(b[i].d));
  }
  *s = sum;
}

/* ---- q8_K (activations of the K-quants) ---- */
void ae_to_float_q8_K_ref(const void *x, float *y, int n) {
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++)
    for (int j = 0; j < AE_QK_K; j++) y[i * AE_QK_K + j] = b[i].d * (float)b[i].qs[j];
}
/* ggml quantize_row_q8_K: iscale = -127 / max (max = value of largest magnitude), q = min(127,
 * nearest(iscale * x)), d = 1 / iscale, bsums = sums of 16 consecutive q. */
void ae_from_float_q8_K_ref(const float *x, void *y, int n) {
  ae_block_q8_K *b = (ae_block_q8_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < AE_QK_K; j++) {
      const float a = __builtin_fabsf(v[j]);
      if (a > amax) { amax = a; max = v[j]; }
    }
    if (amax == 0.0f) {
      b[i].d = 0.0f;
      for (int j = 0; j < AE_QK_K; j++) b[i].qs[j] = 0;
      for (int j = 0; j < AE_QK_K / 16; j++) b[i].bsums[j] = 0;
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < AE_QK_K; j++) {
      const int q = nearest_int(iscale * v[j]);
      b[i].qs[j] = (int8_t)(q < 127 ? q : 127);
    }
    for (int j = 0; j < AE_QK_K / 16; j++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) sum += b[i].qs[j * 16 + l];
      b[i].bsums[j] = (int16_t)sum;
    }
    b[i].d = 1.0f / iscale;
  }
}

/* ---- q4_K ---- */
/* element 64g + l (l < 32) is the low nibble of qs[32g + l], element 64g + 32 + l the high nibble;
 * x = d * sc[e / 32] * q - dmin * m[e / 32]. */
void ae_to_float_q4_K_ref(const void *x, float *y, int n) {
  const ae_block_q4_K *b = (const ae_block_q4_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sc[8], m[8];
    ae_ref_k4_scales(b[i].scales, sc, m);
    const float d = FP16(b[i].d), dmin = FP16(b[i].dmin);
    for (int j = 0; j < 8; j++) {
      const float d1 = d * (float)sc[j], m1 = dmin * (float)m[j];
      for (int l = 0; l < 32; l++) {
        const uint8_t byte = b[i].qs[32 * (j / 2) + l];
        const int q = (j & 1) ? byte >> 4 : byte & 0x0f;
        y[i * AE_QK_K + 32 * j + l] = d1 * (float)q - m1;
      }
    }
  }
}
/* Simple (non-iterative) quantiser (ae_ref_k4_choose, qmax 15), then the nibbles. Not ggml's search-based
 * make_qkx2_quants (weights normally come quantised from GGUF files). */
void ae_from_float_q4_K_ref(const float *x, void *y, int n) {
  ae_block_q4_K *b = (ae_block_q4_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    int sc[8], m[8];
    ae_ref_k4_choose(v, 15.0f, &b[i].d, &b[i].dmin, sc, m);
    const float df = FP16(b[i].d), dminf = FP16(b[i].dmin);
    ae_ref_k4_pack(sc, m, b[i].scales);
    uint8_t q[AE_QK_K];
    for (int j = 0; j < 8; j++) {
      const float d1 = df * (float)sc[j], m1 = dminf * (float)m[j];
      for (int l = 0; l < 32; l++) {
        int t = d1 > 0.0f ? nearest_int((v[32 * j + l] + m1) / d1) : 0;
        q[32 * j + l] = (uint8_t)(t < 0 ? 0 : t > 15 ? 15 : t);
      }
    }
    for (int g = 0; g < 4; g++)
      for (int l = 0; l < 32; l++) b[i].qs[32 * g + l] = (uint8_t)(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
  }
}
void ae_vec_dot_q4_K_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q4_K *a = (const ae_block_q4_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    int sc[8], m[8];
    ae_ref_k4_scales(a[i].scales, sc, m);
    int sumi_q = 0, sumi_m = 0;
    for (int j = 0; j < 8; j++) {
      int dot = 0, qsum = 0;
      for (int l = 0; l < 32; l++) {
        const uint8_t byte = a[i].qs[32 * (j / 2) + l];
        const int q = (j & 1) ? byte >> 4 : byte & 0x0f;
        dot += q * b[i].qs[32 * j + l];
        qsum += b[i].qs[32 * j + l];
      }
      sumi_q += sc[j] * dot;
      sumi_m += m[j] * qsum;
    }
    const float dall = FP16(a[i].d) * b[i].d, dmin = FP16(a[i].dmin) * b[i].d;
    sum += dall * (float)sumi_q - dmin * (float)sumi_m;
  }
  *s = sum;
}

/* ---- q6_K ---- */
/* 6-bit quants q in [0, 63], value (q - 32): element 128h + 32k + l (k < 4, l < 32) has low 4 bits in
 * ql[64h + l + 32 (k & 1)] (low nibble for k < 2, high nibble for k >= 2) and high 2 bits in
 * qh[32h + l] >> (2k); scale scales[e / 16]. */
static void q6_K_unpack(const ae_block_q6_K *b, int8_t q[AE_QK_K]) {
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 4; k++)
      for (int l = 0; l < 32; l++) {
        const uint8_t lo = b->ql[64 * h + l + 32 * (k & 1)];
        const int low4 = k < 2 ? lo & 0x0f : lo >> 4;
        const int high2 = (b->qh[32 * h + l] >> (2 * k)) & 3;
        q[128 * h + 32 * k + l] = (int8_t)((low4 | (high2 << 4)) - 32);
      }
}
void ae_to_float_q6_K_ref(const void *x, float *y, int n) {
  const ae_block_q6_K *b = (const ae_block_q6_K *)x;
  int8_t q[AE_QK_K];
  for (int i = 0; i < n / AE_QK_K; i++) {
    q6_K_unpack(&b[i], q);
    const float d = FP16(b[i].d);
    for (int e = 0; e < AE_QK_K; e++) y[i * AE_QK_K + e] = d * (float)b[i].scales[e / 16] * (float)q[e];
  }
}
/* Simple (non-iterative) quantiser: per 16-element sub-block scale = max / -32 (max = value of largest
 * magnitude), int8 sub-block scales against d = max_scale / -128 (ggml's signs). */
void ae_from_float_q6_K_ref(const float *x, void *y, int n) {
  ae_block_q6_K *b = (ae_block_q6_K *)y;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float *v = x + i * AE_QK_K;
    float scale[16], max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 16; j++) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; l++) {
        const float a = __builtin_fabsf(v[16 * j + l]);
        if (a > amax) { amax = a; max = v[16 * j + l]; }
      }
      scale[j] = max / -32.0f;
      if (__builtin_fabsf(scale[j]) > amax_scale) { amax_scale = __builtin_fabsf(scale[j]); max_scale = scale[j]; }
    }
    int8_t L[AE_QK_K];
    if (amax_scale == 0.0f) {
      __builtin_memset(b[i].scales, 0, sizeof b[i].scales);
      b[i].d = 0;
      for (int e = 0; e < AE_QK_K; e++) L[e] = 32;
    } else {
      const float iscale = -128.0f / max_scale;
      b[i].d = ae_fp32_to_fp16(1.0f / iscale);
      const float df = FP16(b[i].d);
      for (int j = 0; j < 16; j++) {
        int s = nearest_int(iscale * scale[j]);
        b[i].scales[j] = (int8_t)(s > 127 ? 127 : s < -128 ? -128 : s);
        const float d1 = df * (float)b[i].scales[j];
        for (int l = 0; l < 16; l++) {
          int t = d1 != 0.0f ? nearest_int(v[16 * j + l] / d1) : 0;
          t = t < -32 ? -32 : t > 31 ? 31 : t;
          L[16 * j + l] = (int8_t)(t + 32);
        }
      }
    }
    for (int h = 0; h < 2; h++)
      for (int l = 0; l < 32; l++) {
        const int8_t *Lh = L + 128 * h;
        b[i].ql[64 * h + l] = (uint8_t)((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
        b[i].ql[64 * h + l + 32] = (uint8_t)((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
        b[i].qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                        ((Lh[l + 96] >> 4) << 6));
      }
  }
}
void ae_vec_dot_q6_K_ref(int n, float *s, const void *w, const void *x) {
  const ae_block_q6_K *a = (const ae_block_q6_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  int8_t q[AE_QK_K];
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    q6_K_unpack(&a[i], q);
    int sumi = 0;
    for (int j = 0; j < 16; j++) {
      int dot = 0;
      for (int l = 0; l < 16; l++) dot += q[16 * j + l] * b[i].qs[16 * j + l];
      sumi += a[i].scales[j] * dot;
    }
    sum += (FP16(a[i].d) * b[i].d) * (float)sumi;
  }
  *s = sum;
}
