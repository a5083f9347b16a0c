/* Softmax: max, e = exp(x - max) (polynomial exp), sum in 4 f32x4 accumulators, x = e * (1 / sum). */
#include "simd128_util.h"

void ae_softmax_simd128(float *x, int n) {
  if (n <= 0) return;
  v128 mv = wasm_f32x4_splat(x[0]);
  int i = 0;
  for (; i + 4 <= n; i += 4) mv = wasm_f32x4_pmax(mv, ae_load(x + i));
  mv = wasm_f32x4_pmax(mv, wasm_i32x4_shuffle(mv, mv, 2, 3, 0, 1));
  mv = wasm_f32x4_pmax(mv, wasm_i32x4_shuffle(mv, mv, 1, 0, 3, 2));
  float max = wasm_f32x4_extract_lane(mv, 0);
  for (; i < n; i++) max = x[i] > max ? x[i] : max;
  mv = wasm_f32x4_splat(max);
  v128 s0 = wasm_f32x4_splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
  i = 0;
  for (; i + 16 <= n; i += 16) {
    const v128 e0 = ae_v_exp(wasm_f32x4_sub(ae_load(x + i), mv));
    const v128 e1 = ae_v_exp(wasm_f32x4_sub(ae_load(x + i + 4), mv));
    const v128 e2 = ae_v_exp(wasm_f32x4_sub(ae_load(x + i + 8), mv));
    const v128 e3 = ae_v_exp(wasm_f32x4_sub(ae_load(x + i + 12), mv));
    ae_store(x + i, e0); ae_store(x + i + 4, e1); ae_store(x + i + 8, e2); ae_store(x + i + 12, e3);
    s0 = wasm_f32x4_add(s0, e0); s1 = wasm_f32x4_add(s1, e1); s2 = wasm_f32x4_add(s2, e2); s3 = wasm_f32x4_add(s3, e3);
  }
  for (; i + 4 <= n; i += 4) {
    const v128 e = ae_v_exp(wasm_f32x4_sub(ae_load(x + i), mv));
    ae_store(x + i, e);
    s0 = wasm_f32x4_add(s0, e);
  }
  if (i < n) {   /* tail through a buffer padded with -inf (exp -> 0) */
    float t[4] = {-__builtin_inff(), -__builtin_inff(), -__builtin_inff(), -__builtin_inff()};
    for (int j = 0; j < n - i; j++) t[j] = x[i + j];
    const v128 e = ae_v_exp(wasm_f32x4_sub(ae_load(t), mv));
    ae_store(t, e);
    for (int j = 0; j < n - i; j++) x[i + j] = t[j];
    s0 = wasm_f32x4_add(s0, e);
  }
  const float sum = ae_hsum_f32(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)));
  const v128 inv = wasm_f32x4_splat(1.0f / sum);
  i = 0;
  for (; i + 4 <= n; i += 4) ae_store(x + i, wasm_f32x4_mul(ae_load(x + i), inv));
  for (; i < n; i++) x[i] *= 1.0f / sum;
}
