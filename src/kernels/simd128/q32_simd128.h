/* Shared pieces of the SIMD128 kernels of the 32-element block dtypes q5_0, q4_1, q5_1 (dot_q5_0_simd128.c,
 * dot_q4_1_simd128.c, dot_q5_1_simd128.c; inline only): the activation block (q8_0 / q8_1 quants) split
 * into even / odd i16 once per column chunk, the expansion of 4/5-bit weights to bytes, and the exact
 * integer block dot. */
#ifndef AE_Q32_SIMD128_H
#define AE_Q32_SIMD128_H
#include "simd128_util.h"

/* even / odd i16 of activation quants 0..15 (e0, o0) and 16..31 (e1, o1) */
typedef struct { v128 e0, o0, e1, o1; } ae_q32x;

AE_INLINE void ae_q32_prep(const int8_t *qs, ae_q32x *x) {
  const v128 a = ae_load(qs), c = ae_load(qs + 16);
  x->e0 = ae_i8_even(a); x->o0 = ae_i8_odd(a);
  x->e1 = ae_i8_even(c); x->o1 = ae_i8_odd(c);
}

/* Exact sum(w x) of one block: w0, w1 = signed bytes of elements 0..15 and 16..31 (any byte: -128 too, as the q5_0
 * X8 layout's 8 (q - 16) gives; |256 w x| <= 2^22 per element, 2^27 per block). With i16
 * lanes b0 | b1 << 8, (w << 8) = 256 b0 and (w & 0xff00) = 256 b1, so the i16 dots give 256 sum(w x). */
AE_INLINE v128 ae_q32_bdot(v128 w0, v128 w1, const ae_q32x *x) {   /* i32x4 partial sums of 256 sum(w x) */
  const v128 hi = wasm_i16x8_splat((int16_t)0xff00);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(w0, 8), x->e0), wasm_i32x4_dot_i16x8(wasm_v128_and(w0, hi), x->o0));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_shl(w1, 8), x->e1), wasm_i32x4_dot_i16x8(wasm_v128_and(w1, hi), x->o1));
  return wasm_i32x4_add(s0, s1);
}
AE_INLINE int32_t ae_q32_dot(v128 w0, v128 w1, const ae_q32x *x) { return ae_hsum_i32(ae_q32_bdot(w0, w1, x)) >> 8; }

/* Low nibbles (elements 0..15) and high nibbles (16..31) of 16 packed bytes. */
AE_INLINE v128 ae_q32_lo(v128 qs) { return wasm_v128_and(qs, wasm_i8x16_splat(0x0f)); }
AE_INLINE v128 ae_q32_hi(v128 qs) { return wasm_u8x16_shr(qs, 4); }

/* 5th bits: bit e of the little-endian u32 at qh as 0x10 in byte e of h0 (e < 16) / h1 (e - 16). */
AE_INLINE void ae_q32_qh(const uint8_t *qh, v128 *h0, v128 *h1) {
  const v128 v = wasm_v128_load32_splat(qh);
  const v128 bits = wasm_i8x16_const(1, 2, 4, 8, 16, 32, 64, (int8_t)128, 1, 2, 4, 8, 16, 32, 64, (int8_t)128);
  const v128 a = wasm_i8x16_shuffle(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const v128 b = wasm_i8x16_shuffle(v, v, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const v128 s = wasm_i8x16_splat(0x10);
  *h0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(a, bits), bits), s);
  *h1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(b, bits), bits), s);
}

/* A q5_0 block in the load-time layout AE_Q5_0_X8 (kernels.h: the f16 scale, T[4], A[16]) as bytes 8 (q - 16), signed:
 * elements 0..15 are A & 0xf8 (one operation); elements 16..31 take their low 3 bits from A (bits 0..2, shifted to
 * 3..5) and their top 2 bits from T, which one i16x8.mul by (1, 1, 4, 4, 16, 16, 64, 64) moves to bits 6..7 of every
 * byte (byte p of the splatted T holds T[p & 3], shifted by 2 (p >> 2)). 8 operations where the file layout's
 * expansion takes 17: the matvecs divide the sums by 2^11 instead of 2^8 (exact: every sum is a multiple of 2^11). */
static const int16_t ae_q5_0_x8_mul[8] __attribute__((aligned(16))) = {1, 1, 4, 4, 16, 16, 64, 64};
/* The splatted T times the multiplier: byte p holds the pair (bit 3, NOT bit 4) of element 16 + p at bits 6..7. */
AE_INLINE v128 ae_q5_0_x8_tops(const uint8_t *blk) {
  const int16_t *mp = ae_q5_0_x8_mul;
  __asm__("" : "+r"(mp));   /* a multiply, not per-lane shifts (which wasm lacks: clang would scalarise them) */
  return wasm_i16x8_mul(wasm_v128_load32_splat(blk + 2), ae_load(mp));
}
AE_INLINE void ae_q5_0_x8_load(const uint8_t *blk, v128 *w0, v128 *w1) {
  const v128 a = ae_load(blk + 6);
  *w0 = wasm_v128_and(a, wasm_i8x16_splat((int8_t)0xf8));
  *w1 = wasm_v128_or(wasm_v128_and(wasm_i16x8_shl(a, 3), wasm_i8x16_splat(0x38)),
                     wasm_v128_and(ae_q5_0_x8_tops(blk), wasm_i8x16_splat((int8_t)0xc0)));
}
/* The same block as the unsigned 5-bit values q (0..31: a valid 7-bit operand of the relaxed dot; elements 0..15 in
 * q0, 16..31 in q1): the relaxed build's prefill tile of this layout (gemm_q32_simd128.c). */
AE_INLINE void ae_q5_0_x8_load_u(const uint8_t *blk, v128 *q0, v128 *q1) {
  const v128 a = ae_load(blk + 6);
  *q0 = wasm_u8x16_shr(wasm_v128_xor(a, wasm_i8x16_splat((int8_t)0x80)), 3);
  const v128 top = wasm_v128_and(wasm_u16x8_shr(ae_q5_0_x8_tops(blk), 3), wasm_i8x16_splat(0x18));
  *q1 = wasm_v128_or(wasm_v128_and(a, wasm_i8x16_splat(7)), wasm_v128_xor(top, wasm_i8x16_splat(0x10)));
}
/* 16 sum(x) of an activation block's 32 quants (the -16 of q - 16, or the +16 of q5_1's X8 bytes, on integer sums). */
AE_INLINE int32_t ae_q32_sum16(const int8_t *qs) {
  const v128 lo = ae_load(qs), hi = ae_load(qs + 16);
  return 16 * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(
                  wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(lo), wasm_i16x8_extadd_pairwise_i8x16(hi))));
}

/* In place, block by block (bs bytes; the 20 bytes qh[4] qs[16] at offset off, q5_0: 2, q5_1: 4) into T[4] A[16]
 * (kernels.h AE_Q5_0_X8): the 5-bit values as the file's kernels expand them (unsigned), A from them; T from the pairs
 * (bit 3, NOT bit 4) of elements 16..31: in i32 lane k (elements 16 + 4k .. 16 + 4k + 3) byte j's pair is shifted to
 * bits 6 - 2k (one i32x4.mul; 3 << 6 < 256, so no carries between bytes), then the 4 lanes are or-ed together. */
static const int32_t ae_q5_x8_pair_mul[4] __attribute__((aligned(16))) = {64, 16, 4, 1};
AE_INLINE void ae_q5_x8_repack(void *W, size_t nblocks, size_t bs, size_t off) {
  const int32_t *mp = ae_q5_x8_pair_mul;
  __asm__("" : "+r"(mp));   /* a multiply, not per-lane shifts */
  const v128 mul = ae_load(mp);
  for (size_t i = 0; i < nblocks; i++) {
    uint8_t *p = (uint8_t *)W + i * bs + off;
    v128 h0, h1;
    ae_q32_qh(p, &h0, &h1);
    const v128 qs = ae_load(p + 4);
    const v128 q0 = wasm_v128_or(ae_q32_lo(qs), h0), q1 = wasm_v128_or(ae_q32_hi(qs), h1);
    const v128 a = wasm_v128_or(wasm_v128_xor(wasm_v128_and(wasm_i16x8_shl(q0, 3), wasm_i8x16_splat((int8_t)0xf8)), wasm_i8x16_splat((int8_t)0x80)),
                                wasm_v128_and(q1, wasm_i8x16_splat(7)));
    const v128 pr = wasm_v128_and(wasm_u8x16_shr(wasm_v128_xor(q1, wasm_i8x16_splat(0x10)), 3), wasm_i8x16_splat(3));
    const v128 sv = wasm_i32x4_mul(pr, mul);
    const v128 s2 = wasm_v128_or(sv, wasm_i32x4_shuffle(sv, sv, 2, 3, 0, 1));
    const uint32_t t = (uint32_t)wasm_i32x4_extract_lane(wasm_v128_or(s2, wasm_i32x4_shuffle(s2, s2, 1, 0, 3, 2)), 0);
    __builtin_memcpy(p, &t, 4);
    wasm_v128_store(p + 4, a);
  }
}

/* Dequantise one block of expanded bytes w0, w1 (signed, elements 0..15 / 16..31): o[e] = w[e] * d + m
 * (with_min) or w[e] * d, in f32 (the reference's operations per element). */
AE_INLINE void ae_q32_store(float *o, v128 w0, v128 w1, float d, float m, int with_min) {
  const v128 dv = wasm_f32x4_splat(d), mv = wasm_f32x4_splat(m);
  const v128 h[4] = {wasm_i16x8_extend_low_i8x16(w0), wasm_i16x8_extend_high_i8x16(w0),
                     wasm_i16x8_extend_low_i8x16(w1), wasm_i16x8_extend_high_i8x16(w1)};
  for (int k = 0; k < 4; k++) {
    v128 a = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h[k])), dv);
    v128 b = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h[k])), dv);
    if (with_min) { a = wasm_f32x4_add(a, mv); b = wasm_f32x4_add(b, mv); }
    ae_store(o + 8 * k, a);
    ae_store(o + 8 * k + 4, b);
  }
}

/* ---- 4 rows in the lanes of one f32x4: the matvecs of q8_0 and q5_0 (32-element blocks whose first field is the f16
 * scale d, q8_0 activations). ld(block, &w0, &w1) gives a block's 32 signed bytes w times 2^(sh - 8) (q8_0 / q5_0:
 * sh = 8; the q5_0 X8 layout: 8 (q - 16), sh = 11), so the i16 dots' 2^sh sum(w x) >> sh is exact. Per block and row the
 * reference's sequence acc += (float)sumi * (d_w * d_x): the integer sums of 4 rows are transposed into the lanes
 * (pair / unpair) and the float step runs on the 4 lanes at once, so any row range gives the reference's bits. Weight
 * scales are converted 8 at a time with the fast fp16 conversion; 4 rows that meet an inf / nan scale are recomputed
 * with the exact one. The 4 rows in the lanes are one from each quarter of the row range (r0 + k q + i for lane k)
 * and whole rows are read in turn: each lane is one sequential stream through its quarter (4 regions of memory that
 * the hardware prefetchers follow; 4 consecutive rows read 2 blocks at a time were 16 short streams in the same
 * pages: 1.1-1.6x slower from DRAM, most at short rows; docs/PERFORMANCE.md "Session 8"). Partial sums cross column
 * chunks through y (a float store / load is exact). */
#define AE_Q32_ROWS_CHUNK 320   /* blocks per column chunk at most: 320 * (64 + 4) B = 21.25 KiB of stack; whole rows
                                   up to 10240 columns (a lane's stream skipping the rest of each row is slower) */
typedef void (*ae_q32_load_fn)(const uint8_t *blk, v128 *w0, v128 *w1);

AE_INLINE v128 ae_q32_bdot_at(const uint8_t *blk, const ae_q32x *x, ae_q32_load_fn ld) {
  v128 w0, w1;
  ld(blk, &w0, &w1);
  return ae_q32_bdot(w0, w1, x);
}
/* ae_reduce4_i32 in two halves: pair(a, b) = [a0+a2, b0+b2, a1+a3, b1+b3]; unpair(pair(a,b), pair(c,d)) =
 * [sum a, sum b, sum c, sum d]. */
AE_INLINE v128 ae_q32_pair(v128 a, v128 b) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
}
AE_INLINE v128 ae_q32_unpair(v128 ab, v128 cd) {
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* Blocks b, b + 1 of 4 rows (w[k] = row k's blocks, bs bytes each) into acc (lanes = rows); bad collects the
 * scales' inf / nan check (only when !exact). */
AE_INLINE v128 ae_q32_step2(v128 acc, v128 *bad, const uint8_t *const w[4], size_t bs, int b, const ae_q32x *xs,
                            const float *dx, int exact, ae_q32_load_fn ld, int sh) {
  const uint8_t *p0 = w[0] + (size_t)b * bs, *p1 = w[1] + (size_t)b * bs, *p2 = w[2] + (size_t)b * bs, *p3 = w[3] + (size_t)b * bs;
  volatile v128 t[4];   /* the stores order V8's schedule row pair by row pair (no spills) */
  const v128 h = ae_gather8_h((const ae_fp16 *)p0, (const ae_fp16 *)p1, (const ae_fp16 *)p2, (const ae_fp16 *)p3,
                              (const ae_fp16 *)(p0 + bs), (const ae_fp16 *)(p1 + bs), (const ae_fp16 *)(p2 + bs), (const ae_fp16 *)(p3 + bs));
  v128 d0, d1;
  if (exact) { d0 = ae_h2f_exact(ae_h16_lo(h)); d1 = ae_h2f_exact(ae_h16_hi(h)); }
  else { *bad = ae_h16_infnan_acc(*bad, h); d0 = ae_h2f_fast(ae_h16_lo(h)); d1 = ae_h2f_fast(ae_h16_hi(h)); }
  t[0] = ae_q32_pair(ae_q32_bdot_at(p0, &xs[b], ld), ae_q32_bdot_at(p1, &xs[b], ld));
  t[1] = ae_q32_pair(ae_q32_bdot_at(p2, &xs[b], ld), ae_q32_bdot_at(p3, &xs[b], ld));
  t[2] = ae_q32_pair(ae_q32_bdot_at(p0 + bs, &xs[b + 1], ld), ae_q32_bdot_at(p1 + bs, &xs[b + 1], ld));
  t[3] = ae_q32_pair(ae_q32_bdot_at(p2 + bs, &xs[b + 1], ld), ae_q32_bdot_at(p3 + bs, &xs[b + 1], ld));
  const v128 i0 = wasm_i32x4_shr(ae_q32_unpair(t[0], t[1]), sh);
  const v128 i1 = wasm_i32x4_shr(ae_q32_unpair(t[2], t[3]), sh);
  acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i1), wasm_f32x4_mul(d1, wasm_v128_load32_splat(&dx[b + 1]))));
}
/* The last block b of an odd count, 4 rows (exact scale conversion) */
AE_INLINE v128 ae_q32_step1(v128 acc, const uint8_t *const w[4], size_t bs, int b, const ae_q32x *xs, const float *dx,
                            ae_q32_load_fn ld, int sh) {
  const uint8_t *p0 = w[0] + (size_t)b * bs, *p1 = w[1] + (size_t)b * bs, *p2 = w[2] + (size_t)b * bs, *p3 = w[3] + (size_t)b * bs;
  volatile v128 t[2];
  const v128 d0 = ae_gather4_h2f((const ae_fp16 *)p0, (const ae_fp16 *)p1, (const ae_fp16 *)p2, (const ae_fp16 *)p3);
  t[0] = ae_q32_pair(ae_q32_bdot_at(p0, &xs[b], ld), ae_q32_bdot_at(p1, &xs[b], ld));
  t[1] = ae_q32_pair(ae_q32_bdot_at(p2, &xs[b], ld), ae_q32_bdot_at(p3, &xs[b], ld));
  const v128 i0 = wasm_i32x4_shr(ae_q32_unpair(t[0], t[1]), sh);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i0), wasm_f32x4_mul(d0, wasm_v128_load32_splat(&dx[b]))));
}
/* 4 rows x blocks [0, n); acc in/out (lanes = rows). Returns 1 if a scale was inf / nan (only when !exact: the caller
 * recomputes with exact = 1). */
AE_INLINE int ae_q32_rows4(v128 *accp, const uint8_t *const w[4], size_t bs, int n, const ae_q32x *xs, const float *dx,
                           int exact, ae_q32_load_fn ld, int sh) {
  v128 acc = *accp, bad = wasm_i32x4_splat(0);
  int b = 0;
  for (; b + 2 <= n; b += 2) acc = ae_q32_step2(acc, &bad, w, bs, b, xs, dx, exact, ld, sh);
  if (b < n) acc = ae_q32_step1(acc, w, bs, b, xs, dx, ld, sh);
  *accp = acc;
  return exact ? 0 : ae_h16_has_infnan(bad);
}
/* y[r] = row r . x for r in [r0, r1) (W: rows of nb blocks of bs bytes; x: q8_0); fewer than 4 rows (vec_dot) take
 * the one-row tail alone. */
AE_INLINE void ae_q32_matvec4(const uint8_t *W, size_t bs, int nb, const ae_block_q8_0 *x, float *y, int r0, int r1,
                              ae_q32_load_fn ld, int sh) {
  ae_q32x xs[AE_Q32_ROWS_CHUNK];
  float dx[AE_Q32_ROWS_CHUNK];
  const int q = (r1 - r0) / 4;   /* lane k runs the rows of quarter k: r0 + k q + i, i = 0 .. q - 1 */
  const int nchunk = (nb + AE_Q32_ROWS_CHUNK - 1) / AE_Q32_ROWS_CHUNK, cb = (nb + nchunk - 1) / nchunk;
  for (int c0 = 0; c0 < nb; c0 += cb) {
    const int n = nb - c0 < cb ? nb - c0 : cb;
    for (int b = 0; b < n; b++) { ae_q32_prep(x[c0 + b].qs, &xs[b]); dx[b] = ae_h2f_s(x[c0 + b].d); }
    for (int i = 0; i < q; i++) {
      const uint8_t *w[4];
      float *yk[4];
      for (int k = 0; k < 4; k++) {
        const int r = r0 + k * q + i;
        w[k] = W + ((size_t)r * nb + c0) * bs;
        yk[k] = y + r;
      }
      const v128 st = c0 ? wasm_f32x4_make(*yk[0], *yk[1], *yk[2], *yk[3]) : wasm_f32x4_splat(0.0f);
      v128 acc = st;
      if (ae_q32_rows4(&acc, w, bs, n, xs, dx, 0, ld, sh)) { acc = st; ae_q32_rows4(&acc, w, bs, n, xs, dx, 1, ld, sh); }
      *yk[0] = wasm_f32x4_extract_lane(acc, 0); *yk[1] = wasm_f32x4_extract_lane(acc, 1);
      *yk[2] = wasm_f32x4_extract_lane(acc, 2); *yk[3] = wasm_f32x4_extract_lane(acc, 3);
    }
    for (int r = r0 + 4 * q; r < r1; r++) {   /* the 1-3 rows left: one row, the same sums and float sequence */
      const uint8_t *wr = W + ((size_t)r * nb + c0) * bs;
      float sum = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        v128 w0, w1;
        ld(wr + (size_t)b * bs, &w0, &w1);
        sum += (float)(ae_hsum_i32(ae_q32_bdot(w0, w1, &xs[b])) >> sh) * (ae_h2f_s(*(const ae_fp16 *)(wr + (size_t)b * bs)) * dx[b]);
      }
      y[r] = sum;
    }
  }
}

#if AE_RELAXED
/* ---- Relaxed build: the q5_1 X8 matvec (AE_Q5_1_X8 with q8_1 activations) on the unsigned values q (0..31, valid
 * 7-bit operands, so the relaxed dot is exact and host-independent) against the activation bytes as they are (no
 * preparation): per block and row two ae_rdot16 (pair sums |2 x 31 x 128| < 2^13, their i16 sum < 2^14) and one
 * i32x4.dot_i16x8 by 1 give sum(q x), the reference's integer sum, with no 16 sum(x) term. Float step per block on
 * the lanes, the reference's acc += (d_w d_x) (float)sumi + m_w s_x; rows as ae_q32_matvec4 (one from each quarter
 * of the range per lane, whole rows in turn, column chunks of AE_Q32_ROWS_CHUNK blocks crossing through y); scales
 * and mins converted exactly 4 at a time. 1.1x q32m_matvec's signed-byte form on an AMD Zen 5 VM (docs/PERFORMANCE.md
 * "Session 10"); q5_0's X8 matvec keeps the signed bytes (the unsigned unpacking costs what the relaxed dot saves). */
/* The block's X8 bytes (T at xb + 2, A at xb + 6) as the unsigned values: ae_q5_0_x8_load_u with i16 shifts and byte
 * masks (V8 11.x lowers i8x16.shr_u to ~5 x64 instructions). */
AE_INLINE void ae_q5_0_x8_load_u16(const uint8_t *xb, v128 *q0, v128 *q1) {
  const v128 a = ae_load(xb + 6);
  *q0 = wasm_v128_xor(wasm_v128_and(wasm_u16x8_shr(a, 3), wasm_i8x16_splat(0x1f)), wasm_i8x16_splat(0x10));
  const v128 top = wasm_v128_and(wasm_u16x8_shr(ae_q5_0_x8_tops(xb), 3), wasm_i8x16_splat(0x18));
  *q1 = wasm_v128_or(wasm_v128_and(a, wasm_i8x16_splat(7)), wasm_v128_xor(top, wasm_i8x16_splat(0x10)));
}
/* i32x4 partial sums of sum(q x) of one block. fused (kernels.h ae_fused_dot): the i32 relaxed dot as the
 * accumulation (one instruction per 16 products with AVX-VNNI, Chromium 156; three in V8 11.x); else two i16 dots, an
 * i16 add and one i32x4.dot_i16x8 by 1. The same exact integers. */
AE_INLINE v128 ae_q32_udot(const uint8_t *xb, const int8_t *xq, int fused) {
  v128 q0, q1;
  ae_q5_0_x8_load_u16(xb, &q0, &q1);
  if (fused) return ae_rdot(ae_load(xq + 16), q1, ae_rdot(ae_load(xq), q0, wasm_i32x4_splat(0)));
  const v128 p = wasm_i16x8_add(ae_rdot16(ae_load(xq), q0), ae_rdot16(ae_load(xq + 16), q1));
  return wasm_i32x4_dot_i16x8(p, wasm_i16x8_splat(1));
}
AE_INLINE void ae_q5_1_x8r_matvec4(const ae_block_q5_1 *W, int nb, const ae_block_q8_1 *x, float *y, int r0, int r1, int fused) {
  float dx[AE_Q32_ROWS_CHUNK], sx[AE_Q32_ROWS_CHUNK];
  const int q = (r1 - r0) / 4;   /* lane k runs the rows of quarter k: r0 + k q + i */
  const int nchunk = (nb + AE_Q32_ROWS_CHUNK - 1) / AE_Q32_ROWS_CHUNK, cb = (nb + nchunk - 1) / nchunk;
  for (int c0 = 0; c0 < nb; c0 += cb) {
    const int n = nb - c0 < cb ? nb - c0 : cb;
    const ae_block_q8_1 *xc = x + c0;
    for (int b = 0; b < n; b++) { dx[b] = ae_h2f_s(xc[b].d); sx[b] = ae_h2f_s(xc[b].s); }
    for (int i = 0; i < q; i++) {
      const ae_block_q5_1 *w[4];
      for (int k = 0; k < 4; k++) w[k] = W + (size_t)(r0 + k * q + i) * nb + c0;
      v128 acc = c0 ? wasm_f32x4_make(y[r0 + i], y[r0 + q + i], y[r0 + 2 * q + i], y[r0 + 3 * q + i]) : wasm_f32x4_splat(0.0f);
      for (int b = 0; b < n; b++) {
        const ae_block_q5_1 *p0 = w[0] + b, *p1 = w[1] + b, *p2 = w[2] + b, *p3 = w[3] + b;
        volatile v128 tv[2];   /* the stores order V8's schedule row pair by row pair (no spills) */
        tv[0] = ae_q32_pair(ae_q32_udot((const uint8_t *)p0 + 2, xc[b].qs, fused), ae_q32_udot((const uint8_t *)p1 + 2, xc[b].qs, fused));
        tv[1] = ae_q32_pair(ae_q32_udot((const uint8_t *)p2 + 2, xc[b].qs, fused), ae_q32_udot((const uint8_t *)p3 + 2, xc[b].qs, fused));
        const v128 si = wasm_f32x4_convert_i32x4(ae_q32_unpair(tv[0], tv[1]));
        const v128 d = ae_gather4_h2f(&p0->d, &p1->d, &p2->d, &p3->d), m = ae_gather4_h2f(&p0->m, &p1->m, &p2->m, &p3->m);
        acc = wasm_f32x4_add(acc, wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(d, wasm_v128_load32_splat(&dx[b])), si),
                                                 wasm_f32x4_mul(m, wasm_v128_load32_splat(&sx[b]))));
      }
      y[r0 + i] = wasm_f32x4_extract_lane(acc, 0); y[r0 + q + i] = wasm_f32x4_extract_lane(acc, 1);
      y[r0 + 2 * q + i] = wasm_f32x4_extract_lane(acc, 2); y[r0 + 3 * q + i] = wasm_f32x4_extract_lane(acc, 3);
    }
    for (int r = r0 + 4 * q; r < r1; r++) {   /* the 1-3 rows left: one row, the same sums and float sequence */
      const ae_block_q5_1 *wr = W + (size_t)r * nb + c0;
      float sum = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        const float si = (float)ae_hsum_i32(ae_q32_udot((const uint8_t *)&wr[b] + 2, xc[b].qs, fused));
        sum += (ae_h2f_s(wr[b].d) * dx[b]) * si + ae_h2f_s(wr[b].m) * sx[b];
      }
      y[r] = sum;
    }
  }
}
#endif

#endif
