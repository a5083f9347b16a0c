/* argmax with the reference's semantics (first index of the maximum, NaNs never win, NaN at index 0
 * -> 0): max over non-NaN values with pmax, then the first index equal to it. */
#include "simd128_util.h"

int ae_argmax_simd128(const float *x, int n) {
  if (n <= 0) return 0;
  if (x[0] != x[0]) return 0;
  v128 mv = wasm_f32x4_splat(-__builtin_inff());
  int i = 0;
  for (; i + 8 <= n; i += 8) {   /* pmax(a, b) = a < b ? b : a: a NaN b keeps a */
    mv = wasm_f32x4_pmax(mv, ae_load(x + i));
    mv = wasm_f32x4_pmax(mv, ae_load(x + i + 4));
  }
  for (; i + 4 <= n; i += 4) mv = wasm_f32x4_pmax(mv, ae_load(x + i));
  mv = wasm_f32x4_pmax(mv, wasm_i32x4_shuffle(mv, mv, 2, 3, 0, 1));
  mv = wasm_f32x4_pmax(mv, wasm_i32x4_shuffle(mv, mv, 1, 0, 3, 2));
  float m = wasm_f32x4_extract_lane(mv, 0);
  for (; i < n; i++) m = m < x[i] ? x[i] : m;
  mv = wasm_f32x4_splat(m);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const int mask = wasm_i32x4_bitmask(wasm_f32x4_eq(ae_load(x + i), mv));
    if (mask) return i + __builtin_ctz((unsigned)mask);
  }
  for (; i < n; i++)
    if (x[i] == m) return i;
  return 0;
}
