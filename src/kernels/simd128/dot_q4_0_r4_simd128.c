/* q4_0 weights repacked at load into groups of 4 rows (kernels.h AE_Q4_0_R4) x q8_0 activations: the repack itself
 * (SIMD, in place), the matvec (decode) and the batched GEMM (prefill). Bit-exact with ae_vec_dot_q4_0_ref on the
 * unpacked rows (ae_matvec_q4_0_r4_ref) for any row range, and so with the q4_0 kernels of either build.
 *
 * A record (72 B) = block b of the group's 4 rows: 4 f16 scales, then chunks j = 0..3 of 16 B, row k's 4 bytes at
 * 4k: element 8j+i in the low nibble of byte i, 8j+4+i in the high nibble. Per block and group:
 *   relaxed: for each j, the activation's bytes x[8j..8j+3] and x[8j+4..8j+7] splatted (v128.load32_splat) are the
 *     i8 operand of i16x8.relaxed_dot_i8x16_i7x16_s against the chunk's low / high nibbles (0..15: the 7-bit
 *     operand, exact and host-independent); i16 lanes 2k, 2k+1 hold row k's pair sums; 8 dots added in i16 (a lane
 *     holds 16 products, |.| <= 16 * 15 * 128 < 2^15), then widened once (i32x4.extadd_pairwise_i16x8_s): the 4 rows'
 *     sum(q x) in the lanes, no transposition.
 *   plain: i16 lanes (bytes 4k, 4k+1) and (4k+2, 4k+3) of a chunk masked in place (& 0x000f, & 0x0f00, & 0x00f0,
 *     >> 12) against activation pairs prepared as i32 splats (256 x[8j], 256 x[8j+2]), (x[8j+1], x[8j+3]),
 *     (16 x[8j+4], 16 x[8j+6]), (256 x[8j+5], 256 x[8j+7]): 4 i32x4.dot_i16x8_s per chunk give 256 sum(q x) per
 *     row lane.
 * Then per row lane, in block order, the reference's float sequence acc += (float)sumi * (d_w * d_x) with
 * sumi = sum(q x) - 8 sum(x) (exact integers). Scales: v128.load16x4_s, << 13, & 0x8fffffff = d_w * 2^-112 exactly
 * (finite halves, which ae_repack_q4_0_r4 guarantees); d_x carries the 2^112 (as dot_q4_0_simd128.c).
 * A group is one sequential stream of 72 B records (the plain layout's 4 rows are 4 streams in the same pages, which
 * the hardware prefetchers follow poorly from DRAM: docs/PERFORMANCE.md "q4_0 decode and prefill kernels"). The
 * matvec reads 4 groups from the 4 quarters of its row range record by record: 4 sequential streams in different
 * pages keep more DRAM reads in flight than one (1.4-1.7x from DRAM; "Decode matvecs from DRAM").
 *
 * The same kernels serve the relaxed build's q5_0 / q5_1 layouts (kernels.h AE_Q5_0_R4 / AE_Q5_1_R4; `kind` 1 / 2, a
 * constant after inlining): the chunks hold the low 4 bits of the 5-bit values q, a record's 16 bytes of 5th bits are
 * or-ed in at bit 4 (hb5), the i16 sums widen every two chunks (q <= 31), sumi = sum(q x) - 16 sum(x) (q5_0) or
 * sum(q x) with the reference's (d_w d_x) (float)sumi + m_w s_x (q5_1, q8_1 activations). The plain build repacks q5
 * into the X8 layouts instead; its entry points for these run the references. */
#include "q32_simd128.h"   /* simd128_util.h, and ae_q32_qh for the q5 layouts' repack */

#if AE_RELAXED
#define R4_CHUNK 512      /* blocks per column chunk: xaux only, 8 B each (4 KiB) */
#define R4_SH 0
#define R4_SUM8 8
#else
#define R4_CHUNK 128      /* 64 B of activation splats + 8 B per block (9 KiB) */
#define R4_SH 8
#define R4_SUM8 2048
#endif

/* AE_Q5_0_R4 (kind 1) / AE_Q5_1_R4 (kind 2) records */
#define R45_CO(kind) ((kind) == 2 ? 16 : 8)    /* where a record's chunks start: after the scales (and q5_1's mins) */
#define R45_HO(kind) ((kind) == 2 ? 80 : 72)    /* where its 5th bits are */
#define R45_REC(kind) ((kind) == 2 ? AE_R451_REC : AE_R45_REC)
/* -sum8 * sum(x) (relaxed q4_0: the i16 pair of r4_off16); d_x * 2^112; q5_1 (q8_1 activations): s_x * 2^112; relaxed
 * q4_0: n32 = -8 sum(x) as one i32 (the fused matvec's start) */
typedef struct { int32_t nsum; float dxs, sxs; int32_t n32; } xaux;

/* ---- repack (in place) ---- */

/* One record from the 4 rows' block b (p[k] = row k's block). */
AE_INLINE void pack_rec(const uint8_t *const p[4], uint8_t *rec) {
  const v128 m = wasm_i8x16_splat(0x0f);
  v128 r[4];
  for (int k = 0; k < 4; k++) {
    const v128 q = ae_load(p[k] + 2);
    const v128 lo = wasm_v128_and(q, m), hi = wasm_v128_and(wasm_u16x8_shr(q, 4), m);   /* e0..15, e16..31 */
    /* chunk j's bytes: low nibbles e[8j..8j+3], high nibbles e[8j+4..8j+7] */
    const v128 a = wasm_i8x16_shuffle(lo, hi, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const v128 b = wasm_i8x16_shuffle(lo, hi, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    r[k] = wasm_v128_or(a, wasm_i16x8_shl(b, 4));   /* nibbles < 16: no carry across bytes */
  }
  /* 4x4 transpose of 32-bit words: chunk j = word j of rows 0..3 */
  const v128 t0 = wasm_i32x4_shuffle(r[0], r[1], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r[0], r[1], 2, 6, 3, 7);
  const v128 t2 = wasm_i32x4_shuffle(r[2], r[3], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r[2], r[3], 2, 6, 3, 7);
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, p[k], 2);
  wasm_v128_store(rec + 8, wasm_i64x2_shuffle(t0, t2, 0, 2));
  wasm_v128_store(rec + 24, wasm_i64x2_shuffle(t0, t2, 1, 3));
  wasm_v128_store(rec + 40, wasm_i64x2_shuffle(t1, t3, 0, 2));
  wasm_v128_store(rec + 56, wasm_i64x2_shuffle(t1, t3, 1, 3));
}

static void pack_rec_a(const uint8_t *const p[4], uint8_t *rec, int arg) { (void)arg; pack_rec(p, rec); }
int ae_repack_q4_0_r4(void *W, int nrows, int ncols, void *tmp) {
  return ae_group_repack(W, nrows, ncols / AE_QK4_0, sizeof(ae_block_q4_0), AE_R4_REC, tmp, 0, -1, pack_rec_a, 0);
}

/* One AE_Q5_0_R4 record from the 4 rows' q5_0 blocks p[k] (d, qh, qs): the nibbles as pack_rec; the 5th bits as
 * q32_simd128.h's flags (0x10 per element), put in chunk order by the same shuffles, moved to bits 0 / 1 of their
 * bytes, lane j (chunk j) multiplied by 4^j (bits 2j, 2j + 1; no carries) and the 4 lanes or-ed together. */
static const int32_t r45_mul[4] __attribute__((aligned(16))) = {1, 4, 16, 64};
AE_INLINE void pack_rec5(const uint8_t *const p[4], uint8_t *rec, int q51) {   /* q51: AE_Q5_1_R4 (d, m, qh, qs blocks) */
  const int qo = q51 ? 8 : 6, ho = q51 ? 4 : 2, co = q51 ? 16 : 8, hbo = q51 ? 80 : 72;
  const v128 m = wasm_i8x16_splat(0x0f);
  const int32_t *mp = r45_mul;
  __asm__("" : "+r"(mp));   /* a multiply, not per-lane shifts */
  const v128 mul = ae_load(mp);
  v128 r[4];
  for (int k = 0; k < 4; k++) {
    const v128 q = ae_load(p[k] + qo);
    const v128 lo = wasm_v128_and(q, m), hi = wasm_v128_and(wasm_u16x8_shr(q, 4), m);
    const v128 a = wasm_i8x16_shuffle(lo, hi, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const v128 b = wasm_i8x16_shuffle(lo, hi, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    r[k] = wasm_v128_or(a, wasm_i16x8_shl(b, 4));
    v128 h0, h1;
    ae_q32_qh(p[k] + ho, &h0, &h1);
    const v128 fa = wasm_i8x16_shuffle(h0, h1, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const v128 fb = wasm_i8x16_shuffle(h0, h1, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    v128 u = wasm_i32x4_mul(wasm_v128_or(wasm_u16x8_shr(fa, 4), wasm_u16x8_shr(fb, 3)), mul);
    u = wasm_v128_or(u, wasm_i32x4_shuffle(u, u, 2, 3, 0, 1));
    u = wasm_v128_or(u, wasm_i32x4_shuffle(u, u, 1, 0, 3, 2));
    const uint32_t hb = (uint32_t)wasm_i32x4_extract_lane(u, 0);
    __builtin_memcpy(rec + hbo + 4 * k, &hb, 4);
  }
  const v128 t0 = wasm_i32x4_shuffle(r[0], r[1], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r[0], r[1], 2, 6, 3, 7);
  const v128 t2 = wasm_i32x4_shuffle(r[2], r[3], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r[2], r[3], 2, 6, 3, 7);
  for (int k = 0; k < 4; k++) {
    __builtin_memcpy(rec + 2 * k, p[k], 2);
    if (q51) __builtin_memcpy(rec + 8 + 2 * k, p[k] + 2, 2);
  }
  wasm_v128_store(rec + co, wasm_i64x2_shuffle(t0, t2, 0, 2));
  wasm_v128_store(rec + co + 16, wasm_i64x2_shuffle(t0, t2, 1, 3));
  wasm_v128_store(rec + co + 32, wasm_i64x2_shuffle(t1, t3, 0, 2));
  wasm_v128_store(rec + co + 48, wasm_i64x2_shuffle(t1, t3, 1, 3));
}
/* In place, groups of 4 rows; 1 (nothing changed) with rows % 4 != 0 or an inf / nan scale (q5_1: or min) */
static void pack_rec5_a(const uint8_t *const p[4], uint8_t *rec, int q51) { pack_rec5(p, rec, q51); }
static int repack5(void *W, int nrows, int ncols, void *tmp, int q51) {
  return ae_group_repack(W, nrows, ncols / 32, q51 ? sizeof(ae_block_q5_1) : sizeof(ae_block_q5_0), q51 ? AE_R451_REC : AE_R45_REC,
                         tmp, 0, q51 ? 2 : -1, pack_rec5_a, q51);
}
int ae_repack_q5_0_r4(void *W, int nrows, int ncols, void *tmp) { return repack5(W, nrows, ncols, tmp, 0); }
int ae_repack_q5_1_r4(void *W, int nrows, int ncols, void *tmp) { return repack5(W, nrows, ncols, tmp, 1); }

/* ---- activation preparation ---- */

#if AE_RELAXED
typedef struct { v128 unused; } xsplat;   /* the relaxed kernel splats straight from the q8_0 block */
AE_INLINE void prep_splats(const ae_block_q8_0 *x, xsplat *o) { (void)x; (void)o; }
#else
typedef struct { v128 a, b, c, d; } xsplat;   /* word j of each: the 4 pair patterns of chunk j (see the top) */
AE_INLINE void prep_splats(const ae_block_q8_0 *x, xsplat *o) {
  const v128 a = ae_load(x->qs), c = ae_load(x->qs + 16);
  const v128 ea = ae_i8_even(a), oa = ae_i8_odd(a), ec = ae_i8_even(c), oc = ae_i8_odd(c);
  o->a = wasm_i16x8_shl(wasm_i32x4_shuffle(ea, ec, 0, 2, 4, 6), 8);   /* x0,x2 | x8,x10 | x16,x18 | x24,x26 */
  o->b = wasm_i32x4_shuffle(oa, oc, 0, 2, 4, 6);                      /* x1,x3 | ... */
  o->c = wasm_i16x8_shl(wasm_i32x4_shuffle(ea, ec, 1, 3, 5, 7), 4);   /* x4,x6 | ... */
  o->d = wasm_i16x8_shl(wasm_i32x4_shuffle(oa, oc, 1, 3, 5, 7), 8);   /* x5,x7 | ... */
}
#endif

/* -mul sum(x) (mul: R4_SUM8 for q4_0's -8, 16 for q5_0's -16) and d_x 2^112 */
AE_INLINE void prep_aux_m(const ae_block_q8_0 *x, xaux *xa, int mul) {
  const v128 a = ae_load(x->qs), c = ae_load(x->qs + 16);
  const v128 t = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(a), wasm_i16x8_extadd_pairwise_i8x16(c));
  xa->nsum = -mul * ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(t));
  xa->dxs = ae_h2f_s(x->d) * 0x1p112f;
}
#if AE_RELAXED
/* The i16 start values for one activation block (the relaxed R4 q4_0 GEMM tile and matvec): the relaxed i16 dot leaves in i16 lane 2k (2k + 1) of a
 * record's chunk sums the products of elements 8j + {0, 1, 4, 5} (8j + {2, 3, 6, 7}), j < 4, so the lanes start at
 * -8 times the sum of those 16 activations, oA (oB): the pair (oA, oB) as one i32 (little-endian), splatted by the
 * tile. At every step a lane holds -8 x for its elements not yet added and (q - 8) x for the others (q in 0..15),
 * each |.| <= 8 x 128, so it stays within 16 x 8 x 128 = 16384: exact in i16 for any bytes, and the lane pair's
 * extadd is the block's sum(q x) - 8 sum(x) exactly, the float step needs no offset term. */
AE_INLINE int32_t r4_off16(const ae_block_q8_0 *x) {
  const v128 t = wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(ae_load(x->qs)), wasm_i16x8_extadd_pairwise_i8x16(ae_load(x->qs + 16)));
  const v128 u = wasm_i16x8_add(t, wasm_i32x4_shuffle(t, t, 2, 3, 0, 1));   /* even lanes: A parts, odd: B parts */
  const v128 w = wasm_i16x8_add(u, wasm_i32x4_shuffle(u, u, 1, 0, 3, 2));
  return wasm_i32x4_extract_lane(wasm_i16x8_mul(w, wasm_i16x8_splat(-8)), 0);
}

/* The relaxed q4_0 matvec starts its i16 lanes at the block's offsets too (r4_off16; nsum holds the i16 pair), so
 * its float step has no offset term (fma_rec0). */
AE_INLINE void prep_aux(const ae_block_q8_0 *x, xaux *xa) {
  xa->nsum = r4_off16(x); xa->dxs = ae_h2f_s(x->d) * 0x1p112f;
  xa->n32 = (int16_t)(xa->nsum & 0xffff) + (int16_t)((uint32_t)xa->nsum >> 16);
}
#else
AE_INLINE void prep_aux(const ae_block_q8_0 *x, xaux *xa) { prep_aux_m(x, xa, R4_SUM8); }
#endif

/* ---- one record: i32x4 [sum(q x) of rows 0..3] (plain: times 256, before the -8 sum(x) term; relaxed: with it) ---- */
#if AE_RELAXED
/* chunk j of a record against its two activation splats: s += the 4 rows' i16 pair sums */
AE_INLINE v128 chunk_i16(v128 s, const uint8_t *rec, int j, v128 xl, v128 xh, v128 m) {
  const v128 v = ae_load(rec + 8 + 16 * j);
  return wasm_i16x8_add(s, wasm_i16x8_add(ae_rdot16(xl, wasm_v128_and(v, m)), ae_rdot16(xh, wasm_v128_and(wasm_u16x8_shr(v, 4), m))));
}
/* the same in i32 (the fused dot): s + the 4 rows' sums of chunk j */
AE_INLINE v128 chunk_i32(v128 s, const uint8_t *rec, int j, v128 xl, v128 xh, v128 m) {
  const v128 v = ae_load(rec + 8 + 16 * j);
  return ae_rdot(xh, wasm_v128_and(wasm_u16x8_shr(v, 4), m), ae_rdot(xl, wasm_v128_and(v, m), s));
}
AE_INLINE v128 rec_sums(const uint8_t *rec, const ae_block_q8_0 *x, const xsplat *xs, const xaux *xa) {
  (void)xs;
  const v128 m = wasm_i8x16_splat(0x0f);
  v128 s = wasm_v128_load32_splat(&xa->nsum);   /* the offsets (r4_off16): the sum(q x) - 8 sum(x) per row lane */
  for (int j = 0; j < 4; j++) s = chunk_i16(s, rec, j, wasm_v128_load32_splat(x->qs + 8 * j), wasm_v128_load32_splat(x->qs + 8 * j + 4), m);
  return wasm_i32x4_extadd_pairwise_i16x8(s);
}
/* AE_Q5_0_R4 (kernels.h): bit b of the 5th-bit bytes h moved to bit 4 of each byte (a u16 shift by at most 4 left or
 * 3 right brings no bit of the neighbouring byte to bit 4) */
AE_INLINE v128 hb5(v128 h, int b) {
  return wasm_v128_and(b <= 4 ? wasm_i16x8_shl(h, 4 - b) : wasm_u16x8_shr(h, b - 4), wasm_i8x16_splat(0x10));
}
/* chunk j of a q5_0 R4 record: s += the 4 rows' i16 pair sums of q x (q <= 31: a lane holds at most 4 products of
 * |31 x 128| per chunk, so two chunks fit in i16 and the sums widen every two chunks) */
/* chunk j's 5-bit values: lo (elements 8j + i) and hi (8j + 4 + i) */
AE_INLINE void chunk5_vals(const uint8_t *rec, int j, v128 m, int kind, v128 *lo, v128 *hi) {
  const v128 v = ae_load(rec + R45_CO(kind) + 16 * j), h = ae_load(rec + R45_HO(kind));
  *lo = wasm_v128_or(wasm_v128_and(v, m), hb5(h, 2 * j));
  *hi = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(v, 4), m), hb5(h, 2 * j + 1));
}
AE_INLINE v128 chunk5_i16(v128 s, const uint8_t *rec, int j, v128 xl, v128 xh, v128 m, int kind) {
  v128 lo, hi;
  chunk5_vals(rec, j, m, kind, &lo, &hi);
  return wasm_i16x8_add(s, wasm_i16x8_add(ae_rdot16(xl, lo), ae_rdot16(xh, hi)));
}
/* chunk5_i16 with the fused dot (kernels.h ae_fused_dot): s + the 4 rows' sums of q x in i32 lanes */
AE_INLINE v128 chunk5_i32(v128 s, const uint8_t *rec, int j, v128 xl, v128 xh, v128 m, int kind) {
  v128 lo, hi;
  chunk5_vals(rec, j, m, kind, &lo, &hi);
  return ae_rdot(xh, hi, ae_rdot(xl, lo, s));
}
/* After chunk j of a q5 record (4 rows or tokens, i16 sums s0..s3): after chunk 1 the sums widen into the volatile
 * half[] and restart (two chunks fit in i16), after the others they are stored to the volatile sink (scheduling). */
#define R45_AFTER_CHUNK(j) do { \
    if ((j) == 1) { \
      half[0] = wasm_i32x4_extadd_pairwise_i16x8(s0); half[1] = wasm_i32x4_extadd_pairwise_i16x8(s1); \
      half[2] = wasm_i32x4_extadd_pairwise_i16x8(s2); half[3] = wasm_i32x4_extadd_pairwise_i16x8(s3); \
      s0 = s1 = s2 = s3 = wasm_i32x4_splat(0); \
    } else { sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3; } \
  } while (0)
AE_INLINE v128 rec5_sums(const uint8_t *rec, const int8_t *q, int kind) {
  const v128 m = wasm_i8x16_splat(0x0f), z = wasm_i32x4_splat(0);
  v128 t = z;
#pragma clang loop unroll(full)
  for (int half = 0; half < 2; half++) {
    v128 s = z;
#pragma clang loop unroll(full)
    for (int j = 2 * half; j < 2 * half + 2; j++) s = chunk5_i16(s, rec, j, wasm_v128_load32_splat(q + 8 * j), wasm_v128_load32_splat(q + 8 * j + 4), m, kind);
    t = wasm_i32x4_add(t, wasm_i32x4_extadd_pairwise_i16x8(s));
  }
  return t;
}
#else
/* chunk j of a record against the block's 4 pair patterns: s += 256 x the 4 rows' sums (see the top) */
AE_INLINE v128 chunk_plain(v128 s, const uint8_t *rec, int j, v128 pa, v128 pb, v128 pc, v128 pd) {
  const v128 v = ae_load(rec + 8 + 16 * j);
  const v128 s0 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x000f)), pa),
                                 wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x0f00)), pb));
  const v128 s1 = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(v, wasm_i16x8_splat(0x00f0)), pc),
                                 wasm_i32x4_dot_i16x8(wasm_u16x8_shr(v, 12), pd));
  return wasm_i32x4_add(s, wasm_i32x4_add(s0, s1));
}
#define R4_PAT(xs, f, j) wasm_v128_load32_splat((const int32_t *)&(xs)->f + (j))
AE_INLINE v128 rec_sums(const uint8_t *rec, const ae_block_q8_0 *x, const xsplat *xs, const xaux *xa) {
  (void)x; (void)xa;
  v128 s = wasm_i32x4_splat(0);
  for (int j = 0; j < 4; j++) s = chunk_plain(s, rec, j, R4_PAT(xs, a, j), R4_PAT(xs, b, j), R4_PAT(xs, c, j), R4_PAT(xs, d, j));
  return s;
}
#endif

/* the 4 scales of a record: d_w * 2^-112 as f32 (exact for finite halves) */
AE_INLINE v128 rec_scales(const uint8_t *rec) { return ae_h4_scaled(rec); }

/* acc += (float)sumi * (d_w * d_x) per row lane, sumi = s (+ the -8 / -16 sum(x) term) */
#if AE_RELAXED
AE_INLINE v128 fma_rec0(v128 acc, v128 sumi, const xaux *xa, v128 dw) {
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sumi), wasm_f32x4_mul(dw, wasm_v128_load32_splat(&xa->dxs))));
}
#endif
AE_INLINE v128 fma_rec(v128 acc, v128 s, const xaux *xa, v128 dw) {
  const v128 i = wasm_i32x4_shr(wasm_i32x4_add(s, wasm_v128_load32_splat(&xa->nsum)), R4_SH);
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(i), wasm_f32x4_mul(dw, wasm_v128_load32_splat(&xa->dxs))));
}

#if AE_RELAXED
/* q5_1 (kind 2): acc += (d_w d_x) (float)sumi + m_w s_x per row lane, the reference's sequence (the mins' halves
 * converted as the scales, m_w 2^-112, against s_x 2^112) */
AE_INLINE v128 fma_rec51(v128 acc, v128 s, const xaux *xa, const uint8_t *rec) {
  const v128 t = wasm_f32x4_mul(wasm_f32x4_mul(rec_scales(rec), wasm_v128_load32_splat(&xa->dxs)), wasm_f32x4_convert_i32x4(s));
  return wasm_f32x4_add(acc, wasm_f32x4_add(t, wasm_f32x4_mul(rec_scales(rec + 8), wasm_v128_load32_splat(&xa->sxs))));
}
AE_INLINE v128 fma_k(v128 acc, v128 s, const xaux *xa, const uint8_t *rec, int kind) {
  return kind == 2 ? fma_rec51(acc, s, xa, rec) : fma_rec(acc, s, xa, rec_scales(rec));
}
#endif

/* One group (records from rec), blocks [0, n) of the chunk; q5: 1 / 2 = AE_Q5_0_R4 / AE_Q5_1_R4 records (relaxed build
 * only; q points at the chunk's first activation block's quants, xstride bytes apart). */
AE_INLINE v128 group(const uint8_t *rec, int n, const ae_block_q8_0 *x, const xsplat *xs, const xaux *xa, v128 acc, int q5,
                     const int8_t *q, size_t xstride) {
  for (int b = 0; b < n; b++, rec += q5 ? R45_REC(q5) : AE_R4_REC) {
#if AE_RELAXED
    if (q5) { acc = fma_k(acc, rec5_sums(rec, q + (size_t)b * xstride, q5), xa + b, rec, q5); continue; }
#else
    (void)q; (void)xstride;
#endif
#if AE_RELAXED
    acc = fma_rec0(acc, rec_sums(rec, x + b, xs, xa + b), xa + b, rec_scales(rec));
#else
    acc = fma_rec(acc, rec_sums(rec, x + b, xs + b, xa + b), xa + b, rec_scales(rec));
#endif
  }
  return acc;
}
/* Four groups far apart (records from r[k]), record by record: four sequential streams in different pages, which DRAM
 * serves faster than one (docs/PERFORMANCE.md "Decode matvecs from DRAM"; 8 streams spill in V8's code). Within a
 * record, chunk-major: chunk j's activation splats are loaded once and used by the 4 groups, and the 4 groups' sums
 * are stored to a volatile slot after each chunk, which keeps TurboFan from hoisting every load of the record above
 * the arithmetic and spilling them (16 SIMD registers on x64): 1.3x in Node, 1.5-1.75x in Chromium over the record
 * by record form (docs/PERFORMANCE.md, session 12). The same integer sums and float sequence: bit-identical. */
AE_INLINE void group4s(const uint8_t *const r[4], int n, const ae_block_q8_0 *x, const xsplat *xs, const xaux *xa, v128 acc[4], const int fused) {
  volatile v128 sink[4];
  v128 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const uint8_t *p0 = r[0], *p1 = r[1], *p2 = r[2], *p3 = r[3];
#if AE_RELAXED
  (void)xs;
  const v128 m = wasm_i8x16_splat(0x0f);
#endif
  for (int b = 0; b < n; b++, p0 += AE_R4_REC, p1 += AE_R4_REC, p2 += AE_R4_REC, p3 += AE_R4_REC) {
#if AE_RELAXED
    /* the offsets: r4_off16's i16 pair, or (fused) the i32 -8 sum(x) */
    v128 s0 = wasm_v128_load32_splat(fused ? &xa[b].n32 : &xa[b].nsum), s1 = s0, s2 = s0, s3 = s0;
#else
    v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
#endif
    for (int j = 0; j < 4; j++) {
#if AE_RELAXED
      const int8_t *q = x[b].qs;
      const v128 xl = wasm_v128_load32_splat(q + 8 * j), xh = wasm_v128_load32_splat(q + 8 * j + 4);
      if (fused) {
        s0 = chunk_i32(s0, p0, j, xl, xh, m); s1 = chunk_i32(s1, p1, j, xl, xh, m);
        s2 = chunk_i32(s2, p2, j, xl, xh, m); s3 = chunk_i32(s3, p3, j, xl, xh, m);
      } else {
        s0 = chunk_i16(s0, p0, j, xl, xh, m); s1 = chunk_i16(s1, p1, j, xl, xh, m);
        s2 = chunk_i16(s2, p2, j, xl, xh, m); s3 = chunk_i16(s3, p3, j, xl, xh, m);
      }
#else
      const v128 pa = R4_PAT(xs + b, a, j), pb = R4_PAT(xs + b, b, j), pc = R4_PAT(xs + b, c, j), pd = R4_PAT(xs + b, d, j);
      s0 = chunk_plain(s0, p0, j, pa, pb, pc, pd); s1 = chunk_plain(s1, p1, j, pa, pb, pc, pd);
      s2 = chunk_plain(s2, p2, j, pa, pb, pc, pd); s3 = chunk_plain(s3, p3, j, pa, pb, pc, pd);
#endif
      sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3;
    }
#if AE_RELAXED
    if (!fused) {
      s0 = wasm_i32x4_extadd_pairwise_i16x8(s0); s1 = wasm_i32x4_extadd_pairwise_i16x8(s1);
      s2 = wasm_i32x4_extadd_pairwise_i16x8(s2); s3 = wasm_i32x4_extadd_pairwise_i16x8(s3);
    }
    a0 = fma_rec0(a0, s0, xa + b, rec_scales(p0));
    a1 = fma_rec0(a1, s1, xa + b, rec_scales(p1));
    a2 = fma_rec0(a2, s2, xa + b, rec_scales(p2));
    a3 = fma_rec0(a3, s3, xa + b, rec_scales(p3));
#else
    a0 = fma_rec(a0, s0, xa + b, rec_scales(p0));
    a1 = fma_rec(a1, s1, xa + b, rec_scales(p1));
    a2 = fma_rec(a2, s2, xa + b, rec_scales(p2));
    a3 = fma_rec(a3, s3, xa + b, rec_scales(p3));
#endif
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
}
#if AE_RELAXED
/* group4s on AE_Q5_0_R4 records: the same chunk-major order; the i16 sums widen after chunks 1 and 3 (the first half's
 * i32 sums wait in a volatile slot). */
AE_INLINE void group4s5(const uint8_t *const r[4], int n, const int8_t *xq0, size_t xstride, const xaux *xa, v128 acc[4], int kind, const int fused) {
  volatile v128 sink[4], half[4];
  v128 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const uint8_t *p0 = r[0], *p1 = r[1], *p2 = r[2], *p3 = r[3];
  const v128 m = wasm_i8x16_splat(0x0f);
  const size_t RS = R45_REC(kind);
  for (int b = 0; b < n; b++, p0 += RS, p1 += RS, p2 += RS, p3 += RS) {
    v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
#pragma clang loop unroll(full)
    for (int j = 0; j < 4; j++) {
      const int8_t *q = xq0 + (size_t)b * xstride;
      const v128 xl = wasm_v128_load32_splat(q + 8 * j), xh = wasm_v128_load32_splat(q + 8 * j + 4);
      if (fused) {   /* the i32 sums need no widening */
        s0 = chunk5_i32(s0, p0, j, xl, xh, m, kind); s1 = chunk5_i32(s1, p1, j, xl, xh, m, kind);
        s2 = chunk5_i32(s2, p2, j, xl, xh, m, kind); s3 = chunk5_i32(s3, p3, j, xl, xh, m, kind);
        sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3;
        continue;
      }
      s0 = chunk5_i16(s0, p0, j, xl, xh, m, kind); s1 = chunk5_i16(s1, p1, j, xl, xh, m, kind);
      s2 = chunk5_i16(s2, p2, j, xl, xh, m, kind); s3 = chunk5_i16(s3, p3, j, xl, xh, m, kind);
      R45_AFTER_CHUNK(j);
    }
    if (fused) {
      a0 = fma_k(a0, s0, xa + b, p0, kind); a1 = fma_k(a1, s1, xa + b, p1, kind);
      a2 = fma_k(a2, s2, xa + b, p2, kind); a3 = fma_k(a3, s3, xa + b, p3, kind);
      continue;
    }
    a0 = fma_k(a0, wasm_i32x4_add(half[0], wasm_i32x4_extadd_pairwise_i16x8(s0)), xa + b, p0, kind);
    a1 = fma_k(a1, wasm_i32x4_add(half[1], wasm_i32x4_extadd_pairwise_i16x8(s1)), xa + b, p1, kind);
    a2 = fma_k(a2, wasm_i32x4_add(half[2], wasm_i32x4_extadd_pairwise_i16x8(s2)), xa + b, p2, kind);
    a3 = fma_k(a3, wasm_i32x4_add(half[3], wasm_i32x4_extadd_pairwise_i16x8(s3)), xa + b, p3, kind);
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
}
#endif

AE_INLINE void matvec_r4(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int q5, const int fused) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * (q5 == 2 ? sizeof(ae_block_q5_1) : q5 ? sizeof(ae_block_q5_0) : sizeof(ae_block_q4_0)),
               rec = q5 ? R45_REC(q5) : AE_R4_REC, xstride = q5 == 2 ? sizeof(ae_block_q8_1) : sizeof(ae_block_q8_0);
  const int8_t *xqs = q5 == 2 ? ((const ae_block_q8_1 *)xq)->qs : ((const ae_block_q8_0 *)xq)->qs;   /* block 0's quants */
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  const int g0 = r0 >> 2, g1 = (r1 + 3) >> 2;   /* groups [g0, g1); the first / last may be partial */
  const int gq = (g1 - g0 + 3) / 4;               /* group g0 + i is read together with g0 + i + k gq, k < 4 */
  _Alignas(16) float part[2][4];                 /* a partial group's 4 rows (only some are stored into y) */
  xaux xa[R4_CHUNK];
  xsplat xs[AE_RELAXED ? 1 : R4_CHUNK];
#define R4_DST(g) ((4 * (g) >= r0 && 4 * (g) + 4 <= r1) ? y + 4 * (g) : part[(g) == g0 ? 0 : 1])
  for (int c0 = 0; c0 < nb; c0 += R4_CHUNK) {
    const int n = nb - c0 < R4_CHUNK ? nb - c0 : R4_CHUNK;
    for (int b = 0; b < n; b++) {
      if (q5 == 2) {   /* q8_1: no offset term (q >= 0); d_x and s_x 2^112 */
        const ae_block_q8_1 *x1 = (const ae_block_q8_1 *)xq + c0 + b;
        xa[b].nsum = 0; xa[b].dxs = ae_h2f_s(x1->d) * 0x1p112f; xa[b].sxs = ae_h2f_s(x1->s) * 0x1p112f;
      } else if (q5) prep_aux_m(x + c0 + b, xa + b, 16);
      else prep_aux(x + c0 + b, xa + b);
      if (!AE_RELAXED) prep_splats(x + c0 + b, xs + b);
    }
    for (int i = 0; i < gq; i++) {
      if (g0 + i + 3 * gq < g1) {
        const uint8_t *r[4]; v128 acc[4];
        for (int k = 0; k < 4; k++) { const int g = g0 + i + k * gq; r[k] = (const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * rec; acc[k] = c0 ? ae_load(R4_DST(g)) : wasm_f32x4_splat(0.0f); }
#if AE_RELAXED
        if (q5) group4s5(r, n, xqs + (size_t)c0 * xstride, xstride, xa, acc, q5, fused); else
#endif
        group4s(r, n, x + c0, xs, xa, acc, fused);
        for (int k = 0; k < 4; k++) ae_store(R4_DST(g0 + i + k * gq), acc[k]);
      } else for (int k = 0; k < 4; k++) {
        const int g = g0 + i + k * gq;
        if (g >= g1) break;
        float *d = R4_DST(g);
        ae_store(d, group((const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * rec, n, x + c0, xs, xa, c0 ? ae_load(d) : wasm_f32x4_splat(0.0f), q5, xqs + (size_t)c0 * xstride, xstride));
      }
    }
  }
#undef R4_DST
  for (int r = r0; r < r1; r++) {
    const int g = r >> 2;
    if (!(4 * g >= r0 && 4 * g + 4 <= r1)) y[r] = part[g == g0 ? 0 : 1][r & 3];
  }
}
void ae_matvec_rows_q4_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
#if AE_RELAXED
  if (ae_fused_dot & AE_FUSED_TILES) { matvec_r4(W, ncols, xq, y, r0, r1, 0, 1); return; }
#endif
  matvec_r4(W, ncols, xq, y, r0, r1, 0, 0);
}
#if AE_RELAXED
void ae_matvec_rows_q5_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  if (ae_fused_dot & AE_FUSED_TILES) { matvec_r4(W, ncols, xq, y, r0, r1, 1, 1); return; }
  matvec_r4(W, ncols, xq, y, r0, r1, 1, 0);
}
void ae_matvec_rows_q5_1_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  if (ae_fused_dot & AE_FUSED_TILES) { matvec_r4(W, ncols, xq, y, r0, r1, 2, 1); return; }
  matvec_r4(W, ncols, xq, y, r0, r1, 2, 0);
}
#else
/* The plain build repacks q5_0 into AE_Q5_0_X8 instead (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q5_0_r4, ae_matvec_q5_0_r4_ref)
AE_REF_ENTRY_POINTS(q5_1_r4, ae_matvec_q5_1_r4_ref)

#endif

/* ---- prefill GEMM ---- */
#define R4_GEMM_ROWS 128  /* rows per chunk (32 groups): their weights stay in cache while every token group passes (the
                             * activations' preparation is shared by more groups than with 64: 1.02-1.04x, session 14) */
/* GEMM rows r0..r1 outside whole 4-row groups: the matvec per token (it handles partial groups). Sets the whole
 * groups' range a0..a1; returns 0 when there is none (everything done). Used by both builds' GEMM. */
static int gemm_edges(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                      int r0, int r1, int *a0p, int *a1p, int q5) {
  return ae_group_gemm_edges(q5 == 2 ? ae_matvec_rows_q5_1_r4_simd128 : q5 ? ae_matvec_rows_q5_0_r4_simd128 : ae_matvec_rows_q4_0_r4_simd128,
                             W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, a0p, a1p);
}

#if AE_RELAXED
/* Relaxed: q4_0 in tiles of 2 groups x 3 or 4 tokens on unpacked records (gemm_u3g2 / gemm_u4g2 below; session 16:
 * each token's splats serve both groups, 1.02-1.05x session 14's 1 x 4 tile at 64 tokens, 1.20x at 17,
 * docs/PERFORMANCE.md "Session 16"), q5_0 / q5_1 R4 in tiles of 4 rows (one group) x 4 tokens. Per column chunk the k
 * tokens' activations are copied to one stack array (xt4 for 4: per block the tokens' 32 bytes, their offsets or
 * -sum8 sum(x) and d_x 2^112), so every splat of the tile is a load at a constant offset from one pointer. Per token
 * 8 splatted 4-byte activations x 8 ae_rdot16 give the 4 rows' i16 pair sums (as the matvec). Scheduling
 * (docs/DESIGN.md "Relaxed SIMD", V8 code generation): the tokens' i16 sums are stored to a volatile slot after each
 * chunk, which keeps TurboFan from hoisting the next chunk's loads above this chunk's arithmetic (16 SIMD registers on
 * x64). Per (row, token) the matvec's float sequence: bit-identical. */
#define R4_GEMM_CB 64     /* blocks per column chunk: 64 x 160 B = 10 KiB */
typedef struct { int8_t q[4][32]; union { int32_t nsum[4]; float sxs[4]; }; float dxs[4]; } xt4;   /* sxs: q5_1's s_x 2^112 */

/* The k tokens' blocks c0.. (n of them) into xt4 / xt8 records (q[k][32], nsum[k], dxs[k]: 40 k bytes). */
AE_INLINE void prep_tk(const uint8_t *const *xb, int n, int k, uint8_t *o, int kind) {
  for (int b = 0; b < n; b++, o += 40 * k)
    for (int t = 0; t < k; t++) {
      xaux a;
      const int8_t *q;
      if (kind == 2) {   /* q8_1 blocks: d_x and s_x 2^112 (in nsum's slot: q5_1 has no offset term) */
        const ae_block_q8_1 *x1 = (const ae_block_q8_1 *)xb[t] + b;
        const float sxs = ae_h2f_s(x1->s) * 0x1p112f;
        __builtin_memcpy(&a.nsum, &sxs, 4);
        a.dxs = ae_h2f_s(x1->d) * 0x1p112f;
        q = x1->qs;
      } else if (kind == 3) {   /* q4_0, the i16 tile: the two lanes' offsets (i16 pair) in nsum's slot */
        const ae_block_q8_0 *x0 = (const ae_block_q8_0 *)xb[t] + b;
        a.nsum = r4_off16(x0);
        a.dxs = ae_h2f_s(x0->d) * 0x1p112f;
        q = x0->qs;
      } else {
        const ae_block_q8_0 *x0 = (const ae_block_q8_0 *)xb[t] + b;
        prep_aux_m(x0, &a, kind ? 16 : R4_SUM8);
        q = x0->qs;
      }
      __builtin_memcpy(o + 32 * t, q, 32);
      __builtin_memcpy(o + 32 * k + 4 * t, &a.nsum, 4);
      __builtin_memcpy(o + 36 * k + 4 * t, &a.dxs, 4);
    }
}
_Static_assert(sizeof(xt4) == 160, "xt4 layout");

#define R4_SPL(t, o) wasm_v128_load32_splat(x->q[t] + (o))

/* The q5 tile (AE_Q5_0_R4 / AE_Q5_1_R4 records, one group x 4 tokens): the 5th bits or-ed into the unpacked chunks,
 * the i16 sums widened after chunks 1 and 3 (the first half's i32 sums in a volatile slot); per (row, token) the q5_0
 * R4 matvec's sequence. */
AE_INLINE void gemm_tile4_q5(const uint8_t *rec, int n, const xt4 *x, volatile v128 *acc, int kind) {
  volatile v128 sink[4], half[4];
  v128 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const v128 m = wasm_i8x16_splat(0x0f);
  for (int b = 0; b < n; b++, rec += R45_REC(kind), x++) {
    v128 s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
#pragma clang loop unroll(full)
    for (int j = 0; j < 4; j++) {
      v128 lo, hi;
      chunk5_vals(rec, j, m, kind, &lo, &hi);
      s0 = wasm_i16x8_add(s0, wasm_i16x8_add(ae_rdot16(R4_SPL(0, 8 * j), lo), ae_rdot16(R4_SPL(0, 8 * j + 4), hi)));
      s1 = wasm_i16x8_add(s1, wasm_i16x8_add(ae_rdot16(R4_SPL(1, 8 * j), lo), ae_rdot16(R4_SPL(1, 8 * j + 4), hi)));
      s2 = wasm_i16x8_add(s2, wasm_i16x8_add(ae_rdot16(R4_SPL(2, 8 * j), lo), ae_rdot16(R4_SPL(2, 8 * j + 4), hi)));
      s3 = wasm_i16x8_add(s3, wasm_i16x8_add(ae_rdot16(R4_SPL(3, 8 * j), lo), ae_rdot16(R4_SPL(3, 8 * j + 4), hi)));
      R45_AFTER_CHUNK(j);
    }
    const v128 dw = rec_scales(rec);
    if (kind == 2) {   /* q5_1: (d_w d_x) (float)sumi + m_w s_x, as fma_rec51 */
      const v128 mw = rec_scales(rec + 8);
#define R4_F(A, S, t) A = wasm_f32x4_add(A, wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_mul(dw, wasm_v128_load32_splat(&x->dxs[t])), \
        wasm_f32x4_convert_i32x4(wasm_i32x4_add(half[t], wasm_i32x4_extadd_pairwise_i16x8(S)))), wasm_f32x4_mul(mw, wasm_v128_load32_splat(&x->sxs[t]))))
      R4_F(a0, s0, 0); R4_F(a1, s1, 1); R4_F(a2, s2, 2); R4_F(a3, s3, 3);
#undef R4_F
    } else {
#define R4_F(A, S, t) A = wasm_f32x4_add(A, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_add(wasm_i32x4_add(half[t], \
        wasm_i32x4_extadd_pairwise_i16x8(S)), wasm_v128_load32_splat(&x->nsum[t]))), wasm_f32x4_mul(dw, wasm_v128_load32_splat(&x->dxs[t]))))
      R4_F(a0, s0, 0); R4_F(a1, s1, 1); R4_F(a2, s2, 2); R4_F(a3, s3, 3);
#undef R4_F
    }
    sink[0] = a0; sink[1] = a1; sink[2] = a2; sink[3] = a3;
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
}

/* The fused-dot tile's token records (gemm_u8_d32 below; ae_fused_dot, kernels.h): 8 tokens, each token's block
 * sum one chain of 8 ae_rdot starting at its -8 sum(x) (the same exact integer as the i16 tile's), then the same
 * float step per (row, token): bit-identical to the i16 tiles. For hosts whose i32 relaxed dot is one instruction
 * (vpdpbusd: its 4-5 cycle latency is why 8 tokens' chains run side by side; 4 tokens or the 4 chunks unrolled
 * measured slower in Chromium 156, as did stores to a volatile slot per chunk). The 8 float accumulators live in
 * memory (volatile): 8 chains + the nibbles fill x64's 16 vector registers. */
typedef struct { int8_t q[8][32]; int32_t nsum[8]; float dxs[8]; } xt8;

_Static_assert(sizeof(xt8) == 320, "xt8 layout");

/* q4_0's prefill tiles read the weights unpacked (ur4): per (row chunk, column chunk) every record's 4 chunks are
 * split into their low and high nibbles (bytes 0..15, the relaxed dot's 7-bit operand) and its 4 scales converted
 * (rec_scales) once, on the stack, then every token group's tiles load them. In the tiles that was 3 operations per
 * chunk and group (and, shift, and) and 3 per record for the scales, amortised over 3-4 tokens (8 in the fused tile);
 * now over all the tokens of the call. The same integers and floats in the same order: bit-identical. */
typedef struct { v128 q[8]; v128 dw; } ur4;   /* q[2j] / q[2j + 1]: chunk j's low / high nibbles; dw: rec_scales */
#define R4_UCB 32         /* blocks per column chunk of the unpacked tiles: 32 groups x 32 x 144 B = 144 KiB */
_Static_assert(sizeof(ur4) == 144, "ur4 layout");

/* Groups [0, ng) of the row chunk at rec0 (groups gs bytes apart), blocks [0, n) into U[g * R4_UCB + b] */
AE_INLINE void unpack_u(const uint8_t *rec0, size_t gs, int ng, int n, ur4 *U) {
  const v128 m = wasm_i8x16_splat(0x0f);
  for (int g = 0; g < ng; g++) {
    const uint8_t *rec = rec0 + (size_t)g * gs;
    ur4 *o = U + (size_t)g * R4_UCB;
    for (int b = 0; b < n; b++, rec += AE_R4_REC, o++) {
      for (int j = 0; j < 4; j++) {
        const v128 v = ae_load(rec + 8 + 16 * j);
        o->q[2 * j] = wasm_v128_and(v, m);
        o->q[2 * j + 1] = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
      }
      o->dw = rec_scales(rec);
    }
  }
}

/* The i16 tile on unpacked records: G groups (R4_UCB records apart) x K tokens (prep_tk's records, 40 K B each) */
#define R4_GKU(NAME, G, K)                                                                                           \
AE_INLINE void NAME(const ur4 *u, int n, const uint8_t *x, volatile v128 *acc) {                                     \
  volatile v128 sink[K * G];                                                                                         \
  for (int b = 0; b < n; b++, u++, x += 40 * K) {                                                                    \
    v128 s[K * G];                                                                                                   \
    for (int t = 0; t < K; t++) { const v128 o = wasm_v128_load32_splat(x + 32 * K + 4 * t); for (int g = 0; g < G; g++) s[K * g + t] = o; } \
    _Pragma("clang loop unroll(full)")                                                                               \
    for (int j = 0; j < 4; j++) {                                                                                    \
      v128 lo[G], hi[G];                                                                                             \
      for (int g = 0; g < G; g++) { lo[g] = u[g * R4_UCB].q[2 * j]; hi[g] = u[g * R4_UCB].q[2 * j + 1]; }           \
      _Pragma("clang loop unroll(full)")                                                                             \
      for (int t = 0; t < K; t++) {                                                                                  \
        const v128 xl = wasm_v128_load32_splat(x + 32 * t + 8 * j), xh = wasm_v128_load32_splat(x + 32 * t + 8 * j + 4); \
        for (int g = 0; g < G; g++) {                                                                                \
          s[K * g + t] = wasm_i16x8_add(s[K * g + t], wasm_i16x8_add(ae_rdot16(xl, lo[g]), ae_rdot16(xh, hi[g])));   \
          sink[K * g + t] = s[K * g + t];                                                                            \
        }                                                                                                            \
      }                                                                                                              \
    }                                                                                                                \
    for (int g = 0; g < G; g++) {                                                                                    \
      const v128 dw = u[g * R4_UCB].dw;                                                                              \
      for (int t = 0; t < K; t++)                                                                                    \
        acc[K * g + t] = wasm_f32x4_add(acc[K * g + t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(                     \
            wasm_i32x4_extadd_pairwise_i16x8(s[K * g + t])), wasm_f32x4_mul(dw, wasm_v128_load32_splat(x + 36 * K + 4 * t)))); \
    }                                                                                                                \
  }                                                                                                                  \
}
R4_GKU(gemm_u3g1, 1, 3)
R4_GKU(gemm_u3g2, 2, 3)
R4_GKU(gemm_u4g1, 1, 4)
R4_GKU(gemm_u4g2, 2, 4)

/* The fused tile (gemm_tile8_d32) on unpacked records */
AE_INLINE void gemm_u8_d32(const ur4 *u, int n, const xt8 *x, volatile v128 *acc) {
  for (int b = 0; b < n; b++, u++, x++) {
    v128 s[8];
    for (int t = 0; t < 8; t++) s[t] = wasm_v128_load32_splat(&x->nsum[t]);
    for (int j = 0; j < 4; j++) {
      const v128 lo = u->q[2 * j], hi = u->q[2 * j + 1];
      for (int t = 0; t < 8; t++) s[t] = ae_rdot(wasm_v128_load32_splat(x->q[t] + 8 * j + 4), hi, ae_rdot(wasm_v128_load32_splat(x->q[t] + 8 * j), lo, s[t]));
    }
    const v128 dw = u->dw;
    for (int t = 0; t < 8; t++)
      acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s[t]), wasm_f32x4_mul(dw, wasm_v128_load32_splat(&x->dxs[t]))));
  }
}

/* q4_0's rows [rc, re) of one column chunk (n records from c0, unpacked in U) for the kk tokens t0.. (nt real)
 * prepared in xs: i16 tiles of 2 groups x kk tokens and a last odd group (kk 3 / 4), or the fused tile (kk 8). */
AE_INLINE void q4_rows(const ur4 *U, int c0, int n, const uint8_t *xs, float *y, int y_stride, int t0, int nt,
                       int rc, int re, volatile v128 *acc, const int kk) {
  int r = rc;
  if (kk != 8)
    for (; r + 8 <= re; r += 8) {
      for (int g = 0; g < 2; g++)
        for (int t = 0; t < kk; t++) acc[kk * g + t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r + 4 * g) : wasm_f32x4_splat(0.0f);
      const ur4 *u = U + (size_t)((r - rc) / 4) * R4_UCB;
      if (kk == 4) gemm_u4g2(u, n, xs, acc);
      else gemm_u3g2(u, n, xs, acc);
      for (int g = 0; g < 2; g++)
        for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r + 4 * g, acc[kk * g + t]);
    }
  for (; r < re; r += 4) {
    for (int t = 0; t < kk; t++) acc[t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r) : wasm_f32x4_splat(0.0f);
    const ur4 *u = U + (size_t)((r - rc) / 4) * R4_UCB;
    if (kk == 8) gemm_u8_d32(u, n, (const xt8 *)xs, acc);
    else if (kk == 4) gemm_u4g1(u, n, xs, acc);
    else gemm_u3g1(u, n, xs, acc);
    for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r, acc[t]);
  }
}
/* q4_0's driver (k = 3: the i16 tiles of 4 and 3 tokens, ae_tile_tokens_43; k = 8: the fused tile): rows in chunks of
 * R4_GEMM_ROWS, columns in chunks of R4_UCB blocks (unpacked once), token groups of k prepared on the stack (a last
 * group of fewer tokens repeats its last token and stores only the real ones; partial sums cross column chunks
 * through y, exactly). */
AE_INLINE void gemm_q4(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                       int a0, int a1, int k) {
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  ur4 U[(R4_GEMM_ROWS / 4) * R4_UCB];
  xt8 xs[R4_UCB];
  volatile v128 acc[8];
  for (int rc = a0; rc < a1; rc += R4_GEMM_ROWS) {
    const int re = rc + R4_GEMM_ROWS < a1 ? rc + R4_GEMM_ROWS : a1;
    for (int c0 = 0; c0 < nb; c0 += R4_UCB) {
      const int n = nb - c0 < R4_UCB ? nb - c0 : R4_UCB;
      unpack_u((const uint8_t *)W + (size_t)rc * rs + (size_t)c0 * AE_R4_REC, 4 * rs, (re - rc) / 4, n, U);
      for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
        kk = k == 3 ? ae_tile_tokens_43(nvec - t0) : k;
        const int nt = nvec - t0 < kk ? nvec - t0 : kk;
        const uint8_t *xb[8];
        for (int t = 0; t < kk; t++) xb[t] = (const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride + (size_t)c0 * sizeof(ae_block_q8_0);
        prep_tk(xb, n, kk, (uint8_t *)xs, kk == 8 ? 0 : 3);
        if (kk == 8) q4_rows(U, c0, n, (const uint8_t *)xs, y, y_stride, t0, nt, rc, re, acc, 8);
        else if (kk == 4) q4_rows(U, c0, n, (const uint8_t *)xs, y, y_stride, t0, nt, rc, re, acc, 4);
        else q4_rows(U, c0, n, (const uint8_t *)xs, y, y_stride, t0, nt, rc, re, acc, 3);
      }
    }
  }
}
/* The q5 tiles' driver: rows in chunks of R4_GEMM_ROWS, token groups of 4 (a last group of fewer tokens repeats its
 * last token and stores only the real ones), column chunks whose 4 tokens' activations are prepared on the stack
 * (10 KiB; partial sums cross chunks through y, exactly). */
AE_INLINE void gemm_r4(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                       int a0, int a1, int q5) {
  const int nb = ncols / AE_QK4_0, cb = R4_GEMM_CB;
  const size_t rs = (size_t)nb * (q5 == 2 ? sizeof(ae_block_q5_1) : sizeof(ae_block_q5_0)),
               rsz = R45_REC(q5), xblk = q5 == 2 ? sizeof(ae_block_q8_1) : sizeof(ae_block_q8_0);
  xt4 xs[R4_GEMM_CB];
  volatile v128 acc[4];
  for (int rc = a0; rc < a1; rc += R4_GEMM_ROWS) {
    const int re = rc + R4_GEMM_ROWS < a1 ? rc + R4_GEMM_ROWS : a1;
    for (int t0 = 0; t0 < nvec; t0 += 4) {
      const int nt = nvec - t0 < 4 ? nvec - t0 : 4;
      for (int c0 = 0; c0 < nb; c0 += cb) {
        const int n = nb - c0 < cb ? nb - c0 : cb;
        const uint8_t *xb[4];
        for (int t = 0; t < 4; t++) xb[t] = (const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride + (size_t)c0 * xblk;
        prep_tk(xb, n, 4, (uint8_t *)xs, q5);
        for (int r = rc; r < re; r += 4) {
          for (int t = 0; t < 4; t++) acc[t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r) : wasm_f32x4_splat(0.0f);
          gemm_tile4_q5((const uint8_t *)W + (size_t)r * rs + (size_t)c0 * rsz, n, xs, acc, q5);
          for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r, acc[t]);
        }
      }
    }
  }
}
#undef R4_SPL

void ae_matmul_rows_q4_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;
  if (r0 >= r1 || nvec <= 0 || !gemm_edges(W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1, 0)) return;
  if (ae_fused_dot & AE_FUSED_TILES) gemm_q4(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 8);
  else gemm_q4(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 3);
}
void ae_matmul_rows_q5_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;
  if (r0 >= r1 || nvec <= 0 || !gemm_edges(W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1, 1)) return;
  gemm_r4(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 1);
}
void ae_matmul_rows_q5_1_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;
  if (r0 >= r1 || nvec <= 0 || !gemm_edges(W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1, 2)) return;
  gemm_r4(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 2);
}
#else
/* plain: tiles of 4 rows (one group) x 2 tokens; per record the weight chunks are loaded and their nibbles
 * unpacked once for the 2 tokens (a 4-token tile keeps 4 i16 sums + 4 accumulators + the nibbles live and spilled on
 * x64: 0.75-1.37x the file-layout tile, the 2-token one 1.05-1.22x; bench/repack-ab.mjs --gemm). Per (row, token)
 * the matvec's sequence, so each y equals ae_matvec bit for bit. */
#define R4_GEMM_CB 32     /* 2 tokens x (64 + 8) B per block, sized for 4: 9 KiB */

/* 2 tokens at a time (acc of 2 tokens + 2 i16 sums live: no spills on x64's 16 registers); the record's chunks are
 * loaded and unpacked once per token pair */
AE_INLINE void gemm_tile2(const uint8_t *rec, int n, const ae_block_q8_0 *x0, const ae_block_q8_0 *x1, const xsplat *xs, const xaux *xa,
                          v128 *acc0, v128 *acc1) {
  v128 a0 = *acc0, a1 = *acc1;
  for (int b = 0; b < n; b++, rec += AE_R4_REC) {
    const v128 dw = rec_scales(rec);
    (void)x0; (void)x1;
    v128 s0 = wasm_i32x4_splat(0), s1 = s0;
    for (int j = 0; j < 4; j++) {
      const v128 v = ae_load(rec + 8 + 16 * j);
      const v128 m0 = wasm_v128_and(v, wasm_i16x8_splat(0x000f)), m1 = wasm_v128_and(v, wasm_i16x8_splat(0x0f00));
      const v128 m2 = wasm_v128_and(v, wasm_i16x8_splat(0x00f0)), m3 = wasm_u16x8_shr(v, 12);
#define R4_T(S, t) do { const xsplat *p = xs + 2 * b + t; \
        S = wasm_i32x4_add(S, wasm_i32x4_add( \
          wasm_i32x4_add(wasm_i32x4_dot_i16x8(m0, wasm_v128_load32_splat((const int32_t *)&p->a + j)), \
                         wasm_i32x4_dot_i16x8(m1, wasm_v128_load32_splat((const int32_t *)&p->b + j))), \
          wasm_i32x4_add(wasm_i32x4_dot_i16x8(m2, wasm_v128_load32_splat((const int32_t *)&p->c + j)), \
                         wasm_i32x4_dot_i16x8(m3, wasm_v128_load32_splat((const int32_t *)&p->d + j))))); } while (0)
      R4_T(s0, 0); R4_T(s1, 1);
#undef R4_T
    }
    a0 = fma_rec(a0, s0, xa + 2 * b, dw);
    a1 = fma_rec(a1, s1, xa + 2 * b + 1, dw);
  }
  *acc0 = a0; *acc1 = a1;
}

void ae_matmul_rows_q4_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;
  if (r0 >= r1 || nvec <= 0 || !gemm_edges(W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1, 0)) return;
  const int nb = ncols / AE_QK4_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q4_0);
  xaux xa[4 * R4_GEMM_CB];
  xsplat xs[4 * R4_GEMM_CB];
  for (int rc = a0; rc < a1; rc += R4_GEMM_ROWS) {
    const int re = rc + R4_GEMM_ROWS < a1 ? rc + R4_GEMM_ROWS : a1;
    for (int t0 = 0; t0 < nvec; t0 += 2) {
      const int nt = nvec - t0 < 2 ? nvec - t0 : 2;
      for (int c0 = 0; c0 < nb; c0 += R4_GEMM_CB) {
        const int n = nb - c0 < R4_GEMM_CB ? nb - c0 : R4_GEMM_CB;
        const ae_block_q8_0 *x0 = (const ae_block_q8_0 *)((const uint8_t *)xq + (size_t)t0 * xq_stride) + c0;
        const ae_block_q8_0 *x1 = (const ae_block_q8_0 *)((const uint8_t *)xq + (size_t)(t0 + nt - 1) * xq_stride) + c0;
        for (int b = 0; b < n; b++) {
          prep_aux(x0 + b, xa + 2 * b); prep_aux(x1 + b, xa + 2 * b + 1);
          prep_splats(x0 + b, xs + 2 * b); prep_splats(x1 + b, xs + 2 * b + 1);
        }
        for (int r = rc; r < re; r += 4) {
          float *y0 = y + (size_t)t0 * y_stride + r, *y1 = y + (size_t)(t0 + 1) * y_stride + r;
          v128 c0v = c0 ? ae_load(y0) : wasm_f32x4_splat(0.0f), c1v = c0 && nt > 1 ? ae_load(y1) : wasm_f32x4_splat(0.0f);
          gemm_tile2((const uint8_t *)W + (size_t)r * rs + (size_t)c0 * AE_R4_REC, n, x0, x1, xs, xa, &c0v, &c1v);
          ae_store(y0, c0v);
          if (nt > 1) ae_store(y1, c1v);
        }
      }
    }
  }
}

#endif
