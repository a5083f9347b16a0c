/* q6_K weights x q8_K activations, plus q6_K dequantise (quantise: the reference quantiser).
 * Per super-block, exact integers: sumi = sum_j sc_j (sum(q x) - 32 bsums[j]) over the 16 sub-blocks of
 * 16 (q unsigned 0..63, the -32 offset folded through the activation's bsums); then in float
 *   acc += (d_w d_x) (float)sumi                              (exactly ae_vec_dot_q6_K_ref)
 * 6-bit values are assembled directly in i16 lanes (even / odd bytes) from ql nibbles and qh bit pairs;
 * the activation super-block is split once and shared by 4 rows; rows sit in the lanes of the float
 * accumulator, so results match the reference bit for bit for any row range. */
#include "simd128_util.h"

void ae_from_float_q6_K_simd128(const float *x, void *y, int n) { ae_from_float_q6_K_ref(x, y, n); }

/* 6-bit values of elements 128h + 32k + 16p + [0, 16) (k = 0..3) as even/odd i16 lanes: e[k], o[k]. */
AE_INLINE void decode(const ae_block_q6_K *w, int h, int p, v128 e[4], v128 o[4]) {
  const v128 l0 = ae_load(w->ql + 64 * h + 16 * p), l1 = ae_load(w->ql + 64 * h + 32 + 16 * p);
  const v128 hb = ae_load(w->qh + 32 * h + 16 * p);
  const v128 f = wasm_i16x8_splat(0x0f), t = wasm_i16x8_splat(0x30);
  e[0] = wasm_v128_or(wasm_v128_and(l0, f), wasm_v128_and(wasm_i16x8_shl(hb, 4), t));
  o[0] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 8), f), wasm_v128_and(wasm_u16x8_shr(hb, 4), t));
  e[1] = wasm_v128_or(wasm_v128_and(l1, f), wasm_v128_and(wasm_i16x8_shl(hb, 2), t));
  o[1] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 8), f), wasm_v128_and(wasm_u16x8_shr(hb, 6), t));
  e[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 4), f), wasm_v128_and(hb, t));
  o[2] = wasm_v128_or(wasm_u16x8_shr(l0, 12), wasm_v128_and(wasm_u16x8_shr(hb, 8), t));
  e[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), f), wasm_v128_and(wasm_u16x8_shr(hb, 2), t));
  o[3] = wasm_v128_or(wasm_u16x8_shr(l1, 12), wasm_v128_and(wasm_u16x8_shr(hb, 10), t));
}

void ae_to_float_q6_K_simd128(const void *x, float *y, int n) {
  const ae_block_q6_K *b = (const ae_block_q6_K *)x;
  for (int i = 0; i < n / AE_QK_K; i++) {
    const float d = ae_h2f_s(b[i].d);
    float *out = y + i * AE_QK_K;
    for (int h = 0; h < 2; h++)
      for (int p = 0; p < 2; p++) {
        v128 e[4], o[4];
        decode(&b[i], h, p, e, o);
        for (int k = 0; k < 4; k++) {
          const int c = 8 * h + 2 * k + p;                 /* 16-element chunk = sub-block index */
          const v128 dv = wasm_f32x4_splat(d * (float)b[i].scales[c]);
          const v128 q32 = wasm_i32x4_splat(32);
          /* interleave even/odd back to element order */
          const v128 lo = wasm_i16x8_shuffle(e[k], o[k], 0, 8, 1, 9, 2, 10, 3, 11);
          const v128 hi = wasm_i16x8_shuffle(e[k], o[k], 4, 12, 5, 13, 6, 14, 7, 15);
          float *dst = out + 16 * c;
          ae_store(dst, wasm_f32x4_mul(dv, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_low_u16x8(lo), q32))));
          ae_store(dst + 4, wasm_f32x4_mul(dv, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_high_u16x8(lo), q32))));
          ae_store(dst + 8, wasm_f32x4_mul(dv, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_low_u16x8(hi), q32))));
          ae_store(dst + 12, wasm_f32x4_mul(dv, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(wasm_u32x4_extend_high_u16x8(hi), q32))));
        }
      }
  }
}

/* Activation super-block split: X[2c], X[2c+1] = even / odd i16 of x[16c .. 16c+16); bs0/bs1 = bsums. */
typedef struct { v128 X[32]; v128 bs0, bs1; } xk;

AE_INLINE void split_x(const ae_block_q8_K *xb, xk *s) {
  for (int c = 0; c < 16; c++) {
    const v128 v = ae_load(xb->qs + 16 * c);
    s->X[2 * c] = ae_i8_even(v);
    s->X[2 * c + 1] = ae_i8_odd(v);
  }
  s->bs0 = ae_load(xb->bsums);
  s->bs1 = ae_load(xb->bsums + 8);
}

/* i32x4 partials of the super-block's sumi */
AE_INLINE v128 row_sb(const ae_block_q6_K *w, const xk *xs) {
  const v128 sc8 = ae_load(w->scales);
  const v128 sc16_lo = wasm_i16x8_extend_low_i8x16(sc8), sc16_hi = wasm_i16x8_extend_high_i8x16(sc8);
  const v128 sc32[4] = {wasm_i32x4_extend_low_i16x8(sc16_lo), wasm_i32x4_extend_high_i16x8(sc16_lo),
                        wasm_i32x4_extend_low_i16x8(sc16_hi), wasm_i32x4_extend_high_i16x8(sc16_hi)};
  const v128 off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc16_lo, xs->bs0), wasm_i32x4_dot_i16x8(sc16_hi, xs->bs1));
  v128 acc = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 5));
  for (int h = 0; h < 2; h++)
    for (int p = 0; p < 2; p++) {
      v128 e[4], o[4];
      decode(w, h, p, e, o);
      for (int k = 0; k < 4; k++) {
        const int c = 8 * h + 2 * k + p;
        const v128 d = wasm_i32x4_add(wasm_i32x4_dot_i16x8(e[k], xs->X[2 * c]), wasm_i32x4_dot_i16x8(o[k], xs->X[2 * c + 1]));
        const v128 sv = sc32[c >> 2];
        v128 s;
        switch (c & 3) {
          case 0: s = wasm_i32x4_shuffle(sv, sv, 0, 0, 0, 0); break;
          case 1: s = wasm_i32x4_shuffle(sv, sv, 1, 1, 1, 1); break;
          case 2: s = wasm_i32x4_shuffle(sv, sv, 2, 2, 2, 2); break;
          default: s = wasm_i32x4_shuffle(sv, sv, 3, 3, 3, 3); break;
        }
        acc = wasm_i32x4_add(acc, wasm_i32x4_mul(d, s));
      }
    }
  return acc;
}

void ae_vec_dot_q6_K_simd128(int n, float *s, const void *w, const void *x) {
  const ae_block_q6_K *a = (const ae_block_q6_K *)w;
  const ae_block_q8_K *b = (const ae_block_q8_K *)x;
  xk xs;
  float sum = 0.0f;
  for (int i = 0; i < n / AE_QK_K; i++) {
    split_x(&b[i], &xs);
    sum += (ae_h2f_s(a[i].d) * b[i].d) * (float)ae_hsum_i32(row_sb(&a[i], &xs));
  }
  *s = sum;
}

void ae_matvec_rows_q6_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  xk xs;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const ae_block_q6_K *w0 = (const ae_block_q6_K *)W + (size_t)r * nb;
    const ae_block_q6_K *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
    v128 acc = wasm_f32x4_splat(0.0f);
    for (int i = 0; i < nb; i++) {
      split_x(&x[i], &xs);
      const v128 si = ae_reduce4_i32(row_sb(&w0[i], &xs), row_sb(&w1[i], &xs), row_sb(&w2[i], &xs), row_sb(&w3[i], &xs));
      const v128 dd = wasm_f32x4_mul(ae_gather4_h2f(&w0[i].d, &w1[i].d, &w2[i].d, &w3[i].d), wasm_f32x4_splat(x[i].d));
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(dd, wasm_f32x4_convert_i32x4(si)));
    }
    ae_store(y + r, acc);
  }
  for (; r < r1; r++) ae_vec_dot_q6_K_simd128(ncols, &y[r], (const ae_block_q6_K *)W + (size_t)r * nb, x);
}
