/* q8_0 weights x q8_0 activations, plus q8_0 quantise / dequantise.
 * Per block: exact integer dot (i8 -> i16 even/odd split, i32x4.dot_i16x8_s), then in float
 *   acc += (float)sumi * (d_w * d_x)       (block order; exactly ae_vec_dot_q8_0_ref)
 * The 4-row kernel keeps one f32x4 accumulator whose lanes are the 4 rows, so every row gets the same
 * scalar operation sequence as the 1-row path and the reference: results match the reference bit for bit
 * for any row range. Two blocks per loop iteration; the activation block is split once for 4 rows. */
#include "simd128_util.h"

/* ---- quantise: ggml quantize_row_q8_0 (d = amax / 127, q = roundf(x / d) via x * (1 / d)) ---- */
AE_INLINE v128 round_half_away(v128 v) {
  const v128 t = wasm_f32x4_trunc(v);
  const v128 d = wasm_f32x4_sub(v, t);                                   /* exact */
  const v128 one = wasm_f32x4_splat(1.0f);
  const v128 up = wasm_v128_and(wasm_f32x4_ge(d, wasm_f32x4_splat(0.5f)), one);
  const v128 dn = wasm_v128_and(wasm_f32x4_le(d, wasm_f32x4_splat(-0.5f)), one);
  return wasm_f32x4_sub(wasm_f32x4_add(t, up), dn);
}

void ae_from_float_q8_0_simd128(const float *x, void *y, int n) {
  ae_block_q8_0 *b = (ae_block_q8_0 *)y;
  for (int i = 0; i < n / AE_QK8_0; i++) {
    const float *v = x + i * AE_QK8_0;
    v128 f[8];
    v128 am = wasm_f32x4_splat(0.0f);
    for (int j = 0; j < 8; j++) {
      f[j] = ae_load(v + 4 * j);
      am = wasm_f32x4_pmax(am, wasm_f32x4_abs(f[j]));
    }
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 2, 3, 0, 1));
    am = wasm_f32x4_pmax(am, wasm_i32x4_shuffle(am, am, 1, 0, 3, 2));
    const float amax = wasm_f32x4_extract_lane(am, 0);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = ae_fp32_to_fp16(d);
    const v128 idv = wasm_f32x4_splat(id);
    v128 q[8];
    for (int j = 0; j < 8; j++) q[j] = wasm_i32x4_trunc_sat_f32x4(round_half_away(wasm_f32x4_mul(f[j], idv)));
    const v128 h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
    const v128 h2 = wasm_i16x8_narrow_i32x4(q[4], q[5]), h3 = wasm_i16x8_narrow_i32x4(q[6], q[7]);
    ae_store(b[i].qs, wasm_i8x16_narrow_i16x8(h0, h1));
    ae_store(b[i].qs + 16, wasm_i8x16_narrow_i16x8(h2, h3));
  }
}

void ae_to_float_q8_0_simd128(const void *x, float *y, int n) {
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  for (int i = 0; i < n / AE_QK8_0; i++) {
    const v128 d = wasm_f32x4_splat(ae_h2f_s(b[i].d));
    float *o = y + i * AE_QK8_0;
    for (int h = 0; h < 2; h++) {
      const v128 q = ae_load(b[i].qs + 16 * h);
      const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
      ae_store(o + 16 * h + 0, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo)), d));
      ae_store(o + 16 * h + 4, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo)), d));
      ae_store(o + 16 * h + 8, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi)), d));
      ae_store(o + 16 * h + 12, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi)), d));
    }
  }
}

/* ---- dot ---- */
typedef struct { v128 ae, ao, be, bo; } xsplit;   /* activation block: even/odd i16 of both halves */

AE_INLINE xsplit split_x(const ae_block_q8_0 *xb) {
  const v128 a = ae_load(xb->qs), b = ae_load(xb->qs + 16);
  xsplit s = {ae_i8_even(a), ae_i8_odd(a), ae_i8_even(b), ae_i8_odd(b)};
  return s;
}

/* i32x4 partial sums of the block's integer dot product */
AE_INLINE v128 block_dot(const ae_block_q8_0 *wb, xsplit x) {
  const v128 a = ae_load(wb->qs), b = ae_load(wb->qs + 16);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(a), x.ae), wasm_i32x4_dot_i16x8(ae_i8_odd(a), x.ao));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(b), x.be), wasm_i32x4_dot_i16x8(ae_i8_odd(b), x.bo));
  return wasm_i32x4_add(s0, s1);
}

void ae_vec_dot_q8_0_simd128(int n, float *s, const void *w, const void *x) {
  const ae_block_q8_0 *a = (const ae_block_q8_0 *)w, *b = (const ae_block_q8_0 *)x;
  const int nb = n / AE_QK8_0;
  float sum = 0.0f;
  for (int i = 0; i < nb; i++) {
    const int32_t sumi = ae_hsum_i32(block_dot(&a[i], split_x(&b[i])));
    sum += (float)sumi * (ae_h2f_s(a[i].d) * ae_h2f_s(b[i].d));
  }
  *s = sum;
}

AE_INLINE v128 step4(v128 acc, const ae_block_q8_0 *w0, const ae_block_q8_0 *w1, const ae_block_q8_0 *w2,
                     const ae_block_q8_0 *w3, const ae_block_q8_0 *xb) {
  const xsplit xs = split_x(xb);
  const v128 isum = ae_reduce4_i32(block_dot(w0, xs), block_dot(w1, xs), block_dot(w2, xs), block_dot(w3, xs));
  const v128 dw = ae_gather4_h2f(&w0->d, &w1->d, &w2->d, &w3->d);
  const v128 sc = wasm_f32x4_mul(dw, wasm_f32x4_splat(ae_h2f_s(xb->d)));
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), sc));
}

void ae_matvec_rows_q8_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK8_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  int r = r0;
  for (; r + 4 <= r1; r += 4) {
    const ae_block_q8_0 *w0 = (const ae_block_q8_0 *)W + (size_t)r * nb;
    const ae_block_q8_0 *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
    v128 acc = wasm_f32x4_splat(0.0f);
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
      acc = step4(acc, w0 + i, w1 + i, w2 + i, w3 + i, x + i);
      acc = step4(acc, w0 + i + 1, w1 + i + 1, w2 + i + 1, w3 + i + 1, x + i + 1);
    }
    if (i < nb) acc = step4(acc, w0 + i, w1 + i, w2 + i, w3 + i, x + i);
    ae_store(y + r, acc);
  }
  for (; r < r1; r++) ae_vec_dot_q8_0_simd128(ncols, &y[r], (const ae_block_q8_0 *)W + (size_t)r * nb, x);
}
