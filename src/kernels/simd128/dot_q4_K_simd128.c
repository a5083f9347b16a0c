/* q4_K weights x q8_K activations, plus q4_K dequantise (quantise: the reference quantiser).
 * Per super-block, exact integers: sumi_q = sum_j sc_j sum(q x) over sub-block j (32 elements),
 * sumi_m = sum_j m_j (bsums[2j] + bsums[2j+1]); then in float
 *   acc += (d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m      (exactly ae_vec_dot_q4_K_ref)
 * The activation super-block is split once into even/odd i16 (kept in a 0.5 KiB stack buffer) and
 * shared by 4 rows; nibbles go straight into i16 lanes; 6-bit scales/mins are unpacked with one
 * byte shuffle and masks; sub-block sums are scaled with i32x4.mul. The 4 rows occupy the lanes of the
 * float accumulator, so results match the reference bit for bit for any row range. */
#include "simd128_util.h"

void ae_from_float_q4_K_simd128(const float *x, void *y, int n) { ae_from_float_q4_K_ref(x, y, n); }

/* 12 packed bytes -> u8 lanes 0..7 = scales, 8..15 = mins. Reads 16 bytes (the 4 after the scales are
 * the first quants of the same block). */
AE_INLINE v128 unpack_scales(const uint8_t *q) {
  const v128 v = ae_load(q);
  const v128 s1 = wasm_i8x16_shuffle(v, v, 0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11);
  const v128 s2 = wasm_i8x16_shuffle(v, v, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7);
  const v128 a = wasm_v128_and(s1, wasm_i8x16_const(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const v128 b = wasm_v128_and(wasm_u16x8_shr(s1, 4), wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const v128 c = wasm_v128_and(wasm_u16x8_shr(s2, 2),
                               wasm_i8x16_const(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48));
  return wasm_v128_or(wasm_v128_or(a, b), c);
}

void ae_to_float_q4_K_simd128(const void *x, float *y, int n) {
  const ae_block_q4_K *b = (const ae_block_q4_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    uint8_t sm[16];
    ae_store(sm, unpack_scales(b[i].scales));
    const float d = ae_h2f_s(b[i].d), dmin = ae_h2f_s(b[i].dmin);
    float *o = y + i * AE_QK_K;
    for (int j = 0; j < 8; j++) {
      const v128 d1 = wasm_f32x4_splat(d * (float)sm[j]), m1 = wasm_f32x4_splat(dmin * (float)sm[8 + j]);
      for (int h = 0; h < 2; h++) {
        v128 q = ae_load(b[i].qs + 32 * (j / 2) + 16 * h);
        q = wasm_v128_and((j & 1) ? wasm_u16x8_shr(q, 4) : q, wasm_i8x16_splat(0x0f));
        const v128 lo = wasm_u16x8_extend_low_u8x16(q), hi = wasm_u16x8_extend_high_u8x16(q);
        const v128 f[4] = {wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(lo)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(lo)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_low_u16x8(hi)),
                           wasm_f32x4_convert_i32x4(wasm_u32x4_extend_high_u16x8(hi))};
        for (int k = 0; k < 4; k++) ae_store(o + 32 * j + 16 * h + 4 * k, wasm_f32x4_sub(wasm_f32x4_mul(d1, f[k]), m1));
      }
    }
  }
}

/* Activation super-block split: X[2c], X[2c+1] = even / odd i16 of x[16c .. 16c+16); bsp lanes j =
 * bsums[2j] + bsums[2j+1]. */
typedef struct { v128 X[32]; v128 bsp; } xk;

AE_INLINE void split_x(const ae_block_q8_K *xb, xk *s) {
  for (int c = 0; c < 16; c++) {
    const v128 v = ae_load(xb->qs + 16 * c);
    s->X[2 * c] = ae_i8_even(v);
    s->X[2 * c + 1] = ae_i8_odd(v);
  }
  const v128 b0 = ae_load(xb->bsums), b1 = ae_load(xb->bsums + 8);
  s->bsp = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14),
                          wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
}

/* One row's super-block: *q = i32x4 partials of sumi_q, *m = partials of sumi_m. */
AE_INLINE void row_sb(const ae_block_q4_K *w, const xk *xs, v128 *q, v128 *m) {
  const v128 sm = unpack_scales(w->scales);
  const v128 sc16 = wasm_u16x8_extend_low_u8x16(sm);
  const v128 sc_lo = wasm_u32x4_extend_low_u16x8(sc16), sc_hi = wasm_u32x4_extend_high_u16x8(sc16);
  *m = wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(sm), xs->bsp);
  const v128 f = wasm_i16x8_splat(0x0f);
  v128 acc = wasm_i32x4_splat(0);
  for (int g = 0; g < 4; g++) {
    const v128 v0 = ae_load(w->qs + 32 * g), v1 = ae_load(w->qs + 32 * g + 16);
    const v128 *X = xs->X + 8 * g;
    v128 d0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v0, f), X[0]),
                             wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v0, 8), f), X[1]));
    d0 = wasm_i32x4_add(d0, wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v1, f), X[2]),
                                           wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v1, 8), f), X[3])));
    v128 d1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v0, 4), f), X[4]),
                             wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v0, 12), X[5]));
    d1 = wasm_i32x4_add(d1, wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(v1, 4), f), X[6]),
                                           wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v1, 12), X[7])));
    const v128 scv = g < 2 ? sc_lo : sc_hi;
    v128 s0, s1;
    switch (g & 1) {
      case 0: s0 = wasm_i32x4_shuffle(scv, scv, 0, 0, 0, 0); s1 = wasm_i32x4_shuffle(scv, scv, 1, 1, 1, 1); break;
      default: s0 = wasm_i32x4_shuffle(scv, scv, 2, 2, 2, 2); s1 = wasm_i32x4_shuffle(scv, scv, 3, 3, 3, 3); break;
    }
    acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_mul(d0, s0), wasm_i32x4_mul(d1, s1)));
  }
  *q = acc;
}

void ae_vec_dot_q4_K_simd128(int n, float *s, const void *w, const void *x) {
  const ae_block_q4_K *a = (const ae_block_q4_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  xk xs;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    split_x(&b[i], &xs);
    v128 q, m;
    row_sb(&a[i], &xs, &q, &m);
    const float dall = ae_h2f_s(a[i].d) * b[i].d, dmin = ae_h2f_s(a[i].dmin) * b[i].d;
    sum += dall * (float)ae_hsum_i32(q) - dmin * (float)ae_hsum_i32(m);
  }
  *s = sum;
}

void ae_matvec_rows_q4_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  xk xs;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const ae_block_q4_K *w0 = (const ae_block_q4_K *)W + (size_t)r * nb;
    const ae_block_q4_K *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int i = 0; i < nb; i++) {
      split_x(&x[i], &xs);
      v128 q0, q1, q2, q3, m0, m1, m2, m3;
      row_sb(&w0[i], &xs, &q0, &m0);
      row_sb(&w1[i], &xs, &q1, &m1);
      row_sb(&w2[i], &xs, &q2, &m2);
      row_sb(&w3[i], &xs, &q3, &m3);
      const v128 sq = wasm_f32x4_convert_i32x4(ae_reduce4_i32(q0, q1, q2, q3));
      const v128 sm = wasm_f32x4_convert_i32x4(ae_reduce4_i32(m0, m1, m2, m3));
      const v128 dx = wasm_f32x4_splat(x[i].d);
      const v128 dall = wasm_f32x4_mul(ae_gather4_h2f(&w0[i].d, &w1[i].d, &w2[i].d, &w3[i].d), dx);
      const v128 dmin = wasm_f32x4_mul(ae_gather4_h2f(&w0[i].dmin, &w1[i].dmin, &w2[i].dmin, &w3[i].dmin), dx);
      acc = wasm_f32x4_add(acc, wasm_f32x4_sub(wasm_f32x4_mul(dall, sq), wasm_f32x4_mul(dmin, sm)));
    }
    ae_store(y + r, acc);
  }
  for (; r < r1; r++) ae_vec_dot_q4_K_simd128(ncols, &y[r], (const ae_block_q4_K *)W + (size_t)r * nb, x);
}
