/* Prefill GEMM for the weights dotted with q8_0 activations (q8_0, q4_0): ae_matmul_rows_<t>_simd128.
 *
 * Tile: one weight row x 4 tokens, the tokens in the lanes of one f32x4 accumulator. Each weight block is
 * loaded and unpacked once (q8_0: the two i16 forms w << 8 and w & 0xff00; q4_0: the four nibble masks, see
 * dot_q8_0_simd128.c / dot_q4_0_simd128.c) and dotted with the 4 tokens' prepared activations; the 4 i32
 * partial vectors are reduced together (ae_reduce4_i32) to the 4 exact block sums. Then per token, in float,
 *   acc += (float)sumi * (d_w * d_x)          (block order)
 * which is the operation sequence of ae_vec_dot_<t>_ref and of the matvec kernels: every y[b][r] equals
 * ae_matvec on token b bit for bit (so prefill gives the token-by-token results), for any row range or
 * token count.
 *
 * Loops: rows in chunks of GEMM_ROWS (the chunk's weights stay in L1/L2 while every token group passes over
 * them), token groups of 4 (a last group of 1-3 tokens repeats its last token in the spare lanes and stores
 * only the real ones), column chunks of GEMM_CB blocks (activations of 4 tokens prepared on the stack,
 * 18 KiB; partial sums cross chunks through y, a float store / load is exact).
 *
 * Measured (bench/gemm.mjs, docs/PERFORMANCE.md): about 1.1x the matvec per token. Both are bound by the
 * 4 i32x4.dot_i16x8 + 4 activation loads + the reduction per (row, token, block), which a tile cannot
 * share; only the weight unpacking and scale conversion are shared. A 2-row x 4-token tile (each
 * activation load serving two rows) was slower: 8 unpacked weight vectors + partial sums exceed V8's 16
 * SIMD registers on x64 and spill.
 *
 * Code generation (docs/DESIGN.md "Relaxed SIMD", V8 code generation; docs/PERFORMANCE.md "Prefill: chunks without
 * logits, the q8_0 GEMM tile"): each token's 4-dot partial is stored to a volatile slot (V8 otherwise hoists the
 * next tokens' activation loads and spills), the block / activation pointers pass through an empty asm (every load
 * then has a constant offset, no address add per load), and a row whose block scales are all finite (ae_row_finite,
 * checked once per row chunk) converts its scales by moving the half's bits (ae_bscale_fast: 3 integer operations
 * instead of the branchy scalar conversion) against d_x 2^112. Together 1.0-1.4x on q8_0 (kernel-ab, noisy machine). */
#include "simd128_util.h"

#define GEMM_ROWS 64
#define GEMM_CB 64

typedef struct { v128 e0, o0, e1, o1; } xblk;   /* one token's block, i16 lanes (layouts as the matvecs') */

/* W_Q8_0F: q8_0 with the fused dot (relaxed build, kernels.h ae_fused_dot). The activation's sign moves onto the
 * weights: with m = 0xff where x < 0, w ^ m = -w - 1, so sum(w x) = sum(|x| (w ^ m)) + sum(|x| over x < 0); |x| <= 127
 * (the q8_0 quantiser's range) is the 7-bit operand of ae_rdot (exact, host-independent) and w ^ m any byte. Per (row,
 * token, block): two xors and two ae_rdot, where the i16 tile needs 4 i32x4.dot_i16x8 and 3 adds. */
enum { W_Q8_0, W_Q4_0, W_Q8_0F };
#define KIND_BS(kind) ((kind) == W_Q4_0 ? sizeof(ae_block_q4_0) : sizeof(ae_block_q8_0))

#if AE_RELAXED
/* Relaxed build, q4_0: e0 / o0 hold the token's bytes 0..15 / 16..31 as they are (the i8 operand of ae_rdot16)
 * and the nibbles (0..15) are the 7-bit operand: exact and host-independent. Per weight block the two nibble
 * vectors are formed once; per token two pmaddubsw and an i16 add give 8 i16 lanes of 4 products each; the 4
 * tokens' lanes are transposed and added in i16 (a lane then holds 16 products, |.| <= 16 * 15 * 128 < 2^15)
 * and widened once: the 4 exact block sums sum(q x). sum8 = 8 sum(x), no shift (Q4_SH 0). */
#define Q4_SH 0
#define Q4_SUM8 8
#else
#define Q4_SH 8
#define Q4_SUM8 2048
#endif

/* Tokens t < nt of the group (x + t * stride), blocks [c0, c0 + n): xs[4 b + t], sum8[4 b + t], dx[4 b + t] (d_x) and
 * dxs[4 b + t] (d_x 2^112, for ae_bscale_fast; exact: |d_x| <= 65504, so d_x 2^112 < FLT_MAX). */
AE_INLINE void prep4(int kind, const uint8_t *x, size_t stride, int nt, int c0, int n, xblk *xs, int32_t *sum8, float *dx, float *dxs) {
  for (int t = 0; t < 4; t++) {
    const ae_block_q8_0 *xb = (const ae_block_q8_0 *)(x + (size_t)(t < nt ? t : nt - 1) * stride) + c0;
    for (int b = 0; b < n; b++) {
      const v128 a = ae_load(xb[b].qs), c = ae_load(xb[b].qs + 16);
      const v128 e0 = ae_i8_even(a), o0 = ae_i8_odd(a), e1 = ae_i8_even(c), o1 = ae_i8_odd(c);
      xblk *o = &xs[4 * b + t];
      if (kind == W_Q8_0) {
        o->e0 = e0; o->o0 = o0; o->e1 = e1; o->o1 = o1;
        sum8[4 * b + t] = 0;
      } else if (kind == W_Q8_0F) {   /* |x| and the sign masks; sum8 = sum(|x| over x < 0) */
        const v128 z = wasm_i32x4_splat(0);
        o->e0 = wasm_i8x16_abs(a); o->o0 = wasm_i8x16_lt(a, z); o->e1 = wasm_i8x16_abs(c); o->o1 = wasm_i8x16_lt(c, z);
        const v128 n = wasm_i16x8_add(wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(o->e0, o->o0)),
                                      wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(o->e1, o->o1)));
        sum8[4 * b + t] = ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(n));
      } else {   /* q4_0: pairs with the nibble masks (dot_q4_0_simd128.c) and 2048 sum(x); relaxed: see above */
#if AE_RELAXED
        o->e0 = a; o->o0 = c; o->e1 = o->o1 = wasm_i32x4_splat(0);
#else
        o->e0 = wasm_i16x8_shl(e0, 8); o->o0 = o0; o->e1 = wasm_i16x8_shl(e1, 4); o->o1 = wasm_i16x8_shl(o1, 8);
#endif
        const v128 s = wasm_i16x8_add(wasm_i16x8_add(e0, o0), wasm_i16x8_add(e1, o1));
        sum8[4 * b + t] = Q4_SUM8 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(s));
      }
      dx[4 * b + t] = ae_h2f_s(xb[b].d);
      dxs[4 * b + t] = dx[4 * b + t] * 0x1p112f;
    }
  }
}

AE_INLINE v128 dot4(v128 m0, v128 m1, v128 m2, v128 m3, const xblk *x) {
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(m0, x->e0), wasm_i32x4_dot_i16x8(m1, x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(m2, x->e1), wasm_i32x4_dot_i16x8(m3, x->o1)));
}

AE_INLINE void unpack(int kind, const uint8_t *w, v128 *m) {
  if (kind == W_Q8_0) {
    const v128 a = ae_load(w + 2), c = ae_load(w + 18), hi = wasm_i16x8_splat((int16_t)0xff00);
    m[0] = wasm_i16x8_shl(a, 8); m[1] = wasm_v128_and(a, hi); m[2] = wasm_i16x8_shl(c, 8); m[3] = wasm_v128_and(c, hi);
  } else {
    const v128 v = ae_load(w + 2);
    m[0] = wasm_v128_and(v, wasm_i16x8_splat(0x000f)); m[1] = wasm_v128_and(v, wasm_i16x8_splat(0x0f00));
    m[2] = wasm_v128_and(v, wasm_i16x8_splat(0x00f0)); m[3] = wasm_u16x8_shr(v, 12);
  }
}

AE_INLINE v128 bscale(const uint8_t *w) {
  ae_fp16 h;
  __builtin_memcpy(&h, w, 2);
  return wasm_f32x4_splat(ae_h2f_s(h));
}
/* Block sums -> acc += (float)sumi * (d_w * d_x) per token lane. */
AE_INLINE v128 fma_block(int kind, v128 acc, v128 s, const int32_t *sum8, v128 dw, const float *dx) {
  if (kind == W_Q4_0) s = wasm_i32x4_shr(wasm_i32x4_sub(s, ae_load(sum8)), Q4_SH);
  else if (kind == W_Q8_0F) s = wasm_i32x4_add(s, ae_load(sum8));
  else s = wasm_i32x4_shr(s, 8);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_mul(dw, ae_load(dx))));
}

/* One row, blocks [0, n) of the chunk, 4 tokens; acc in/out (lanes = tokens). fast: the row's scales are finite
 * (ae_bscale_fast with dx = d_x 2^112), else bscale with dx = d_x. */
AE_INLINE v128 row1x4(int kind, int fast, const uint8_t *w, int n, const xblk *xs, const int32_t *sum8, const float *dx, v128 acc) {
  const size_t bs = KIND_BS(kind);
  for (int b = 0; b < n; b++, w += bs) {
#if AE_RELAXED
    if (kind == W_Q8_0F) {
      const xblk *x = xs + 4 * b;
      const v128 w0 = ae_load(w + 2), w1 = ae_load(w + 18), z = wasm_i32x4_splat(0);
      v128 d[4];   /* no volatile store per token here: 1.07x faster without in Chromium 156 */
      for (int t = 0; t < 4; t++) d[t] = ae_rdot(wasm_v128_xor(w1, x[t].o1), x[t].e1, ae_rdot(wasm_v128_xor(w0, x[t].o0), x[t].e0, z));
      acc = fma_block(kind, acc, ae_reduce4_i32(d[0], d[1], d[2], d[3]), sum8 + 4 * b, fast ? ae_bscale_fast(w) : bscale(w), dx + 4 * b);
      continue;
    }
    if (kind == W_Q4_0) {
      const v128 v = ae_load(w + 2), f = wasm_i8x16_splat(0x0f);
      const v128 lo = wasm_v128_and(v, f), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), f);
      const xblk *x = xs + 4 * b;
      const v128 a = wasm_i16x8_add(ae_rdot16(x[0].e0, lo), ae_rdot16(x[0].o0, hi));
      const v128 c = wasm_i16x8_add(ae_rdot16(x[1].e0, lo), ae_rdot16(x[1].o0, hi));
      const v128 d = wasm_i16x8_add(ae_rdot16(x[2].e0, lo), ae_rdot16(x[2].o0, hi));
      const v128 e = wasm_i16x8_add(ae_rdot16(x[3].e0, lo), ae_rdot16(x[3].o0, hi));
      const v128 ac = wasm_i16x8_add(wasm_i32x4_shuffle(a, c, 0, 4, 1, 5), wasm_i32x4_shuffle(a, c, 2, 6, 3, 7));
      const v128 de = wasm_i16x8_add(wasm_i32x4_shuffle(d, e, 0, 4, 1, 5), wasm_i32x4_shuffle(d, e, 2, 6, 3, 7));
      const v128 s = wasm_i32x4_extadd_pairwise_i16x8(
          wasm_i16x8_add(wasm_i32x4_shuffle(ac, de, 0, 1, 4, 5), wasm_i32x4_shuffle(ac, de, 2, 3, 6, 7)));
      acc = fma_block(kind, acc, s, sum8 + 4 * b, fast ? ae_bscale_fast(w) : bscale(w), dx + 4 * b);
      continue;
    }
#endif
    v128 m[4];
    const xblk *x = xs + 4 * b;
    __asm__("" : "+r"(x)); __asm__("" : "+r"(w));   /* opaque: every load takes a constant offset (DESIGN.md) */
    unpack(kind, w, m);
    volatile v128 sink[4];
    const v128 d0 = dot4(m[0], m[1], m[2], m[3], x); sink[0] = d0;
    const v128 d1 = dot4(m[0], m[1], m[2], m[3], x + 1); sink[1] = d1;
    const v128 d2 = dot4(m[0], m[1], m[2], m[3], x + 2); sink[2] = d2;
    const v128 d3 = dot4(m[0], m[1], m[2], m[3], x + 3); sink[3] = d3;
    const v128 s = ae_reduce4_i32(d0, d1, d2, d3);
    acc = fma_block(kind, acc, s, sum8 + 4 * b, fast ? ae_bscale_fast(w) : bscale(w), dx + 4 * b);
  }
  return acc;
}

AE_INLINE void gemm(int kind, const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                    int y_stride, int r0, int r1) {
  const int nb = ncols / AE_QK8_0;
  const size_t rs = (size_t)nb * KIND_BS(kind);
  xblk xs[4 * GEMM_CB];
  int32_t sum8[4 * GEMM_CB];
  float dx[4 * GEMM_CB], dxs[4 * GEMM_CB];
  uint8_t fin[GEMM_ROWS];
  const size_t bs = KIND_BS(kind);
  for (int rc = r0; rc < r1; rc += GEMM_ROWS) {
    const int re = rc + GEMM_ROWS < r1 ? rc + GEMM_ROWS : r1;
    for (int r = rc; r < re; r++) fin[r - rc] = (uint8_t)ae_row_finite((const uint8_t *)W + (size_t)r * rs, nb, bs);
    for (int t0 = 0; t0 < nvec; t0 += 4) {
      const int nt = nvec - t0 < 4 ? nvec - t0 : 4;
      const uint8_t *xt = (const uint8_t *)xq + (size_t)t0 * xq_stride;
      float *yt = y + (size_t)t0 * y_stride;
      for (int c0 = 0; c0 < nb; c0 += GEMM_CB) {
        const int n = nb - c0 < GEMM_CB ? nb - c0 : GEMM_CB;
        prep4(kind, xt, xq_stride, nt, c0, n, xs, sum8, dx, dxs);
        for (int r = rc; r < re; r++) {
          const uint8_t *wr = (const uint8_t *)W + (size_t)r * rs + (size_t)c0 * bs;
          const v128 a = ae_gemm_load_y(yt, y_stride, nt, r, c0);
          ae_gemm_store_y(yt, y_stride, nt, r, fin[r - rc] ? row1x4(kind, 1, wr, n, xs, sum8, dxs, a) : row1x4(kind, 0, wr, n, xs, sum8, dx, a));
        }
      }
    }
  }
}

void ae_matmul_rows_q8_0_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
#if AE_RELAXED
  if (ae_fused_dot & AE_FUSED_TILES) { gemm(W_Q8_0F, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1); return; }
#endif
  gemm(W_Q8_0, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}

void ae_matmul_rows_q4_0_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                 int y_stride, int r0, int r1) {
  gemm(W_Q4_0, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1);
}
