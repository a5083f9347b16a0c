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
/* Bit e (< 32) of the little-endian u32 qh. */
static inline int ae_ref_qh_bit(const uint8_t qh[4], int e) { return (qh[e >> 3] >> (e & 7)) & 1; }

#endif
