/* bf16 weights x f32 activations. A bf16 is the top half of an f32, so 8 weights become two f32x4 with
 * one interleave each (exact). Per-row arithmetic (the f32 kernel's, so any row split gives the same bits):
 *   acc0 += w[8i..8i+4) * x[..], acc1 += w[8i+4..8i+8) * x[..] over full groups of 8;
 *   one more acc0 step if 4 or more elements remain; v = acc0 + acc1;
 *   s = (v0 + v2) + (v1 + v3); then s += w[i] * x[i] for the last n % 4 elements in order. */
#include "simd128_util.h"

AE_INLINE float bf2f(uint16_t h) { return ae_u2f((uint32_t)h << 16); }

void ae_to_float_bf16_simd128(const void *x, float *y, int n) {
  const uint16_t *h = (const uint16_t *)x;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 v = ae_load(h + i);
    ae_store(y + i, ae_h16_lo(v));
    ae_store(y + i + 4, ae_h16_hi(v));
  }
  for (; i < n; i++) y[i] = bf2f(h[i]);
}

/* ggml GGML_FP32_TO_BF16: round to nearest even, NaN -> quiet NaN (bit 6 of the half set). */
void ae_from_float_bf16_simd128(const float *x, void *y, int n) {
  uint16_t *h = (uint16_t *)y;
  const v128 absm = wasm_i32x4_splat(0x7fffffff), inf = wasm_i32x4_splat(0x7f800000), one = wasm_i32x4_splat(1);
  const v128 bias = wasm_i32x4_splat(0x7fff), q = wasm_i32x4_splat(64);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    v128 r[2];
    for (int k = 0; k < 2; k++) {
      const v128 u = ae_load(x + i + 4 * k);
      const v128 nan = wasm_u32x4_gt(wasm_v128_and(u, absm), inf);
      const v128 hi = wasm_u32x4_shr(u, 16);
      const v128 rne = wasm_u32x4_shr(wasm_i32x4_add(u, wasm_i32x4_add(bias, wasm_v128_and(hi, one))), 16);
      r[k] = wasm_v128_bitselect(wasm_v128_or(hi, q), rne, nan);
    }
    ae_store(h + i, wasm_i8x16_shuffle(r[0], r[1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29));
  }
  if (i < n) ae_from_float_bf16_ref(x + i, h + i, n - i);
}

void ae_vec_dot_bf16_simd128(int n, float *s, const void *w, const void *x) {
  const uint16_t *a = (const uint16_t *)w;
  const float *b = (const float *)x;
  v128 acc0 = wasm_f32x4_splat(0.0f), acc1 = acc0;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 v = ae_load(a + i);
    acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(ae_h16_lo(v), ae_load(b + i)));
    acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(ae_h16_hi(v), ae_load(b + i + 4)));
  }
  if (i + 4 <= n) {
    acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(ae_h16_lo(wasm_v128_load64_zero(a + i)), ae_load(b + i)));
    i += 4;
  }
  float sum = ae_hsum_f32(wasm_f32x4_add(acc0, acc1));
  for (; i < n; i++) sum += bf2f(a[i]) * b[i];
  *s = sum;
}

/* Four rows per pass (four weight streams in flight, x loaded once), each row with exactly the vec_dot
 * sequence above: per-lane reductions in ae_reduce4_f32 use ae_hsum_f32's order. */
void ae_matvec_rows_bf16_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const float *x = (const float *)xq;
  const size_t rs = (size_t)ncols;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t *w[4];
    for (int k = 0; k < 4; k++) w[k] = (const uint16_t *)W + (size_t)(r + k) * rs;
    v128 a0[4], a1[4];
    for (int k = 0; k < 4; k++) { a0[k] = wasm_f32x4_splat(0.0f); a1[k] = a0[k]; }
    int i = 0;
    for (; i + 8 <= ncols; i += 8) {
      const v128 x0 = ae_load(x + i), x1 = ae_load(x + i + 4);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++) {
        const v128 v = ae_load(w[k] + i);
        a0[k] = wasm_f32x4_add(a0[k], wasm_f32x4_mul(ae_h16_lo(v), x0));
        a1[k] = wasm_f32x4_add(a1[k], wasm_f32x4_mul(ae_h16_hi(v), x1));
      }
    }
    if (i + 4 <= ncols) {
      const v128 x0 = ae_load(x + i);
      for (int k = 0; k < 4; k++) a0[k] = wasm_f32x4_add(a0[k], wasm_f32x4_mul(ae_h16_lo(wasm_v128_load64_zero(w[k] + i)), x0));
      i += 4;
    }
    const v128 sums = ae_reduce4_f32(wasm_f32x4_add(a0[0], a1[0]), wasm_f32x4_add(a0[1], a1[1]), wasm_f32x4_add(a0[2], a1[2]),
                                     wasm_f32x4_add(a0[3], a1[3]));
    float s[4] = {wasm_f32x4_extract_lane(sums, 0), wasm_f32x4_extract_lane(sums, 1), wasm_f32x4_extract_lane(sums, 2),
                  wasm_f32x4_extract_lane(sums, 3)};
    for (int j = i; j < ncols; j++)
      for (int k = 0; k < 4; k++) s[k] += bf2f(w[k][j]) * x[j];
    for (int k = 0; k < 4; k++) y[r + k] = s[k];
  }
  for (; r < r1; r++) ae_vec_dot_bf16_simd128(ncols, &y[r], (const uint16_t *)W + (size_t)r * rs, xq);
}
