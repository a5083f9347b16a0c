/* q4_0 weights x q8_0 activations, plus q4_0 quantise (the reference quantiser) / dequantise.
 * Per block the exact integer dot sumi = sum((q - 8) x) is formed, then in float
 *   acc += (float)sumi * (d_w * d_x)      (block order; exactly ae_vec_dot_q4_0_ref)
 * bit-exact with the reference for any row range. The activation is prepared once per column chunk
 * (AE_Q4_CHUNK blocks on the stack) together with
 * -8 sum(x) (times 256 in the plain build) and d_x. Four rows go at once, two blocks per iteration, the rows
 * in the lanes of one f32x4 accumulator (integer block sums transposed), each row seeing the scalar
 * operation sequence of the reference.
 *
 * Weight scales: 8 halves (4 rows x 2 blocks) gathered per iteration and converted with the fast path
 * without its 2^112 multiply (ae_h2f_raw: finite half h -> h * 2^-112, exact, possibly a subnormal float);
 * the 2^112 is carried by the activation scale (dxs = d_x * 2^112, exact: |d_x| <= 65504), so
 * d_w' * dxs = round(d_w * d_x) bit for bit. A row group that meets an inf/nan scale is recomputed with
 * the exact conversion and the plain d_x.
 *
 * Plain build: nibbles masked in place in i16 lanes against an activation pre-shifted to match (see xblk),
 * 4 i32x4.dot_i16x8 per block and row. Relaxed build: i16x8.relaxed_dot_i8x16_i7x16 (x64: one pmaddubsw)
 * with the nibbles (0..15) as the 7-bit operand, so it is exact and host-independent; the 4 rows' i16 pair
 * sums are transposed and added in i16 lanes (every lane a sum of at most 16 products, |.| <= 16 * 15 * 128
 * < 2^15) and widened to i32 once per block for the 4 rows (i32x4.extadd_pairwise_i16x8).
 *
 * V8 scheduling: TurboFan hoists every load of a loop body, so the 4 rows' partial sums of each block pass
 * through a small volatile stack buffer; the stores keep the schedule row group by row group (no spills). */
#include "simd128_util.h"

/* blocks per column chunk, within the 16 KiB stack budget of a kernel call (tests/kernels.test.mjs):
 * plain 128 * (64 + 8) B = 9 KiB, relaxed 256 * (32 + 8) B = 10 KiB (a row of 8192 columns in one chunk) */
#if AE_RELAXED
#define AE_Q4_CHUNK 256
#else
#define AE_Q4_CHUNK 128
#endif

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

/* Per activation block: nsum = -8 sum(x) << Q4_SH (the -8 of the weights), dxs = d_x * 2^112. */
typedef struct { int32_t nsum; float dxs; } xaux;

#if AE_RELAXED
/* Relaxed build: x0 / x1 = x bytes 0..15 / 16..31 as they are (the i8 operand); the block sum is sumi itself. */
#define Q4_SH 0
typedef struct { v128 x0, x1; } xblk;

AE_INLINE void prep(const ae_block_q8_0 *x, int n, xblk *xs, xaux *xa) {
  for (int b = 0; b < n; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    xs[b].x0 = a; xs[b].x1 = c;
    const v128 t = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(a), wasm_i16x8_extadd_pairwise_i8x16(c));
    xa[b].nsum = -8 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(t));
    xa[b].dxs = ae_h2f_s(x[b].d) * 0x1p112f;
  }
}

/* i16x8 partial sums of sum(q x) (unsigned nibbles, without the -8): 4 products per lane */
AE_INLINE v128 bdot16(const uint8_t *qs, const xblk *x) {
  const v128 v = ae_load(qs), m = wasm_i8x16_splat(0x0f);
  return wasm_i16x8_add(ae_rdot16(x->x0, wasm_v128_and(v, m)), ae_rdot16(x->x1, wasm_v128_and(wasm_u16x8_shr(v, 4), m)));
}
/* i32x4 partial sums of one row's block */
AE_INLINE v128 bdot(const uint8_t *qs, const xblk *x) { return wasm_i32x4_extadd_pairwise_i16x8(bdot16(qs, x)); }

/* [sum(q x) of rows 0..3] for one block: the i16 partials transposed and added in i16 (lanes <= 16 products) */
AE_INLINE v128 block4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, const xblk *x) {
  const v128 a = bdot16(p0, x), b = bdot16(p1, x), c = bdot16(p2, x), d = bdot16(p3, x);
  const v128 ab = wasm_i16x8_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128 cd = wasm_i16x8_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7)));
}
#else
#define Q4_SH 8
/* Activation block, prepared for nibbles masked in place: with v = i16 lanes b0 | b1 << 8 of the weight
 * bytes, (v & 0x000f) = q_lo_even, (v & 0x0f00) = 256 q_lo_odd, (v & 0x00f0) = 16 q_hi_even and
 * (v >> 12) = q_hi_odd, so pairing them with 256 x_even(0..15), x_odd(0..15), 16 x_even(16..31) and
 * 256 x_odd(16..31) gives 256 sum(q x) with 4 single ops per 16 weight bytes (|256 x| <= 32768 fits
 * i16 as a product operand; pair sums of the dot stay far below 2^31). */
typedef struct { v128 e0, o0, e1, o1; } xblk;

AE_INLINE void prep(const ae_block_q8_0 *x, int n, xblk *xs, xaux *xa) {
  for (int b = 0; b < n; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    const v128 e0 = ae_i8_even(a), o0 = ae_i8_odd(a), e1 = ae_i8_even(c), o1 = ae_i8_odd(c);
    xs[b].e0 = wasm_i16x8_shl(e0, 8); xs[b].o0 = o0;
    xs[b].e1 = wasm_i16x8_shl(e1, 4); xs[b].o1 = wasm_i16x8_shl(o1, 8);
    const v128 t = wasm_i16x8_add(wasm_i16x8_add(e0, o0), wasm_i16x8_add(e1, o1));
    xa[b].nsum = -2048 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(t));   /* -256 * 8 * sum(x) */
    xa[b].dxs = ae_h2f_s(x[b].d) * 0x1p112f;
  }
}

/* i32x4 partial sums of 256 sum(q x) (unsigned nibbles, without the -8) */
AE_INLINE v128 bdot(const uint8_t *qs, const xblk *x) {
  const v128 v = ae_load(qs);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x000f)), x->e0),
                                 wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x0f00)), x->o0));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x00f0)), x->e1),
                                 wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), x->o1));
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
/* [256 sum(q x) of rows 0..3] for one block */
AE_INLINE v128 block4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, const xblk *x) {
  return unpair(pair(bdot(p0, x), bdot(p1, x)), pair(bdot(p2, x), bdot(p3, x)));
}
#endif


/* acc += (float)sumi * (d * d_x) per row lane; s = block sums before the -8 term and the shift */
AE_INLINE v128 fma_block(v128 acc, v128 s, const xaux *xa, v128 d, int exact) {
  const v128 i = wasm_i32x4_shr(wasm_i32x4_add(s, wasm_v128_load32_splat(&xa->nsum)), Q4_SH);
  const v128 dx = exact ? wasm_f32x4_splat(xa->dxs * 0x1p-112f) : wasm_v128_load32_splat(&xa->dxs);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i), wasm_f32x4_mul(d, dx)));
}

/* 4 rows (p0 + k * rs) x blocks [0, n) of the chunk; acc in/out (lanes = rows). Returns 1 if a scale was
 * inf/nan (only when !exact: the caller recomputes with exact = 1). */
AE_INLINE int group4(v128 *accp, const uint8_t *p0, size_t rs, int n, const xblk *xs, const xaux *xa, int exact) {
  const uint8_t *p1 = p0 + rs, *p2 = p1 + rs, *p3 = p2 + rs;
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  volatile v128 t[4];   /* the stores order V8's schedule (no spills): per block (relaxed), per row pair (plain) */
  int b = 0;
  for (; b + 2 <= n; b += 2, p0 += 36, p1 += 36, p2 += 36, p3 += 36) {
    v128 h = wasm_i32x4_const_splat(0);
    h = wasm_v128_load16_lane(p0, h, 0); h = wasm_v128_load16_lane(p1, h, 1);
    h = wasm_v128_load16_lane(p2, h, 2); h = wasm_v128_load16_lane(p3, h, 3);
    h = wasm_v128_load16_lane(p0 + 18, h, 4); h = wasm_v128_load16_lane(p1 + 18, h, 5);
    h = wasm_v128_load16_lane(p2 + 18, h, 6); h = wasm_v128_load16_lane(p3 + 18, h, 7);
    v128 d0, d1;
    if (exact) { d0 = ae_h2f_exact(ae_h16_lo(h)); d1 = ae_h2f_exact(ae_h16_hi(h)); }
    else { bad = ae_h16_infnan_acc(bad, h); d0 = ae_h2f_raw(ae_h16_lo(h)); d1 = ae_h2f_raw(ae_h16_hi(h)); }
#if AE_RELAXED
    t[0] = block4(p0 + 2, p1 + 2, p2 + 2, p3 + 2, &xs[b]);
    t[1] = block4(p0 + 20, p1 + 20, p2 + 20, p3 + 20, &xs[b + 1]);
    const v128 s0 = t[0], s1 = t[1];
#else
    t[0] = pair(bdot(p0 + 2, &xs[b]), bdot(p1 + 2, &xs[b]));
    t[1] = pair(bdot(p2 + 2, &xs[b]), bdot(p3 + 2, &xs[b]));
    t[2] = pair(bdot(p0 + 20, &xs[b + 1]), bdot(p1 + 20, &xs[b + 1]));
    t[3] = pair(bdot(p2 + 20, &xs[b + 1]), bdot(p3 + 20, &xs[b + 1]));
    const v128 s0 = unpair(t[0], t[1]), s1 = unpair(t[2], t[3]);
#endif
    acc = fma_block(acc, s0, &xa[b], d0, exact);
    acc = fma_block(acc, s1, &xa[b + 1], d1, exact);
  }
  if (b < n) {
    const v128 d0 = ae_gather4_h2f((const ae_fp16 *)p0, (const ae_fp16 *)p1, (const ae_fp16 *)p2, (const ae_fp16 *)p3);
    acc = fma_block(acc, block4(p0 + 2, p1 + 2, p2 + 2, p3 + 2, &xs[b]), &xa[b], d0, 1);
  }
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}

/* Segmented variant of group4 for n a multiple of 4 (decode from DRAM): each row's blocks are read in runs of
 * AE_Q4_SEG (576 B) before the next row's. Reading the 4 rows 36 B at a time interleaves 4 streams inside the
 * same pages, which the hardware prefetchers follow poorly (measured: the matvec reached about half its
 * cache-resident speed from DRAM). Phase 1 forms each row's block sums 4 blocks at a time into a small stack
 * array; phase 2 transposes them to rows-in-lanes and runs the same float sequence as group4. Relaxed build only
 * (measured, from DRAM: 1.1-1.3x group4; the plain build's 4-block row sums spill and run at half speed). */
#define AE_Q4_SEG 32

/* i32x4 [block sums of blocks 0..3] of one row (p = the first block; before the -8 term and the shift) */
AE_INLINE v128 row_blocks4(const uint8_t *p, const xblk *x) {
#if AE_RELAXED
  const v128 a = bdot16(p + 2, x), b = bdot16(p + 20, x + 1), c = bdot16(p + 38, x + 2), d = bdot16(p + 56, x + 3);
  const v128 ab = wasm_i16x8_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128 cd = wasm_i16x8_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7)));
#else
  return ae_reduce4_i32(bdot(p + 2, x), bdot(p + 20, x + 1), bdot(p + 38, x + 2), bdot(p + 56, x + 3));
#endif
}

AE_INLINE int group4_seg(v128 *accp, const uint8_t *p0, size_t rs, int n, const xblk *xs, const xaux *xa, int exact) {
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  v128 sums[4][AE_Q4_SEG / 4];
  for (int s0 = 0; s0 < n; s0 += AE_Q4_SEG) {
    const int m = n - s0 < AE_Q4_SEG ? n - s0 : AE_Q4_SEG;
    for (int k = 0; k < 4; k++) {
      const uint8_t *p = p0 + k * rs + (size_t)s0 * sizeof(ae_block_q4_0);
      for (int j = 0; j < m; j += 4) sums[k][j >> 2] = row_blocks4(p + (size_t)j * sizeof(ae_block_q4_0), &xs[s0 + j]);
    }
    for (int j = 0; j < m; j += 4) {
      const v128 a0 = sums[0][j >> 2], a1 = sums[1][j >> 2], a2 = sums[2][j >> 2], a3 = sums[3][j >> 2];
      const v128 t0 = wasm_i32x4_shuffle(a0, a1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(a0, a1, 2, 6, 3, 7);
      const v128 t2 = wasm_i32x4_shuffle(a2, a3, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(a2, a3, 2, 6, 3, 7);
      const uint8_t *q0 = p0 + (size_t)(s0 + j) * sizeof(ae_block_q4_0), *q1 = q0 + rs, *q2 = q1 + rs, *q3 = q2 + rs;
      for (int i = 0; i < 4; i += 2) {   /* blocks j + i, j + i + 1: 8 scales, as group4 */
        const size_t o = (size_t)i * sizeof(ae_block_q4_0);
        v128 h = wasm_i32x4_const_splat(0);
        h = wasm_v128_load16_lane(q0 + o, h, 0); h = wasm_v128_load16_lane(q1 + o, h, 1);
        h = wasm_v128_load16_lane(q2 + o, h, 2); h = wasm_v128_load16_lane(q3 + o, h, 3);
        h = wasm_v128_load16_lane(q0 + o + 18, h, 4); h = wasm_v128_load16_lane(q1 + o + 18, h, 5);
        h = wasm_v128_load16_lane(q2 + o + 18, h, 6); h = wasm_v128_load16_lane(q3 + o + 18, h, 7);
        v128 d0, d1;
        if (exact) { d0 = ae_h2f_exact(ae_h16_lo(h)); d1 = ae_h2f_exact(ae_h16_hi(h)); }
        else { bad = ae_h16_infnan_acc(bad, h); d0 = ae_h2f_raw(ae_h16_lo(h)); d1 = ae_h2f_raw(ae_h16_hi(h)); }
        const v128 s0v = i ? wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5) : wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5);
        const v128 s1v = i ? wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7) : wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
        acc = fma_block(acc, s0v, &xa[s0 + j + i], d0, exact);
        acc = fma_block(acc, s1v, &xa[s0 + j + i + 1], d1, exact);
      }
    }
  }
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}

/* One row, blocks [0, n): the same integer sums and float sequence as group4's lanes. */
AE_INLINE float row_sum(const ae_block_q4_0 *w, int n, const xblk *xs, const xaux *xa, float sum) {
  for (int b = 0; b < n; b++) {
    const int32_t sumi = (ae_hsum_i32(bdot(w[b].qs, &xs[b])) + xa[b].nsum) >> Q4_SH;
    sum += (float)sumi * (ae_h2f_s(w[b].d) * (xa[b].dxs * 0x1p-112f));
  }
  return sum;
}

/* One row without the chunk preparation (calls on fewer than 4 rows: vec_dot, short row runs). */
static void row1(const ae_block_q4_0 *w, const ae_block_q8_0 *x, int nb, float *y) {
  float sum = 0.0f;
  for (int b = 0; b < nb; b++) {
    xblk xb;
    xaux xa;
    prep(x + b, 1, &xb, &xa);
    sum = row_sum(w + b, 1, &xb, &xa, sum);
  }
  *y = sum;
}

void ae_matvec_rows_q4_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  if (r1 - r0 < 4) {
    for (int r = r0; r < r1; r++) row1((const ae_block_q4_0 *)W + (size_t)r * nb, x, nb, &y[r]);
    return;
  }
  xblk xs[AE_Q4_CHUNK];
  xaux xa[AE_Q4_CHUNK];
  for (int c0 = 0; c0 < nb; c0 += AE_Q4_CHUNK) {
    const int n = nb - c0 < AE_Q4_CHUNK ? nb - c0 : AE_Q4_CHUNK;
    prep(x + c0, n, xs, xa);
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
      const uint8_t *w0 = (const uint8_t *)W + (size_t)r * rs + (size_t)c0 * sizeof(ae_block_q4_0);
      const v128 start = c0 ? ae_load(y + r) : wasm_f32x4_splat(0.0f);
      v128 acc = start;
      if (AE_RELAXED && n % 4 == 0) {   /* plain: the 4-block row sums spill (16 activation vectors), slower */
        if (group4_seg(&acc, w0, rs, n, xs, xa, 0)) { acc = start; group4_seg(&acc, w0, rs, n, xs, xa, 1); }
      } else if (group4(&acc, w0, rs, n, xs, xa, 0)) { acc = start; group4(&acc, w0, rs, n, xs, xa, 1); }
      ae_store(y + r, acc);
    }
    for (; r < r1; r++)
      y[r] = row_sum((const ae_block_q4_0 *)W + (size_t)r * nb + c0, n, xs, xa, c0 ? y[r] : 0.0f);
  }
}

void ae_vec_dot_q4_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q4_0_simd128(w, n, x, s, 0, 1);
}
