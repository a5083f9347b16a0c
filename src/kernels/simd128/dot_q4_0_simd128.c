/* q4_0 weights x q8_0 activations, plus q4_0 quantise (the reference quantiser) / dequantise.
 * Per block the exact integer dot sum((q - 8) x) is formed as sum(q x) - 8 sum(x): nibbles are taken
 * straight into i16 lanes (byte pair b0 | b1 << 8: q_lo_even = v & 15, q_lo_odd = (v >> 8) & 15,
 * q_hi_even = (v >> 4) & 15, q_hi_odd = v >> 12), matched with the even/odd split of the activation;
 * sum(x) is computed once per activation block and shared by the 4 rows. Then in float
 *   acc += (float)sumi * (d_w * d_x)      (block order; exactly ae_vec_dot_q4_0_ref)
 * with the 4 rows in the lanes of one accumulator: bit-exact with the reference for any row range. */
#include "simd128_util.h"

void ae_from_float_q4_0_simd128(const float *x, void *y, int n) { ae_from_float_q4_0_ref(x, y, n); }

void ae_to_float_q4_0_simd128(const void *x, float *y, int n) {
  const ae_block_q4_0 *b = (const ae_block_q4_0 *)x;
  const v128 m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  for (int i = 0; i < n / AE_QK4_0; i++) {
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    const v128 v = ae_load(b[i].qs);
    const v128 lo = wasm_i8x16_sub(wasm_v128_and(v, m4), eight);
    const v128 hi = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), eight);
    float *o = y + i * AE_QK4_0;
    const v128 h[4] = {wasm_i16x8_extend_low_i8x16(lo), wasm_i16x8_extend_high_i8x16(lo),
                       wasm_i16x8_extend_low_i8x16(hi), wasm_i16x8_extend_high_i8x16(hi)};
    for (int k = 0; k < 4; k++) {
      ae_store(o + 8 * k, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h[k])), d));
      ae_store(o + 8 * k + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h[k])), d));
    }
  }
}

typedef struct { v128 ae, ao, be, bo, sum8; } xsplit;   /* sum8: 8 * sum(x) in every lane */

AE_INLINE xsplit split_x(const ae_block_q8_0 *xb) {
  const v128 a = ae_load(xb->qs), b = ae_load(xb->qs + 16);
  xsplit s;
  s.ae = ae_i8_even(a); s.ao = ae_i8_odd(a); s.be = ae_i8_even(b); s.bo = ae_i8_odd(b);
  const v128 t = wasm_i16x8_add(wasm_i16x8_add(s.ae, s.ao), wasm_i16x8_add(s.be, s.bo));
  v128 u = wasm_i32x4_dot_i16x8(t, wasm_i16x8_splat(8));
  u = wasm_i32x4_add(u, wasm_i32x4_shuffle(u, u, 2, 3, 0, 1));
  s.sum8 = wasm_i32x4_add(u, wasm_i32x4_shuffle(u, u, 1, 0, 3, 2));
  return s;
}

/* i32x4 partial sums of sum(q x) (unsigned nibbles, without the -8) */
AE_INLINE v128 block_dot(const ae_block_q4_0 *wb, xsplit x) {
  const v128 v = ae_load(wb->qs), m = wasm_i16x8_splat(0x0f);
  const v128 le = wasm_v128_and(v, m), lo = wasm_v128_and(wasm_u16x8_shr(v, 8), m);
  const v128 he = wasm_v128_and(wasm_u16x8_shr(v, 4), m), ho = wasm_u16x8_shr(v, 12);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(le, x.ae), wasm_i32x4_dot_i16x8(lo, x.ao));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(he, x.be), wasm_i32x4_dot_i16x8(ho, x.bo));
  return wasm_i32x4_add(s0, s1);
}

void ae_vec_dot_q4_0_simd128(int n, float *s, const void *w, const void *x) {
  const ae_block_q4_0 *a = (const ae_block_q4_0 *)w;
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  const int nb = n / AE_QK4_0;
  float sum = 0.0f;
  for (int i = 0; i < nb; i++) {
    const xsplit xs = split_x(&b[i]);
    const int32_t sumi = ae_hsum_i32(block_dot(&a[i], xs)) - wasm_i32x4_extract_lane(xs.sum8, 0);
    sum += (float)sumi * (ae_h2f_s(a[i].d) * ae_h2f_s(b[i].d));
  }
  *s = sum;
}

AE_INLINE v128 step4(v128 acc, const ae_block_q4_0 *w0, const ae_block_q4_0 *w1, const ae_block_q4_0 *w2,
                     const ae_block_q4_0 *w3, const ae_block_q8_0 *xb) {
  const xsplit xs = split_x(xb);
  v128 isum = ae_reduce4_i32(block_dot(w0, xs), block_dot(w1, xs), block_dot(w2, xs), block_dot(w3, xs));
  isum = wasm_i32x4_sub(isum, xs.sum8);
  const v128 dw = ae_gather4_h2f(&w0->d, &w1->d, &w2->d, &w3->d);
  const v128 sc = wasm_f32x4_mul(dw, wasm_f32x4_splat(ae_h2f_s(xb->d)));
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), sc));
}

void ae_matvec_rows_q4_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK4_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const ae_block_q4_0 *w0 = (const ae_block_q4_0 *)W + (size_t)r * nb;
    const ae_block_q4_0 *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
    v128 acc = wasm_f32x4_splat(0.0f);
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
      acc = step4(acc, w0 + i, w1 + i, w2 + i, w3 + i, x + i);
      acc = step4(acc, w0 + i + 1, w1 + i + 1, w2 + i + 1, w3 + i + 1, x + i + 1);
    }
    if (i < nb) acc = step4(acc, w0 + i, w1 + i, w2 + i, w3 + i, x + i);
    ae_store(y + r, acc);
  }
  for (; r < r1; r++) ae_vec_dot_q4_0_simd128(ncols, &y[r], (const ae_block_q4_0 *)W + (size_t)r * nb, x);
}
