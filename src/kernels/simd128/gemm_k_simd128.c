/* Prefill GEMM for the k-quants (q2_K, q3_K, q4_K, q5_K, q6_K weights x q8_K activations): ae_matmul_rows_<t>_simd128.
 * (q2_K: sb_q2, q3_K: sb_q3; what follows describes q4_K / q5_K / q6_K, and they follow it.)
 *
 * Tile: one weight row x 4 tokens (both builds). Per super-block the weight values are unpacked once (q4_K
 * nibbles, q5_K 5-bit values, q6_K 6-bit values: all in [0, 63]), together with the sub-block scales, and
 * dotted with each of the 4 tokens' q8_K values:
 *  - relaxed build: ae_rdot16 (i16x8.relaxed_dot_i8x16_i7x16_s, one pmaddubsw in V8 11.x) of the activation
 *    bytes with the weight bytes (the 7-bit operand: exact and host-independent), pair sums added in i16 where
 *    they share a scale (q4_K / q5_K: 4 products of |31 x 128| per lane, q6_K: 2 of |63 x 128|, < 2^15), then
 *    i32x4.dot_i16x8 with the sub-block scale in every i16 lane: sc_j sum(q x) in i32 lanes, no i32 multiply;
 *  - plain build: the weights are split into even / odd i16 lanes and multiplied by their sub-block scale in i16
 *    once per row (|q sc| <= 63 x 128 < 2^15), then i32x4.dot_i16x8 with each token's even / odd i16 activations
 *    (split once per column chunk for all rows of the chunk).
 * The 4 tokens' i32x4 partial sums are reduced together (ae_reduce4_i32). These are the exact integers the
 * matvec forms in another order (no partial sum reaches 2^31):
 *   q4_K / q5_K: sumi_q = sum_j sc_j sum(q x),  sumi_m = sum_j m_j (bsums[2j] + bsums[2j+1])
 *   q6_K:        sumi   = sum_j sc_j sum(q x) - 32 sum_j sc_j bsums[j]
 * and then per token, in float, the matvec's sequence (dot_q4_K/q5_K/q6_K_simd128.c, ae_vec_dot_<t>_ref),
 * lanes = tokens:
 *   q4_K / q5_K: acc = acc + ((d_w d_x) (float)sumi_q - (dmin_w d_x) (float)sumi_m)
 *   q6_K:        acc = acc + (d_w d_x) (float)sumi                          (super-block order)
 * so every y[b][r] equals ae_matvec on token b (and the reference) bit for bit. Shared by the 4 tokens: the
 * weight loads and unpacking, the scale unpacking and (plain) the multiplication by the scales, the f16 scale
 * conversions. Loops: rows in chunks of GEMM_ROWS (kept in cache while every token group passes), token groups
 * of 4 (a last group of 1-3 tokens repeats its last token in the spare lanes and stores only the real ones),
 * column chunks of GEMM_CB super-blocks (the 4 tokens' activations on the stack; partial sums cross chunks
 * through y, exactly). */
#include "q3k_simd128.h"

#define GEMM_ROWS 32
#define GEMM_CB 8
#define GEMM_T 4   /* tokens per tile (8 measured no faster) */
#define NG (GEMM_T / 4)

enum { K_Q4, K_Q5, K_Q6, K_Q5X, K_Q6X, K_Q3, K_Q3X, K_Q2 };   /* K_Q5X / K_Q6X / K_Q3X: q5_K / q6_K / q3_K in the relaxed build's
                                                         * AE_Q5_K_X / AE_Q6_K_X / AE_Q3_K_X layouts */

/* Scheduling: V8's TurboFan keeps loads in program order on its effect chain but schedules pure arithmetic as
 * late as possible, so a super-block's activation loads end up long before their use and most of them are
 * spilled (16 SIMD registers on x64). Storing the accumulators to a volatile slot after each step (SCHED)
 * pins the step's arithmetic before the next step's loads. */
#define SCHED() do { for (int t_ = 0; t_ < GEMM_T; t_++) sink[t_] = a[t_]; } while (0)

/* One super-block of 4 tokens. Relaxed: X[c][t] = token t's x[16c .. 16c + 16) (bytes, ae_rdot16's i8 operand);
 * plain: X[2c][t], X[2c + 1][t] = its even / odd bytes as i16 lanes. bs[t]: q4_K / q5_K: bs[t][0] lanes j =
 * bsums[2j] + bsums[2j+1]; q6_K: bs[t][0], bs[t][1] = bsums[0..8), bsums[8..16). */
#if AE_RELAXED
#define XV 16
#else
#define XV 32
#endif
typedef struct { v128 X[XV][GEMM_T]; v128 bs[GEMM_T][2]; } xk4;

AE_INLINE void prep4(int kind, const uint8_t *x, size_t stride, int nt, int c0, int n, xk4 *xs, float *dx) {
  for (int t = 0; t < GEMM_T; t++) {
    const ae_block_q8_K *xb = (const ae_block_q8_K *)(x + (size_t)(t < nt ? t : nt - 1) * stride) + c0;
    for (int i = 0; i < n; i++) {
      for (int c = 0; c < 16; c++) {
        const v128 v = ae_load(xb[i].qs + 16 * c);
#if AE_RELAXED
        xs[i].X[c][t] = v;
#else
        xs[i].X[2 * c][t] = ae_i8_even(v);
        xs[i].X[2 * c + 1][t] = ae_i8_odd(v);
#endif
      }
      const v128 b0 = ae_load(xb[i].bsums), b1 = ae_load(xb[i].bsums + 8);
      if (kind == K_Q6 || kind == K_Q6X || kind == K_Q3 || kind == K_Q3X || kind == K_Q2) {
        xs[i].bs[t][0] = b0;
        xs[i].bs[t][1] = b1;
      } else {
        xs[i].bs[t][0] = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14),
                                        wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
      }
      dx[GEMM_T * i + t] = xb[i].d;
    }
  }
}



/* q4_K / q5_K weight bytes of group g (64 elements), half h: b0 = sub-block 2g's values of elements
 * 64g + 16h + [0, 16), b1 = sub-block 2g + 1's (64g + 32 + 16h ..); q5_K: nibble | 5th bit j of qh[16h + e]
 * moved to bit 4 (as dot_q5_K_simd128.c). */
AE_INLINE void sb_bytes(int kind, const uint8_t *qs, const uint8_t *qh, int g, int h, v128 *b0, v128 *b1) {
  if (kind == K_Q5X) {   /* qs: the block's X groups (AE_Q5_K_X): elements 64g + 16k = U_k (g even) / U_{4+k} (g odd) */
    const uint8_t *o = qs + 80 * (g >> 1);
    if (!(g & 1)) {
      const v128 m = wasm_i8x16_splat(0x1f);
      *b0 = wasm_v128_and(ae_load(o + 16 * h), m);
      *b1 = wasm_v128_and(ae_load(o + 32 + 16 * h), m);
    } else {
      const v128 hv = ae_load(o + 64), hi = wasm_i8x16_splat((int8_t)0xe0), m18 = wasm_i8x16_splat(0x18);
      const v128 t0 = h ? wasm_i16x8_shl(hv, 1) : wasm_i16x8_shl(hv, 3), t1 = h ? wasm_u16x8_shr(hv, 3) : wasm_u16x8_shr(hv, 1);
      *b0 = wasm_v128_or(wasm_u16x8_shr(wasm_v128_and(ae_load(o + 16 * h), hi), 5), wasm_v128_and(t0, m18));
      *b1 = wasm_v128_or(wasm_u16x8_shr(wasm_v128_and(ae_load(o + 32 + 16 * h), hi), 5), wasm_v128_and(t1, m18));
    }
    return;
  }
  const v128 v = ae_load(qs + 32 * g + 16 * h), f = wasm_i8x16_splat(0x0f);
  if (kind == K_Q4) {
    *b0 = wasm_v128_and(v, f);
    *b1 = wasm_v128_and(wasm_u16x8_shr(v, 4), f);
  } else {
    const v128 hb = ae_load(qh + 16 * h), t = wasm_i8x16_splat(0x10);
    const int j0 = 2 * g, j1 = 2 * g + 1;
    *b0 = wasm_v128_or(wasm_v128_and(v, f),
                       wasm_v128_and(j0 <= 4 ? wasm_i16x8_shl(hb, 4 - j0) : wasm_u16x8_shr(hb, j0 - 4), t));
    *b1 = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v, 4), f),
                       wasm_v128_and(j1 <= 4 ? wasm_i16x8_shl(hb, 4 - j1) : wasm_u16x8_shr(hb, j1 - 4), t));
  }
}

/* q4_K / q5_K super-block: q[g] = [sumi_q of tokens 4g .. 4g + 3], m[g] likewise sumi_m. */
AE_INLINE void sb_q45(int kind, const uint8_t *blk, const xk4 *xs, v128 *q, v128 *m) {
  const uint8_t *scales = blk + 4, *qs = kind == K_Q4 || kind == K_Q5X ? blk + 16 : blk + 48, *qh = blk + 16;
  const v128 sm = ae_k4_unpack_scales(scales);
  const v128 sc16 = wasm_u16x8_extend_low_u8x16(sm), mn16 = wasm_u16x8_extend_high_u8x16(sm);
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++)
    m[g] = ae_reduce4_i32(wasm_i32x4_dot_i16x8(mn16, xs->bs[4 * g][0]), wasm_i32x4_dot_i16x8(mn16, xs->bs[4 * g + 1][0]),
                          wasm_i32x4_dot_i16x8(mn16, xs->bs[4 * g + 2][0]), wasm_i32x4_dot_i16x8(mn16, xs->bs[4 * g + 3][0]));
  v128 a[GEMM_T];
  volatile v128 sink[GEMM_T];
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++) a[t] = wasm_i32x4_splat(0);
  /* per sub-block j and token: two ae_rdot16 (one pmaddubsw each in V8 11.x) over its 32 values (bytes <= 31,
   * the 7-bit operand: host-independent) added in i16 (4 products of |31 x 128| per lane, < 2^15), then
   * i32x4.dot_i16x8 with sc_j in every i16 lane: sc_j sum(q x) in i32 lanes, no i32 multiply */
  const v128 scp[2] = {wasm_i16x8_shuffle(sc16, sc16, 0, 0, 1, 1, 2, 2, 3, 3), wasm_i16x8_shuffle(sc16, sc16, 4, 4, 5, 5, 6, 6, 7, 7)};
#pragma clang loop unroll(full)
  for (int g = 0; g < 4; g++) {
    const v128 s0 = ae_lane_splat32(scp[g >> 1], 2 * g), s1 = ae_lane_splat32(scp[g >> 1], 2 * g + 1);
#if AE_RELAXED
    v128 b0[2], b1[2];
#pragma clang loop unroll(full)
    for (int h = 0; h < 2; h++) sb_bytes(kind, qs, qh, g, h, &b0[h], &b1[h]);
#pragma clang loop unroll(full)
    for (int t = 0; t < GEMM_T; t++)
      a[t] = wasm_i32x4_add(a[t], wasm_i32x4_dot_i16x8(wasm_i16x8_add(ae_rdot16(xs->X[4 * g][t], b0[0]),
                                                                      ae_rdot16(xs->X[4 * g + 1][t], b0[1])), s0));
    SCHED();
#pragma clang loop unroll(full)
    for (int t = 0; t < GEMM_T; t++)
      a[t] = wasm_i32x4_add(a[t], wasm_i32x4_dot_i16x8(wasm_i16x8_add(ae_rdot16(xs->X[4 * g + 2][t], b1[0]),
                                                                      ae_rdot16(xs->X[4 * g + 3][t], b1[1])), s1));
    SCHED();
#else
    /* plain: per half h, the 16 + 16 values of sub-blocks 2g / 2g + 1 as even / odd i16 times their scale
     * (|q sc| <= 31 x 63), dotted with each token's even / odd i16 activations */
#pragma clang loop unroll(full)
    for (int h = 0; h < 2; h++) {
      v128 b0, b1;
      sb_bytes(kind, qs, qh, g, h, &b0, &b1);
      const v128 m8 = wasm_i16x8_splat(0x00ff);
      const v128 w0e = wasm_i16x8_mul(wasm_v128_and(b0, m8), s0), w0o = wasm_i16x8_mul(wasm_u16x8_shr(b0, 8), s0);
      const v128 w1e = wasm_i16x8_mul(wasm_v128_and(b1, m8), s1), w1o = wasm_i16x8_mul(wasm_u16x8_shr(b1, 8), s1);
      const int c0 = 4 * g + h, c1 = 4 * g + 2 + h;   /* 16-value chunks of b0 / b1 */
#pragma clang loop unroll(full)
      for (int t = 0; t < GEMM_T; t++)
        a[t] = wasm_i32x4_add(a[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(w0e, xs->X[2 * c0][t]), wasm_i32x4_dot_i16x8(w0o, xs->X[2 * c0 + 1][t])));
      SCHED();
#pragma clang loop unroll(full)
      for (int t = 0; t < GEMM_T; t++)
        a[t] = wasm_i32x4_add(a[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(w1e, xs->X[2 * c1][t]), wasm_i32x4_dot_i16x8(w1o, xs->X[2 * c1 + 1][t])));
      SCHED();
    }
#endif
  }
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++) q[g] = ae_reduce4_i32(a[4 * g], a[4 * g + 1], a[4 * g + 2], a[4 * g + 3]);
}

/* a[t] += sc sum(u x) over chunk c (16 elements) for the GEMM_T tokens; u unsigned bytes (q6_K 0..63, q3_K 0..7, q2_K
 * 0..3), sc the chunk's scale in every i16 lane. Relaxed: ae_rdot16 (u the 7-bit operand: pair sums <= 2 x 63 x 128 <
 * 2^15), then sc times them in i32 lanes (i32x4.dot_i16x8). Plain: even / odd u times sc in i16 (|u sc| <= 63 x 128 <
 * 2^15), dotted with the i16 activations. */
AE_INLINE void sc_chunk(v128 a[GEMM_T], const xk4 *xs, int c, v128 u, v128 sc) {
#if AE_RELAXED
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++) a[t] = wasm_i32x4_add(a[t], wasm_i32x4_dot_i16x8(ae_rdot16(xs->X[c][t], u), sc));
#else
  const v128 we = wasm_i16x8_mul(wasm_v128_and(u, wasm_i16x8_splat(0x00ff)), sc), wo = wasm_i16x8_mul(wasm_u16x8_shr(u, 8), sc);
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++)
    a[t] = wasm_i32x4_add(a[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(we, xs->X[2 * c][t]), wasm_i32x4_dot_i16x8(wo, xs->X[2 * c + 1][t])));
#endif
}
/* [sum_s k_s bsums[s] of tokens 4g .. 4g + 3] (k: 16 i16 per-sub-block factors in lo / hi; the bsums as q6_K's prep) */
AE_INLINE v128 bsum_dot4(v128 lo, v128 hi, const xk4 *xs, int g) {
  v128 o[4];
#pragma clang loop unroll(full)
  for (int t = 0; t < 4; t++) o[t] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(lo, xs->bs[4 * g + t][0]), wasm_i32x4_dot_i16x8(hi, xs->bs[4 * g + t][1]));
  return ae_reduce4_i32(o[0], o[1], o[2], o[3]);
}

/* q6_K super-block: s[g] = [sumi of tokens 4g .. 4g + 3]. 6-bit values of chunk c = 8h + 2k + p (elements
 * 16c ..) from ql / qh by ae_q6_decode (simd128_util.h). */
AE_INLINE void sb_q6(const ae_block_q6_K *w, const xk4 *xs, v128 *s, int xl) {
  const v128 sc8 = ae_load(w->scales);
  const v128 sc_lo = wasm_i16x8_extend_low_i8x16(sc8), sc_hi = wasm_i16x8_extend_high_i8x16(sc8);
  v128 a[GEMM_T];
  volatile v128 sink[GEMM_T];
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++) a[t] = wasm_i32x4_splat(0);
  v128 scp[4];
  ae_q6_scale_pairs(sc_lo, sc_hi, scp);
#if AE_RELAXED
  if (xl) {   /* AE_Q6_K_X (dot_q6_K_simd128.c): chunks c = 4G + i of group G */
#pragma clang loop unroll(full)
    for (int G = 0; G < 4; G++) {
      v128 u[4];
      ae_q6x_decode((const uint8_t *)w + 48 * G, u);
#pragma clang loop unroll(full)
      for (int i = 0; i < 4; i++) {
        const int c = 4 * G + i;
        sc_chunk(a, xs, c, u[i], ae_lane_splat32(scp[c >> 2], c));
        SCHED();
      }
    }
  } else
#else
  (void)xl;
#endif
#pragma clang loop unroll(full)
  for (int h = 0; h < 2; h++)
#pragma clang loop unroll(full)
    for (int p = 0; p < 2; p++) {
      const v128 l0 = ae_load(w->ql + 64 * h + 16 * p), l1 = ae_load(w->ql + 64 * h + 32 + 16 * p);
      const v128 hb = ae_load(w->qh + 32 * h + 16 * p);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++) {
        const int c = 8 * h + 2 * k + p;
        sc_chunk(a, xs, c, ae_q6_decode(l0, l1, hb, k), ae_lane_splat32(scp[c >> 2], c));
        SCHED();
      }
    }
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++)
    s[g] = wasm_i32x4_sub(ae_reduce4_i32(a[4 * g], a[4 * g + 1], a[4 * g + 2], a[4 * g + 3]), wasm_i32x4_shl(bsum_dot4(sc_lo, sc_hi, xs, g), 5));
}

/* q3_K super-block: s[g] = [sumi of tokens 4g .. 4g + 3], sumi = sum_s sc_s sum(u x) - 4 sum_s sc_s bsums[s] (u = value
 * + 4 in 0..7: dot_q3_K_simd128.c). Sub-block s = chunk s (16 elements): u from the file layout's planes (q3k_u) or the
 * X layout's groups (q3kx_u); then as q6_K's: relaxed, ae_rdot16 (u the 7-bit operand, pair sums <= 2 x 7 x 128) and
 * sc_s in i32 lanes by i32x4.dot_i16x8; plain, even / odd u times sc_s in i16 (|u sc| <= 7 x 32) against the i16
 * activations. */
AE_INLINE void sb_q3(const uint8_t *w, const xk4 *xs, v128 *s, int xl) {
  const v128 us = q3k_scales(w + 96);   /* the scales at 96 in both layouts (after hmask, qs / the X groups) */
  const v128 sc_lo = wasm_i16x8_extend_low_i8x16(us), sc_hi = wasm_i16x8_extend_high_i8x16(us);
  v128 a[GEMM_T];
  volatile v128 sink[GEMM_T];
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++) a[t] = wasm_i32x4_splat(0);
  v128 scp[4];
  ae_q6_scale_pairs(sc_lo, sc_hi, scp);
  v128 m3, m4;
  q3k_masks(&m3, &m4);
#if AE_RELAXED
  v128 m7, n3, n4;
  q3kx_masks(&m7, &n3, &n4);
#else
  (void)xl;
#endif
  const ae_block_q3_K *b = (const ae_block_q3_K *)w;
#pragma clang loop unroll(full)
  for (int c = 0; c < 16; c++) {
    const int nn = c >> 3, j = (c & 7) >> 1, half = c & 1;
#if AE_RELAXED
    const v128 u = xl ? q3kx_u(w + 48 * nn, c & 7, m7, n3, n4)
                      : q3k_u(ae_load(b->qs + 32 * nn + 16 * half), ae_load(b->hmask + 16 * half), nn, j, m3, m4);
#else
    const v128 u = q3k_u(ae_load(b->qs + 32 * nn + 16 * half), ae_load(b->hmask + 16 * half), nn, j, m3, m4);
#endif
    sc_chunk(a, xs, c, u, ae_lane_splat32(scp[c >> 2], c));
    SCHED();
  }
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++)
    s[g] = wasm_i32x4_sub(ae_reduce4_i32(a[4 * g], a[4 * g + 1], a[4 * g + 2], a[4 * g + 3]), wasm_i32x4_shl(bsum_dot4(sc_lo, sc_hi, xs, g), 2));
}

/* q2_K super-block: q[g] / m[g] = [sumi_q / sumi_m of tokens 4g .. 4g + 3], sumi_q = sum_s sc_s sum(q x), sumi_m =
 * sum_s m_s bsums[s] (dot_q2_K_simd128.c). Sub-block s = chunk s: q (0..3) from q3_K's low-bit plane, then as sb_q3
 * (relaxed: ae_rdot16, q the 7-bit operand, times sc_s by i32x4.dot_i16x8; plain: even / odd q times sc_s in i16,
 * |q sc| <= 45, against the i16 activations). */
AE_INLINE void sb_q2(const uint8_t *w, const xk4 *xs, v128 *q, v128 *m) {
  const ae_block_q2_K *b = (const ae_block_q2_K *)w;
  v128 m3, m4;
  q3k_masks(&m3, &m4);
  (void)m4;
  const v128 m15 = wasm_i8x16_splat(0x0f);
  const v128 s8 = ae_load(b->scales), sc8 = wasm_v128_and(s8, m15), mn8 = wasm_u16x8_shr(wasm_v128_andnot(s8, m15), 4);
  const v128 sc_lo = wasm_u16x8_extend_low_u8x16(sc8), sc_hi = wasm_u16x8_extend_high_u8x16(sc8);
  const v128 mn_lo = wasm_u16x8_extend_low_u8x16(mn8), mn_hi = wasm_u16x8_extend_high_u8x16(mn8);
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++) m[g] = bsum_dot4(mn_lo, mn_hi, xs, g);
  v128 a[GEMM_T];
  volatile v128 sink[GEMM_T];
#pragma clang loop unroll(full)
  for (int t = 0; t < GEMM_T; t++) a[t] = wasm_i32x4_splat(0);
  v128 scp[4];
  ae_q6_scale_pairs(sc_lo, sc_hi, scp);
#pragma clang loop unroll(full)
  for (int c = 0; c < 16; c++) {
    const int nn = c >> 3, j = (c & 7) >> 1, half = c & 1;
    const v128 u = wasm_v128_and(wasm_u16x8_shr(ae_load(b->qs + 32 * nn + 16 * half), 2 * j), m3);
    sc_chunk(a, xs, c, u, ae_lane_splat32(scp[c >> 2], c));
    SCHED();
  }
#pragma clang loop unroll(full)
  for (int g = 0; g < NG; g++) q[g] = ae_reduce4_i32(a[4 * g], a[4 * g + 1], a[4 * g + 2], a[4 * g + 3]);
}

AE_INLINE size_t kbytes(int kind) {
  return kind == K_Q4 ? sizeof(ae_block_q4_K) : kind == K_Q5 || kind == K_Q5X ? sizeof(ae_block_q5_K)
       : kind == K_Q3 || kind == K_Q3X ? sizeof(ae_block_q3_K) : kind == K_Q2 ? sizeof(ae_block_q2_K) : sizeof(ae_block_q6_K);
}

/* One row, super-blocks [0, n) of the chunk, GEMM_T tokens; acc[g] in/out (lanes = tokens 4g ..). */
AE_INLINE void row1xT(int kind, const uint8_t *w, int n, const xk4 *xs, const float *dx, v128 *acc) {
  const size_t bs = kbytes(kind);
  for (int i = 0; i < n; i++, w += bs) {
    if (kind == K_Q6 || kind == K_Q6X || kind == K_Q3 || kind == K_Q3X) {
      v128 s[NG];
      ae_fp16 hd;   /* q6_K: d at 208, q3_K: at 108 */
      if (kind == K_Q3 || kind == K_Q3X) {
        sb_q3(w, &xs[i], s, kind == K_Q3X);
        __builtin_memcpy(&hd, w + 108, 2);
      } else {
        sb_q6((const ae_block_q6_K *)w, &xs[i], s, kind == K_Q6X);
        __builtin_memcpy(&hd, w + 208, 2);
      }
      const v128 dw = wasm_f32x4_splat(ae_h2f_s(hd));
#pragma clang loop unroll(full)
      for (int g = 0; g < NG; g++)
        acc[g] = wasm_f32x4_add(acc[g], wasm_f32x4_mul(wasm_f32x4_mul(dw, ae_load(dx + GEMM_T * i + 4 * g)),
                                                       wasm_f32x4_convert_i32x4(s[g])));
    } else {
      ae_fp16 hd, hm;   /* q4_K / q5_K: d at 0, dmin at 2; q2_K: at 80, 82 */
      __builtin_memcpy(&hd, w + (kind == K_Q2 ? 80 : 0), 2);
      __builtin_memcpy(&hm, w + (kind == K_Q2 ? 82 : 2), 2);
      v128 q[NG], m[NG];
      if (kind == K_Q2) sb_q2(w, &xs[i], q, m);
      else sb_q45(kind, w, &xs[i], q, m);
      const v128 dw = wasm_f32x4_splat(ae_h2f_s(hd)), mw = wasm_f32x4_splat(ae_h2f_s(hm));
#pragma clang loop unroll(full)
      for (int g = 0; g < NG; g++) {
        const v128 dxv = ae_load(dx + GEMM_T * i + 4 * g);
        const v128 dall = wasm_f32x4_mul(dw, dxv), dmin = wasm_f32x4_mul(mw, dxv);
        acc[g] = wasm_f32x4_add(acc[g], wasm_f32x4_sub(wasm_f32x4_mul(dall, wasm_f32x4_convert_i32x4(q[g])),
                                                       wasm_f32x4_mul(dmin, wasm_f32x4_convert_i32x4(m[g]))));
      }
    }
  }
}

AE_INLINE void gemm(int kind, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                    int y_stride, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const size_t bs = kbytes(kind);
  const size_t rs = (size_t)nb * bs;
  xk4 xs[GEMM_CB];
  float dx[GEMM_T * GEMM_CB];
  for (int rc = r0; rc < r1; rc += GEMM_ROWS) {
    const int re = rc + GEMM_ROWS < r1 ? rc + GEMM_ROWS : r1;
    for (int t0 = 0; t0 < nvec; t0 += GEMM_T) {
      const int nt = nvec - t0 < GEMM_T ? nvec - t0 : GEMM_T;
      const uint8_t *xt = (const uint8_t *)xq + (size_t)t0 * xq_stride;
      float *yt = y + (size_t)t0 * y_stride;
      for (int c0 = 0; c0 < nb; c0 += GEMM_CB) {
        const int n = nb - c0 < GEMM_CB ? nb - c0 : GEMM_CB;
        prep4(kind, xt, xq_stride, nt, c0, n, xs, dx);
        for (int r = rc; r < re; r++) {
          float a[GEMM_T];
          for (int t = 0; t < GEMM_T; t++) a[t] = c0 && t < nt ? yt[(size_t)t * y_stride + r] : 0.0f;
          v128 acc[NG];
#pragma clang loop unroll(full)
          for (int g = 0; g < NG; g++) acc[g] = ae_load(a + 4 * g);
          row1xT(kind, (const uint8_t *)W + (size_t)r * rs + (size_t)c0 * bs, n, xs, dx, acc);
#pragma clang loop unroll(full)
          for (int g = 0; g < NG; g++) ae_store(a + 4 * g, acc[g]);
          for (int t = 0; t < nt; t++) yt[(size_t)t * y_stride + r] = a[t];
        }
      }
    }
  }
}

#define GEMM(kind, ...) gemm(kind, __VA_ARGS__)

void ae_matmul_rows_q4_K_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  GEMM(K_Q4, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q5_K_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  GEMM(K_Q5, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q6_K_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  GEMM(K_Q6, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q2_K_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  GEMM(K_Q2, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q3_K_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  GEMM(K_Q3, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
#if AE_RELAXED
void ae_matmul_rows_q3_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                   int y_stride, int r0, int r1) {
  GEMM(K_Q3X, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q5_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                   int y_stride, int r0, int r1) {
  GEMM(K_Q5X, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q6_K_x_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                   int y_stride, int r0, int r1) {
  GEMM(K_Q6X, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
#endif
