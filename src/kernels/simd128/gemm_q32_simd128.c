/* Prefill GEMM for the 32-element block dtypes with their own expansion (q5_0 x q8_0, q4_1 x q8_1,
 * q5_1 x q8_1): ae_matmul_rows_<t>_simd128.
 *
 * Tile: one weight row x 4 tokens. Each weight block is expanded once (nibbles | 5th bits, as the matvecs in
 * dot_q5_0/q4_1/q5_1_simd128.c) into the two i16 forms (w << 8, w & 0xff00) of q32_simd128.h's ae_q32_dot,
 * and dotted with the 4 tokens' activations (split into even / odd i16 once per column chunk); the 4 i32
 * partial vectors are reduced together (ae_reduce4_i32) to the 4 exact block sums (x 256, shifted back).
 * Then per token, in float, the matvec's sequence (lanes = tokens, block order):
 *   q5_0:        acc = acc + (float)sumi * (d_w * d_x)
 *   q4_1 / q5_1: acc = acc + ((d_w * d_x) * (float)sumi + m_w * s_x)
 * so every y[b][r] equals ae_matvec on token b (and ae_vec_dot_<t>_ref) bit for bit, for any row range.
 * Shared by the 4 tokens: the weight loads, the expansion and the f16 scale conversions. Loops as
 * gemm_q8act_simd128.c (rows in chunks of GEMM_ROWS, token groups of 4 with the last token repeated in
 * spare lanes, column chunks of GEMM_CB blocks with partial sums crossing chunks through y). */
#include "q32_simd128.h"

#define GEMM_ROWS 64
#define GEMM_CB 64

enum { W_Q5_0, W_Q4_1, W_Q5_1, W_Q5_0_X8, W_Q5_1_X8 };   /* W_Q5_x_X8: the load-time layouts (kernels.h AE_Q5_0_X8, AE_Q5_1_X8) */

AE_INLINE size_t wsize(int kind) {
  return kind == W_Q5_0 || kind == W_Q5_0_X8 ? sizeof(ae_block_q5_0) : kind == W_Q4_1 ? sizeof(ae_block_q4_1) : sizeof(ae_block_q5_1);   /* q5_1, q5_1 X8 */
}

/* Tokens t < nt of the group (x + t * stride), blocks [c0, c0 + n): xs[4 b + t], dx[4 b + t], sx[4 b + t]; for
 * W_Q5_1_X8 also cx[4 b + t] = 16 sum(x). */
AE_INLINE void prep4(int kind, const uint8_t *x, size_t stride, int nt, int c0, int n, ae_q32x *xs, float *dx,
                     float *sx, int32_t *cx) {
  for (int t = 0; t < 4; t++) {
    const uint8_t *xt = x + (size_t)(t < nt ? t : nt - 1) * stride;
    for (int b = 0; b < n; b++) {
      if (kind == W_Q5_0 || kind == W_Q5_0_X8) {
        const ae_block_q8_0 *xb = (const ae_block_q8_0 *)xt + c0 + b;
        ae_q32_prep(xb->qs, &xs[4 * b + t]);
        dx[4 * b + t] = ae_h2f_s(xb->d);
        sx[4 * b + t] = 0.0f;
      } else {
        const ae_block_q8_1 *xb = (const ae_block_q8_1 *)xt + c0 + b;
        ae_q32_prep(xb->qs, &xs[4 * b + t]);
        if (kind == W_Q5_1_X8) cx[4 * b + t] = ae_q32_sum16(xb->qs);
        dx[4 * b + t] = ae_h2f_s(xb->d);
        sx[4 * b + t] = ae_h2f_s(xb->s);
      }
    }
  }
}

/* Expanded bytes of one weight block (elements 0..15 in w0, 16..31 in w1) and its f16 scale / min. */
AE_INLINE void expand(int kind, const uint8_t *blk, v128 *w0, v128 *w1, float *d, float *m) {
  ae_fp16 h;
  __builtin_memcpy(&h, blk, 2);
  *d = ae_h2f_s(h);
  if (kind == W_Q5_0) {
    const ae_block_q5_0 *b = (const ae_block_q5_0 *)blk;
    v128 h0, h1;
    ae_q32_qh(b->qh, &h0, &h1);
    const v128 qs = ae_load(b->qs), sixteen = wasm_i8x16_splat(16);
    *w0 = wasm_i8x16_sub(wasm_v128_or(ae_q32_lo(qs), h0), sixteen);
    *w1 = wasm_i8x16_sub(wasm_v128_or(ae_q32_hi(qs), h1), sixteen);
    *m = 0.0f;
  } else if (kind == W_Q5_0_X8) {   /* bytes 8 (q - 16): row1x4 divides its sums by 2^11 */
    ae_q5_0_x8_load(blk, w0, w1);
    *m = 0.0f;
  } else if (kind == W_Q5_1_X8) {   /* the same after d and m; row1x4 adds 16 sum(x) back */
    ae_q5_0_x8_load(blk + 2, w0, w1);
    *m = ae_h2f_s(((const ae_block_q5_1 *)blk)->m);
  } else if (kind == W_Q4_1) {
    const ae_block_q4_1 *b = (const ae_block_q4_1 *)blk;
    const v128 qs = ae_load(b->qs);
    *w0 = ae_q32_lo(qs);
    *w1 = ae_q32_hi(qs);
    *m = ae_h2f_s(b->m);
  } else {
    const ae_block_q5_1 *b = (const ae_block_q5_1 *)blk;
    const v128 qs = ae_load(b->qs);
    v128 h0, h1;
    ae_q32_qh(b->qh, &h0, &h1);
    *w0 = wasm_v128_or(ae_q32_lo(qs), h0);
    *w1 = wasm_v128_or(ae_q32_hi(qs), h1);
    *m = ae_h2f_s(b->m);
  }
}

/* 256 sum(w x) of one token (ae_q32_dot before its reduction) */
AE_INLINE v128 dot4(v128 m0, v128 m1, v128 m2, v128 m3, const ae_q32x *x) {
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(m0, x->e0), wasm_i32x4_dot_i16x8(m1, x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(m2, x->e1), wasm_i32x4_dot_i16x8(m3, x->o1)));
}

/* One row, blocks [0, n) of the chunk, 4 tokens; acc in/out (lanes = tokens). */
AE_INLINE v128 row1x4(int kind, const uint8_t *w, int n, const ae_q32x *xs, const float *dx, const float *sx, const int32_t *cx,
                      v128 acc) {
  const size_t bs = wsize(kind);
  const v128 hi = wasm_i16x8_splat((int16_t)0xff00);
  for (int b = 0; b < n; b++, w += bs) {
    v128 w0, w1;
    float d, m;
    expand(kind, w, &w0, &w1, &d, &m);
    const v128 m0 = wasm_i16x8_shl(w0, 8), m1 = wasm_v128_and(w0, hi), m2 = wasm_i16x8_shl(w1, 8), m3 = wasm_v128_and(w1, hi);
    const ae_q32x *x = xs + 4 * b;
    v128 s = wasm_i32x4_shr(ae_reduce4_i32(dot4(m0, m1, m2, m3, x), dot4(m0, m1, m2, m3, x + 1),
                                           dot4(m0, m1, m2, m3, x + 2), dot4(m0, m1, m2, m3, x + 3)), kind == W_Q5_0_X8 || kind == W_Q5_1_X8 ? 11 : 8);
    if (kind == W_Q5_1_X8) s = wasm_i32x4_add(s, ae_load(cx + 4 * b));
    const v128 dd = wasm_f32x4_mul(wasm_f32x4_splat(d), ae_load(dx + 4 * b));
    if (kind == W_Q5_0 || kind == W_Q5_0_X8) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), dd));
    else
      acc = wasm_f32x4_add(acc, wasm_f32x4_add(wasm_f32x4_mul(dd, wasm_f32x4_convert_i32x4(s)),
                                               wasm_f32x4_mul(wasm_f32x4_splat(m), ae_load(sx + 4 * b))));
  }
  return acc;
}

#if AE_RELAXED
/* One row x 4 tokens (lanes), blocks [0, n): per token the relaxed i16 dot of its raw activation bytes (xr[8 b + 2 t],
 * xr[8 b + 2 t + 1]) with q0 / q1 (pair sums |.| <= 2 * 31 * 127, the two halves' sum <= 15748: no i16 overflow),
 * widened by pairs, the 4 tokens reduced, minus 16 sum(x) per token (cx[4 b + t]): the exact sum((q - 16) x); then
 * the q5_0 reference's float step, acc + (float)sumi * (d_w * d_x). Per block and token 4 operations where the plain
 * tile takes 7 (and the i16 forms of the weights are not needed). */
AE_INLINE v128 row1x4_x8r(const uint8_t *w, int n, const v128 *xr, const int32_t *cx, const float *dx, v128 acc) {
  for (int b = 0; b < n; b++, w += sizeof(ae_block_q5_0)) {
    v128 q0, q1;
    ae_q5_0_x8_load_u(w, &q0, &q1);
    const v128 *x = xr + 8 * b;
    v128 s[4];
    for (int t = 0; t < 4; t++)
      s[t] = wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(ae_rdot16(x[2 * t], q0), ae_rdot16(x[2 * t + 1], q1)));
    const v128 si = wasm_i32x4_sub(ae_reduce4_i32(s[0], s[1], s[2], s[3]), ae_load(cx + 4 * b));
    ae_fp16 h;
    __builtin_memcpy(&h, w, 2);
    const v128 dd = wasm_f32x4_mul(wasm_f32x4_splat(ae_h2f_s(h)), ae_load(dx + 4 * b));
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(si), dd));
  }
  return acc;
}
static __attribute__((noinline)) void tiles_x8r(const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt,
                                                float *yt, int y_stride, int rc, int re) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * sizeof(ae_block_q5_0);
  v128 xr[8 * GEMM_CB];
  int32_t cx[4 * GEMM_CB];
  float dx[4 * GEMM_CB];
  for (int c0 = 0; c0 < nb; c0 += GEMM_CB) {
    const int n = nb - c0 < GEMM_CB ? nb - c0 : GEMM_CB;
    for (int t = 0; t < 4; t++) {   /* the last token repeated in spare lanes */
      const ae_block_q8_0 *xb = (const ae_block_q8_0 *)(xt + (size_t)(t < nt ? t : nt - 1) * xq_stride) + c0;
      for (int b = 0; b < n; b++) {
        xr[8 * b + 2 * t] = ae_load(xb[b].qs);
        xr[8 * b + 2 * t + 1] = ae_load(xb[b].qs + 16);
        cx[4 * b + t] = ae_q32_sum16(xb[b].qs);
        dx[4 * b + t] = ae_h2f_s(xb[b].d);
      }
    }
    for (int r = rc; r < re; r++)
      ae_gemm_store_y(yt, y_stride, nt, r, row1x4_x8r((const uint8_t *)W + (size_t)r * rs + (size_t)c0 * sizeof(ae_block_q5_0), n,
                                                  xr, cx, dx, ae_gemm_load_y(yt, y_stride, nt, r, c0)));
  }
}
#endif

/* Rows [rc, re) x the nt (2..4) tokens at xt, over column chunks. In a frame of its own (one function per kind): the
 * lone-token matvec of gemm() does not nest its prepared row activations under these arrays (stack <= 32 KiB). */
AE_INLINE void tiles(int kind, const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt, float *yt,
                     int y_stride, int rc, int re) {
  const int nb = ncols / 32;
  const size_t bs = wsize(kind), rs = (size_t)nb * bs;
  ae_q32x xs[4 * GEMM_CB];
  float dx[4 * GEMM_CB], sx[4 * GEMM_CB];
  int32_t cx[4 * GEMM_CB];
  for (int c0 = 0; c0 < nb; c0 += GEMM_CB) {
    const int n = nb - c0 < GEMM_CB ? nb - c0 : GEMM_CB;
    prep4(kind, xt, xq_stride, nt, c0, n, xs, dx, sx, cx);
    for (int r = rc; r < re; r++)
      ae_gemm_store_y(yt, y_stride, nt, r, row1x4(kind, (const uint8_t *)W + (size_t)r * rs + (size_t)c0 * bs, n, xs, dx, sx, cx,
                                          ae_gemm_load_y(yt, y_stride, nt, r, c0)));
  }
}
#define TILES(K)                                                                                                   \
  static __attribute__((noinline)) void tiles_##K(const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt, \
                                                  float *yt, int y_stride, int rc, int re) {                      \
    tiles(K, W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);                                                   \
  }
TILES(W_Q5_0) TILES(W_Q4_1) TILES(W_Q5_1) TILES(W_Q5_1_X8)
#if !AE_RELAXED
TILES(W_Q5_0_X8)   /* the relaxed build: tiles_x8r */
#endif
#undef TILES

AE_INLINE void gemm(int kind, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                    int y_stride, int r0, int r1) {
  for (int rc = r0; rc < r1; rc += GEMM_ROWS) {
    const int re = rc + GEMM_ROWS < r1 ? rc + GEMM_ROWS : r1;
    for (int t0 = 0; t0 < nvec; t0 += 4) {
      const int nt = nvec - t0 < 4 ? nvec - t0 : 4;
      const uint8_t *xt = (const uint8_t *)xq + (size_t)t0 * xq_stride;
      float *yt = y + (size_t)t0 * y_stride;
      if (nt == 1) {   /* a lone token: the matvec (the same bits, without 3 idle lanes) */
        if (kind == W_Q5_0) ae_matvec_rows_q5_0_simd128(W, ncols, xt, yt, rc, re);
        else if (kind == W_Q5_0_X8) ae_matvec_rows_q5_0_x8_simd128(W, ncols, xt, yt, rc, re);
        else if (kind == W_Q5_1_X8) ae_matvec_rows_q5_1_x8_simd128(W, ncols, xt, yt, rc, re);
        else if (kind == W_Q4_1) ae_matvec_rows_q4_1_simd128(W, ncols, xt, yt, rc, re);
        else ae_matvec_rows_q5_1_simd128(W, ncols, xt, yt, rc, re);
      } else if (kind == W_Q5_0) tiles_W_Q5_0(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
#if AE_RELAXED
      else if (kind == W_Q5_0_X8) tiles_x8r(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
#else
      else if (kind == W_Q5_0_X8) tiles_W_Q5_0_X8(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
#endif
      else if (kind == W_Q5_1_X8) tiles_W_Q5_1_X8(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
      else if (kind == W_Q4_1) tiles_W_Q4_1(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
      else tiles_W_Q5_1(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
    }
  }
}

void ae_matmul_rows_q5_0_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  gemm(W_Q5_0, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q4_1_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  gemm(W_Q4_1, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q5_1_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  gemm(W_Q5_1, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q5_0_x8_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  gemm(W_Q5_0_X8, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_q5_1_x8_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  gemm(W_Q5_1_X8, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
