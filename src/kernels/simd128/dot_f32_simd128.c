/* f32 weights x f32 activations.
 * Per-row arithmetic (shared by the 4-row and 1-row paths, so any row split gives the same bits):
 *   acc0 += w[8i..8i+4) * x[..], acc1 += w[8i+4..8i+8) * x[..] over full groups of 8;
 *   one more acc0 step if 4 or more elements remain; v = acc0 + acc1;
 *   s = (v0 + v2) + (v1 + v3); then s += w[i] * x[i] for the last n % 4 elements in order. */
#include "simd128_util.h"

void ae_to_float_f32_simd128(const void *x, float *y, int n) {
  if ((const void *)y != x) __builtin_memmove(y, x, (size_t)n * 4);
}
void ae_from_float_f32_simd128(const float *x, void *y, int n) {
  if ((const void *)x != y) __builtin_memmove(y, x, (size_t)n * 4);
}

void ae_vec_dot_f32_simd128(int n, float *s, const void *w, const void *x) {
  const float *a = (const float *)w, *b = (const float *)x;
  v128 acc0 = wasm_f32x4_splat(0.0f), acc1 = acc0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = ae_madd(ae_load(a + i), ae_load(b + i), acc0);
    acc1 = ae_madd(ae_load(a + i + 4), ae_load(b + i + 4), acc1);
  }
  if (i + 4 <= n) { acc0 = ae_madd(ae_load(a + i), ae_load(b + i), acc0); i += 4; }
  float sum = ae_hsum_f32(wasm_f32x4_add(acc0, acc1));
  for (; i < n; i++) sum += a[i] * b[i];
  *s = sum;
}

void ae_matvec_rows_f32_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const float *x = (const float *)xq;
  const size_t rs = (size_t)ncols;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const float *w0 = (const float *)W + (size_t)r * rs, *w1 = w0 + rs, *w2 = w1 + rs, *w3 = w2 + rs;
    v128 a0 = wasm_f32x4_splat(0.0f), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    int i = 0;
    for (; i + 8 <= ncols; i += 8) {
      const v128 x0 = ae_load(x + i), x1 = ae_load(x + i + 4);
      a0 = ae_madd(ae_load(w0 + i), x0, a0);
      a1 = ae_madd(ae_load(w0 + i + 4), x1, a1);
      b0 = ae_madd(ae_load(w1 + i), x0, b0);
      b1 = ae_madd(ae_load(w1 + i + 4), x1, b1);
      c0 = ae_madd(ae_load(w2 + i), x0, c0);
      c1 = ae_madd(ae_load(w2 + i + 4), x1, c1);
      d0 = ae_madd(ae_load(w3 + i), x0, d0);
      d1 = ae_madd(ae_load(w3 + i + 4), x1, d1);
    }
    if (i + 4 <= ncols) {
      const v128 x0 = ae_load(x + i);
      a0 = ae_madd(ae_load(w0 + i), x0, a0);
      b0 = ae_madd(ae_load(w1 + i), x0, b0);
      c0 = ae_madd(ae_load(w2 + i), x0, c0);
      d0 = ae_madd(ae_load(w3 + i), x0, d0);
      i += 4;
    }
    const v128 sums = ae_reduce4_f32(wasm_f32x4_add(a0, a1), wasm_f32x4_add(b0, b1), wasm_f32x4_add(c0, c1),
                                     wasm_f32x4_add(d0, d1));
    float s0 = wasm_f32x4_extract_lane(sums, 0), s1 = wasm_f32x4_extract_lane(sums, 1);
    float s2 = wasm_f32x4_extract_lane(sums, 2), s3 = wasm_f32x4_extract_lane(sums, 3);
    for (; i < ncols; i++) {
      s0 += w0[i] * x[i]; s1 += w1[i] * x[i]; s2 += w2[i] * x[i]; s3 += w3[i] * x[i];
    }
    y[r] = s0; y[r + 1] = s1; y[r + 2] = s2; y[r + 3] = s3;
  }
  for (; r < r1; r++) ae_vec_dot_f32_simd128(ncols, &y[r], (const float *)W + (size_t)r * rs, x);
}
