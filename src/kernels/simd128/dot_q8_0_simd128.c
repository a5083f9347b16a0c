/* q8_0 weights x q8_0 activations, plus q8_0 quantise / dequantise.
 * Per block: exact integer dot, then in float
 *   acc += (float)sumi * (d_w * d_x)       (block order; exactly ae_vec_dot_q8_0_ref)
 * The activation is prepared once per column chunk (AE_Q8_CHUNK blocks, on the stack): even / odd bytes
 * sign-extended to i16 and d_x as float. A weight chunk of 16 bytes w (i16 lanes b0 | b1 << 8) needs no
 * unpacking: (w << 8) holds 256 * b0 and (w & 0xff00) holds 256 * b1, so
 *   dot_i16x8(w << 8, x_even) + dot_i16x8(w & 0xff00, x_odd) = 256 * sum(w x)       (exact in i32)
 * and the block sum is shifted right by 8. The 4-row kernel keeps the 4 rows in the lanes of one f32x4
 * accumulator (integer sums transposed with 6 shuffles), so each row sees the same scalar operation
 * sequence as the 1-row path and the reference: bit-exact for any row range. Weight scales are
 * converted 8 at a time with the fast fp16 conversion; a row group that meets an inf/nan scale is
 * recomputed with the exact one. Two blocks per loop iteration. The 4 rows in the lanes are one row from each
 * quarter of the row range (r0 + k q + i for lane k), and the next 4 are the rows after them: each lane reads one
 * sequential stream through its quarter, whole rows in turn (4 regions of memory that the hardware prefetchers
 * follow; 4 consecutive rows read 2 blocks at a time were 16 short streams in the same pages: 1.2-1.5x slower from
 * DRAM, most at short rows; docs/DESIGN.md "Decode matvecs: streams", docs/PERFORMANCE.md "Session 8").
 * Partial sums cross column chunks through y (a float store/load is exact), so chunking does not change any result. */
#include "simd128_util.h"

#define AE_Q8_CHUNK 320   /* blocks per column chunk at most: 320 * (64 + 4) B = 21.25 KiB of stack; whole rows up to 10240 columns */

/* ---- quantise (ggml quantize_row_q8_0: simd128_util.h ae_q8_block_quant) / dequantise ---- */
void ae_from_float_q8_0_simd128(const float *x, void *y, int n) {
  ae_block_q8_0 *b = (ae_block_q8_0 *)y;
  for (int i = 0; i < n / AE_QK8_0; i++) b[i].d = ae_fp32_to_fp16(ae_q8_block_quant(x + i * AE_QK8_0, b[i].qs, NULL));
}

void ae_to_float_q8_0_simd128(const void *x, float *y, int n) {
  const ae_block_q8_0 *b = (const ae_block_q8_0 *)x;
  for (int i = 0; i < n / AE_QK8_0; i++) ae_q8_block_dequant(b[i].qs, ae_h2f_s(b[i].d), y + i * AE_QK8_0);
}

/* ---- dot ----
 * Both builds compile this form: a relaxed form (activations split by sign into [0, 127], 4 i32 relaxed dots per
 * block, exact) measured slower in Node 20 (V8 11.3 lowers the i32 relaxed dot to 3 instructions: 0.8-0.9x,
 * docs/PERFORMANCE.md "Relaxed SIMD") and in Chromium 156 end to end (bench/peers.mjs, s15m q8_0: 0.8x), so it was
 * removed. */
#define Q8_SH 8
typedef struct { v128 e0, o0, e1, o1; } xblk;   /* even / odd i16 of bytes 0..15 and 16..31 */

AE_INLINE void prep(const ae_block_q8_0 *x, int n, xblk *xs, float *dx) {
  for (int b = 0; b < n; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    xs[b].e0 = ae_i8_even(a); xs[b].o0 = ae_i8_odd(a);
    xs[b].e1 = ae_i8_even(c); xs[b].o1 = ae_i8_odd(c);
    dx[b] = ae_h2f_s(x[b].d);
  }
}

/* i32x4 partial sums of 256 * sum(w x) for one block */
AE_INLINE v128 bdot(const ae_block_q8_0 *wb, const xblk *x) {
  const v128 a = ae_load(wb->qs), c = ae_load(wb->qs + 16), hi = wasm_i16x8_splat((int16_t)0xff00);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(a, 8), x->e0), wasm_i32x4_dot_i16x8(wasm_v128_and(a, hi), x->o0));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(c, 8), x->e1), wasm_i32x4_dot_i16x8(wasm_v128_and(c, hi), x->o1));
  return wasm_i32x4_add(s0, s1);
}

/* ae_reduce4_i32 in two halves: pair(a, b) = [a0+a2, b0+b2, a1+a3, b1+b3]; unpair(pair(a,b), pair(c,d)) =
 * [sum a, sum b, sum c, sum d]. */
AE_INLINE v128 pair(v128 a, v128 b) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
}
AE_INLINE v128 unpair(v128 ab, v128 cd) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* Blocks b, b + 1 of 4 rows (w[k] = row k's blocks, anywhere) into acc (lanes = rows); bad collects the scales'
 * inf / nan check (only when !exact). */
AE_INLINE v128 step2(v128 acc, v128 *bad, const ae_block_q8_0 *const w[4], int b, const xblk *xs, const float *dx, int exact) {
  const ae_block_q8_0 *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  volatile v128 t[4];   /* the stores order V8's schedule row pair by row pair (no spills) */
  const v128 h = ae_gather8_h(&w0[b].d, &w1[b].d, &w2[b].d, &w3[b].d, &w0[b + 1].d, &w1[b + 1].d, &w2[b + 1].d, &w3[b + 1].d);
  v128 d0, d1;
  if (exact) { d0 = ae_h2f_exact(ae_h16_lo(h)); d1 = ae_h2f_exact(ae_h16_hi(h)); }
  else { *bad = ae_h16_infnan_acc(*bad, h); d0 = ae_h2f_fast(ae_h16_lo(h)); d1 = ae_h2f_fast(ae_h16_hi(h)); }
  t[0] = pair(bdot(&w0[b], &xs[b]), bdot(&w1[b], &xs[b]));
  t[1] = pair(bdot(&w2[b], &xs[b]), bdot(&w3[b], &xs[b]));
  t[2] = pair(bdot(&w0[b + 1], &xs[b + 1]), bdot(&w1[b + 1], &xs[b + 1]));
  t[3] = pair(bdot(&w2[b + 1], &xs[b + 1]), bdot(&w3[b + 1], &xs[b + 1]));
  v128 i0 = unpair(t[0], t[1]);
  v128 i1 = unpair(t[2], t[3]);
  i0 = wasm_i32x4_shr(i0, Q8_SH);
  i1 = wasm_i32x4_shr(i1, Q8_SH);
  acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i1), wasm_f32x4_mul(d1, wasm_v128_load32_splat(&dx[b + 1]))));
}
/* The last block b of an odd count, 4 rows (exact scale conversion) */
AE_INLINE v128 step1(v128 acc, const ae_block_q8_0 *const w[4], int b, const xblk *xs, const float *dx) {
  const ae_block_q8_0 *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
  volatile v128 t[2];
  const v128 d0 = ae_gather4_h2f(&w0[b].d, &w1[b].d, &w2[b].d, &w3[b].d);
  t[0] = pair(bdot(&w0[b], &xs[b]), bdot(&w1[b], &xs[b]));
  t[1] = pair(bdot(&w2[b], &xs[b]), bdot(&w3[b], &xs[b]));
  v128 i0 = wasm_i32x4_shr(unpair(t[0], t[1]), Q8_SH);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
}

/* 4 rows x blocks [0, n) of the chunk; acc in/out (lanes = rows). Returns 1 if a scale was inf/nan
 * (only when !exact: the caller recomputes with exact = 1). */
AE_INLINE int rows4(v128 *accp, const ae_block_q8_0 *const w[4], int n, const xblk *xs, const float *dx, int exact) {
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  int b = 0;
  for (; b + 2 <= n; b += 2) acc = step2(acc, &bad, w, b, xs, dx, exact);
  if (b < n) acc = step1(acc, w, b, xs, dx);
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}
/* One row without the chunk preparation (for calls on fewer than 4 rows: vec_dot, short row runs);
 * the same integer sums and float sequence as the prepared paths. */
static void row1(const ae_block_q8_0 *w, const ae_block_q8_0 *x, int nb, float *y) {
  float sum = 0.0f;
  xblk xb;
  float dxb;
  for (int b = 0; b < nb; b++) {
    prep(x + b, 1, &xb, &dxb);
    const int32_t sumi = ae_hsum_i32(bdot(&w[b], &xb)) >> Q8_SH;
    sum += (float)sumi * (ae_h2f_s(w[b].d) * dxb);
  }
  *y = sum;
}

void ae_matvec_rows_q8_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK8_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  if (r1 - r0 < 4) {
    for (int r = r0; r < r1; r++) row1((const ae_block_q8_0 *)W + (size_t)r * nb, x, nb, &y[r]);
    return;
  }
  xblk xs[AE_Q8_CHUNK];
  float dx[AE_Q8_CHUNK];
  const int q = (r1 - r0) / 4;   /* lane k runs the rows of quarter k: r0 + k q + i, i = 0 .. q - 1 */
  /* whole rows when they fit (up to 10240 columns), else equal column chunks: a lane's stream then skips the rest of
   * each row, which the prefetchers follow worse (896 x 4864 in chunks of 128 + 24 blocks: 7.1 GB/s, whole: 10.2) */
  const int nchunk = (nb + AE_Q8_CHUNK - 1) / AE_Q8_CHUNK, cb = (nb + nchunk - 1) / nchunk;
  for (int c0 = 0; c0 < nb; c0 += cb) {
    const int n = nb - c0 < cb ? nb - c0 : cb;
    prep(x + c0, n, xs, dx);
    for (int i = 0; i < q; i++) {
      const ae_block_q8_0 *w[4];
      float *yk[4];
      for (int k = 0; k < 4; k++) {
        const int r = r0 + k * q + i;
        w[k] = (const ae_block_q8_0 *)W + (size_t)r * nb + c0;
        yk[k] = y + r;
      }
      const v128 st = c0 ? wasm_f32x4_make(*yk[0], *yk[1], *yk[2], *yk[3]) : wasm_f32x4_splat(0.0f);
      v128 acc = st;
      if (rows4(&acc, w, n, xs, dx, 0)) { acc = st; rows4(&acc, w, n, xs, dx, 1); }
      *yk[0] = wasm_f32x4_extract_lane(acc, 0); *yk[1] = wasm_f32x4_extract_lane(acc, 1);
      *yk[2] = wasm_f32x4_extract_lane(acc, 2); *yk[3] = wasm_f32x4_extract_lane(acc, 3);
    }
    for (int r = r0 + 4 * q; r < r1; r++) {   /* the 1-3 rows left */
      const ae_block_q8_0 *w = (const ae_block_q8_0 *)W + (size_t)r * nb + c0;
      float sum = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        const int32_t sumi = ae_hsum_i32(bdot(&w[b], &xs[b])) >> Q8_SH;
        sum += (float)sumi * (ae_h2f_s(w[b].d) * dx[b]);
      }
      y[r] = sum;
    }
  }
}

void ae_vec_dot_q8_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q8_0_simd128(w, n, x, s, 0, 1);
}
