/* iq4_nl weights x q8_0 activations, plus iq4_nl dequantise (quantise: the reference quantiser). Block layout and the
 * reference's arithmetic: src/kernels/ref/iq4_nl_ref.c. The codes become their values by one i8x16.swizzle against the
 * 16-value table (codes 0..15: always in range); the values are signed, as the activations are, so the products go
 * through i16 (extend, i32x4.dot_i16x8: exact) in both builds. Per block: sumi exact, then per row
 * acc += (float)sumi * (d_w d_x), the reference's sequence. The row kernel takes 4 rows at a time (one from each
 * quarter of its range; the activation block widened once for the 4), their float steps in the lanes; kind W:
 * ae_matmul runs it per token over row chunks. */
#include "simd128_util.h"

void ae_from_float_iq4_nl_simd128(const float *x, void *y, int n) { ae_from_float_iq4_nl_ref(x, y, n); }

/* the value table and the nibble mask, loaded through an opaque pointer (V8 would rebuild a v128.const per use) */
AE_INLINE void iq4nl_consts(v128 *lut, v128 *m) {
  static const uint8_t k[16] __attribute__((aligned(16))) = {15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15};
  const int8_t *p = AE_IQ4NL_VALUES;
  const uint8_t *q = k;
  __asm__("" : "+r"(p), "+r"(q));
  *lut = wasm_v128_load(p); *m = wasm_v128_load(q);
}
/* the block's values: elements 0..15 (lo), 16..31 (hi), i8 */
AE_INLINE void iq4nl_values(const ae_block_iq4_nl *w, v128 lut, v128 m, v128 *lo, v128 *hi) {
  const v128 q = ae_load(w->qs);
  *lo = wasm_i8x16_swizzle(lut, wasm_v128_and(q, m));
  *hi = wasm_i8x16_swizzle(lut, wasm_v128_and(wasm_u16x8_shr(q, 4), m));
}

void ae_to_float_iq4_nl_simd128(const void *x, float *y, int n) {
  const ae_block_iq4_nl *b = (const ae_block_iq4_nl *)x;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < n / 32; i++) {
    v128 v[2];
    iq4nl_values(&b[i], lut, m, &v[0], &v[1]);
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    for (int h = 0; h < 2; h++) {
      const v128 l = wasm_i16x8_extend_low_i8x16(v[h]), u = wasm_i16x8_extend_high_i8x16(v[h]);
      float *o = y + 32 * i + 16 * h;
      ae_store(o, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(l))));
      ae_store(o + 4, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(l))));
      ae_store(o + 8, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(u))));
      ae_store(o + 12, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(u))));
    }
  }
}

/* i32 lanes summing to the block's sumi, against the activation block widened to i16 (X[0..3]: elements 0-7, 8-15,
 * 16-23, 24-31) */
AE_INLINE v128 iq4nl_dot(const ae_block_iq4_nl *w, const v128 X[4], v128 lut, v128 m) {
  v128 lo, hi;
  iq4nl_values(w, lut, m, &lo, &hi);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(lo), X[0]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(lo), X[1])),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(hi), X[2]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(hi), X[3])));
}
AE_INLINE void iq4nl_widen(const ae_block_q8_0 *x, v128 X[4]) {
  const v128 a = ae_load(x->qs), b = ae_load(x->qs + 16);
  X[0] = wasm_i16x8_extend_low_i8x16(a); X[1] = wasm_i16x8_extend_high_i8x16(a);
  X[2] = wasm_i16x8_extend_low_i8x16(b); X[3] = wasm_i16x8_extend_high_i8x16(b);
}

void ae_vec_dot_iq4_nl_simd128(int n, float *s, const void *w, const void *x) {
  const ae_block_iq4_nl *a = (const ae_block_iq4_nl *)w;
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  v128 lut, m, X[4];
  iq4nl_consts(&lut, &m);
  float sum = 0.0f;
  for (int i = 0; i < n / 32; i++) {
    iq4nl_widen(&b[i], X);
    sum += (float)ae_hsum_i32(iq4nl_dot(&a[i], X, lut, m)) * (ae_h2f_s(a[i].d) * ae_h2f_s(b[i].d));
  }
  *s = sum;
}

/* lane k = the sum of a_k's lanes (exact) */
AE_INLINE v128 iq4nl_hsum4(v128 a0, v128 a1, v128 a2, v128 a3) {
  const v128 t0 = wasm_i32x4_add(wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7));
  const v128 t1 = wasm_i32x4_add(wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5), wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5), wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7));
}

/* Rows in groups of 4, one from each quarter of the range (each row left over: in all 4 lanes), the float steps in
 * the lanes: per lane the reference's sequence, so any row range and grouping gives its bits. */
void ae_matvec_rows_iq4_nl_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * sizeof(ae_block_iq4_nl);
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  const int q = (r1 - r0) / 4, tail = (r1 - r0) - 4 * q;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < q + tail; i++) {
    int rr[4];
    for (int k = 0; k < 4; k++) rr[k] = i < q ? r0 + i + k * q : r0 + 4 * q + (i - q);
    const ae_block_iq4_nl *row[4];
    for (int k = 0; k < 4; k++) row[k] = (const ae_block_iq4_nl *)((const uint8_t *)W + (size_t)rr[k] * rs);
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int b = 0; b < nb; b++) {
      v128 X[4];
      iq4nl_widen(&x[b], X);
      const v128 s = iq4nl_hsum4(iq4nl_dot(row[0] + b, X, lut, m), iq4nl_dot(row[1] + b, X, lut, m), iq4nl_dot(row[2] + b, X, lut, m), iq4nl_dot(row[3] + b, X, lut, m));
      const v128 dw = wasm_f32x4_make(ae_h2f_s(row[0][b].d), ae_h2f_s(row[1][b].d), ae_h2f_s(row[2][b].d), ae_h2f_s(row[3][b].d));
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_mul(dw, wasm_f32x4_splat(ae_h2f_s(x[b].d)))));
    }
    y[rr[0]] = wasm_f32x4_extract_lane(acc, 0);
    if (i < q) { y[rr[1]] = wasm_f32x4_extract_lane(acc, 1); y[rr[2]] = wasm_f32x4_extract_lane(acc, 2); y[rr[3]] = wasm_f32x4_extract_lane(acc, 3); }
  }
}
