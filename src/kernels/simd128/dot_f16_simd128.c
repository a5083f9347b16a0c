/* f16 weights x f32 activations (vec_dot_type f32): halves are converted in registers with integer
 * bit tricks (wasm has no f16 conversion).
 * Per-row arithmetic (4-row and 1-row paths identical): over groups of 8 halves
 *   acc += f32(h[8i..8i+4)) * x[..]; acc += f32(h[8i+4..8i+8)) * x[..];
 * one more step if 4 or more remain; s = (acc0 + acc2) + (acc1 + acc3); then
 * s += f32(h[i]) * x[i] for the last n % 4 elements. The loop uses the fast conversion
 * (ae_h2f_fast, exact for finite halves) and tracks inf/nan; a row group that saw one is recomputed
 * with the exact conversion (same arithmetic, so finite rows are unaffected). */
#include "simd128_util.h"

/* ---- conversions ---- */
void ae_to_float_f16_simd128(const void *x, float *y, int n) {
  const ae_fp16 *h = (const ae_fp16 *)x;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 v = ae_load(h + i);
    ae_store(y + i, ae_h2f_exact(ae_h16_lo(v)));
    ae_store(y + i + 4, ae_h2f_exact(ae_h16_hi(v)));
  }
  for (; i < n; i++) y[i] = ae_h2f_s(h[i]);
}

/* fp32 -> fp16, round to nearest even, bit-identical to ae_fp32_to_fp16 (NaN payload rule included).
 * Normal results: add the rounding bias (0xfff + lowest kept bit) to the rebiased bits and shift;
 * subnormal results: adding 0.5f makes the float adder round |f| to a multiple of 2^-24. */
static inline v128 f2h_lanes(v128 f) {
  const v128 sign = wasm_u32x4_shr(wasm_v128_and(f, wasm_i32x4_const_splat((int32_t)0x80000000u)), 16);
  const v128 a = wasm_v128_and(f, wasm_i32x4_const_splat(0x7fffffff));
  /* normal: |f| in [2^-14, 65520) */
  const v128 odd = wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_const_splat(1));
  v128 nrm = wasm_i32x4_add(a, wasm_i32x4_const_splat((int32_t)(0xc8000000u + 0xfffu)));  /* -112 << 23 */
  nrm = wasm_u32x4_shr(wasm_i32x4_add(nrm, odd), 13);
  /* subnormal or zero: |f| < 2^-14 */
  const v128 sub = wasm_i32x4_sub(wasm_f32x4_add(a, wasm_f32x4_splat(0.5f)), wasm_f32x4_splat(0.5f));
  /* inf / nan / overflow */
  const v128 nanm = wasm_u32x4_shr(wasm_v128_and(a, wasm_i32x4_const_splat(0x007fffff)), 13);
  const v128 nanp = wasm_v128_or(wasm_i32x4_const_splat(0x7c00),
                                 wasm_v128_bitselect(wasm_i32x4_const_splat(0x200), nanm,
                                                     wasm_i32x4_eq(nanm, wasm_i32x4_const_splat(0))));
  const v128 is_nan = wasm_i32x4_gt(a, wasm_i32x4_const_splat(0x7f800000));
  const v128 big = wasm_v128_bitselect(nanp, wasm_i32x4_const_splat(0x7c00), is_nan);
  const v128 is_big = wasm_i32x4_ge(a, wasm_i32x4_const_splat(0x47800000));   /* >= 65536 */
  const v128 is_sub = wasm_i32x4_lt(a, wasm_i32x4_const_splat(0x38800000));   /* < 2^-14 */
  v128 r = wasm_v128_bitselect(sub, nrm, is_sub);
  r = wasm_v128_bitselect(big, r, is_big);
  return wasm_v128_or(r, sign);
}
void ae_from_float_f16_simd128(const float *x, void *y, int n) {
  ae_fp16 *h = (ae_fp16 *)y;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 lo = f2h_lanes(ae_load(x + i)), hi = f2h_lanes(ae_load(x + i + 4));
    ae_store(h + i, wasm_i8x16_shuffle(lo, hi, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29));
  }
  for (; i < n; i++) h[i] = ae_fp32_to_fp16(x[i]);
}

/* ---- dot products ----
 * exact: 0 fast conversion, 1 exact conversion, 2 fast conversion without its final * 2^112, which is
 * applied to the activation instead: (b 2^112) x and b (x 2^112) are the same real product, rounded
 * once, so the results are bit-identical as long as x 2^112 does not overflow (all finite |x| < 2^16,
 * checked once per call). */
#define RAW 2
AE_INLINE v128 cvt(v128 x32, int exact) {
  if (exact == 1) return ae_h2f_exact(x32);
  if (exact == RAW) return ae_h2f_raw(x32);
  return ae_h2f_fast(x32);
}
AE_INLINE v128 xs(v128 x, int exact) { return exact == RAW ? wasm_f32x4_mul(x, wasm_f32x4_splat(0x1p112f)) : x; }

/* One row; returns 1 if an inf/nan half was seen (only tracked when !exact). */
AE_INLINE int dot_row(int n, float *s, const ae_fp16 *h, const float *x, int exact) {
  v128 acc = wasm_f32x4_splat(0.0f), m = wasm_i32x4_splat(0);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 v = ae_load(h + i);
    if (exact != 1) m = ae_h16_infnan_acc(m, v);
    acc = ae_madd(cvt(ae_h16_lo(v), exact), xs(ae_load(x + i), exact), acc);
    acc = ae_madd(cvt(ae_h16_hi(v), exact), xs(ae_load(x + i + 4), exact), acc);
  }
  if (i + 4 <= n) {
    const v128 v = wasm_v128_load64_zero(h + i);
    if (exact != 1) m = ae_h16_infnan_acc(m, v);
    acc = ae_madd(cvt(ae_h16_lo(v), exact), xs(ae_load(x + i), exact), acc);
    i += 4;
  }
  float sum = ae_hsum_f32(acc);
  for (; i < n; i++) sum += ae_h2f_s(h[i]) * x[i];
  *s = sum;
  return exact == 1 ? 0 : ae_h16_has_infnan(m);
}

void ae_vec_dot_f16_simd128(int n, float *s, const void *w, const void *x) {
  if (dot_row(n, s, (const ae_fp16 *)w, (const float *)x, 0)) dot_row(n, s, (const ae_fp16 *)w, (const float *)x, 1);
}

AE_INLINE int rows4(int n, float *y, const ae_fp16 *w0, const float *x, size_t rs, int exact) {
  const ae_fp16 *w1 = w0 + rs, *w2 = w1 + rs, *w3 = w2 + rs;
  v128 a0 = wasm_f32x4_splat(0.0f), b0 = a0, c0 = a0, d0 = a0;
  v128 m = wasm_i32x4_splat(0);
  int i = 0;
#define STEP8(acc0, wp)                                                                          \
  do {                                                                                           \
    const v128 v = ae_load(wp + i);                                                              \
    if (exact != 1) m = ae_h16_infnan_acc(m, v);                                                 \
    acc0 = ae_madd(cvt(ae_h16_lo(v), exact), x0, acc0);                   \
    acc0 = ae_madd(cvt(ae_h16_hi(v), exact), x1, acc0);                   \
  } while (0)
  for (; i + 8 <= n; i += 8) {
    const v128 x0 = xs(ae_load(x + i), exact), x1 = xs(ae_load(x + i + 4), exact);
    STEP8(a0, w0); STEP8(b0, w1); STEP8(c0, w2); STEP8(d0, w3);
  }
#undef STEP8
#define STEP4(acc0, wp)                                                                          \
  do {                                                                                           \
    const v128 v = wasm_v128_load64_zero(wp + i);                                                \
    if (exact != 1) m = ae_h16_infnan_acc(m, v);                                                 \
    acc0 = ae_madd(cvt(ae_h16_lo(v), exact), x0, acc0);                   \
  } while (0)
  if (i + 4 <= n) {
    const v128 x0 = xs(ae_load(x + i), exact);
    STEP4(a0, w0); STEP4(b0, w1); STEP4(c0, w2); STEP4(d0, w3);
    i += 4;
  }
#undef STEP4
  const v128 sums = ae_reduce4_f32(a0, b0, c0, d0);
  float s0 = wasm_f32x4_extract_lane(sums, 0), s1 = wasm_f32x4_extract_lane(sums, 1);
  float s2 = wasm_f32x4_extract_lane(sums, 2), s3 = wasm_f32x4_extract_lane(sums, 3);
  for (; i < n; i++) {
    s0 += ae_h2f_s(w0[i]) * x[i]; s1 += ae_h2f_s(w1[i]) * x[i];
    s2 += ae_h2f_s(w2[i]) * x[i]; s3 += ae_h2f_s(w3[i]) * x[i];
  }
  y[0] = s0; y[1] = s1; y[2] = s2; y[3] = s3;
  return exact == 1 ? 0 : ae_h16_has_infnan(m);
}

void ae_matvec_rows_f16_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const float *x = (const float *)xq;
  const size_t rs = (size_t)ncols;
  int r = r0;
  const int raw = r1 - r0 >= 4 && ae_f32_below_2p16(x, ncols);
  for (; r + 4 <= r1; r += 4) {
    const ae_fp16 *w0 = (const ae_fp16 *)W + (size_t)r * rs;
    if (raw ? rows4(ncols, y + r, w0, x, rs, RAW) : rows4(ncols, y + r, w0, x, rs, 0)) rows4(ncols, y + r, w0, x, rs, 1);
  }
  for (; r < r1; r++) ae_vec_dot_f16_simd128(ncols, &y[r], (const ae_fp16 *)W + (size_t)r * rs, x);
}
