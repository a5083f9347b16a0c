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

/* 8 halves -> 2 f32x4. exact = 1: exact for every half (the cache may hold inf after an overflow); exact = 0: the
 * fast conversion (ae_h2f_fast: exact for finite halves), *m tracking inf / nan (ae_h16_infnan_acc). */
AE_INLINE void h8x(const ae_fp16 *p, v128 *a, v128 *b, v128 *m, int exact) {
  const v128 h = ae_load(p);
  if (exact) { *a = ae_h2f_exact(ae_h16_lo(h)); *b = ae_h2f_exact(ae_h16_hi(h)); return; }
  *m = ae_h16_infnan_acc(*m, h);
  *a = ae_h2f_fast(ae_h16_lo(h)); *b = ae_h2f_fast(ae_h16_hi(h));
}

/* out[0..8w) += att[t] * v_t over the n positions, w = 1 or 2 (8 or 16 columns from v). exact = 0: the fast
 * conversion, and nothing is stored when an inf / nan half was among the values (returns 1: the caller runs it again
 * with exact = 1 from the untouched out); the same operations on the same floats otherwise, so the same bits. */
AE_INLINE int accum_cols_f16(const ae_fp16 *v, size_t rs, int n, const float *att, float *out, int w, int exact) {
  v128 o0 = ae_load(out), o1 = ae_load(out + 4), o2 = w == 2 ? ae_load(out + 8) : o0, o3 = w == 2 ? ae_load(out + 12) : o1, a, b;
  v128 m = wasm_i32x4_splat(0);
  const ae_fp16 *r = v;
  for (int t = 0; t < n; t++, r += rs) {
    const v128 p = wasm_f32x4_splat(att[t]);
    h8x(r, &a, &b, &m, exact); FMA(o0, p, a); FMA(o1, p, b);
    if (w == 2) { h8x(r + 8, &a, &b, &m, exact); FMA(o2, p, a); FMA(o3, p, b); }
  }
  if (!exact && ae_h16_has_infnan(m)) return 1;
  ae_store(out, o0); ae_store(out + 4, o1);
  if (w == 2) { ae_store(out + 8, o2); ae_store(out + 12, o3); }
  return 0;
}

void ae_attn_accum_f16_simd128(const void *vp, int n, int hd, const float *att, float *out) {
  const ae_fp16 *v = (const ae_fp16 *)vp;
  const size_t rs = (size_t)hd;
  int d = 0;
  for (; d + 16 <= hd; d += 16)
    if (accum_cols_f16(v + d, rs, n, att, out + d, 2, 0)) accum_cols_f16(v + d, rs, n, att, out + d, 2, 1);
  for (; d + 8 <= hd; d += 8)
    if (accum_cols_f16(v + d, rs, n, att, out + d, 1, 0)) accum_cols_f16(v + d, rs, n, att, out + d, 1, 1);
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
void ae_attn_accum(ae_type t, const void *v, int n, int head_dim, const float *att, float *out) {
  if (ae_attn_accum_supported(t) && n > 0) k_accum[t](v, n, head_dim, att, out);
}

int ae_kv_types_ok(int kt, int vt, int head_dim) {
  if (!ae_is_weight_type(kt) || !ae_attn_accum_supported(vt) || head_dim <= 0 || head_dim > 1024) return 0;
  return ae_traits((ae_type)kt)->matvec != 0;
}

size_t ae_kv_row_size(ae_type t, int head_dim) {
  const int b = ae_traits(t)->blck_size;
  return ae_row_size(t, (head_dim + b - 1) / b * b);
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
    if (run[r].n > 0) ae_matmul(kt, run[r].k, hdk, qa, qs, ng, att + total, att_stride, 0, run[r].n);
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
    int off = 0;
    for (int r = 0; r < nrun; r++) {
      ae_attn_accum((ae_type)run[r].vt, run[r].v, run[r].n, hd, a + off, o);
      off += run[r].n;
    }
  }
}

/* ---- several query tokens of one KV head at once (prefill; contract in kernels.h) ----------------------------
 * Joint V accumulation of 4 query rows over the same positions: each V row is loaded (f16: converted) once for
 * the 4; per row and element the operations are ae_attn_accum's (o = o + att[t] * v_t in position order), so
 * the results equal 4 single calls bit for bit. f32 / f16 values in 8-wide chunks, the last hd % 8 elements
 * scalar (the same per-element operations as the single kernels' vector lanes: exact conversions). */
#define FMA4(o, i, a0, a1, a2, a3, v)                                                                            \
  do { FMA(o[0][i], a0, v); FMA(o[1][i], a1, v); FMA(o[2][i], a2, v); FMA(o[3][i], a3, v); } while (0)
#define ACCUM4_BODY(ELT, LOAD8)                                                                                  \
  int d = 0;                                                                                                     \
  for (; d + 8 <= hd; d += 8) {                                                                                  \
    v128 o[4][2];                                                                                                \
    for (int q = 0; q < 4; q++) { o[q][0] = ae_load(out[q] + d); o[q][1] = ae_load(out[q] + d + 4); }           \
    const ELT *r = v + d;                                                                                        \
    for (int t = 0; t < n; t++, r += rs) {                                                                       \
      v128 a, b;                                                                                                 \
      LOAD8;                                                                                                     \
      const v128 p0 = wasm_f32x4_splat(att[0][t]), p1 = wasm_f32x4_splat(att[1][t]);                            \
      const v128 p2 = wasm_f32x4_splat(att[2][t]), p3 = wasm_f32x4_splat(att[3][t]);                            \
      FMA4(o, 0, p0, p1, p2, p3, a);                                                                             \
      FMA4(o, 1, p0, p1, p2, p3, b);                                                                             \
    }                                                                                                            \
    for (int q = 0; q < 4; q++) { ae_store(out[q] + d, o[q][0]); ae_store(out[q] + d + 4, o[q][1]); }           \
  }

static void accum4_f32(const void *vp, int n, int hd, const float *const *att, float *const *out) {
  const float *v = (const float *)vp;
  const size_t rs = (size_t)hd;
  ACCUM4_BODY(float, (a = ae_load(r), b = ae_load(r + 4)))
  for (; d < hd; d++)
    for (int q = 0; q < 4; q++) {
      float o = out[q][d];
      for (int t = 0; t < n; t++) o = o + att[q][t] * v[(size_t)t * rs + d];
      out[q][d] = o;
    }
}

/* 4 query rows over 8 columns of V (fast conversion unless exact; as accum_cols_f16: returns 1 and stores nothing
 * when an inf / nan half was seen, for the caller to run it again exactly) */
AE_INLINE int accum4_cols_f16(const ae_fp16 *v, size_t rs, int n, const float *const *att, float *const *out, int d, int exact) {
  v128 o[4][2], m = wasm_i32x4_splat(0);
  for (int q = 0; q < 4; q++) { o[q][0] = ae_load(out[q] + d); o[q][1] = ae_load(out[q] + d + 4); }
  const ae_fp16 *r = v + d;
  for (int t = 0; t < n; t++, r += rs) {
    v128 a, b;
    h8x(r, &a, &b, &m, exact);
    const v128 p0 = wasm_f32x4_splat(att[0][t]), p1 = wasm_f32x4_splat(att[1][t]);
    const v128 p2 = wasm_f32x4_splat(att[2][t]), p3 = wasm_f32x4_splat(att[3][t]);
    FMA4(o, 0, p0, p1, p2, p3, a);
    FMA4(o, 1, p0, p1, p2, p3, b);
  }
  if (!exact && ae_h16_has_infnan(m)) return 1;
  for (int q = 0; q < 4; q++) { ae_store(out[q] + d, o[q][0]); ae_store(out[q] + d + 4, o[q][1]); }
  return 0;
}

static void accum4_f16(const void *vp, int n, int hd, const float *const *att, float *const *out) {
  const ae_fp16 *v = (const ae_fp16 *)vp;
  const size_t rs = (size_t)hd;
  int d = 0;
  for (; d + 8 <= hd; d += 8)
    if (accum4_cols_f16(v, rs, n, att, out, d, 0)) accum4_cols_f16(v, rs, n, att, out, d, 1);
  for (; d < hd; d++)
    for (int q = 0; q < 4; q++) {
      float o = out[q][d];
      for (int t = 0; t < n; t++) o = o + att[q][t] * ae_h2f_s(v[(size_t)t * rs + d]);
      out[q][d] = o;
    }
}
#undef ACCUM4_BODY
#undef FMA4

/* nq rows (att[i], out[i]) over the same n positions of V (dtype vt): 4 at a time jointly where a joint kernel
 * exists (f32, f16), else / then one by one. Same bits as ae_attn_accum per row. */
static void accum_rows(ae_type vt, const void *v, int n, int hd, const float **att, float **out, int nq) {
  if (n <= 0) return;
  int i = 0;
  if (vt == AE_F32 || vt == AE_F16)
    for (; i + 4 <= nq; i += 4) (vt == AE_F32 ? accum4_f32 : accum4_f16)(v, n, hd, att + i, out + i);
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
    if (run[r].n > 0) ae_matmul(kt, run[r].k, hdk, qbuf, qs, nr, att + total, att_stride, 0, run[r].n);
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
