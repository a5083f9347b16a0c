/* bf16 weights x f32 activations (scalar reference). bf16 = the top 16 bits of an f32; dot products
 * accumulate exact double products in double (like f16's). */
#include "ref_util.h"

static inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
void ae_to_float_bf16_ref(const void *x, float *y, int n) {
  const uint16_t *h = (const uint16_t *)x;
  for (int i = 0; i < n; i++) y[i] = bf16_to_f32(h[i]);
}
/* ggml GGML_FP32_TO_BF16: round to nearest even; NaN kept NaN (quiet bit set). */
void ae_from_float_bf16_ref(const float *x, void *y, int n) {
  uint16_t *h = (uint16_t *)y;
  for (int i = 0; i < n; i++) {
    uint32_t u;
    __builtin_memcpy(&u, &x[i], 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) h[i] = (uint16_t)((u >> 16) | 64);
    else h[i] = (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
  }
}
void ae_vec_dot_bf16_ref(int n, float *s, const void *w, const void *x) {
  const uint16_t *a = (const uint16_t *)w;
  const float *b = (const float *)x;
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += (double)bf16_to_f32(a[i]) * (double)b[i];
  *s = (float)sum;
}
