/* q8_0 weights repacked at load into groups of 4 rows (kernels.h AE_Q8_0_R4; the relaxed build's layout) x q8_0
 * activations: the repack itself (SIMD, in place), the matvec (decode) and the batched GEMM (prefill). Bit-exact with
 * ae_vec_dot_q8_0_ref on the unpacked rows (ae_matvec_q8_0_r4_ref) for any row range, and so with the q8_0 kernels of
 * either build.
 *
 * A record (136 B) = block b of the group's 4 rows: 4 f16 scales, then chunks j = 0..7 of 16 B, row k's elements
 * 4j..4j+3 at bytes 4k..4k+3. Per block, the activation is prepared once: |x| (0..127, the q8_0 quantiser's range:
 * the 7-bit operand), the sign masks m (0xff where x < 0) and c = sum(|x| over x < 0). Per chunk j, |x[4j..4j+3]| and
 * m[4j..4j+3] are splatted (v128.load32_splat) and
 *   s = i32x4.relaxed_dot_i8x16_i7x16_add(w ^ m, |x|, s)
 * adds the 4 rows' sums in the lanes: w ^ m = -w - 1 where x < 0, so sum((w ^ m) |x|) + c = sum(w x), exact for any
 * weight byte and independent of the host (the i7 operand in range). s starts at c; then per row lane, in block order,
 * the reference's float sequence acc += (float)sumi * (d_w * d_x), the scales converted as dot_q4_0_r4_simd128.c's
 * (d_w 2^-112 against d_x 2^112: finite halves, which the repack guarantees).
 *
 * The matvec reads 4 groups from the 4 quarters of its row range record by record, chunk-major within a record (the
 * chunk's two splats loaded once for the 4 groups, the 4 sums stored to a volatile slot after each chunk: TurboFan
 * otherwise hoists the record's loads and spills; see dot_q4_0_r4_simd128.c group4s). Per 16 weight bytes: a load, a
 * xor and the relaxed dot (ae_rdot_w: pmaddubsw + pmaddwd + paddd in V8 without AVX-VNNI), where the q8_0
 * file layout's matvec needs two i32x4.dot_i16x8 with their unpacking, and transposes its 4 rows' sums per block.
 * The plain build keeps q8_0 (model.c): its entry points here run the reference. */
#include "iq4_simd128.h"

/* ---- repack (in place; both builds: tests and tools) ---- */
/* One record from the 4 rows' block b (p[k] = row k's block): a 4x4 transpose of 32-bit words per 16-byte half. */
AE_INLINE void pack_rec8(const uint8_t *const p[4], uint8_t *rec) {
  for (int h = 0; h < 2; h++) {
    const v128 r0 = ae_load(p[0] + 2 + 16 * h), r1 = ae_load(p[1] + 2 + 16 * h), r2 = ae_load(p[2] + 2 + 16 * h), r3 = ae_load(p[3] + 2 + 16 * h);
    const v128 t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7);
    const v128 t2 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
    uint8_t *o = rec + 8 + 64 * h;
    wasm_v128_store(o, wasm_i64x2_shuffle(t0, t2, 0, 2));
    wasm_v128_store(o + 16, wasm_i64x2_shuffle(t0, t2, 1, 3));
    wasm_v128_store(o + 32, wasm_i64x2_shuffle(t1, t3, 0, 2));
    wasm_v128_store(o + 48, wasm_i64x2_shuffle(t1, t3, 1, 3));
  }
  for (int k = 0; k < 4; k++) __builtin_memcpy(rec + 2 * k, p[k], 2);
}

static void pack_rec8_a(const uint8_t *const p[4], uint8_t *rec, int arg) { (void)arg; pack_rec8(p, rec); }
int ae_repack_q8_0_r4(void *W, int nrows, int ncols, void *tmp) {
  return ae_group_repack(W, nrows, ncols / AE_QK8_0, sizeof(ae_block_q8_0), AE_R8_REC, tmp, 0, -1, pack_rec8_a, 0);
}

#if AE_RELAXED
/* One token's block, prepared: |x|, the sign masks, c = sum(|x| over x < 0), d_x 2^112 (80 B). */
typedef struct { int8_t ax[32], mx[32]; int32_t c; float dxs; int32_t pad[2]; } r8x;
_Static_assert(sizeof(r8x) == 80, "r8x layout");

AE_INLINE void prep8_qs(const int8_t *qs, r8x *o) {   /* 32 activation bytes (a q8_0 block's, a q8_K sub-block's) */
  const v128 a = ae_load(qs), c = ae_load(qs + 16), z = wasm_i32x4_splat(0);
  const v128 aa = wasm_i8x16_abs(a), ac = wasm_i8x16_abs(c), ma = wasm_i8x16_lt(a, z), mc = wasm_i8x16_lt(c, z);
  ae_store(o->ax, aa); ae_store(o->ax + 16, ac); ae_store(o->mx, ma); ae_store(o->mx + 16, mc);
  const v128 n = wasm_i16x8_add(wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(aa, ma)), wasm_u16x8_extadd_pairwise_u8x16(wasm_v128_and(ac, mc)));
  o->c = ae_hsum_i32(wasm_i32x4_extadd_pairwise_i16x8(n));
}
AE_INLINE void prep8(const ae_block_q8_0 *x, r8x *o) {
  prep8_qs(x->qs, o);
  o->dxs = ae_h2f_s(x->d) * 0x1p112f;
}

/* the 4 scales of a record: d_w 2^-112 as f32 (exact for finite halves) */
AE_INLINE v128 rec_scales8(const uint8_t *rec) { return ae_h4_scaled(rec); }
AE_INLINE v128 fma8(v128 acc, v128 s, const r8x *x, const uint8_t *rec) {
  return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), wasm_f32x4_mul(rec_scales8(rec), wasm_v128_load32_splat(&x->dxs))));
}
/* s + the 4 rows' sums of chunk v against |x| (xa) with the signs moved by xm: with f (ae_fused_dot & AE_FUSED_R8, a
 * constant after inlining: two specialisations) the i32 relaxed dot itself (one vpdpbusd on an AVX-VNNI host), else
 * ae_rdot_w (simd128_util.h) */
AE_INLINE v128 r8_step(v128 s, v128 v, v128 xm, v128 xa, v128 ones, const int f) {
  return f ? ae_rdot(wasm_v128_xor(v, xm), xa, s) : ae_rdot_w(wasm_v128_xor(v, xm), xa, s, ones);
}
#define R8_CHUNK 512   /* blocks per column chunk of the matvec (40 KiB of prepared activations at most): a whole row up to
                        * 16384 columns, so each group is read as one run (shorter chunks broke the 4 streams: 0.6x from DRAM) */
#define R8_DOT(s, p, j, xa, xm) r8_step(s, ae_load((p) + 8 + 16 * (j)), xm, xa, ones, f)

/* One group, blocks [0, n): acc += its 4 rows' block terms. */
AE_INLINE v128 group8(const uint8_t *rec, int n, const r8x *x, v128 acc, const int f) {
  const v128 ones = ae_i16_ones();
  for (int b = 0; b < n; b++, rec += AE_R8_REC, x++) {
    v128 s = wasm_v128_load32_splat(&x->c);
#pragma clang loop unroll(full)
    for (int j = 0; j < 8; j++) s = R8_DOT(s, rec, j, wasm_v128_load32_splat(x->ax + 4 * j), wasm_v128_load32_splat(x->mx + 4 * j));
    acc = fma8(acc, s, x, rec);
  }
  return acc;
}
/* Four groups far apart, record by record, chunk-major within a record (see the top). */
AE_INLINE void group4s8(const uint8_t *const r[4], int n, const r8x *x, v128 acc[4], const int f) {
  volatile v128 sink[4];
  const v128 ones = ae_i16_ones();
  v128 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const uint8_t *p0 = r[0], *p1 = r[1], *p2 = r[2], *p3 = r[3];
  for (int b = 0; b < n; b++, p0 += AE_R8_REC, p1 += AE_R8_REC, p2 += AE_R8_REC, p3 += AE_R8_REC, x++) {
    v128 s0 = wasm_v128_load32_splat(&x->c), s1 = s0, s2 = s0, s3 = s0;
#pragma clang loop unroll(full)
    for (int j = 0; j < 8; j++) {
      const v128 xa = wasm_v128_load32_splat(x->ax + 4 * j), xm = wasm_v128_load32_splat(x->mx + 4 * j);
      s0 = R8_DOT(s0, p0, j, xa, xm); s1 = R8_DOT(s1, p1, j, xa, xm);
      s2 = R8_DOT(s2, p2, j, xa, xm); s3 = R8_DOT(s3, p3, j, xa, xm);
      sink[0] = s0; sink[1] = s1; sink[2] = s2; sink[3] = s3;
    }
    a0 = fma8(a0, s0, x, p0); a1 = fma8(a1, s1, x, p1); a2 = fma8(a2, s2, x, p2); a3 = fma8(a3, s3, x, p3);
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
}

AE_INLINE void matvec8(const void *W, int ncols, const void *xq, float *y, int r0, int r1, const int f) {
  const int nb = ncols / AE_QK8_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q8_0);
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  const int g0 = r0 >> 2, g1 = (r1 + 3) >> 2;   /* groups [g0, g1); the first / last may be partial */
  const int gq = (g1 - g0 + 3) / 4;               /* group g0 + i is read together with g0 + i + k gq, k < 4 */
  _Alignas(16) float part[2][4];                 /* a partial group's 4 rows (only some are stored into y) */
  r8x xs[R8_CHUNK];
#define R8_DST(g) ((4 * (g) >= r0 && 4 * (g) + 4 <= r1) ? y + 4 * (g) : part[(g) == g0 ? 0 : 1])
  for (int c0 = 0; c0 < nb; c0 += R8_CHUNK) {
    const int n = nb - c0 < R8_CHUNK ? nb - c0 : R8_CHUNK;
    for (int b = 0; b < n; b++) prep8(x + c0 + b, xs + b);
    for (int i = 0; i < gq; i++) {
      if (g0 + i + 3 * gq < g1) {
        const uint8_t *r[4]; v128 acc[4];
        for (int k = 0; k < 4; k++) { const int g = g0 + i + k * gq; r[k] = (const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * AE_R8_REC; acc[k] = c0 ? ae_load(R8_DST(g)) : wasm_f32x4_splat(0.0f); }
        group4s8(r, n, xs, acc, f);
        for (int k = 0; k < 4; k++) ae_store(R8_DST(g0 + i + k * gq), acc[k]);
      } else for (int k = 0; k < 4; k++) {
        const int g = g0 + i + k * gq;
        if (g >= g1) break;
        float *d = R8_DST(g);
        ae_store(d, group8((const uint8_t *)W + (size_t)g * 4 * rs + (size_t)c0 * AE_R8_REC, n, xs, c0 ? ae_load(d) : wasm_f32x4_splat(0.0f), f));
      }
    }
  }
#undef R8_DST
  for (int r = r0; r < r1; r++) {
    const int g = r >> 2;
    if (!(4 * g >= r0 && 4 * g + 4 <= r1)) y[r] = part[g == g0 ? 0 : 1][r & 3];
  }
}
void ae_matvec_rows_q8_0_r4_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  if (r0 >= r1) return;
  if (ae_fused_dot & AE_FUSED_R8) matvec8(W, ncols, xq, y, r0, r1, 1);
  else matvec8(W, ncols, xq, y, r0, r1, 0);
}

/* ---- prefill GEMM: tiles of 2 groups (8 rows) x 4 tokens (R8_TG x R8_TT; x 3 where the token count needs it:
 * ae_tile_tokens_43, the records keeping R8_TT slots per block), one group x 4 tokens for a last odd group.
 * Per column chunk the 4 tokens' prepared blocks sit in one stack array (per block the 4 tokens' r8x), so every splat
 * is a load at a constant offset from one pointer. Per record chunk: one load per group; per token two splats shared
 * by the 2 groups; per group and token a xor and ae_rdot_w. The sums go to a volatile slot after each chunk (as the
 * matvec; without them TurboFan hoists and spills: 0.6x). 2 x 4 against session 13's 1 x 4 with ae_rdot: 1.38x in
 * Node, 1.40x in Chromium; 2 x 3 1.33x, 2 x 2 1.31x, 3 x 3 1.26x, 4 x 2 1.33x (docs/PERFORMANCE.md "Session 16").
 * Per (row, token) the matvec's integer sums and float sequence: bit-identical. ---- */
#define R8_GEMM_ROWS 64   /* rows per chunk (16 groups): their weights stay in cache while every token group passes */
#define R8_GEMM_CB 32     /* blocks per column chunk: 32 x 4 x 80 B = 10 KiB */

#define R8_TT 4            /* tokens per tile */
#define R8_TG 2            /* groups per tile */
/* G groups x T tokens (T <= R8_TT: the records keep R8_TT slots per block): each token's splats serve the G groups */
#define R8_TILE(NAME, G, T)                                                                                           \
AE_INLINE void NAME(const uint8_t *rec, size_t gs, int n, const r8x *x, volatile v128 *acc, const int f) {            \
  volatile v128 sink[G * R8_TT];                                                                                      \
  const v128 ones = ae_i16_ones();                                                                                    \
  for (int b = 0; b < n; b++, rec += AE_R8_REC, x += R8_TT) {                                                         \
    v128 s[G * R8_TT];                                                                                                \
    _Pragma("clang loop unroll(full)")                                                                                \
    for (int t = 0; t < T; t++) { const v128 c = wasm_v128_load32_splat(&x[t].c); for (int g = 0; g < G; g++) s[R8_TT * g + t] = c; } \
    _Pragma("clang loop unroll(full)")                                                                                \
    for (int j = 0; j < 8; j++) {                                                                                     \
      v128 v[G];                                                                                                      \
      for (int g = 0; g < G; g++) v[g] = ae_load(rec + g * gs + 8 + 16 * j);                                          \
      _Pragma("clang loop unroll(full)")                                                                              \
      for (int t = 0; t < T; t++) {                                                                                   \
        const v128 xm = wasm_v128_load32_splat(x[t].mx + 4 * j), xa = wasm_v128_load32_splat(x[t].ax + 4 * j);        \
        for (int g = 0; g < G; g++) { s[R8_TT * g + t] = r8_step(s[R8_TT * g + t], v[g], xm, xa, ones, f); sink[R8_TT * g + t] = s[R8_TT * g + t]; } \
      }                                                                                                               \
    }                                                                                                                 \
    _Pragma("clang loop unroll(full)")                                                                                \
    for (int t = 0; t < T; t++)                                                                                       \
      for (int g = 0; g < G; g++) acc[R8_TT * g + t] = fma8(acc[R8_TT * g + t], s[R8_TT * g + t], x + t, rec + g * gs); \
  }                                                                                                                   \
}
R8_TILE(tile8, 1, R8_TT)
R8_TILE(tile8g, R8_TG, R8_TT)
R8_TILE(tile8_3, 1, 3)
R8_TILE(tile8g_3, R8_TG, 3)
/* The tile of `two` ? R8_TG groups : one group, x kk (4 or 3) tokens; both constants after inlining. */
AE_INLINE void tile8k(const uint8_t *rec, size_t gs, int n, const r8x *x, volatile v128 *acc, const int f, const int two,
                      const int kk) {
  if (two) { if (kk == 4) tile8g(rec, gs, n, x, acc, f); else tile8g_3(rec, gs, n, x, acc, f); }
  else if (kk == 4) tile8(rec, gs, n, x, acc, f);
  else tile8_3(rec, gs, n, x, acc, f);
}

/* The tile accumulators of G groups (rows r + 4 g) x the R8_TT tokens t0 + t: loaded from y (the column chunks before
 * c0; zero at the first), stored back for the nt real tokens. Shared by the q8_0, iq4_nl and iq4_xs drivers below. */
AE_INLINE void r8_acc_load(volatile v128 *acc, int G, const float *y, int y_stride, int t0, int nt, int r, int c0) {
  for (int g = 0; g < G; g++)
    for (int t = 0; t < R8_TT; t++) acc[R8_TT * g + t] = c0 && t < nt ? ae_load(y + (size_t)(t0 + t) * y_stride + r + 4 * g) : wasm_f32x4_splat(0.0f);
}
AE_INLINE void r8_acc_store(const volatile v128 *acc, int G, float *y, int y_stride, int t0, int nt, int r) {
  for (int g = 0; g < G; g++)
    for (int t = 0; t < nt; t++) ae_store(y + (size_t)(t0 + t) * y_stride + r + 4 * g, acc[R8_TT * g + t]);
}

AE_INLINE void gemm8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride, int a0,
                     int a1, const int f) {
  const int nb = ncols / AE_QK8_0;
  const size_t rs = (size_t)nb * sizeof(ae_block_q8_0);
  r8x xs[R8_TT * R8_GEMM_CB];
  volatile v128 acc[R8_TG * R8_TT];
  for (int rc = a0; rc < a1; rc += R8_GEMM_ROWS) {
    const int re = rc + R8_GEMM_ROWS < a1 ? rc + R8_GEMM_ROWS : a1;
    for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
      kk = ae_tile_tokens_43(nvec - t0);   /* tokens of this tile (4 or 3; the records keep R8_TT slots per block) */
      const int nt = nvec - t0 < kk ? nvec - t0 : kk;
      for (int c0 = 0; c0 < nb; c0 += R8_GEMM_CB) {
        const int n = nb - c0 < R8_GEMM_CB ? nb - c0 : R8_GEMM_CB;
        for (int t = 0; t < kk; t++) {   /* a last group of fewer tokens repeats its last token (only real ones stored) */
          const ae_block_q8_0 *xb = (const ae_block_q8_0 *)((const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride) + c0;
          for (int b = 0; b < n; b++) prep8(xb + b, xs + R8_TT * b + t);
        }
        int r = rc;
        for (; r + 4 * R8_TG <= re; r += 4 * R8_TG) {
          r8_acc_load(acc, R8_TG, y, y_stride, t0, nt, r, c0);
          tile8k((const uint8_t *)W + (size_t)r * rs + (size_t)c0 * AE_R8_REC, 4 * rs, n, xs, acc, f, 1, kk);
          r8_acc_store(acc, R8_TG, y, y_stride, t0, nt, r);
        }
        for (; r < re; r += 4) {
          r8_acc_load(acc, 1, y, y_stride, t0, nt, r, c0);
          tile8k((const uint8_t *)W + (size_t)r * rs + (size_t)c0 * AE_R8_REC, 4 * rs, n, xs, acc, f, 0, kk);
          r8_acc_store(acc, 1, y, y_stride, t0, nt, r);
        }
      }
    }
  }
}
void ae_matmul_rows_q8_0_r4_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                    int y_stride, int r0, int r1) {
  int a0, a1;   /* whole groups; the rows outside them: the matvec per token */
  if (r0 >= r1 || nvec <= 0 || !ae_group_gemm_edges(ae_matvec_rows_q8_0_r4_simd128, W, ncols, xq, xq_stride, nvec, y, y_stride, r0, r1, &a0, &a1)) return;
  if (ae_fused_dot & AE_FUSED_R8) gemm8(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 1);
  else gemm8(W, ncols, xq, xq_stride, nvec, y, y_stride, a0, a1, 0);
}

/* ---- iq4_nl prefill on these tiles (gemm_iq4_simd128.c calls it for row chunks whose block scales are all finite). An
 * iq4_nl block is a q8_0 block once its codes are looked up: the same f16 d, the values (-127..113) as the 32 bytes, so
 * the q8_0 reference's integers and float sequence are iq4_nl's (acc + (float)sumi * (d_w d_x)). Per (row chunk, column
 * chunk) the rows' blocks become AE_Q8_0_R4 records in a stack buffer (gemm_iq4's rows in groups of 4 from rc; a tail
 * of 1-3 rows is the caller's), then every token group runs the q8_0 R4 tiles on them; the column chunks stay in order
 * for every (row, token), the partial sums crossing them through y. Bit for bit the iq4_nl matvec per token. ---- */
#define NL8_ROWS 64   /* rows per chunk: 16 groups x R8_GEMM_CB records x 136 B = 68 KiB of records */
AE_INLINE void nl8_records(const uint8_t *W, size_t rs, int r, int c0, int n, uint8_t *out, v128 lut, v128 m) {
  for (int b = 0; b < n; b++, out += AE_R8_REC) {
    v128 v[4][2];
    for (int k = 0; k < 4; k++) {
      const uint8_t *blk = W + (size_t)(r + k) * rs + (size_t)(c0 + b) * sizeof(ae_block_iq4_nl);
      iq4_values(blk + 2, lut, m, &v[k][0], &v[k][1]);
      __builtin_memcpy(out + 2 * k, blk, 2);
    }
    for (int h = 0; h < 2; h++) {   /* pack_rec8's transposition of 32-bit words */
      const v128 t0 = wasm_i32x4_shuffle(v[0][h], v[1][h], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(v[0][h], v[1][h], 2, 6, 3, 7);
      const v128 t2 = wasm_i32x4_shuffle(v[2][h], v[3][h], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(v[2][h], v[3][h], 2, 6, 3, 7);
      uint8_t *o = out + 8 + 64 * h;
      wasm_v128_store(o, wasm_i64x2_shuffle(t0, t2, 0, 2));
      wasm_v128_store(o + 16, wasm_i64x2_shuffle(t0, t2, 1, 3));
      wasm_v128_store(o + 32, wasm_i64x2_shuffle(t1, t3, 0, 2));
      wasm_v128_store(o + 48, wasm_i64x2_shuffle(t1, t3, 1, 3));
    }
  }
}
AE_INLINE void gemm_nl8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride, int rc,
                        int re, const int f) {
  const int nb = ncols / 32;
  const size_t rs = (size_t)nb * sizeof(ae_block_iq4_nl);
  uint8_t recs[(NL8_ROWS / 4) * R8_GEMM_CB * AE_R8_REC] __attribute__((aligned(16)));
  r8x xs[R8_TT * R8_GEMM_CB];
  volatile v128 acc[R8_TG * R8_TT];
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  const int ng = (re - rc) / 4;   /* whole groups; the caller keeps re - rc a multiple of 4 */
  const size_t gs = (size_t)R8_GEMM_CB * AE_R8_REC;   /* one group's records in the buffer */
  for (int c0 = 0; c0 < nb; c0 += R8_GEMM_CB) {
    const int n = nb - c0 < R8_GEMM_CB ? nb - c0 : R8_GEMM_CB;
    for (int g = 0; g < ng; g++) nl8_records((const uint8_t *)W, rs, rc + 4 * g, c0, n, recs + (size_t)g * gs, lut, m);
    for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
      kk = ae_tile_tokens_43(nvec - t0);   /* as gemm8 */
      const int nt = nvec - t0 < kk ? nvec - t0 : kk;
      for (int t = 0; t < kk; t++) {   /* a last group of fewer tokens repeats its last token (only real ones stored) */
        const ae_block_q8_0 *xb = (const ae_block_q8_0 *)((const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride) + c0;
        for (int b = 0; b < n; b++) prep8(xb + b, xs + R8_TT * b + t);
      }
      int g = 0;
      for (; g + R8_TG <= ng; g += R8_TG) {
        const int r = rc + 4 * g;
        r8_acc_load(acc, R8_TG, y, y_stride, t0, nt, r, c0);
        tile8k(recs + (size_t)g * gs, gs, n, xs, acc, f, 1, kk);
        r8_acc_store(acc, R8_TG, y, y_stride, t0, nt, r);
      }
      for (; g < ng; g++) {
        const int r = rc + 4 * g;
        r8_acc_load(acc, 1, y, y_stride, t0, nt, r, c0);
        tile8k(recs + (size_t)g * gs, gs, n, xs, acc, f, 0, kk);
        r8_acc_store(acc, 1, y, y_stride, t0, nt, r);
      }
    }
  }
}
/* ---- iq4_xs prefill on the same per-chunk step: per super-block of 4 rows a record (XS8_REC bytes, on the stack) of the
 * 4 d, per sub-block ib its 4 rows' scales ls as i16 pairs (LS16: lanes 2k, 2k + 1 = ls_k) and as i32 (LS32), and its
 * values in AE_Q8_0_R4's chunk layout. Per chunk and token: the values take the activation's sign (xor, as the q8_0 R4
 * tile), ae_rdot16 against |x|, then i32x4.dot_i16x8 against LS16 puts ls_k times row k's pair sums in lane k (|.| <=
 * 2 x 32512 x 32); the sub-block's c = sum(|x| over x < 0) enters once per super-block as sum_ib ls_k c_ib (LS32). So
 * sumi = sum_ib ls_ib sum(v x), the iq4_xs matvec's integer, and per super-block its float step acc + (float)sumi * (d_w
 * d_x) with d_w converted exactly (d_x is a float of any size). Bit for bit the iq4_xs matvec per token. ---- */
#define XS8_ROWS 32
#define XS8_CB 8   /* super-blocks per column chunk */
#define XS8_LS16 16
#define XS8_LS32 144
#define XS8_VAL 272
#define XS8_REC (XS8_VAL + 8 * 128)
AE_INLINE void xs8_records(const uint8_t *W, size_t rs, int r, int c0, int n, uint8_t *out, v128 lut, v128 m) {
  for (int b = 0; b < n; b++, out += XS8_REC) {
    const ae_block_iq4_xs *blk[4];
    _Alignas(16) int16_t ls[4][8];
    for (int k = 0; k < 4; k++) {
      blk[k] = (const ae_block_iq4_xs *)(W + (size_t)(r + k) * rs) + c0 + b;
      wasm_v128_store(ls[k], iq4xs_scales8(blk[k]));
      __builtin_memcpy(out + 2 * k, &blk[k]->d, 2);
    }
    for (int ib = 0; ib < 8; ib++) {
      wasm_v128_store(out + XS8_LS16 + 16 * ib, wasm_i16x8_make(ls[0][ib], ls[0][ib], ls[1][ib], ls[1][ib], ls[2][ib], ls[2][ib], ls[3][ib], ls[3][ib]));
      wasm_v128_store(out + XS8_LS32 + 16 * ib, wasm_i32x4_make(ls[0][ib], ls[1][ib], ls[2][ib], ls[3][ib]));
      v128 v[4][2];
      for (int k = 0; k < 4; k++) iq4_values(blk[k]->qs + 16 * ib, lut, m, &v[k][0], &v[k][1]);
      for (int h = 0; h < 2; h++) {   /* pack_rec8's transposition of 32-bit words */
        const v128 t0 = wasm_i32x4_shuffle(v[0][h], v[1][h], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(v[0][h], v[1][h], 2, 6, 3, 7);
        const v128 t2 = wasm_i32x4_shuffle(v[2][h], v[3][h], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(v[2][h], v[3][h], 2, 6, 3, 7);
        uint8_t *o = out + XS8_VAL + 128 * ib + 64 * h;
        wasm_v128_store(o, wasm_i64x2_shuffle(t0, t2, 0, 2));
        wasm_v128_store(o + 16, wasm_i64x2_shuffle(t0, t2, 1, 3));
        wasm_v128_store(o + 32, wasm_i64x2_shuffle(t1, t3, 0, 2));
        wasm_v128_store(o + 48, wasm_i64x2_shuffle(t1, t3, 1, 3));
      }
    }
  }
}
/* G groups (records gs bytes apart) x T tokens (T <= R8_TT), super-blocks [0, n): x[(8 b + ib) R8_TT + t] token t's
 * sub-block ib, dx[R8_TT b + t]; each token's splats serve the G groups (as R8_TILE) */
#define XS8_TILE(NAME, G, T)                                                                                          \
AE_INLINE void NAME(const uint8_t *rec, size_t gs, int n, const r8x *x, const float *dx, volatile v128 *acc) {        \
  volatile v128 sink[G * R8_TT];                                                                                      \
  for (int b = 0; b < n; b++, rec += XS8_REC, x += 8 * R8_TT) {                                                       \
    v128 si[G * R8_TT];                                                                                               \
    _Pragma("clang loop unroll(full)")                                                                                \
    for (int i = 0; i < G * T; i++) {   /* sum_ib ls_k c_ib: the sign moves' offsets (i = T g + t) */                 \
      v128 c = wasm_i32x4_splat(0);                                                                                   \
      for (int ib = 0; ib < 8; ib++)                                                                                  \
        c = wasm_i32x4_add(c, wasm_i32x4_mul(ae_load(rec + (i / T) * gs + XS8_LS32 + 16 * ib), wasm_v128_load32_splat(&x[R8_TT * ib + i % T].c))); \
      si[R8_TT * (i / T) + i % T] = c;                                                                                \
    }                                                                                                                 \
    for (int ib = 0; ib < 8; ib++) {                                                                                  \
      v128 LS[G];                                                                                                     \
      for (int g = 0; g < G; g++) LS[g] = ae_load(rec + g * gs + XS8_LS16 + 16 * ib);                                 \
      const r8x *xi = x + R8_TT * ib;                                                                                 \
      _Pragma("clang loop unroll(full)")                                                                              \
      for (int j = 0; j < 8; j++) {                                                                                   \
        v128 v[G];                                                                                                    \
        for (int g = 0; g < G; g++) v[g] = ae_load(rec + g * gs + XS8_VAL + 128 * ib + 16 * j);                       \
        _Pragma("clang loop unroll(full)")                                                                            \
        for (int t = 0; t < T; t++) {                                                                                 \
          const v128 xm = wasm_v128_load32_splat(xi[t].mx + 4 * j), xa = wasm_v128_load32_splat(xi[t].ax + 4 * j);    \
          for (int g = 0; g < G; g++) {                                                                               \
            si[R8_TT * g + t] = wasm_i32x4_add(si[R8_TT * g + t], wasm_i32x4_dot_i16x8(ae_rdot16(wasm_v128_xor(v[g], xm), xa), LS[g])); \
            sink[R8_TT * g + t] = si[R8_TT * g + t];                                                                  \
          }                                                                                                           \
        }                                                                                                             \
      }                                                                                                               \
    }                                                                                                                 \
    for (int g = 0; g < G; g++) {                                                                                     \
      const uint8_t *d = rec + g * gs;   /* the 4 d as (h << 16) in i32 lanes, converted exactly */                   \
      v128 h = wasm_i32x4_splat(0);                                                                                   \
      h = wasm_v128_load16_lane(d, h, 1); h = wasm_v128_load16_lane(d + 2, h, 3);                                     \
      h = wasm_v128_load16_lane(d + 4, h, 5); h = wasm_v128_load16_lane(d + 6, h, 7);                                 \
      const v128 dw = ae_h2f_exact(h);                                                                                \
      _Pragma("clang loop unroll(full)")                                                                              \
      for (int t = 0; t < T; t++)                                                                                     \
        acc[R8_TT * g + t] = wasm_f32x4_add(acc[R8_TT * g + t], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(si[R8_TT * g + t]), \
                                                                               wasm_f32x4_mul(dw, wasm_v128_load32_splat(dx + R8_TT * b + t)))); \
    }                                                                                                                 \
  }                                                                                                                   \
}
XS8_TILE(tile_xs8, 1, R8_TT)
XS8_TILE(tile_xs8g, 2, R8_TT)
XS8_TILE(tile_xs8_3, 1, 3)
XS8_TILE(tile_xs8g_3, 2, 3)

/* rows [rc, re) (re - rc a multiple of 4, at most XS8_ROWS), nvec >= 2 tokens */
void ae_matmul_rows_iq4_xs_r8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                              int rc, int re) {
  const int nb = ncols / AE_QK_K;
  const size_t rs = (size_t)nb * sizeof(ae_block_iq4_xs), gs = (size_t)XS8_CB * XS8_REC;
  uint8_t recs[(XS8_ROWS / 4) * XS8_CB * XS8_REC] __attribute__((aligned(16)));
  r8x xs[XS8_CB * 8 * R8_TT];
  float dx[XS8_CB * R8_TT];
  volatile v128 acc[2 * R8_TT];
  v128 lut, m;
  iq4nl_consts(&lut, &m);
  const int ng = (re - rc) / 4;
  for (int c0 = 0; c0 < nb; c0 += XS8_CB) {
    const int n = nb - c0 < XS8_CB ? nb - c0 : XS8_CB;
    for (int g = 0; g < ng; g++) xs8_records((const uint8_t *)W, rs, rc + 4 * g, c0, n, recs + (size_t)g * gs, lut, m);
    for (int t0 = 0, kk; t0 < nvec; t0 += kk) {
      kk = ae_tile_tokens_43(nvec - t0);   /* as gemm8 */
      const int nt = nvec - t0 < kk ? nvec - t0 : kk;
      for (int t = 0; t < kk; t++) {   /* a last group of fewer tokens repeats its last token (only real ones stored) */
        const ae_block_q8_K *xb = (const ae_block_q8_K *)((const uint8_t *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xq_stride) + c0;
        for (int b = 0; b < n; b++) {
          dx[R8_TT * b + t] = xb[b].d;
          for (int ib = 0; ib < 8; ib++) prep8_qs(xb[b].qs + 32 * ib, xs + (8 * b + ib) * R8_TT + t);
        }
      }
      int g = 0;
      for (; g + 2 <= ng; g += 2) {
        const int r = rc + 4 * g;
        r8_acc_load(acc, 2, y, y_stride, t0, nt, r, c0);
        if (kk == 4) tile_xs8g(recs + (size_t)g * gs, gs, n, xs, dx, acc);
        else tile_xs8g_3(recs + (size_t)g * gs, gs, n, xs, dx, acc);
        r8_acc_store(acc, 2, y, y_stride, t0, nt, r);
      }
      for (; g < ng; g++) {
        const int r = rc + 4 * g;
        r8_acc_load(acc, 1, y, y_stride, t0, nt, r, c0);
        if (kk == 4) tile_xs8(recs + (size_t)g * gs, gs, n, xs, dx, acc);
        else tile_xs8_3(recs + (size_t)g * gs, gs, n, xs, dx, acc);
        r8_acc_store(acc, 1, y, y_stride, t0, nt, r);
      }
    }
  }
}

/* rows [rc, re) (re - rc a multiple of 4, at most NL8_ROWS, every block scale finite), nvec >= 2 tokens */
void ae_matmul_rows_iq4_nl_r8(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y, int y_stride,
                              int rc, int re) {
  if (ae_fused_dot & AE_FUSED_R8) gemm_nl8(W, ncols, xq, xq_stride, nvec, y, y_stride, rc, re, 1);
  else gemm_nl8(W, ncols, xq, xq_stride, nvec, y, y_stride, rc, re, 0);
}
#else
/* The plain build keeps q8_0 in the file layout (model.c): this layout's kernels are the reference there. */
AE_REF_ENTRY_POINTS(q8_0_r4, ae_matvec_q8_0_r4_ref)
#endif
