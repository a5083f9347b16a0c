/* Prefill GEMM for iq4_nl (x q8_0) and iq4_xs (x q8_K): ae_matmul_rows_iq4_nl_simd128, ae_matmul_rows_iq4_xs_simd128.
 *
 * Tile: one weight row x 4 tokens (both builds). Per 32 weights the codes become their values once (two swizzles into
 * the table, dot_iq4_nl_simd128.c) and are widened to i16 (iq4_xs: times the sub-block's scale in i16, |value ls| <=
 * 127 x 32 < 2^15), then dotted (i32x4.dot_i16x8, exact) with each of the 4 tokens' activations, widened to i16 once
 * per column chunk for all rows of the chunk. The values are signed as the activations are, so there is no 7-bit
 * operand for the relaxed dot: both builds run this tile. The 4 tokens' i32x4 partial sums are reduced together
 * (ae_reduce4_i32) to the exact integers the matvec forms in another order (no partial sum reaches 2^31):
 *   iq4_nl: sumi = sum(value x) per block;  iq4_xs: sumi = sum_ib ls_ib sum(value x) per super-block
 * and then per token, in float, the matvec's step (lanes = tokens, block order):
 *   acc = acc + (float)sumi * (d_w d_x)
 * so every y[b][r] equals ae_matvec on token b (and the reference) bit for bit, for any row range. Shared by the 4
 * tokens: the weight loads, the decode and widening, the scales. Loops as gemm_k_simd128.c: rows in chunks of
 * GEMM_ROWS, token groups of 4 (a last group of 2-3 tokens repeats its last token in the spare lanes and stores only the
 * real ones; a lone token runs the matvec, the same bits), column chunks of GEMM_SB sub-blocks of 32 (partial sums cross
 * chunks through y, exactly). */
#include "iq4_simd128.h"

#define GEMM_ROWS 32
#define GEMM_SB 32   /* 32-element sub-blocks per column chunk (a multiple of 8: whole iq4_xs super-blocks): 8 KiB */

/* The activations of sub-blocks [s0, s0 + n) of the 4 tokens (token t < nt at x + t stride; the last repeated):
 * xw[16 j + 4 v + t] = token t's elements 32 (s0 + j) + 8 v .. + 8 as i16; dx[4 b + t] = the scale of block b of the
 * chunk (iq4_nl: one per sub-block, and dxs = d_x 2^112 for ae_bscale_fast; iq4_xs: one per super-block). */
AE_INLINE void prep4(int xs, const uint8_t *x, size_t stride, int nt, int s0, int n, v128 *xw, float *dx, float *dxs) {
  for (int t = 0; t < 4; t++) {
    const uint8_t *xt = x + (size_t)(t < nt ? t : nt - 1) * stride;
    for (int j = 0; j < n; j++) {
      const int8_t *q;
      if (xs) {
        const ae_block_q8_K *b = (const ae_block_q8_K *)xt + (s0 + j) / 8;
        q = b->qs + 32 * ((s0 + j) % 8);
        if (j % 8 == 0) dx[4 * (j / 8) + t] = b->d;
      } else {
        const ae_block_q8_0 *b = (const ae_block_q8_0 *)xt + s0 + j;
        q = b->qs;
        dx[4 * j + t] = ae_h2f_s(b->d);
        dxs[4 * j + t] = dx[4 * j + t] * 0x1p112f;   /* exact: |d_x| <= 65504, d_x 2^112 < FLT_MAX */
      }
      const v128 lo = ae_load(q), hi = ae_load(q + 16);
      v128 *o = xw + 16 * j + t;
      o[0] = wasm_i16x8_extend_low_i8x16(lo); o[4] = wasm_i16x8_extend_high_i8x16(lo);
      o[8] = wasm_i16x8_extend_low_i8x16(hi); o[12] = wasm_i16x8_extend_high_i8x16(hi);
    }
  }
}

/* a[t] += the 4 tokens' products of the 32 widened weights w[0..3] (elements 0-7, 8-15, 16-23, 24-31) with their
 * activations x (xw of the sub-block), each token's sum stored to the volatile sink: V8 keeps a token's 4 activation
 * loads next to their use instead of hoisting all 16 (and spilling) */
AE_INLINE void dot4x4(const v128 w[4], const v128 *x, v128 a[4], volatile v128 *sink) {
  __asm__("" : "+r"(x));   /* one base register: every load takes a constant offset */
#pragma clang loop unroll(full)
  for (int t = 0; t < 4; t++) {
    a[t] = wasm_i32x4_add(a[t], wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[0], x[t]), wasm_i32x4_dot_i16x8(w[1], x[4 + t])),
                                               wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[2], x[8 + t]), wasm_i32x4_dot_i16x8(w[3], x[12 + t]))));
    sink[t] = a[t];
  }
}

/* One row x 4 tokens (lanes), blocks [0, n) of the chunk (iq4_nl: n blocks of 32; iq4_xs: n super-blocks); acc in/out.
 * fast (iq4_nl, a row whose block scales are all finite): d_w by ae_bscale_fast against dx = d_x 2^112 (the same float
 * products), else the exact conversion against dx = d_x. */
AE_INLINE v128 row1x4(int xs, const uint8_t *w, int n, const v128 *xw, const float *dx, int fast, v128 lut, v128 m, v128 acc) {
  volatile v128 sink[4];
  for (int i = 0; i < n; i++) {
    v128 a[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
    ae_fp16 hd;   /* d is the first field of both blocks */
    if (xs) {
      const ae_block_iq4_xs *b = (const ae_block_iq4_xs *)w + i;
      _Alignas(16) int16_t ls[8];
      wasm_v128_store(ls, iq4xs_scales8(b));
      int16_t *lp = ls;
      __asm__("" : "+r"(lp) : : "memory");   /* read back by one broadcast load per sub-block */
#pragma clang loop unroll(full)
      for (int ib = 0; ib < 8; ib++) {
        v128 lo, hi;
        iq4_values(b->qs + 16 * ib, lut, m, &lo, &hi);
        const v128 s = wasm_v128_load16_splat(lp + ib);
        const v128 wv[4] = {wasm_i16x8_mul(wasm_i16x8_extend_low_i8x16(lo), s), wasm_i16x8_mul(wasm_i16x8_extend_high_i8x16(lo), s),
                            wasm_i16x8_mul(wasm_i16x8_extend_low_i8x16(hi), s), wasm_i16x8_mul(wasm_i16x8_extend_high_i8x16(hi), s)};
        dot4x4(wv, xw + 16 * (8 * i + ib), a, sink);
      }
      hd = b->d;
    } else {
      const ae_block_iq4_nl *b = (const ae_block_iq4_nl *)w + i;
      v128 lo, hi;
      iq4_values(b->qs, lut, m, &lo, &hi);
      const v128 wv[4] = {wasm_i16x8_extend_low_i8x16(lo), wasm_i16x8_extend_high_i8x16(lo), wasm_i16x8_extend_low_i8x16(hi), wasm_i16x8_extend_high_i8x16(hi)};
      dot4x4(wv, xw + 16 * i, a, sink);
      hd = b->d;
    }
    const v128 si = ae_reduce4_i32(a[0], a[1], a[2], a[3]);
    const v128 dw = fast ? ae_bscale_fast((const uint8_t *)&hd) : wasm_f32x4_splat(ae_h2f_s(hd));
    const v128 dd = wasm_f32x4_mul(dw, ae_load(dx + 4 * i));
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(si), dd));
  }
  return acc;
}

/* Rows [rc, re) x the nt (2..4) tokens at xt, over column chunks; in a frame of its own (the lone token's matvec of
 * gemm() does not nest its locals under these arrays) */
AE_INLINE void tiles(int xs, const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt, float *yt, int y_stride,
                     int rc, int re) {
  const int nsb = ncols / 32, per = xs ? 8 : 1;   /* sub-blocks per block */
  const size_t bs = xs ? sizeof(ae_block_iq4_xs) : sizeof(ae_block_iq4_nl), rs = (size_t)(nsb / per) * bs;
  v128 xw[16 * GEMM_SB];
  float dx[4 * GEMM_SB], dxs[4 * GEMM_SB];
  uint8_t fin[GEMM_ROWS];   /* iq4_nl: every block scale of the row finite */
  for (int r = rc; r < re; r++) fin[r - rc] = !xs && ae_row_finite((const uint8_t *)W + (size_t)r * rs, nsb, bs);
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  for (int s0 = 0; s0 < nsb; s0 += GEMM_SB) {
    const int n = nsb - s0 < GEMM_SB ? nsb - s0 : GEMM_SB;
    prep4(xs, xt, xq_stride, nt, s0, n, xw, dx, dxs);
    for (int r = rc; r < re; r++)
      ae_gemm_store_y(yt, y_stride, nt, r, row1x4(xs, (const uint8_t *)W + (size_t)r * rs + (size_t)(s0 / per) * bs, n / per, xw,
                                                  fin[r - rc] ? dxs : dx, fin[r - rc], lut, m, ae_gemm_load_y(yt, y_stride, nt, r, s0)));
  }
}
static __attribute__((noinline)) void tiles_nl(const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt, float *yt,
                                               int y_stride, int rc, int re) {
  tiles(0, W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
}
static __attribute__((noinline)) void tiles_xs(const void *W, int ncols, const uint8_t *xt, size_t xq_stride, int nt, float *yt,
                                               int y_stride, int rc, int re) {
  tiles(1, W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
}

/* Rows [r0, r1) in chunks of GEMM_ROWS (tiles' per-row arrays) x every token group: the tiles above (a lone token: the
 * matvec). */
AE_INLINE void rows_tiles(int xs, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                          int r0, int r1) {
  for (int rc = r0; rc < r1; rc += GEMM_ROWS) {
    const int re = rc + GEMM_ROWS < r1 ? rc + GEMM_ROWS : r1;
    for (int t0 = 0; t0 < nvec; t0 += 4) {
      const int nt = nvec - t0 < 4 ? nvec - t0 : 4;
      const uint8_t *xt = (const uint8_t *)xq + (size_t)t0 * xq_stride;
      float *yt = y + (size_t)t0 * y_stride;
      if (nt == 1) (xs ? ae_matvec_rows_iq4_xs_simd128 : ae_matvec_rows_iq4_nl_simd128)(W, ncols, xt, yt, rc, re);
      else (xs ? tiles_xs : tiles_nl)(W, ncols, xt, xq_stride, nt, yt, y_stride, rc, re);
    }
  }
}

AE_INLINE void gemm(int xs, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                    int r0, int r1) {
#if AE_RELAXED
  /* iq4_nl, relaxed build: rows in chunks of 64, each chunk's groups of 4 whose block scales are all finite as q8_0 R4
   * records on the q8_0 R4 tiles (ae_matmul_rows_iq4_nl_r8: the relaxed dot with the activation's sign on the weights,
   * 1.6-1.7x this file's tile), a tail of 1-3 rows or a chunk with an inf / nan scale on the tiles above */
  if (xs && nvec >= 2) {   /* iq4_xs: every whole group of 4 on the q8_0 R4 step with its scales (ae_matmul_rows_iq4_xs_r8) */
    for (int rc = r0; rc < r1; rc += 32) {
      const int re = rc + 32 < r1 ? rc + 32 : r1, r4 = rc + ((re - rc) & ~3);
      if (r4 > rc) ae_matmul_rows_iq4_xs_r8(W, ncols, xq, xq_stride, nvec, y, y_stride, rc, r4);
      if (r4 < re) rows_tiles(1, W, ncols, xq, xq_stride, nvec, y, y_stride, r4, re);
    }
    return;
  }
  if (!xs && nvec >= 2) {
    const size_t rs = (size_t)(ncols / 32) * sizeof(ae_block_iq4_nl);
    for (int rc = r0; rc < r1; rc += 64) {
      const int re = rc + 64 < r1 ? rc + 64 : r1;
      int r4 = rc + ((re - rc) & ~3), fin = 1;
      for (int r = rc; r < r4 && fin; r++) fin = ae_row_finite((const uint8_t *)W + (size_t)r * rs, ncols / 32, sizeof(ae_block_iq4_nl));
      if (!fin) r4 = rc;
      if (r4 > rc) ae_matmul_rows_iq4_nl_r8(W, ncols, xq, xq_stride, nvec, y, y_stride, rc, r4);
      if (r4 < re) rows_tiles(0, W, ncols, xq, xq_stride, nvec, y, y_stride, r4, re);
    }
    return;
  }
#endif
  rows_tiles(xs, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}

void ae_matmul_rows_iq4_nl_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                   int y_stride, int r0, int r1) {
  gemm(0, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
void ae_matmul_rows_iq4_xs_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                   int y_stride, int r0, int r1) {
  gemm(1, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
