/* q4_0 weights x q8_0 activations, plus q4_0 quantise (the reference quantiser) / dequantise.
 * Per block the exact integer dot sum((q - 8) x) is formed as (256 sum(q x) - 2048 sum(x)) >> 8 with
 * the nibbles masked in place in i16 lanes (see xblk) against an activation prepared once per column
 * chunk together with 2048 sum(x) and d_x (see dot_q8_0_simd128.c
 * for the chunking, the fast/exact scale conversion and the row-lane accumulator). Then in float
 *   acc += (float)sumi * (d_w * d_x)      (block order; exactly ae_vec_dot_q4_0_ref)
 * bit-exact with the reference for any row range. Each row's block sum is written to a small volatile
 * stack buffer (two rows at a time): the stores order V8's schedule and avoid register spills. */
#include "simd128_util.h"

#define AE_Q4_CHUNK 128   /* blocks per column chunk: 128 * (64 + 4 + 4) B = 9 KiB of stack */

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

#if AE_RELAXED
/* Relaxed build: e0 / o0 = x bytes 0..15 / 16..31 as they are; the nibbles are the 7-bit operand of
 * ae_rdot, so bdot gives sum(q x) itself (Q4_SH 0) and sum8 = 8 sum(x). */
#define Q4_SH 0
typedef struct { v128 e0, o0; } xblk;

AE_INLINE void prep(const ae_block_q8_0 *x, int n, xblk *xs, float *dx, int32_t *sum8) {
  for (int b = 0; b < n; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    xs[b].e0 = a; xs[b].o0 = c;
    const v128 t = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(a), wasm_i16x8_extadd_pairwise_i8x16(c));
    sum8[b] = 8 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(t));
    dx[b] = ae_h2f_s(x[b].d);
  }
}

/* i32x4 partial sums of sum(q x) (unsigned nibbles, without the -8) */
AE_INLINE v128 bdot(const ae_block_q4_0 *wb, const xblk *x) {
  const v128 v = ae_load(wb->qs), f = wasm_i8x16_splat(0x0f);
  return ae_rdot(x->o0, wasm_v128_and(wasm_u16x8_shr(v, 4), f), ae_rdot(x->e0, wasm_v128_and(v, f), wasm_i32x4_splat(0)));
}
#else
#define Q4_SH 8
/* Activation block, prepared for nibbles masked in place: with v = i16 lanes b0 | b1 << 8 of the weight
 * bytes, (v & 0x000f) = q_lo_even, (v & 0x0f00) = 256 q_lo_odd, (v & 0x00f0) = 16 q_hi_even and
 * (v >> 12) = q_hi_odd, so pairing them with 256 x_even(0..15), x_odd(0..15), 16 x_even(16..31) and
 * 256 x_odd(16..31) gives 256 sum(q x) with 4 single ops per 16 weight bytes (|256 x| <= 32512 fits
 * i16; pair sums of the dot stay far below 2^31). */
typedef struct { v128 e0, o0, e1, o1; } xblk;

AE_INLINE void prep(const ae_block_q8_0 *x, int n, xblk *xs, float *dx, int32_t *sum8) {
  for (int b = 0; b < n; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    const v128 e0 = ae_i8_even(a), o0 = ae_i8_odd(a), e1 = ae_i8_even(c), o1 = ae_i8_odd(c);
    xs[b].e0 = wasm_i16x8_shl(e0, 8); xs[b].o0 = o0;
    xs[b].e1 = wasm_i16x8_shl(e1, 4); xs[b].o1 = wasm_i16x8_shl(o1, 8);
    const v128 t = wasm_i16x8_add(wasm_i16x8_add(e0, o0), wasm_i16x8_add(e1, o1));
    sum8[b] = 2048 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(t));   /* 256 * 8 * sum(x) */
    dx[b] = ae_h2f_s(x[b].d);
  }
}

/* i32x4 partial sums of 256 sum(q x) (unsigned nibbles, without the -8) */
AE_INLINE v128 bdot(const ae_block_q4_0 *wb, const xblk *x) {
  const v128 v = ae_load(wb->qs);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x000f)), x->e0),
                                 wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x0f00)), x->o0));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x00f0)), x->e1),
                                 wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), x->o1));
  return wasm_i32x4_add(s0, s1);
}
#endif

/* ae_reduce4_i32 in two halves (see dot_q8_0_simd128.c) */
AE_INLINE v128 pair(v128 a, v128 b) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
}
AE_INLINE v128 unpair(v128 ab, v128 cd) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

AE_INLINE int group4(v128 *accp, const ae_block_q4_0 *w0, size_t nb, int n, const xblk *xs, const float *dx,
                     const int32_t *sum8, int exact) {
  const ae_block_q4_0 *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  volatile v128 t[4];
  int b = 0;
  for (; b + 2 <= n; b += 2) {
    const v128 h = ae_gather8_h(&w0[b].d, &w1[b].d, &w2[b].d, &w3[b].d, &w0[b + 1].d, &w1[b + 1].d, &w2[b + 1].d, &w3[b + 1].d);
    v128 d0, d1;
    if (exact) { d0 = ae_h2f_exact(ae_h16_lo(h)); d1 = ae_h2f_exact(ae_h16_hi(h)); }
    else { bad = ae_h16_infnan_acc(bad, h); d0 = ae_h2f_fast(ae_h16_lo(h)); d1 = ae_h2f_fast(ae_h16_hi(h)); }
    t[0] = pair(bdot(&w0[b], &xs[b]), bdot(&w1[b], &xs[b]));
    t[1] = pair(bdot(&w2[b], &xs[b]), bdot(&w3[b], &xs[b]));
    t[2] = pair(bdot(&w0[b + 1], &xs[b + 1]), bdot(&w1[b + 1], &xs[b + 1]));
    t[3] = pair(bdot(&w2[b + 1], &xs[b + 1]), bdot(&w3[b + 1], &xs[b + 1]));
    const v128 i0 = wasm_i32x4_shr(wasm_i32x4_sub(unpair(t[0], t[1]), wasm_v128_load32_splat(&sum8[b])), Q4_SH);
    const v128 i1 = wasm_i32x4_shr(wasm_i32x4_sub(unpair(t[2], t[3]), wasm_v128_load32_splat(&sum8[b + 1])), Q4_SH);
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i1), wasm_f32x4_mul(d1, wasm_v128_load32_splat(&dx[b + 1]))));
  }
  if (b < n) {
    const v128 d0 = ae_gather4_h2f(&w0[b].d, &w1[b].d, &w2[b].d, &w3[b].d);
    t[0] = pair(bdot(&w0[b], &xs[b]), bdot(&w1[b], &xs[b]));
    t[1] = pair(bdot(&w2[b], &xs[b]), bdot(&w3[b], &xs[b]));
    const v128 i0 = wasm_i32x4_shr(wasm_i32x4_sub(unpair(t[0], t[1]), wasm_v128_load32_splat(&sum8[b])), Q4_SH);
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
  }
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}

/* One row without the chunk preparation (for calls on fewer than 4 rows: vec_dot, short row runs);
 * the same integer sums and float sequence as the prepared paths. */
static void row1(const ae_block_q4_0 *w, const ae_block_q8_0 *x, int nb, float *y) {
  float sum = 0.0f;
  xblk xb;
  float dxb;
  int32_t s8;
  for (int b = 0; b < nb; b++) {
    prep(x + b, 1, &xb, &dxb, &s8);
    const int32_t sumi = (ae_hsum_i32(bdot(&w[b], &xb)) - s8) >> Q4_SH;
    sum += (float)sumi * (ae_h2f_s(w[b].d) * dxb);
  }
  *y = sum;
}

void ae_matvec_rows_q4_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK4_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  if (r1 - r0 < 4) {
    for (int r = r0; r < r1; r++) row1((const ae_block_q4_0 *)W + (size_t)r * nb, x, nb, &y[r]);
    return;
  }
  xblk xs[AE_Q4_CHUNK];
  float dx[AE_Q4_CHUNK];
  int32_t sum8[AE_Q4_CHUNK];
  for (int c0 = 0; c0 < nb; c0 += AE_Q4_CHUNK) {
    const int n = nb - c0 < AE_Q4_CHUNK ? nb - c0 : AE_Q4_CHUNK;
    prep(x + c0, n, xs, dx, sum8);
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
      const ae_block_q4_0 *w0 = (const ae_block_q4_0 *)W + (size_t)r * nb + c0;
      const v128 start = c0 ? ae_load(y + r) : wasm_f32x4_splat(0.0f);
      v128 acc = start;
      if (group4(&acc, w0, (size_t)nb, n, xs, dx, sum8, 0)) { acc = start; group4(&acc, w0, (size_t)nb, n, xs, dx, sum8, 1); }
      ae_store(y + r, acc);
    }
    for (; r < r1; r++) {
      const ae_block_q4_0 *w = (const ae_block_q4_0 *)W + (size_t)r * nb + c0;
      float sum = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        const int32_t sumi = (ae_hsum_i32(bdot(&w[b], &xs[b])) - sum8[b]) >> Q4_SH;
        sum += (float)sumi * (ae_h2f_s(w[b].d) * dx[b]);
      }
      y[r] = sum;
    }
  }
}

void ae_vec_dot_q4_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q4_0_simd128(w, n, x, s, 0, 1);
}
