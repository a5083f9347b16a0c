/* Small helpers shared by the scalar reference files of src/kernels/ref/ (inline only). */
#ifndef AE_REF_UTIL_H
#define AE_REF_UTIL_H
#include "kernels/kernels.h"

#define AE_FP16(h) ae_fp16_to_fp32(h)

/* C roundf: half away from zero. */
static inline float ae_ref_round_away(float v) {
  float t = __builtin_truncf(v);
  const float d = v - t;   /* exact */
  if (d >= 0.5f) t += 1.0f;
  else if (d <= -0.5f) t -= 1.0f;
  return t;
}
/* ggml nearest_int: round to nearest, ties to even. */
static inline int ae_ref_nearest(float v) { return (int)__builtin_nearbyintf(v); }

/* ggml get_scale_min_k4 for all 8 sub-blocks: 8 6-bit scales and 8 6-bit mins packed in 12 bytes
 * (q4_K and q5_K). */
static inline void ae_ref_k4_scales(const uint8_t *q, int sc[8], int m[8]) {
  for (int j = 0; j < 4; j++) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
    sc[j + 4] = (q[j + 8] & 0x0f) | ((q[j] >> 6) << 4);
    m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
  }
}
/* The inverse packing. */
static inline void ae_ref_k4_pack(const int sc[8], const int m[8], uint8_t q[12]) {
  for (int j = 0; j < 4; j++) {
    q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}
/* The simple (non-iterative) k-quant scale choice of q4_K and q5_K (not ggml's search-based make_qkx2_quants): per
 * 32-element sub-block j of the 256 values v, offset = min(0, min x) and scale = (max - offset) / qmax (qmax 15 for
 * 4-bit quants, 31 for 5-bit); the super-block's d, dmin = largest scale / offset over 63, stored in fp16; sc[j], m[j] =
 * the 6-bit multiples of d, dmin nearest to them. */
static inline void ae_ref_k4_choose(const float *v, float qmax, ae_fp16 *d, ae_fp16 *dmin, int sc[8], int m[8]) {
  float scale[8], mn[8], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; j++) {
    float lo = 0.0f, hi = v[32 * j];
    for (int l = 0; l < 32; l++) {
      const float t = v[32 * j + l];
      lo = t < lo ? t : lo;
      hi = t > hi ? t : hi;
    }
    scale[j] = (hi - lo) / qmax;
    mn[j] = -lo;
    max_scale = scale[j] > max_scale ? scale[j] : max_scale;
    max_min = mn[j] > max_min ? mn[j] : max_min;
  }
  *d = ae_fp32_to_fp16(max_scale / 63.0f);
  *dmin = ae_fp32_to_fp16(max_min / 63.0f);
  const float df = AE_FP16(*d), dminf = AE_FP16(*dmin);
  for (int j = 0; j < 8; j++) {
    const int s = df > 0.0f ? ae_ref_nearest(scale[j] / df) : 0;
    const int mm = dminf > 0.0f ? ae_ref_nearest(mn[j] / dminf) : 0;
    sc[j] = s < 0 ? 0 : s > 63 ? 63 : s;
    m[j] = mm < 0 ? 0 : mm > 63 ? 63 : mm;
  }
}
/* Bit e (< 32) of the little-endian u32 qh. */
static inline int ae_ref_qh_bit(const uint8_t qh[4], int e) { return (qh[e >> 3] >> (e & 7)) & 1; }

#endif
