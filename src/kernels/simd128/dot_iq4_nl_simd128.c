/* iq4_nl weights x q8_0 activations, plus iq4_nl dequantise (quantise: the reference quantiser). Block layout and the
 * reference's arithmetic: src/kernels/ref/iq4_nl_ref.c. The codes become their values by one i8x16.swizzle against the
 * 16-value table (codes 0..15: always in range); the values are signed, as the activations are, so the products go
 * through i16 (extend, i32x4.dot_i16x8: exact) in both builds. Per block: sumi exact, then per row
 * acc += (float)sumi * (d_w d_x), the reference's sequence. The row kernel takes 4 rows at a time (one from each
 * quarter of its range; the activation block widened once for the 4), their float steps in the lanes. The prefill GEMM
 * (kind WM): gemm_iq4_simd128.c. */
#include "iq4_simd128.h"

void ae_from_float_iq4_nl_simd128(const float *x, void *y, int n) { ae_from_float_iq4_nl_ref(x, y, n); }

/* o[0..16) = dl * the 16 values of v (i8), in the references' order (scale times value) */
AE_INLINE void iq4_store16(float *o, v128 dl, v128 v) {
  const v128 l = wasm_i16x8_extend_low_i8x16(v), u = wasm_i16x8_extend_high_i8x16(v);
  ae_store(o, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(l))));
  ae_store(o + 4, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(l))));
  ae_store(o + 8, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(u))));
  ae_store(o + 12, wasm_f32x4_mul(dl, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(u))));
}

void ae_to_float_iq4_nl_simd128(const void *x, float *y, int n) {
  const ae_block_iq4_nl *b = (const ae_block_iq4_nl *)x;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < n / 32; i++) {
    v128 v[2];
    iq4_values(b[i].qs, lut, m, &v[0], &v[1]);
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    for (int h = 0; h < 2; h++) iq4_store16(y + 32 * i + 16 * h, d, v[h]);
  }
}

/* i32 lanes summing to the block's sumi, against the activation block widened to i16 (X[0..3]: elements 0-7, 8-15,
 * 16-23, 24-31) */
AE_INLINE v128 iq4nl_dot(const ae_block_iq4_nl *w, const v128 X[4], v128 lut, v128 m) {
  v128 lo, hi;
  iq4_values(w->qs, lut, m, &lo, &hi);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(lo), X[0]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(lo), X[1])),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(hi), X[2]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(hi), X[3])));
}
AE_INLINE void iq4nl_widen(const ae_block_q8_0 *x, v128 X[4]) {
  const v128 a = ae_load(x->qs), b = ae_load(x->qs + 16);
  X[0] = wasm_i16x8_extend_low_i8x16(a); X[1] = wasm_i16x8_extend_high_i8x16(a);
  X[2] = wasm_i16x8_extend_low_i8x16(b); X[3] = wasm_i16x8_extend_high_i8x16(b);
}

/* lane k = the sum of a_k's lanes (exact) */
AE_INLINE v128 iq4nl_hsum4(v128 a0, v128 a1, v128 a2, v128 a3) {
  const v128 t0 = wasm_i32x4_add(wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7));
  const v128 t1 = wasm_i32x4_add(wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5), wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 1, 4, 5), wasm_i32x4_shuffle(t0, t1, 2, 3, 6, 7));
}


/* ---- iq4_xs (src/kernels/ref/iq4_xs_ref.c): iq4_nl's codes and values in 8 sub-blocks of 32 with 6-bit scales, q8_K
 * activations. Per sub-block the i16 products as iq4_nl's, times the sub-block's scale (i32x4.mul), summed exactly. */
void ae_from_float_iq4_xs_simd128(const float *x, void *y, int n) { ae_from_float_iq4_xs_ref(x, y, n); }

void ae_to_float_iq4_xs_simd128(const void *x, float *y, int n) {
  const ae_block_iq4_xs *b = (const ae_block_iq4_xs *)x;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = ae_h2f_s(b[i].d);
    for (int ib = 0; ib < 8; ib++) {
      v128 v[2];
      iq4_values(b[i].qs + 16 * ib, lut, m, &v[0], &v[1]);
      const v128 dl = wasm_f32x4_splat(d * (float)iq4xs_scale(&b[i], ib));   /* the reference's (d * ls) * value */
      for (int h = 0; h < 2; h++) iq4_store16(y + i * AE_QK_K + 32 * ib + 16 * h, dl, v[h]);
    }
  }
}

/* i32 lanes summing to the block's sumi for 4 rows (acc[k]), the activation's sub-block widened once for the 4 */
AE_INLINE void iq4xs_block4(const ae_block_iq4_xs *const w[4], const ae_block_q8_K *x, v128 lut, v128 m, v128 acc[4]) {
  volatile v128 sink[4];
  int ls[4][8];
  for (int k = 0; k < 4; k++) for (int ib = 0; ib < 8; ib++) ls[k][ib] = iq4xs_scale(w[k], ib);
  acc[0] = acc[1] = acc[2] = acc[3] = wasm_i32x4_splat(0);
  for (int ib = 0; ib < 8; ib++) {
    const v128 a = ae_load(x->qs + 32 * ib), b = ae_load(x->qs + 32 * ib + 16);
    const v128 X[4] = {wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_low_i8x16(b), wasm_i16x8_extend_high_i8x16(b)};
    for (int k = 0; k < 4; k++) {
      v128 lo, hi;
      iq4_values(w[k]->qs + 16 * ib, lut, m, &lo, &hi);
      const v128 d = wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(lo), X[0]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(lo), X[1])),
                                    wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(hi), X[2]), wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(hi), X[3])));
      acc[k] = wasm_i32x4_add(acc[k], wasm_i32x4_mul(d, wasm_i32x4_splat(ls[k][ib])));
    }
    sink[0] = acc[0]; sink[1] = acc[1]; sink[2] = acc[2]; sink[3] = acc[3];
  }
}

/* The row kernel of both dtypes (xs: iq4_xs, a constant after inlining): rows in groups of 4, one from each quarter of
 * the range (ae_rows4), the float steps in the lanes: per lane the reference's sequence ((float)sumi times d_w d_x; the
 * product of two floats does not depend on their order), so any row range and grouping gives its bits. */
AE_INLINE void iq4_matvec(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int xs) {
  const int nb = ncols / (xs ? AE_QK_K : 32);
  const size_t bs = xs ? sizeof(ae_block_iq4_xs) : sizeof(ae_block_iq4_nl), rs = (size_t)nb * bs;
  const int q = (r1 - r0) / 4, tail = (r1 - r0) - 4 * q;
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int i = 0; i < q + tail; i++) {
    int rr[4];
    const int nr = ae_rows4(i, q, r0, rr);
    const uint8_t *row[4];
    for (int k = 0; k < 4; k++) row[k] = (const uint8_t *)W + (size_t)rr[k] * rs;
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int b = 0; b < nb; b++) {
      const size_t o = (size_t)b * bs;
      v128 sumi;
      float dx;
      if (xs) {
        const ae_block_q8_K *x = (const ae_block_q8_K *)xq + b;
        const ae_block_iq4_xs *w4[4] = {(const void *)(row[0] + o), (const void *)(row[1] + o), (const void *)(row[2] + o), (const void *)(row[3] + o)};
        v128 a[4];
        iq4xs_block4(w4, x, lut, m, a);
        sumi = iq4nl_hsum4(a[0], a[1], a[2], a[3]);
        dx = x->d;
      } else {
        const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq + b;
        v128 X[4];
        iq4nl_widen(x, X);
        sumi = iq4nl_hsum4(iq4nl_dot((const void *)(row[0] + o), X, lut, m), iq4nl_dot((const void *)(row[1] + o), X, lut, m),
                           iq4nl_dot((const void *)(row[2] + o), X, lut, m), iq4nl_dot((const void *)(row[3] + o), X, lut, m));
        dx = ae_h2f_s(x->d);
      }
      ae_fp16 d[4];   /* d is the first field of both blocks */
      for (int k = 0; k < 4; k++) __builtin_memcpy(&d[k], row[k] + o, 2);
      const v128 dw = wasm_f32x4_make(ae_h2f_s(d[0]), ae_h2f_s(d[1]), ae_h2f_s(d[2]), ae_h2f_s(d[3]));
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), wasm_f32x4_mul(dw, wasm_f32x4_splat(dx))));
    }
    ae_store_rows4(y, rr, nr, acc);
  }
}
void ae_matvec_rows_iq4_nl_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { iq4_matvec(W, ncols, xq, y, r0, r1, 0); }
void ae_matvec_rows_iq4_xs_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) { iq4_matvec(W, ncols, xq, y, r0, r1, 1); }
/* one row: the row kernel's arithmetic (the row in all 4 lanes), the references' bits */
void ae_vec_dot_iq4_nl_simd128(int n, float *s, const void *w, const void *x) { iq4_matvec(w, n, x, s, 0, 1, 0); }
void ae_vec_dot_iq4_xs_simd128(int n, float *s, const void *w, const void *x) { iq4_matvec(w, n, x, s, 0, 1, 1); }
