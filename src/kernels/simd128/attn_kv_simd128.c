/* Attention over a typed KV cache (contracts in src/kernels/kernels.h, references in ref/attn_kv_ref.c).
 * Scores are the registry's row kernels (ae_matmul: the K rows of one KV head are read once for the ng query
 * heads of a GQA group); the weighted sum of V rows is ae_attn_accum_<t>: head_dim values kept in registers
 * (16 floats, or one 32-value block for q8_0 / q4_0) while the positions stream by, each step
 * o = o + a_t * v_t per element in position order, so the result equals the reference bit for bit. */
#include "kernels/simd128/simd128_util.h"

#define FMA(acc, s, v) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(s, v))

/* i32 lanes (|v| < 2^22) -> f32 exactly (magic-number trick; see sparse_simd128.c) */
AE_INLINE v128 i2f(v128 v) {
  return wasm_f32x4_sub(wasm_i32x4_add(v, wasm_i32x4_const_splat(0x4B400000)), wasm_f32x4_const_splat(12582912.0f));
}
AE_INLINE void i8_to_f32(v128 q, v128 *f) {
  const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
  f[0] = i2f(wasm_i32x4_extend_low_i16x8(lo)); f[1] = i2f(wasm_i32x4_extend_high_i16x8(lo));
  f[2] = i2f(wasm_i32x4_extend_low_i16x8(hi)); f[3] = i2f(wasm_i32x4_extend_high_i16x8(hi));
}

void ae_attn_accum_f32_simd128(const void *vp, int n, int hd, const float *att, float *out) {
  const float *v = (const float *)vp;
  const size_t rs = (size_t)hd;
  int d = 0;
  for (; d + 16 <= hd; d += 16) {
    v128 o0 = ae_load(out + d), o1 = ae_load(out + d + 4), o2 = ae_load(out + d + 8), o3 = ae_load(out + d + 12);
    const float *r = v + d;
    for (int t = 0; t < n; t++, r += rs) {
      const v128 p = wasm_f32x4_splat(att[t]);
      FMA(o0, p, ae_load(r)); FMA(o1, p, ae_load(r + 4)); FMA(o2, p, ae_load(r + 8)); FMA(o3, p, ae_load(r + 12));
    }
    ae_store(out + d, o0); ae_store(out + d + 4, o1); ae_store(out + d + 8, o2); ae_store(out + d + 12, o3);
  }
  for (; d + 4 <= hd; d += 4) {
    v128 o = ae_load(out + d);
    const float *r = v + d;
    for (int t = 0; t < n; t++, r += rs) FMA(o, wasm_f32x4_splat(att[t]), ae_load(r));
    ae_store(out + d, o);
  }
  for (; d < hd; d++) {
    float o = out[d];
    for (int t = 0; t < n; t++) o = o + att[t] * v[(size_t)t * rs + d];
    out[d] = o;
  }
}

#define ACC_RAW 2
/* 8 halves -> 2 f32x4. exact = 1: exact for every half (the cache may hold inf after an overflow); exact = 0: the
 * fast conversion (ae_h2f_fast: exact for finite halves), *m tracking inf / nan (ae_h16_infnan_acc); exact =
 * ACC_RAW: as 0 without its 2^112 (ae_h2f_raw: the values times 2^-112). */
AE_INLINE void h8x(const ae_fp16 *p, v128 *a, v128 *b, v128 *m, int exact) {
  const v128 h = ae_load(p);
  if (exact == 1) { *a = ae_h2f_exact(ae_h16_lo(h)); *b = ae_h2f_exact(ae_h16_hi(h)); return; }
  *m = ae_h16_infnan_acc(*m, h);
  if (exact == ACC_RAW) { *a = ae_h2f_raw(ae_h16_lo(h)); *b = ae_h2f_raw(ae_h16_hi(h)); }
  else { *a = ae_h2f_fast(ae_h16_lo(h)); *b = ae_h2f_fast(ae_h16_hi(h)); }
}

/* out[0..8w) += att[t] * v_t over the n positions, w = 1 or 2 (8 or 16 columns from v). exact = 0: the fast
 * conversion, and nothing is stored when an inf / nan half was among the values (returns 1: the caller runs it again
 * with exact = 1 from the untouched out); the same operations on the same floats otherwise, so the same bits.
 * exact = ACC_RAW: as 0, but the half's 2^112 goes on the weight instead (att[t] 2^112 times v_t 2^-112: the same real
 * product, rounded once, so the same bits; one multiply per 4 values fewer, 1.19x), for att whose finite weights are
 * all below 2^16 in magnitude (ae_f32_below_2p16), as the f16 matvec's prescaled path. */
AE_INLINE int accum_cols_f16(const ae_fp16 *v, size_t rs, int n, const float *att, float *out, int w, int exact) {
  v128 o0 = ae_load(out), o1 = ae_load(out + 4), o2 = w == 2 ? ae_load(out + 8) : o0, o3 = w == 2 ? ae_load(out + 12) : o1, a, b;
  v128 m = wasm_i32x4_splat(0);
  const ae_fp16 *r = v;
  for (int t = 0; t < n; t++, r += rs) {
    const v128 p = wasm_f32x4_splat(exact == ACC_RAW ? att[t] * 0x1p112f : att[t]);
    h8x(r, &a, &b, &m, exact); FMA(o0, p, a); FMA(o1, p, b);
    if (w == 2) { h8x(r + 8, &a, &b, &m, exact); FMA(o2, p, a); FMA(o3, p, b); }
  }
  if (exact != 1 && ae_h16_has_infnan(m)) return 1;
  ae_store(out, o0); ae_store(out + 4, o1);
  if (w == 2) { ae_store(out + 8, o2); ae_store(out + 12, o3); }
  return 0;
}

void ae_attn_accum_f16_simd128(const void *vp, int n, int hd, const float *att, float *out) {
  const ae_fp16 *v = (const ae_fp16 *)vp;
  const size_t rs = (size_t)hd;
  const int raw = hd >= 8 && ae_f32_below_2p16(att, n);   /* each call below with a constant mode */
  int d = 0;
  for (; d + 16 <= hd; d += 16)
    if (raw ? accum_cols_f16(v + d, rs, n, att, out + d, 2, ACC_RAW) : accum_cols_f16(v + d, rs, n, att, out + d, 2, 0))
      accum_cols_f16(v + d, rs, n, att, out + d, 2, 1);
  for (; d + 8 <= hd; d += 8)
    if (raw ? accum_cols_f16(v + d, rs, n, att, out + d, 1, ACC_RAW) : accum_cols_f16(v + d, rs, n, att, out + d, 1, 0))
      accum_cols_f16(v + d, rs, n, att, out + d, 1, 1);
  for (; d < hd; d++) {
    float o = out[d];
    for (int t = 0; t < n; t++) o = o + att[t] * ae_h2f_s(v[(size_t)t * rs + d]);
    out[d] = o;
  }
}

/* q8_0 / q4_0 rows of nbr blocks (head_dim rounded up to 32: the cache pads heads with zeros); block b of every
 * position: o[0..32) += (att[t] d_t) * q_t, the last block of a padded head through a 32-float buffer */
#define QBLOCK_LOOP(BLK_T, DECODE)                                                                       \
  const int nbr = (hd + 31) / 32;                                                                        \
  for (int b = 0; b < nbr; b++) {                                                                        \
    float tmp[32];                                                                                       \
    const int w = hd - 32 * b < 32 ? hd - 32 * b : 32;                                                   \
    float *ob = out + 32 * b;                                                                            \
    if (w < 32) { for (int j = 0; j < 32; j++) tmp[j] = j < w ? ob[j] : 0.0f; ob = tmp; }                \
    v128 o[8], f[4];                                                                                     \
    for (int j = 0; j < 8; j++) o[j] = ae_load(ob + 4 * j);                                              \
    const BLK_T *blk = (const BLK_T *)vp + b;                                                            \
    for (int t = 0; t < n; t++, blk += nbr) {                                                            \
      const v128 s = wasm_f32x4_splat(att[t] * ae_h2f_s(blk->d));                                         \
      v128 qa, qb;                                                                                       \
      DECODE;                                                                                            \
      i8_to_f32(qa, f); FMA(o[0], s, f[0]); FMA(o[1], s, f[1]); FMA(o[2], s, f[2]); FMA(o[3], s, f[3]); \
      i8_to_f32(qb, f); FMA(o[4], s, f[0]); FMA(o[5], s, f[1]); FMA(o[6], s, f[2]); FMA(o[7], s, f[3]); \
    }                                                                                                    \
    for (int j = 0; j < 8; j++) ae_store(ob + 4 * j, o[j]);                                              \
    if (w < 32) for (int j = 0; j < w; j++) out[32 * b + j] = tmp[j];                                   \
  }

void ae_attn_accum_q8_0_simd128(const void *vp, int n, int hd, const float *att, float *out) {
  QBLOCK_LOOP(ae_block_q8_0, (qa = ae_load(blk->qs), qb = ae_load(blk->qs + 16)))
}

void ae_attn_accum_q4_0_simd128(const void *vp, int n, int hd, const float *att, float *out) {
  const v128 m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  QBLOCK_LOOP(ae_block_q4_0, (qa = ae_load(blk->qs), qb = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(qa, 4), m4), eight),
                              qa = wasm_i8x16_sub(wasm_v128_and(qa, m4), eight)))
}

static const ae_attn_accum_fn k_accum[AE_TYPE_COUNT] = {
  [AE_F32] = ae_attn_accum_f32_simd128, [AE_F16] = ae_attn_accum_f16_simd128,
  [AE_Q8_0] = ae_attn_accum_q8_0_simd128, [AE_Q4_0] = ae_attn_accum_q4_0_simd128,
};
int ae_attn_accum_supported(int t) { return t >= 0 && t < AE_TYPE_COUNT && k_accum[t] != 0; }

size_t ae_kv_row_size(ae_type t, int head_dim) {
  const int b = ae_traits(t)->blck_size;
  return ae_row_size(t, (head_dim + b - 1) / b * b);
}

/* Positions per block of the V sums: the kernels sweep their rows once per group of columns (8-32 values of a
 * head), so a long run is cut into blocks of ~16 KiB of rows that stay in L1 across the sweeps (1500 positions of a
 * 96-value f16 head are 288 KiB: from L2, or from DRAM at decode, at every sweep). Consecutive blocks continue
 * each element's sum in position order: the same operations, so the same bits. */
static int accum_block(ae_type t, int hd, size_t *rsz) {
  *rsz = ae_kv_row_size(t, hd);
  const int b = (int)(16384 / *rsz);
  return b < 16 ? 16 : b;
}

void ae_attn_accum(ae_type t, const void *v, int n, int head_dim, const float *att, float *out) {
  if (!ae_attn_accum_supported(t) || n <= 0) return;
  size_t rsz;
  const int tb = accum_block(t, head_dim, &rsz);
  for (int t0 = 0; t0 < n; t0 += tb)
    k_accum[t]((const uint8_t *)v + (size_t)t0 * rsz, n - t0 < tb ? n - t0 : tb, head_dim, att + t0, out);
}

int ae_kv_types_ok(int kt, int vt, int head_dim) {
  if (!ae_is_weight_type(kt) || !ae_attn_accum_supported(vt) || head_dim <= 0 || head_dim > 1024) return 0;
  return ae_traits((ae_type)kt)->matvec != 0;
}

static void accum_rows(ae_type vt, const void *v, int n, int hd, const float **att, float **out, int nq);

/* ---- f16 K / V rows shared by several query rows: converted once per block into f32 on the stack ----
 * (a GQA group at decode, several tokens in prefill). The kernels above convert each half once per 4 query rows
 * and sweep a long run from L2 once per group of columns; here a block of rows (16 KiB as f32) is converted once for
 * every query row and stays in L1. Values: the fast conversion, or the exact one for a block with an inf / nan half
 * (as the f16 kernels do per row or column group): the same floats, then per query row the same operations in the
 * same order (the f16 GEMM's for the scores, ae_attn_accum's for V), so the same bits. */
#define KV_F32_FLOATS 4096

/* Positions per converted block (head_dim <= 1024: at least 4). */
AE_INLINE int f32_block_rows(int hd) { return KV_F32_FLOATS / hd; }

/* count halves -> floats, exactly */
static void h2f_block(const ae_fp16 *h, int count, float *s) {
  v128 m = wasm_i32x4_splat(0);
  int i = 0;
  for (; i + 8 <= count; i += 8) {
    const v128 v = ae_load(h + i);
    m = ae_h16_infnan_acc(m, v);
    ae_store(s + i, ae_h2f_fast(ae_h16_lo(v)));
    ae_store(s + i + 4, ae_h2f_fast(ae_h16_hi(v)));
  }
  if (ae_h16_has_infnan(m))
    for (int j = 0; j + 8 <= count; j += 8) {
      const v128 v = ae_load(h + j);
      ae_store(s + j, ae_h2f_exact(ae_h16_lo(v)));
      ae_store(s + j + 4, ae_h2f_exact(ae_h16_hi(v)));
    }
  for (; i < count; i++) s[i] = ae_h2f_s(h[i]);
}

/* Scores of nr query rows (x, rows xs floats apart) against nb converted K rows k (hd floats each): att[row *
 * att_stride + p], per (row, position) the f16 GEMM's sequence (gemm_f16_simd128.c row4: 8 values at a time low then
 * high half, a 4-value step, (v0 + v2) + (v1 + v3), the scalar tail). Query rows 4 at a time (a last group repeats
 * its last row and stores only the real ones). (K rows 2 at a time, 8 sums, measured no faster: V8 spilled them.) */
#define SC_STEP8(a0, a1, a2, a3, lo, hi)                                                                        \
  do {                                                                                                         \
    a0 = ae_madd(hi, ae_load(x0 + i + 4), ae_madd(lo, ae_load(x0 + i), a0));                                   \
    a1 = ae_madd(hi, ae_load(x1 + i + 4), ae_madd(lo, ae_load(x1 + i), a1));                                   \
    a2 = ae_madd(hi, ae_load(x2 + i + 4), ae_madd(lo, ae_load(x2 + i), a2));                                   \
    a3 = ae_madd(hi, ae_load(x3 + i + 4), ae_madd(lo, ae_load(x3 + i), a3));                                   \
  } while (0)
#define SC_STEP4(a0, a1, a2, a3, lo)                                                                            \
  do {                                                                                                         \
    a0 = ae_madd(lo, ae_load(x0 + i), a0); a1 = ae_madd(lo, ae_load(x1 + i), a1);                               \
    a2 = ae_madd(lo, ae_load(x2 + i), a2); a3 = ae_madd(lo, ae_load(x3 + i), a3);                               \
  } while (0)
AE_INLINE void sc_store(v128 r, const float *w, int i, int hd, const float *x0, const float *x1, const float *x2,
                        const float *x3, float *o, size_t att_stride, int nt) {
  float s0 = wasm_f32x4_extract_lane(r, 0), s1 = wasm_f32x4_extract_lane(r, 1);
  float s2 = wasm_f32x4_extract_lane(r, 2), s3 = wasm_f32x4_extract_lane(r, 3);
  for (; i < hd; i++) { s0 += w[i] * x0[i]; s1 += w[i] * x1[i]; s2 += w[i] * x2[i]; s3 += w[i] * x3[i]; }
  o[0] = s0;
  if (nt > 1) o[att_stride] = s1;
  if (nt > 2) o[2 * att_stride] = s2;
  if (nt > 3) o[3 * att_stride] = s3;
}
static void scores_f32(const float *k, int nb, int hd, const float *x, size_t xs, int nr, float *att, size_t att_stride) {
  for (int t0 = 0; t0 < nr; t0 += 4) {
    const int nt = nr - t0 < 4 ? nr - t0 : 4;
    const float *x0 = x + (size_t)t0 * xs, *x1 = x + (size_t)(t0 + (nt > 1 ? 1 : 0)) * xs;
    const float *x2 = x + (size_t)(t0 + (nt > 2 ? 2 : nt - 1)) * xs, *x3 = x + (size_t)(t0 + (nt > 3 ? 3 : nt - 1)) * xs;
    float *o = att + (size_t)t0 * att_stride;
    for (int p = 0; p < nb; p++) {
      const float *w = k + (size_t)p * hd;
      v128 a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
      int i = 0;
      for (; i + 8 <= hd; i += 8) {
        const v128 lo = ae_load(w + i), hi = ae_load(w + i + 4);
        SC_STEP8(a0, a1, a2, a3, lo, hi);
      }
      if (i + 4 <= hd) {
        const v128 lo = ae_load(w + i);
        SC_STEP4(a0, a1, a2, a3, lo);
        i += 4;
      }
      sc_store(ae_reduce4_f32(a0, a1, a2, a3), w, i, hd, x0, x1, x2, x3, o + p, att_stride, nt);
    }
  }
}
#undef SC_STEP8
#undef SC_STEP4

/* The scores of one run (n rows of dtype kt, hdk values each) for nr query rows (qa: kt's vec_dot_type rows, qs bytes
 * apart): f16 rows shared by 2 or more query rows through converted blocks, else the registry's GEMM. */
static void run_scores(ae_type kt, const void *K, int n, int hdk, const void *qa, size_t qs, int nr, float *att, size_t att_stride) {
  if (n <= 0) return;
  if (kt != AE_F16 || nr < 2) { ae_matmul(kt, K, hdk, qa, qs, nr, att, att_stride, 0, n); return; }
  float kb[KV_F32_FLOATS] __attribute__((aligned(16)));
  const int tb = f32_block_rows(hdk);
  for (int p0 = 0; p0 < n; p0 += tb) {
    const int nb = n - p0 < tb ? n - p0 : tb;
    h2f_block((const ae_fp16 *)K + (size_t)p0 * hdk, nb * hdk, kb);
    scores_f32(kb, nb, hdk, (const float *)qa, qs / 4, nr, att + p0, att_stride);
  }
}

void ae_attention_kv(float *out, int out_stride, const float *q, int q_stride, int ng, const ae_kv_run *run, int nrun,
                     int hd, float scale, float softcap, float *att, int att_stride, void *qbuf) {
  int total = 0, conv = -1;   /* conv: the dtype q currently sits in, in qbuf */
  for (int r = 0; r < nrun; r++) {
    const ae_type kt = (ae_type)run[r].kt, vt = ae_traits(kt)->vec_dot_type;
    const void *qa = q;
    size_t qs = (size_t)q_stride * 4;
    const int blk = ae_traits(kt)->blck_size, hdk = (hd + blk - 1) / blk * blk;  /* K rows: head_dim padded */
    if (vt != AE_F32) {
      qs = ae_row_size(vt, hdk);
      if (conv != (int)vt) {
        float *pad = (float *)((uint8_t *)qbuf + (size_t)ng * AE_KV_PAD(hd) * 4);
        for (int j = 0; j < ng; j++) {
          const float *qj = q + (size_t)j * q_stride;
          if (hdk != hd) { for (int i = 0; i < hdk; i++) pad[i] = i < hd ? qj[i] : 0.0f; qj = pad; }
          ae_traits(vt)->from_float(qj, (uint8_t *)qbuf + (size_t)j * qs, hdk);
        }
        conv = (int)vt;
      }
      qa = qbuf;
    }
    run_scores(kt, run[r].k, run[r].n, hdk, qa, qs, ng, att + total, att_stride);
    total += run[r].n;
  }
  for (int j = 0; j < ng; j++) {
    float *a = att + (size_t)j * att_stride, *o = out + (size_t)j * out_stride;
    int t = 0;
    const v128 sv = wasm_f32x4_splat(scale);
    for (; t + 4 <= total; t += 4) ae_store(a + t, wasm_f32x4_mul(ae_load(a + t), sv));
    for (; t < total; t++) a[t] *= scale;
    if (softcap > 0.0f) ae_softcap_simd128(a, total, softcap);
    ae_softmax_simd128(a, total);
    for (int d = 0; d < hd; d++) o[d] = 0.0f;
  }
  /* V: the group's query heads 4 at a time over each run (accum_rows: a V row converted once for the 4); per head
   * its runs in order, so the same operations as ae_attn_accum head by head */
  for (int j0 = 0; j0 < ng; j0 += AE_ATTN_MULTI_ROWS) {
    const int g = ng - j0 < AE_ATTN_MULTI_ROWS ? ng - j0 : AE_ATTN_MULTI_ROWS;
    const float *a[AE_ATTN_MULTI_ROWS];
    float *o[AE_ATTN_MULTI_ROWS];
    for (int i = 0; i < g; i++) o[i] = out + (size_t)(j0 + i) * out_stride;
    for (int r = 0, off = 0; r < nrun; off += run[r].n, r++) {
      for (int i = 0; i < g; i++) a[i] = att + (size_t)(j0 + i) * att_stride + off;
      accum_rows((ae_type)run[r].vt, run[r].v, run[r].n, hd, a, o, g);
    }
  }
}

/* ---- several query tokens of one KV head at once (prefill; contract in kernels.h) ----------------------------
 * Joint V accumulation of 4 query rows over the same f32 rows (the cache's, or f16 rows converted by accum_rows):
 * each V row is loaded once for the 4; per row and element the operations are ae_attn_accum's (o = o + att[t] * v_t
 * in position order), so the results equal 4 single calls bit for bit. 8-wide chunks, the last hd % 8 elements
 * scalar. */
#define FMA4(o, i, a0, a1, a2, a3, v)                                                                            \
  do { FMA(o[0][i], a0, v); FMA(o[1][i], a1, v); FMA(o[2][i], a2, v); FMA(o[3][i], a3, v); } while (0)
static void accum4_f32(const void *vp, int n, int hd, const float *const *att, float *const *out) {
  const float *v = (const float *)vp;
  const size_t rs = (size_t)hd;
  int d = 0;
  for (; d + 8 <= hd; d += 8) {
    v128 o[4][2];
    for (int q = 0; q < 4; q++) { o[q][0] = ae_load(out[q] + d); o[q][1] = ae_load(out[q] + d + 4); }
    const float *r = v + d;
    for (int t = 0; t < n; t++, r += rs) {
      const v128 a = ae_load(r), b = ae_load(r + 4);
      const v128 p0 = wasm_f32x4_splat(att[0][t]), p1 = wasm_f32x4_splat(att[1][t]);
      const v128 p2 = wasm_f32x4_splat(att[2][t]), p3 = wasm_f32x4_splat(att[3][t]);
      FMA4(o, 0, p0, p1, p2, p3, a);
      FMA4(o, 1, p0, p1, p2, p3, b);
    }
    for (int q = 0; q < 4; q++) { ae_store(out[q] + d, o[q][0]); ae_store(out[q] + d + 4, o[q][1]); }
  }
  for (; d < hd; d++)
    for (int q = 0; q < 4; q++) {
      float o = out[q][d];
      for (int t = 0; t < n; t++) o = o + att[q][t] * v[(size_t)t * rs + d];
      out[q][d] = o;
    }
}

#undef FMA4

/* nq rows (att[i], out[i]) over the same n positions of V (dtype vt), same bits as ae_attn_accum per row: f16 rows
 * for 2 or more query rows converted once per block (h2f_block), f32 rows 4 query rows at a time in position blocks
 * (accum_block), the rest one row at a time. */
static void accum_rows(ae_type vt, const void *v, int n, int hd, const float **att, float **out, int nq) {
  if (n <= 0) return;
  int i = 0;
  if (vt == AE_F16 && nq >= 2) {   /* converted blocks (see h2f_block), then the f32 kernels on them */
    float vb[KV_F32_FLOATS] __attribute__((aligned(16)));
    const int tb = f32_block_rows(hd);
    for (int t0 = 0; t0 < n; t0 += tb) {
      const int nb = n - t0 < tb ? n - t0 : tb;
      h2f_block((const ae_fp16 *)v + (size_t)t0 * hd, nb * hd, vb);
      int j = 0;
      for (; j + 4 <= nq; j += 4) {
        const float *a[4] = {att[j] + t0, att[j + 1] + t0, att[j + 2] + t0, att[j + 3] + t0};
        accum4_f32(vb, nb, hd, a, out + j);
      }
      for (; j < nq; j++) ae_attn_accum_f32_simd128(vb, nb, hd, att[j] + t0, out[j]);
    }
    return;
  }
  if (vt == AE_F32) {
    size_t rsz;
    const int tb = accum_block(vt, hd, &rsz);
    for (; i + 4 <= nq; i += 4)
      for (int t0 = 0; t0 < n; t0 += tb) {   /* position blocks (accum_block) */
        const float *a[4] = {att[i] + t0, att[i + 1] + t0, att[i + 2] + t0, att[i + 3] + t0};
        accum4_f32((const uint8_t *)v + (size_t)t0 * rsz, n - t0 < tb ? n - t0 : tb, hd, a, out + i);
      }
  }
  for (; i < nq; i++) ae_attn_accum(vt, v, n, hd, att[i], out[i]);
}

/* Rows i of a group: accumulate union positions [s, e) (clipped to each row's own [lo, hi) by the caller) over the
 * runs; att of row i at union position u is a[i][u - lo[i]]. */
static void accum_range(const ae_kv_run *run, int nrun, int hd, const float *const *a, const int *lo, float **out, int nq,
                        int s, int e) {
  if (s >= e) return;
  const float *ap[AE_ATTN_MULTI_ROWS];
  int u0 = 0;
  for (int r = 0; r < nrun && u0 < e; u0 += run[r].n, r++) {
    const int b = s > u0 ? s : u0, f = e < u0 + run[r].n ? e : u0 + run[r].n;
    if (b >= f) continue;
    const ae_type vt = (ae_type)run[r].vt;
    for (int i = 0; i < nq; i++) ap[i] = a[i] + (b - lo[i]);
    accum_rows(vt, (const uint8_t *)run[r].v + (size_t)(b - u0) * ae_kv_row_size(vt, hd), f - b, hd, ap, out, nq);
  }
}

void ae_attention_kv_multi(float *out, int out_stride, int out_tok, const float *q, int q_stride, int q_tok, int ng, int nq,
                           const int *lo, const int *hi, const ae_kv_run *run, int nrun, int hd, float scale, float softcap,
                           float *att, int att_stride, void *qbuf) {
  const int nr = ng * nq;   /* query rows, row i = b * ng + j */
  int total = 0, conv = -1;
  for (int r = 0; r < nrun; r++) {
    const ae_type kt = (ae_type)run[r].kt, vt = ae_traits(kt)->vec_dot_type;
    const int blk = ae_traits(kt)->blck_size, hdk = (hd + blk - 1) / blk * blk;
    const size_t qs = ae_row_size(vt, hdk);
    if (conv != (int)vt) {   /* every query row in kt's vec_dot_type (f32: a copy), rows qs bytes apart */
      float *pad = (float *)((uint8_t *)qbuf + (size_t)nr * AE_KV_PAD(hd) * 4);
      for (int i = 0; i < nr; i++) {
        const float *qi = q + (size_t)(i / ng) * q_tok + (size_t)(i % ng) * q_stride;
        for (int d = 0; d < hdk; d++) pad[d] = d < hd ? qi[d] : 0.0f;
        ae_traits(vt)->from_float(pad, (uint8_t *)qbuf + (size_t)i * qs, hdk);
      }
      conv = (int)vt;
    }
    run_scores(kt, run[r].k, run[r].n, hdk, qbuf, qs, nr, att + total, att_stride);
    total += run[r].n;
  }
  const v128 sv = wasm_f32x4_splat(scale);
  for (int i = 0; i < nr; i++) {   /* row i's own positions to the front, then ae_attention_kv's steps */
    float *a = att + (size_t)i * att_stride;
    const int b = i / ng, len = hi[b] - lo[b];
    if (lo[b] > 0) __builtin_memmove(a, a + lo[b], (size_t)len * 4);
    int t = 0;
    for (; t + 4 <= len; t += 4) ae_store(a + t, wasm_f32x4_mul(ae_load(a + t), sv));
    for (; t < len; t++) a[t] *= scale;
    if (softcap > 0.0f) ae_softcap_simd128(a, len, softcap);
    ae_softmax_simd128(a, len);
    float *o = out + (size_t)b * out_tok + (size_t)(i % ng) * out_stride;
    for (int d = 0; d < hd; d++) o[d] = 0.0f;
  }
  /* V: groups of up to AE_ATTN_MULTI_ROWS rows; per row its positions in order: [lo, S) alone, [S, E) jointly
   * (S, E = the group's largest lo and smallest hi), [E, hi) alone */
  for (int i0 = 0; i0 < nr; i0 += AE_ATTN_MULTI_ROWS) {
    const int g = nr - i0 < AE_ATTN_MULTI_ROWS ? nr - i0 : AE_ATTN_MULTI_ROWS;
    const float *a[AE_ATTN_MULTI_ROWS];
    float *o[AE_ATTN_MULTI_ROWS];
    int l[AE_ATTN_MULTI_ROWS], h[AE_ATTN_MULTI_ROWS], S = 0, E = 1 << 30;
    for (int i = 0; i < g; i++) {
      const int b = (i0 + i) / ng;
      a[i] = att + (size_t)(i0 + i) * att_stride;
      o[i] = out + (size_t)b * out_tok + (size_t)((i0 + i) % ng) * out_stride;
      l[i] = lo[b]; h[i] = hi[b];
      S = l[i] > S ? l[i] : S; E = h[i] < E ? h[i] : E;
    }
    if (S >= E) {
      for (int i = 0; i < g; i++) accum_range(run, nrun, hd, a + i, l + i, o + i, 1, l[i], h[i]);
      continue;
    }
    for (int i = 0; i < g; i++) accum_range(run, nrun, hd, a + i, l + i, o + i, 1, l[i], S);
    accum_range(run, nrun, hd, a, l, o, g, S, E);
    for (int i = 0; i < g; i++) accum_range(run, nrun, hd, a + i, l + i, o + i, 1, E, h[i]);
  }
}
