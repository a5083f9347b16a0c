/* q6_K weights repacked at load into groups of 4 rows (kernels.h AE_Q6_K_R4; the relaxed build's layout for rows in
 * multiples of 4) x q8_K activations: the repack itself (SIMD, in place), the matvec (decode) and the batched GEMM
 * (prefill). Bit-exact with ae_vec_dot_q6_K_ref on the unpacked rows (ae_matvec_q6_K_r4_ref) for any row range, and so
 * with the q6_K kernels of either build.
 *
 * A record (840 B) = super-block b of the group's 4 rows: d_k (f16), the scales in pairs (pair p: sc_k[2p], sc_k[2p + 1]
 * for k = 0..3), then per sub-block j (16 elements) 48 B: 4 chunks of 16 B (row k's bytes 4k..4k+3 = its values
 * 16j + 4c + i) packed into 3 vectors as AE_Q6_K_X packs a group (ae_q6x_decode: 11 operations per 64 values). Per
 * chunk the activation's bytes x[16j + 4c ..] are splatted (v128.load32_splat) as the i8 operand of
 * i16x8.relaxed_dot_i8x16_i7x16_s against the values (0..63: the 7-bit operand, exact and host-independent); i16
 * lanes 2k, 2k+1 hold row k's pair sums; two chunks add up in i16 (4 products of |63 x 128| per lane < 2^15), and
 * i32x4.dot_i16x8_s against (sc_k[j], sc_k[j]) in lanes 2k, 2k+1 (one shuffle of the pair's sign-extending load)
 * adds sc_k[j] sum(q x) to row lane k. The -32 offset: 32 sum_j sc_k[j] bsums[j], one i32x4.dot_i16x8_s per scale pair
 * against the pair's bsums (one load32_splat). Then per row lane the reference's float sequence
 *   acc += (d_w d_x) (float)sumi
 * with d_w converted exactly (ae_h4_f32; finite halves, which the repack guarantees).
 *
 * The matvec reads 4 groups from the 4 quarters of its row range record by record, sub-block-major within a record
 * (the sub-block's 4 splats loaded once for the 4 groups; each group's sums kept in volatile slots: see
 * dot_q4_0_r4_simd128.c group4s). The plain build keeps q6_K (model.c): its entry points here run the reference. */
#include "simd128_util.h"

/* ---- repack (in place; both builds: tests and tools) ---- */
/* One record from the 4 rows' super-block b (p[k] = row k's block). */
AE_INLINE void pack_rec_k6(const uint8_t *const p[4], uint8_t *rec) {
  const ae_block_q6_K *const *bk = (const ae_block_q6_K *const *)p;
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, &bk[k]->d, 2);
  {   /* scales: a 4 x 8 transpose of 16-bit pairs */
    const v128 s0 = ae_load(bk[0]->scales), s1 = ae_load(bk[1]->scales), s2 = ae_load(bk[2]->scales), s3 = ae_load(bk[3]->scales);
    const v128 a = wasm_i16x8_shuffle(s0, s1, 0, 8, 1, 9, 2, 10, 3, 11), b = wasm_i16x8_shuffle(s2, s3, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128 c = wasm_i16x8_shuffle(s0, s1, 4, 12, 5, 13, 6, 14, 7, 15), d = wasm_i16x8_shuffle(s2, s3, 4, 12, 5, 13, 6, 14, 7, 15);
    ae_store(rec + 8, wasm_i32x4_shuffle(a, b, 0, 4, 1, 5)); ae_store(rec + 24, wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    ae_store(rec + 40, wasm_i32x4_shuffle(c, d, 0, 4, 1, 5)); ae_store(rec + 56, wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  }
  v128 q[4][16];
  for (int k = 0; k < 4; k++) ae_q6_values(bk[k], q[k]);
  for (int j = 0; j < 16; j++) {
    v128 u[4];
    ae_transpose32_4x4(q[0][j], q[1][j], q[2][j], q[3][j], u);   /* u[c] = chunk c: row k's values 16j + 4c .. */
    ae_q6x_pack(u, rec + 72 + 48 * j);
  }
}

static void pack_rec_k6_a(const uint8_t *const p[4], uint8_t *rec, int arg) { (void)arg; pack_rec_k6(p, rec); }
int ae_repack_q6_K_r4(void *W, int nrows, int ncols, void *tmp) {
  return ae_group_repack(W, nrows, ncols / AE_QK_K, sizeof(ae_block_q6_K), AE_RK6_REC, tmp, 208, -1, pack_rec_k6_a, 0);
}

#if AE_RELAXED
/* i16 lanes 2k, 2k+1 = scale r (0, 1) of the pair in E (lanes 2k + r = sc_k[2p + r]) */
AE_INLINE v128 rk6_p(v128 E, int r) {
  return r ? wasm_i16x8_shuffle(E, E, 1, 1, 3, 3, 5, 5, 7, 7) : wasm_i16x8_shuffle(E, E, 0, 0, 2, 2, 4, 4, 6, 6);
}
#define RK6_P(E, r) rk6_p(E, r)
/* the 4 rows' sum(q x) of sub-block j, scaled: i32 lane k = sc_k[j] sum over the sub-block of q x (q unsigned) */
AE_INLINE v128 rk6_sub(const uint8_t *rec, int j, v128 P, v128 x0, v128 x1, v128 x2, v128 x3) {
  v128 u[4];
  ae_q6x_decode(rec + 72 + 48 * j, u);
  const v128 s01 = wasm_i16x8_add(ae_rdot16(x0, u[0]), ae_rdot16(x1, u[1]));
  const v128 s23 = wasm_i16x8_add(ae_rdot16(x2, u[2]), ae_rdot16(x3, u[3]));
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(s01, P), wasm_i32x4_dot_i16x8(s23, P));
}
/* rk6_sub with the fused dot (kernels.h ae_fused_dot): the 4 chunks' sums in i32 lanes, times sc_k[j] (S: i32 lane k) */
AE_INLINE v128 rk6_sub32(const uint8_t *rec, int j, v128 S, v128 x0, v128 x1, v128 x2, v128 x3) {
  v128 u[4];
  ae_q6x_decode(rec + 72 + 48 * j, u);
  return wasm_i32x4_mul(ae_rdot(x3, u[3], ae_rdot(x2, u[2], ae_rdot(x1, u[1], ae_rdot(x0, u[0], wasm_i32x4_splat(0))))), S);
}
/* scale r (0, 1) of the pair in E (i16 lanes 2k + r) as i32 lane k */
AE_INLINE v128 rk6_s32(v128 E, int r) { return r ? wasm_i32x4_shr(E, 16) : wasm_i32x4_shr(wasm_i32x4_shl(E, 16), 16); }
/* acc += (d_w d_x) (float)(sq - 32 off) per row lane */
AE_INLINE v128 rk6_fma(v128 acc, v128 sq, v128 off, const uint8_t *rec, float dx) {
  const v128 dall = wasm_f32x4_mul(ae_h4_f32(rec), wasm_f32x4_splat(dx));
  return wasm_f32x4_add(acc, wasm_f32x4_mul(dall, wasm_f32x4_convert_i32x4(wasm_i32x4_sub(sq, wasm_i32x4_shl(off, 5)))));
}
#define RK6_X(q, j, c) wasm_v128_load32_splat((q) + 16 * (j) + 4 * (c))

/* One group, super-blocks [0, n) */
AE_INLINE v128 group_k6(const uint8_t *rec, int n, const ae_block_q8_K *x, v128 acc) {
  for (int b = 0; b < n; b++, rec += AE_RK6_REC) {
    __asm__("" : "+r"(rec));
    const int8_t *q = x[b].qs;
    v128 sq = wasm_i32x4_splat(0), off = sq;
#pragma clang loop unroll(full)
    for (int p = 0; p < 8; p++) {
      const v128 E = wasm_i16x8_load8x8(rec + 8 + 8 * p);
      off = wasm_i32x4_add(off, wasm_i32x4_dot_i16x8(E, wasm_v128_load32_splat(x[b].bsums + 2 * p)));
#pragma clang loop unroll(full)
      for (int r = 0; r < 2; r++) {
        const int j = 2 * p + r;
        sq = wasm_i32x4_add(sq, rk6_sub(rec, j, RK6_P(E, r), RK6_X(q, j, 0), RK6_X(q, j, 1), RK6_X(q, j, 2), RK6_X(q, j, 3)));
      }
    }
    acc = rk6_fma(acc, sq, off, rec, x[b].d);
  }
  return acc;
}
/* Four groups far apart, record by record, sub-block-major within a record (see the top); the sums wait in volatile
 * slots (touched once per sub-block). */
AE_INLINE void group4_k6(const uint8_t *const r[4], int n, const ae_block_q8_K *x, v128 acc[4], const int fused) {
  volatile v128 sq[4], off[4];
  for (int b = 0; b < n; b++) {
    /* the record pointers opaque: every load takes a constant offset (DESIGN.md "Repacked weights") */
    const uint8_t *p0 = r[0] + (size_t)b * AE_RK6_REC, *p1 = r[1] + (size_t)b * AE_RK6_REC;
    const uint8_t *p2 = r[2] + (size_t)b * AE_RK6_REC, *p3 = r[3] + (size_t)b * AE_RK6_REC;
    __asm__("" : "+r"(p0)); __asm__("" : "+r"(p1)); __asm__("" : "+r"(p2)); __asm__("" : "+r"(p3));
    const int8_t *q = x[b].qs;
    const int16_t *bs = x[b].bsums;
    sq[0] = sq[1] = sq[2] = sq[3] = wasm_i32x4_splat(0);
    off[0] = off[1] = off[2] = off[3] = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
    for (int p = 0; p < 8; p++) {
      const v128 bp = wasm_v128_load32_splat(bs + 2 * p);
      const v128 E0 = wasm_i16x8_load8x8(p0 + 8 + 8 * p), E1 = wasm_i16x8_load8x8(p1 + 8 + 8 * p);
      const v128 E2 = wasm_i16x8_load8x8(p2 + 8 + 8 * p), E3 = wasm_i16x8_load8x8(p3 + 8 + 8 * p);
      off[0] = wasm_i32x4_add(off[0], wasm_i32x4_dot_i16x8(E0, bp)); off[1] = wasm_i32x4_add(off[1], wasm_i32x4_dot_i16x8(E1, bp));
      off[2] = wasm_i32x4_add(off[2], wasm_i32x4_dot_i16x8(E2, bp)); off[3] = wasm_i32x4_add(off[3], wasm_i32x4_dot_i16x8(E3, bp));
#pragma clang loop unroll(full)
      for (int rr = 0; rr < 2; rr++) {
        const int j = 2 * p + rr;
        const v128 x0 = RK6_X(q, j, 0), x1 = RK6_X(q, j, 1), x2 = RK6_X(q, j, 2), x3 = RK6_X(q, j, 3);
        if (fused) {
          sq[0] = wasm_i32x4_add(sq[0], rk6_sub32(p0, j, rk6_s32(E0, rr), x0, x1, x2, x3));
          sq[1] = wasm_i32x4_add(sq[1], rk6_sub32(p1, j, rk6_s32(E1, rr), x0, x1, x2, x3));
          sq[2] = wasm_i32x4_add(sq[2], rk6_sub32(p2, j, rk6_s32(E2, rr), x0, x1, x2, x3));
          sq[3] = wasm_i32x4_add(sq[3], rk6_sub32(p3, j, rk6_s32(E3, rr), x0, x1, x2, x3));
        } else {
          sq[0] = wasm_i32x4_add(sq[0], rk6_sub(p0, j, RK6_P(E0, rr), x0, x1, x2, x3));
          sq[1] = wasm_i32x4_add(sq[1], rk6_sub(p1, j, RK6_P(E1, rr), x0, x1, x2, x3));
          sq[2] = wasm_i32x4_add(sq[2], rk6_sub(p2, j, RK6_P(E2, rr), x0, x1, x2, x3));
          sq[3] = wasm_i32x4_add(sq[3], rk6_sub(p3, j, RK6_P(E3, rr), x0, x1, x2, x3));
        }
      }
    }
    const float dx = x[b].d;
    acc[0] = rk6_fma(acc[0], sq[0], off[0], p0, dx); acc[1] = rk6_fma(acc[1], sq[1], off[1], p1, dx);
    acc[2] = rk6_fma(acc[2], sq[2], off[2], p2, dx); acc[3] = rk6_fma(acc[3], sq[3], off[3], p3, dx);
  }
}

void ae_matvec_rows_q6_K_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * sizeof(ae_block_q6_K);
  const ae_block_q8_K *x = (const ae_block_q8_K *)xq;
  const int g0 = r0 >> 2, g1 = (r1 + 3) >> 2;   /* groups [g0, g1); the first / last may be partial */
  const int gq = (g1 - g0 + 3) / 4;               /* group g0 + i is read together with g0 + i + k gq, k < 4 */
  _Alignas(16) float part[2][4];
#define RK6_DST(g) ((4 * (g) >= r0 && 4 * (g) + 4 <= r1) ? y + 4 * (g) : part[(g) == g0 ? 0 : 1])
  for (int i = 0; i < gq; i++) {
    if (g0 + i + 3 * gq < g1) {
      const uint8_t *r[4]; v128 acc[4];
      for (int k = 0; k < 4; k++) { r[k] = (const uint8_t *)W + (size_t)(g0 + i + k * gq) * 4 * rs; acc[k] = wasm_f32x4_splat(0.0f); }
      if (ae_fused_dot & AE_FUSED_TILES) group4_k6(r, nb, x, acc, 1);
      else group4_k6(r, nb, x, acc, 0);
      for (int k = 0; k < 4; k++) ae_store(RK6_DST(g0 + i + k * gq), acc[k]);
    } else for (int k = 0; k < 4; k++) {
      const int g = g0 + i + k * gq;
      if (g >= g1) break;
      ae_store(RK6_DST(g), group_k6((const uint8_t *)W + (size_t)g * 4 * rs, nb, x, wasm_f32x4_splat(0.0f)));
    }
  }
#undef RK6_DST
  for (int r = r0; r < r1; r++) {
    const int g = r >> 2;
    if (!(4 * g >= r0 && 4 * g + 4 <= r1)) y[r] = part[g == g0 ? 0 : 1][r & 3];
  }
}

/* ---- prefill GEMM: tiles of 4 rows (one group) x 4 tokens (x 3 where the token count needs it: ae_tile_tokens_43).
 * Per column chunk the tokens' quants, bsums and d are copied to one stack array (every splat a load at a constant
 * offset from one pointer); per record each sub-block is decoded once for the tile's tokens, per token four splats,
 * four relaxed dots and two scale dots; the tokens' sums go to volatile slots after each sub-block (as the matvec).
 * Per (row, token) the matvec's integer sums and float sequence: bit-identical. ---- */
#define RK6_GEMM_ROWS 64   /* rows per chunk (16 groups) */
#define RK6_GEMM_CB 8      /* super-blocks per column chunk: 8 x 4 x (256 + 32 + 16) B = 9.5 KiB */
typedef struct { int8_t q[4][256]; int16_t bs[4][16]; float d[4]; int32_t pad[4]; } rk6t;

AE_INLINE void tile_k6(const uint8_t *rec, int n, const rk6t *x, volatile v128 *acc, const int T, const int F) {
  volatile v128 sq[4], off[4];
  for (int b = 0; b < n; b++, rec += AE_RK6_REC, x++) {
    for (int t = 0; t < T; t++) sq[t] = wasm_i32x4_splat(0);
    for (int t = 0; t < T; t++) off[t] = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
    for (int p = 0; p < 8; p++) {
      const v128 E = wasm_i16x8_load8x8(rec + 8 + 8 * p);
#pragma clang loop unroll(full)
      for (int t = 0; t < T; t++) off[t] = wasm_i32x4_add(off[t], wasm_i32x4_dot_i16x8(E, wasm_v128_load32_splat(x->bs[t] + 2 * p)));
#pragma clang loop unroll(full)
      for (int rr = 0; rr < 2; rr++) {
        const int j = 2 * p + rr;
        const v128 P = RK6_P(E, rr);
        v128 u[4];
        ae_q6x_decode(rec + 72 + 48 * j, u);
        if (F) {   /* the fused dot (kernels.h ae_fused_dot): per token two chains of 2 i32 dots, added, times sc_k[j] */
          const v128 S = rk6_s32(E, rr), z = wasm_i32x4_splat(0);
#pragma clang loop unroll(full)
          for (int t = 0; t < T; t++) {
            const int8_t *q = x->q[t];
            const v128 a = wasm_i32x4_add(ae_rdot(RK6_X(q, j, 1), u[1], ae_rdot(RK6_X(q, j, 0), u[0], z)), ae_rdot(RK6_X(q, j, 3), u[3], ae_rdot(RK6_X(q, j, 2), u[2], z)));
            sq[t] = wasm_i32x4_add(sq[t], wasm_i32x4_mul(a, S));
          }
          continue;
        }
#pragma clang loop unroll(full)
        for (int t = 0; t < T; t++) {
          const int8_t *q = x->q[t];
          const v128 s01 = wasm_i16x8_add(ae_rdot16(RK6_X(q, j, 0), u[0]), ae_rdot16(RK6_X(q, j, 1), u[1]));
          const v128 s23 = wasm_i16x8_add(ae_rdot16(RK6_X(q, j, 2), u[2]), ae_rdot16(RK6_X(q, j, 3), u[3]));
          sq[t] = wasm_i32x4_add(sq[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(s01, P), wasm_i32x4_dot_i16x8(s23, P)));
        }
      }
    }
    for (int t = 0; t < T; t++) acc[t] = rk6_fma(acc[t], sq[t], off[t], rec, x->d[t]);
  }
}

void ae_matmul_rows_q6_K_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;   /* whole groups; the rows outside them: the matvec per token */
  if (r0 >= r1 || nvec <= 0 || !ae_group_gemm_edges(ae_matvec_rows_q6_K_r4_simd128, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1)) return;
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * sizeof(ae_block_q6_K);
  rk6t xs[RK6_GEMM_CB];
  volatile v128 acc[4];
  for (int rc = a0; rc < a1; rc += RK6_GEMM_ROWS) {
    const int re = rc + RK6_GEMM_ROWS < a1 ? rc + RK6_GEMM_ROWS : a1;
    for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
      kk = ae_tile_tokens_43(nvec - t0);
      const int nt = nvec - t0 < kk ? nvec - t0 : kk;
      for (int c0 = 0; c0 < nb; c0 += RK6_GEMM_CB) {
        const int n = nb - c0 < RK6_GEMM_CB ? nb - c0 : RK6_GEMM_CB;
        for (int t = 0; t < kk; t++) {   /* a last group of fewer tokens repeats its last token (only real ones stored) */
          const ae_block_q8_K *xb = (const ae_block_q8_K *)((const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride) + c0;
          for (int b = 0; b < n; b++) {
            __builtin_memcpy(xs[b].q[t], xb[b].qs, 256);
            __builtin_memcpy(xs[b].bs[t], xb[b].bsums, 32);
            xs[b].d[t] = xb[b].d;
          }
        }
        for (int r = rc; r < re; r += 4) {
          for (int t = 0; t < kk; t++) acc[t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r) : wasm_f32x4_splat(0.0f);
          const uint8_t *w = (const uint8_t *)W + (size_t)r * rs + (size_t)c0 * AE_RK6_REC;
          if (ae_fused_dot & AE_FUSED_TILES) { if (kk == 4) tile_k6(w, n, xs, acc, 4, 1); else tile_k6(w, n, xs, acc, 3, 1); }
          else if (kk == 4) tile_k6(w, n, xs, acc, 4, 0);   /* kk a constant in each copy */
          else tile_k6(w, n, xs, acc, 3, 0);
          for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r, acc[t]);
        }
      }
    }
  }
}
#else
/* The plain build keeps q6_K in the file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q6_K_r4, ae_matvec_q6_K_r4_ref)
#endif
