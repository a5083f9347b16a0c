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
 * recomputed with the exact one. Two blocks per loop iteration; the matvec reads 4 row groups from the quarters of
 * its row range in turn (4 regions of memory: DRAM serves them faster, docs/DESIGN.md "Decode matvecs: streams").
 * Partial sums cross column chunks through y (a float store/load is exact), so chunking does not change any result. */
#include "simd128_util.h"

#define AE_Q8_CHUNK 128   /* blocks per column chunk: 128 * (64 + 4) B = 8.5 KiB of stack */

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

/* Blocks b, b + 1 of 4 rows (w0 = row 0's blocks, row stride nb) into acc (lanes = rows); bad collects the scales'
 * inf / nan check (only when !exact). */
AE_INLINE v128 step2(v128 acc, v128 *bad, const ae_block_q8_0 *w0, size_t nb, int b, const xblk *xs, const float *dx, int exact) {
  const ae_block_q8_0 *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
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
AE_INLINE v128 step1(v128 acc, const ae_block_q8_0 *w0, size_t nb, int b, const xblk *xs, const float *dx) {
  const ae_block_q8_0 *w1 = w0 + nb, *w2 = w1 + nb, *w3 = w2 + nb;
  volatile v128 t[2];
  const v128 d0 = ae_gather4_h2f(&w0[b].d, &w1[b].d, &w2[b].d, &w3[b].d);
  t[0] = pair(bdot(&w0[b], &xs[b]), bdot(&w1[b], &xs[b]));
  t[1] = pair(bdot(&w2[b], &xs[b]), bdot(&w3[b], &xs[b]));
  v128 i0 = wasm_i32x4_shr(unpair(t[0], t[1]), Q8_SH);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
}

/* 4 rows x blocks [0, n) of the chunk; acc in/out (lanes = rows). Returns 1 if a scale was inf/nan
 * (only when !exact: the caller recomputes with exact = 1). */
AE_INLINE int group4(v128 *accp, const ae_block_q8_0 *w0, size_t nb, int n, const xblk *xs, const float *dx, int exact) {
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  int b = 0;
  for (; b + 2 <= n; b += 2) acc = step2(acc, &bad, w0, nb, b, xs, dx, exact);
  if (b < n) acc = step1(acc, w0, nb, b, xs, dx);
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

/* Four 4-row groups far apart (w[k]), two blocks of each in turn: the rows' streams in four regions of memory, which
 * DRAM serves faster than one region (docs/PERFORMANCE.md "Decode matvecs from DRAM"). Returns a bit per group whose
 * scales had an inf/nan (the caller recomputes that group with group4(exact)). */
AE_INLINE int group4x4(v128 acc[4], const ae_block_q8_0 *const w[4], size_t nb, int n, const xblk *xs, const float *dx) {
  v128 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], b0 = wasm_i32x4_splat(0), b1 = b0, b2 = b0, b3 = b0;
  int b = 0;
  for (; b + 2 <= n; b += 2) {
    a0 = step2(a0, &b0, w[0], nb, b, xs, dx, 0);
    a1 = step2(a1, &b1, w[1], nb, b, xs, dx, 0);
    a2 = step2(a2, &b2, w[2], nb, b, xs, dx, 0);
    a3 = step2(a3, &b3, w[3], nb, b, xs, dx, 0);
  }
  if (b < n) { a0 = step1(a0, w[0], nb, b, xs, dx); a1 = step1(a1, w[1], nb, b, xs, dx); a2 = step1(a2, w[2], nb, b, xs, dx); a3 = step1(a3, w[3], nb, b, xs, dx); }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
  return ae_h16_has_infnan(b0) | ae_h16_has_infnan(b1) << 1 | ae_h16_has_infnan(b2) << 2 | ae_h16_has_infnan(b3) << 3;
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
  for (int c0 = 0; c0 < nb; c0 += AE_Q8_CHUNK) {
    const int n = nb - c0 < AE_Q8_CHUNK ? nb - c0 : AE_Q8_CHUNK;
    prep(x + c0, n, xs, dx);
    const int ng = (r1 - r0) / 4, gq = (ng + 3) / 4;   /* 4-row groups; group i is read together with i + k gq */
    for (int i = 0; i < gq; i++) {
      if (i + 3 * gq < ng) {
        const ae_block_q8_0 *w[4]; v128 st[4], acc[4];
        for (int k = 0; k < 4; k++) { const int r = r0 + 4 * (i + k * gq); w[k] = (const ae_block_q8_0 *)W + (size_t)r * nb + c0; acc[k] = st[k] = c0 ? ae_load(y + r) : wasm_f32x4_splat(0.0f); }
        const int bad = group4x4(acc, w, (size_t)nb, n, xs, dx);
        for (int k = 0; k < 4; k++) {
          if (bad >> k & 1) { acc[k] = st[k]; group4(&acc[k], w[k], (size_t)nb, n, xs, dx, 1); }
          ae_store(y + r0 + 4 * (i + k * gq), acc[k]);
        }
      } else for (int k = 0; k < 4 && i + k * gq < ng; k++) {
        const int r = r0 + 4 * (i + k * gq);
        const ae_block_q8_0 *wa = (const ae_block_q8_0 *)W + (size_t)r * nb + c0;
        const v128 sa = c0 ? ae_load(y + r) : wasm_f32x4_splat(0.0f);
        v128 acca = sa;
        if (group4(&acca, wa, (size_t)nb, n, xs, dx, 0)) { acca = sa; group4(&acca, wa, (size_t)nb, n, xs, dx, 1); }
        ae_store(y + r, acca);
      }
    }
    int r = r0 + 4 * ng;
    for (; r < r1; r++) {
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
