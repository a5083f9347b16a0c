/* q6_K weights x q8_K activations, plus q6_K dequantise (quantise: the reference quantiser).
 * Per super-block, exact integers: sumi = sum_j sc_j (sum(q x) - 32 bsums[j]) over the 16 sub-blocks of
 * 16 (q unsigned 0..63, the -32 offset folded through the activation's bsums); then in float
 *   acc += (d_w d_x) (float)sumi                              (exactly ae_vec_dot_q6_K_ref)
 * 6-bit values are assembled as bytes from ql nibbles and qh bit pairs (i16 shifts, byte masks). Relaxed build:
 * the bytes go straight into ae_rdot16 with the activation bytes as they are (no preparation), and each chunk's
 * sub-block scale is applied by i32x4.dot_i16x8 with sc in every i16 lane. Plain build: the bytes are split into
 * even / odd i16 lanes against an activation split once per pass (on the stack); two chunks' i32 sums (each
 * |t| <= 4 x 63 x 128 < 2^15) are narrowed into one i16x8 and multiplied by both scales with one dot_i16x8.
 * Matvec: 4 rows in the lanes, one from each quarter of the row range (four weight streams far apart, which DRAM
 * serves faster than one: docs/DESIGN.md "Decode matvecs: streams"), read super-block by super-block; their sums
 * reduced together and the float step run on the lanes with the 4 fp16 scales converted at once, accumulators in
 * registers. (Until session 10 the 4 lanes were 4 consecutive rows read one after the other with the super-block
 * sums on the stack, 4 such sets from the quarters in turn: on an AMD Zen 5 VM that read DRAM at 4-5 GB/s, a third
 * of this scheme's speed; docs/PERFORMANCE.md "Session 10".) Rows longer than one pass (plain build: > 16
 * super-blocks) and calls on fewer than 4 rows go super-block outer (8 rows inner). Every path uses the reference's
 * float sequence per row: bit-exact for any row range. V8 (11.x) notes: each group of 4 chunks' partial sum is stored to its own volatile slot (orders
 * the schedule, no spills); the block and activation pointers pass through an empty asm so clang folds the
 * constant offsets into the loads (without it every load costs an extra address add in V8's code). */
#include "simd128_util.h"

void ae_from_float_q6_K_simd128(const float *x, void *y, int n) { ae_from_float_q6_K_ref(x, y, n); }

AE_INLINE void decode_k(v128 l0, v128 l1, v128 hb, int k, v128 *e, v128 *o) {
  const v128 q = ae_q6_decode(l0, l1, hb, k);
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

#if AE_RELAXED
/* Relaxed build: the activation is used as it is (its bytes are ae_rdot16's signed operand, the 6-bit values the
 * 7-bit one): no preparation, any row length in one pass. */
typedef ae_block_q8_K xk;
#define AE_QK_CHUNK (1 << 24)   /* no activation preparation: any row length in one pass */
#define AE_QK_PREP 1
AE_INLINE const xk *prep(const ae_block_q8_K *x, int n, xk *xs) { (void)n; (void)xs; return x; }
AE_INLINE v128 xk_bs(const xk *x, int h) { return ae_load(x->bsums + 8 * h); }
#else
/* Plain build: X[2c], X[2c+1] = even / odd i16 of x[16c .. 16c+16); bs = bsums; prepared once per pass. */
typedef struct { v128 X[32]; v128 bs[2]; } xk;
#define AE_QK_CHUNK 16   /* super-blocks per pass: 16 * 544 B = 8.5 KiB of stack */
#define AE_QK_PREP AE_QK_CHUNK
AE_INLINE const xk *prep(const ae_block_q8_K *x, int n, xk *xs) {
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < 16; c++) {
      const v128 v = ae_load(x[i].qs + 16 * c);
      xs[i].X[2 * c] = ae_i8_even(v);
      xs[i].X[2 * c + 1] = ae_i8_odd(v);
    }
    xs[i].bs[0] = ae_load(x[i].bsums);
    xs[i].bs[1] = ae_load(x[i].bsums + 8);
  }
  return xs;
}
AE_INLINE v128 xk_bs(const xk *x, int h) { return x->bs[h]; }
/* i32x4 partial sums of sum(q x) over the 16 elements of chunk c */
AE_INLINE v128 chunk_dot(v128 l0, v128 l1, v128 hb, int k, const xk *xs, int c) {
  v128 e, o;
  decode_k(l0, l1, hb, k, &e, &o);
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(e, xs->X[2 * c]), wasm_i32x4_dot_i16x8(o, xs->X[2 * c + 1]));
}

/* [sc_i x 4, sc_{i+2} x 4] (i16 lanes) from the (sc, sc) pairs in the i32 lanes of sp, i = 0, 1 (plain build) */
AE_INLINE v128 scale_pair(v128 sp, int i) {
  return i ? wasm_i32x4_shuffle(sp, sp, 1, 1, 3, 3) : wasm_i32x4_shuffle(sp, sp, 0, 0, 2, 2);
}
#endif

/* The super-block's sumi as i32x4 lanes (their sum). Relaxed build: per chunk ae_rdot16 (one pmaddubsw in V8
 * 11.x; pair sums of |63 x 128| < 2^15) and i32x4.dot_i16x8 with sc_c in every i16 lane; plain: even / odd i16
 * dots times sc_c (i32x4.mul). */
AE_INLINE v128 row_sbv(const ae_block_q6_K *w, const xk *xs, int xl) {
  __asm__("" : "+r"(w)); __asm__("" : "+r"(xs));
  const v128 sc8 = ae_load(w->scales);
  const v128 sc16_lo = wasm_i16x8_extend_low_i8x16(sc8), sc16_hi = wasm_i16x8_extend_high_i8x16(sc8);
  const v128 off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(sc16_lo, xk_bs(xs, 0)), wasm_i32x4_dot_i16x8(sc16_hi, xk_bs(xs, 1)));
  v128 scp[4];
  ae_q6_scale_pairs(sc16_lo, sc16_hi, scp);
  /* 4 independent partial sums, each stored once: the stores order V8's schedule (no spills) without a
   * store-to-load dependency chain */
  volatile v128 part[5];
  part[4] = wasm_i32x4_shl(off, 5);   /* stored first: the bsums are used as soon as they are loaded (no spill) */
#if AE_RELAXED
  if (xl) {   /* AE_Q6_K_X: group G's 3 vectors give chunks c = 4G + i (i < 3) by an and, chunk 4G + 3 from their top bits */
#pragma clang loop unroll(full)
    for (int G = 0; G < 4; G++) {
      v128 u[4];
      ae_q6x_decode((const uint8_t *)w + 48 * G, u);
      v128 acc = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
      for (int i = 0; i < 4; i++) {
        const int c = 4 * G + i;
        acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(ae_rdot16(ae_load(xs->qs + 16 * c), u[i]), ae_lane_splat32(scp[G], c)));
      }
      part[G] = acc;
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
#if AE_RELAXED
      v128 acc = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
      for (int k = 0; k < 4; k++) {
        const int c = 8 * h + 2 * k + p;   /* 16-element chunk = scale index */
        acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(ae_rdot16(ae_load(xs->qs + 16 * c), ae_q6_decode(l0, l1, hb, k)), ae_lane_splat32(scp[c >> 2], c)));
      }
      part[2 * h + p] = acc;
#else
      /* chunks k, k + 1 (scales sc_c, sc_{c+2}): their i32 sums t (|t| <= 4 x 63 x 128 < 2^15) narrowed into one
       * i16x8 (exact) and multiplied by [sc_c x 4, sc_{c+2} x 4] with one i32x4.dot_i16x8 */
      part[2 * h + p] = wasm_i32x4_add(
          wasm_i32x4_dot_i16x8(wasm_i16x8_narrow_i32x4(chunk_dot(l0, l1, hb, 0, xs, 8 * h + p), chunk_dot(l0, l1, hb, 1, xs, 8 * h + 2 + p)), scale_pair(scp[2 * h], p)),
          wasm_i32x4_dot_i16x8(wasm_i16x8_narrow_i32x4(chunk_dot(l0, l1, hb, 2, xs, 8 * h + 4 + p), chunk_dot(l0, l1, hb, 3, xs, 8 * h + 6 + p)), scale_pair(scp[2 * h + 1], p)));
#endif
    }
  v128 acc_v = wasm_i32x4_sub(wasm_i32x4_splat(0), part[4]);
  for (int j = 0; j < 4; j++) acc_v = wasm_i32x4_add(acc_v, part[j]);
  return acc_v;
}
AE_INLINE int32_t row_sb(const ae_block_q6_K *w, const xk *xs, int xl) { return ae_hsum_i32(row_sbv(w, xs, xl)); }

/* Calls on fewer than 4 rows, and (plain build) rows longer than one pass: rows in groups of 8; for each
 * super-block the activation is prepared once (0.5 KiB) and used by the 8 rows, each keeping its float sum in
 * block order (the same arithmetic as the 4-row path). Measured (plain, 3072x8192, from DRAM): 2x faster than
 * the 4-row kernel over two column passes, which reads each row in two pieces. */
#define AE_KQ_ROWS 8
AE_INLINE void rows_sb_outer(const void *W, int nb, const ae_block_q8_K *x, float *y, int r0, int r1, int xl) {
  xk xs[1];
  for (int rg = r0; rg < r1; rg += AE_KQ_ROWS) {
    const int nr = r1 - rg < AE_KQ_ROWS ? r1 - rg : AE_KQ_ROWS;
    const ae_block_q6_K *w = (const ae_block_q6_K *)W + (size_t)rg * nb;
    float acc[AE_KQ_ROWS] = {0};
    for (int i = 0; i < nb; i++) {
      const xk *xp = prep(x + i, 1, xs);
      const float dx = x[i].d;
      for (int j = 0; j < nr; j++) acc[j] += (ae_h2f_s(w[(size_t)j * nb + i].d) * dx) * (float)row_sb(&w[(size_t)j * nb + i], xp, xl);
    }
    for (int j = 0; j < nr; j++) y[rg + j] = acc[j];
  }
}

/* 4 rows in the lanes (w[k]: row k's blocks), super-block by super-block: the 4 rows' sums reduced together and the
 * reference's float step acc += (d_w d_x) (float)sumi on the lanes with the 4 fp16 scales converted at once;
 * accumulators in registers. */
AE_INLINE v128 lanes4(const ae_block_q6_K *const w[4], int nb, const ae_block_q8_K *x, const xk *xp, int xl) {
  v128 acc = wasm_f32x4_splat(0.0f);
  for (int i = 0; i < nb; i++) {
    const v128 s0 = row_sbv(w[0] + i, &xp[i], xl), s1 = row_sbv(w[1] + i, &xp[i], xl);
    const v128 s2 = row_sbv(w[2] + i, &xp[i], xl), s3 = row_sbv(w[3] + i, &xp[i], xl);
    const v128 d = ae_gather4_h2f(&w[0][i].d, &w[1][i].d, &w[2][i].d, &w[3][i].d);
    const v128 s = wasm_f32x4_convert_i32x4(ae_reduce4_i32(s0, s1, s2, s3));
    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_mul(d, wasm_v128_load32_splat(&x[i].d)), s));
  }
  return acc;
}

/* xl: AE_Q6_K_X blocks (the relaxed build's layout), else q6_K's */
AE_INLINE void matvec_q6(const void *W, int ncols, const void *xq, float *y, int r0, int r1, int xl) {
  const int nb = ncols / AE_QK_K;
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  if (nb > AE_QK_CHUNK || r1 - r0 < 4) { rows_sb_outer(W, nb, x, y, r0, r1, xl); return; }
  xk xs[AE_QK_PREP];
  const xk *xp = prep(x, nb, xs);
  const ae_block_q6_K *w0 = (const ae_block_q6_K *)W;
  const int nset = (r1 - r0) / 4;
  /* lanes = rows r0 + i + k nset, k < 4: one from each quarter of the row range (four streams far apart) */
  for (int i = 0; i < nset; i++) {
    const ae_block_q6_K *w[4];
    for (int k = 0; k < 4; k++) w[k] = w0 + (size_t)(r0 + i + k * nset) * nb;
    const v128 o = lanes4(w, nb, x, xp, xl);
    y[r0 + i] = wasm_f32x4_extract_lane(o, 0); y[r0 + i + nset] = wasm_f32x4_extract_lane(o, 1);
    y[r0 + i + 2 * nset] = wasm_f32x4_extract_lane(o, 2); y[r0 + i + 3 * nset] = wasm_f32x4_extract_lane(o, 3);
  }
  for (int r = r0 + 4 * nset; r < r1; r++) {
    const ae_block_q6_K *w = w0 + (size_t)r * nb;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) sum += (ae_h2f_s(w[i].d) * x[i].d) * (float)row_sb(&w[i], &xp[i], xl);
    y[r] = sum;
  }
}
void ae_matvec_rows_q6_K_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  matvec_q6(W, ncols, xq, y, r0, r1, 0);
}

void ae_vec_dot_q6_K_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q6_K_simd128(w, n, x, s, 0, 1);
}

/* ---- AE_Q6_K_X (kernels.h): the repack (in place, both builds: tests and tools) and the relaxed build's matvec ---- */
void ae_repack_q6_K_x(void *W, size_t nblocks) {
  for (size_t b = 0; b < nblocks; b++) {
    ae_block_q6_K *w = (ae_block_q6_K *)W + b;
    v128 q[16];   /* q[c] = the values 16c .. 16c + 15 (unsigned 6-bit) */
    ae_q6_values(w, q);
#pragma clang loop unroll(full)
    for (int G = 0; G < 4; G++) ae_q6x_pack(q + 4 * G, (uint8_t *)w + 48 * G);   /* u[3]'s bits 2i, 2i + 1 -> bits 6-7 of V_i */
  }
}
#if AE_RELAXED
void ae_matvec_rows_q6_K_x_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  matvec_q6(W, ncols, xq, y, r0, r1, 1);
}
#else
/* The plain build keeps q6_K in the file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q6_K_x, ae_matvec_q6_K_x_ref)
#endif
