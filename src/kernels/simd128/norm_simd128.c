/* RMSNorm: sum of squares in 4 f32x4 accumulators (16 elements per step), then as the reference:
 * mean = ss / n, scale = 1 / sqrtf(mean + eps), y = (x * scale) * w. */
#include "simd128_util.h"

void ae_rmsnorm_simd128(float *y, const float *x, const float *w, int n, float eps) {
  v128 a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const v128 v0 = ae_load(x + i), v1 = ae_load(x + i + 4), v2 = ae_load(x + i + 8), v3 = ae_load(x + i + 12);
    a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(v0, v0));
    a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(v1, v1));
    a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(v2, v2));
    a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(v3, v3));
  }
  for (; i + 4 <= n; i += 4) { const v128 v = ae_load(x + i); a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(v, v)); }
  float ss = ae_hsum_f32(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)));
  for (; i < n; i++) ss += x[i] * x[i];
  const float mean = ss / (float)n;
  const float scale = 1.0f / __builtin_sqrtf(mean + eps);
  const v128 sv = wasm_f32x4_splat(scale);
  i = 0;
  for (; i + 4 <= n; i += 4) ae_store(y + i, wasm_f32x4_mul(wasm_f32x4_mul(ae_load(x + i), sv), ae_load(w + i)));
  for (; i < n; i++) y[i] = (x[i] * scale) * w[i];
}
