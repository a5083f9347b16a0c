/* q6_K weights x q8_K activations, plus q6_K dequantise (quantise: the reference quantiser).
 * Per super-block, exact integers: sumi = sum_j sc_j (sum(q x) - 32 bsums[j]) over the 16 sub-blocks of
 * 16 (q unsigned 0..63, the -32 offset folded through the activation's bsums); then in float
 *   acc += (d_w d_x) (float)sumi                              (exactly ae_vec_dot_q6_K_ref)
 * 6-bit values are assembled as bytes from ql nibbles and qh bit pairs (i16 shifts, byte masks) and split
 * into even / odd i16 lanes (relaxed build: the bytes go straight into ae_rdot16, and the sub-block scale is
 * applied by i32x4.dot_i16x8 with sc in every i16 lane). The activation is split once per column chunk (on the stack) and shared by
 * all rows; rows longer than one chunk, and calls on fewer than 4 rows, go super-block outer instead
 * (split one super-block at a time, 8 rows inner). Every path uses the reference's scalar float
 * sequence per row: bit-exact for any row range. Each 32 elements' partial sum is stored to its own
 * volatile slot: the stores order V8's schedule (no register spills) without a dependency chain. */
#include "simd128_util.h"

void ae_from_float_q6_K_simd128(const float *x, void *y, int n) { ae_from_float_q6_K_ref(x, y, n); }

/* 6-bit values of elements 128h + 32k + 16p + [0, 16) as even/odd i16 lanes, from l0 = ql[64h + 16p ..],
 * l1 = ql[64h + 32 + 16p ..], hb = qh[32h + 16p ..]: first the 16 values as bytes (i16 shifts, byte
 * masks), then even bytes (& 0x00ff) and odd bytes (>> 8). */
AE_INLINE v128 decode_q(v128 l0, v128 l1, v128 hb, int k) {
  const v128 f = wasm_i8x16_splat(0x0f), t = wasm_i8x16_splat(0x30);
  switch (k) {
    case 0: return wasm_v128_or(wasm_v128_and(l0, f), wasm_v128_and(wasm_i16x8_shl(hb, 4), t));
    case 1: return wasm_v128_or(wasm_v128_and(l1, f), wasm_v128_and(wasm_i16x8_shl(hb, 2), t));
    case 2: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 4), f), wasm_v128_and(hb, t));
    default: return wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), f), wasm_v128_and(wasm_u16x8_shr(hb, 2), t));
  }
}
AE_INLINE void decode_k(v128 l0, v128 l1, v128 hb, int k, v128 *e, v128 *o) {
  const v128 q = decode_q(l0, l1, hb, k);
  *e = wasm_v128_and(q, wasm_i16x8_splat(0x00ff));
  *o = wasm_u16x8_shr(q, 8);
}
AE_INLINE void decode(const ae_block_q6_K *w, int h, int p, v128 e[4], v128 o[4]) {
  const v128 l0 = ae_load(w->ql + 64 * h + 16 * p), l1 = ae_load(w->ql + 64 * h + 32 + 16 * p);
  const v128 hb = ae_load(w->qh + 32 * h + 16 * p);
  for (int k = 0; k < 4; k++) decode_k(l0, l1, hb, k, &e[k], &o[k]);
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
#define AE_QK_CHUNK 16   /* super-blocks per column chunk: 16 * 544 B = 8.5 KiB of stack */

#if AE_RELAXED
/* Relaxed build: X[c] = x[16c .. 16c+16) as bytes (X[16..31] unused); the 6-bit values are ae_rdot's
 * 7-bit operand. */
AE_INLINE void prep(const ae_block_q8_K *x, int n, xk *xs) {
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < 16; c++) xs[i].X[c] = ae_load(x[i].qs + 16 * c);
    xs[i].bs0 = ae_load(x[i].bsums);
    xs[i].bs1 = ae_load(x[i].bsums + 8);
  }
}
/* i32x4 partial sums of sum(q x) over the 16 elements of chunk c */
AE_INLINE v128 chunk_dot(v128 l0, v128 l1, v128 hb, int k, const xk *xs, int c) {
  return ae_rdot(xs->X[c], decode_q(l0, l1, hb, k), wasm_i32x4_splat(0));
}
#else
AE_INLINE v128 chunk_dot(v128 l0, v128 l1, v128 hb, int k, const xk *xs, int c) {
  v128 e, o;
  decode_k(l0, l1, hb, k, &e, &o);
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(e, xs->X[2 * c]), wasm_i32x4_dot_i16x8(o, xs->X[2 * c + 1]));
}
AE_INLINE void prep(const ae_block_q8_K *x, int n, xk *xs) {
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < 16; c++) {
      const v128 v = ae_load(x[i].qs + 16 * c);
      xs[i].X[2 * c] = ae_i8_even(v);
      xs[i].X[2 * c + 1] = ae_i8_odd(v);
    }
    xs[i].bs0 = ae_load(x[i].bsums);
    xs[i].bs1 = ae_load(x[i].bsums + 8);
  }
}
#endif

AE_INLINE v128 lane_splat(v128 v, int j) {
  switch (j & 3) {
    case 0: return wasm_i32x4_shuffle(v, v, 0, 0, 0, 0);
    case 1: return wasm_i32x4_shuffle(v, v, 1, 1, 1, 1);
    case 2: return wasm_i32x4_shuffle(v, v, 2, 2, 2, 2);
    default: return wasm_i32x4_shuffle(v, v, 3, 3, 3, 3);
  }
}

/* i16 pairs (sc_c, sc_c) in i32 lanes of scp[c >> 2]: lane c & 3 splatted gives sc_c in all 8 i16 lanes */
AE_INLINE v128 pair_splat(const v128 *scp, int c) { return lane_splat(scp[c >> 2], c); }

/* The super-block's sumi as i32x4 lanes (their sum). Relaxed build: per chunk ae_rdot16 (one pmaddubsw in V8
 * 11.x; pair sums of |63 x 128| < 2^15) and i32x4.dot_i16x8 with sc_c in every i16 lane; plain: even / odd i16
 * dots times sc_c (i32x4.mul). */
AE_INLINE v128 row_sbv(const ae_block_q6_K *w, const xk *xs) {
  const v128 sc8 = ae_load(w->scales);
  const v128 sc16_lo = wasm_i16x8_extend_low_i8x16(sc8), sc16_hi = wasm_i16x8_extend_high_i8x16(sc8);
  const v128 off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc16_lo, xs->bs0), wasm_i32x4_dot_i16x8(sc16_hi, xs->bs1));
#if AE_RELAXED
  const v128 scp[4] = {wasm_i16x8_shuffle(sc16_lo, sc16_lo, 0, 0, 1, 1, 2, 2, 3, 3), wasm_i16x8_shuffle(sc16_lo, sc16_lo, 4, 4, 5, 5, 6, 6, 7, 7),
                       wasm_i16x8_shuffle(sc16_hi, sc16_hi, 0, 0, 1, 1, 2, 2, 3, 3), wasm_i16x8_shuffle(sc16_hi, sc16_hi, 4, 4, 5, 5, 6, 6, 7, 7)};
#else
  const v128 sc32[4] = {wasm_i32x4_extend_low_i16x8(sc16_lo), wasm_i32x4_extend_high_i16x8(sc16_lo),
                        wasm_i32x4_extend_low_i16x8(sc16_hi), wasm_i32x4_extend_high_i16x8(sc16_hi)};
#endif
  /* 8 independent partial sums, each stored once: the stores order V8's schedule (no spills) without a
   * store-to-load dependency chain */
  volatile v128 part[8];
#pragma clang loop unroll(full)
  for (int h = 0; h < 2; h++)
#pragma clang loop unroll(full)
    for (int p = 0; p < 2; p++) {
      const v128 l0 = ae_load(w->ql + 64 * h + 16 * p), l1 = ae_load(w->ql + 64 * h + 32 + 16 * p);
      const v128 hb = ae_load(w->qh + 32 * h + 16 * p);
      v128 acc = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++) {
        const int c = 8 * h + 2 * k + p;   /* 16-element chunk = scale index */
#if AE_RELAXED
        acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(ae_rdot16(xs->X[c], decode_q(l0, l1, hb, k)), pair_splat(scp, c)));
#else
        const v128 d = chunk_dot(l0, l1, hb, k, xs, c);
        acc = wasm_i32x4_add(acc, wasm_i32x4_mul(d, lane_splat(sc32[c >> 2], c)));
#endif
        if (k & 1) { part[4 * h + 2 * p + (k >> 1)] = acc; acc = wasm_i32x4_splat(0); }
      }
    }
  v128 acc_v = wasm_i32x4_sub(wasm_i32x4_splat(0), wasm_i32x4_shl(off, 5));
  for (int j = 0; j < 8; j++) acc_v = wasm_i32x4_add(acc_v, part[j]);
  return acc_v;
}
AE_INLINE int32_t row_sb(const ae_block_q6_K *w, const xk *xs) { return ae_hsum_i32(row_sbv(w, xs)); }

/* Rows longer than one chunk: rows in groups of 8; for each super-block the activation is split once
 * (0.5 KiB) and used by the 8 rows, each keeping its float sum in block order (same
 * arithmetic as the chunked path). Measured on 3072x8192: 2.1 ms against 4.8 ms for two chunk passes. */
#define AE_KQ_ROWS 8
static void rows_sb_outer(const void *W, int nb, const ae_block_q8_K *x, float *y, int r0, int r1) {
  xk xs[1];
  for (int rg = r0; rg < r1; rg += AE_KQ_ROWS) {
    const int nr = r1 - rg < AE_KQ_ROWS ? r1 - rg : AE_KQ_ROWS;
    const ae_block_q6_K *w = (const ae_block_q6_K *)W + (size_t)rg * nb;
    float acc[AE_KQ_ROWS] = {0};
    for (int i = 0; i < nb; i++) {
      prep(x + i, 1, xs);
      const float dx = x[i].d;
      for (int j = 0; j < nr; j++) acc[j] += (ae_h2f_s(w[(size_t)j * nb + i].d) * dx) * (float)row_sb(&w[(size_t)j * nb + i], &xs[0]);
    }
    for (int j = 0; j < nr; j++) y[rg + j] = acc[j];
  }
}

void ae_matvec_rows_q6_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  if (nb > AE_QK_CHUNK || r1 - r0 < 4) { rows_sb_outer(W, nb, x, y, r0, r1); return; }
  xk xs[AE_QK_CHUNK];
  for (int c0 = 0; c0 < nb; c0 += AE_QK_CHUNK) {
    const int n = nb - c0 < AE_QK_CHUNK ? nb - c0 : AE_QK_CHUNK;
    prep(x + c0, n, xs);
    for (int r = r0; r < r1; r++) {
      const ae_block_q6_K *w = (const ae_block_q6_K *)W + (size_t)r * nb + c0;
      float sum = c0 ? y[r] : 0.0f;
      for (int i = 0; i < n; i++) sum += (ae_h2f_s(w[i].d) * x[c0 + i].d) * (float)row_sb(&w[i], &xs[i]);
      y[r] = sum;
    }
  }
}

void ae_vec_dot_q6_K_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q6_K_simd128(w, n, x, s, 0, 1);
}
