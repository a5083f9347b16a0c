/* ffn-saturated module (slot 2): SwiGLU FFN that skips neurons, plus the profiling pass.
 *
 *   static  (AE_FFN_SAT_STATIC): a per-layer mask freezes neurons; gate/up rows of the active neurons
 *           are read from a compacted copy (row copies, no requantisation: each computed g, u is bit
 *           for bit the dense one). Frozen neurons either take a constant h (hfill: the calibration
 *           mean, or 0) before the model's row-major down (down_mode ROWS: no saving on down; with an
 *           empty mask it is exactly the dense path), or are skipped in a neuron-major down
 *           (down_mode NEURON: y = sum_i h_i down_nm[i] + comp).
 *   dynamic (AE_FFN_SAT_DYNAMIC): gate for every neuron, s = silu(g); up (and down with NEURON) only
 *           where |s| > threshold; h = 0 elsewhere.
 *   profile (AE_FFN_PROFILE): the dense computation (bit-exact) plus per-neuron statistics of h and a
 *           histogram of |silu(g)| (ffn_aux.h), accumulated in host memory: no JS in the loop.
 * ffn_active = neurons whose up row was computed, summed over tokens. */
#include "kernels/ffn_common.h"

/* ---- neuron-major down: y[d0 .. d1) += sum_k coef[k] * row(idx[k])[d0 .. d1) ---------------------------
 * Rows are streamed whole (contiguous: what hardware prefetchers follow), four neurons per pass over y
 * (which stays in L1). Per output element the operations are y = y + coef_k * w_k in k order
 * (q8_0 / q4_0: w_k = d_k * q as (coef_k d_k) * q), so the result does not depend on the column split
 * or on how neurons are grouped. d0, d1 are multiples of 32. */
#define FMA(acc, s, v) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(s, v))

/* i32 lanes (|v| < 2^22) -> f32 by the magic-number trick: LLVM turns extend + convert into scalar
 * code on wasm, which this avoids */
AE_INLINE v128 i2f(v128 v) {
  return wasm_f32x4_sub(wasm_i32x4_add(v, wasm_i32x4_const_splat(0x4B400000)), wasm_f32x4_const_splat(12582912.0f));
}
/* 16 i8 -> 4 f32x4 in order */
AE_INLINE void i8_to_f32(v128 q, v128 *f) {
  const v128 lo = wasm_i16x8_extend_low_i8x16(q), hi = wasm_i16x8_extend_high_i8x16(q);
  f[0] = i2f(wasm_i32x4_extend_low_i16x8(lo)); f[1] = i2f(wasm_i32x4_extend_high_i16x8(lo));
  f[2] = i2f(wasm_i32x4_extend_low_i16x8(hi)); f[3] = i2f(wasm_i32x4_extend_high_i16x8(hi));
}

static void axr_f32(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  int k = 0;
  for (; k + 4 <= cnt; k += 4) {
    const float *w0 = (const float *)(base + (size_t)idx[k] * rs), *w1 = (const float *)(base + (size_t)idx[k + 1] * rs);
    const float *w2 = (const float *)(base + (size_t)idx[k + 2] * rs), *w3 = (const float *)(base + (size_t)idx[k + 3] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]), s1 = wasm_f32x4_splat(coef[k + 1]), s2 = wasm_f32x4_splat(coef[k + 2]), s3 = wasm_f32x4_splat(coef[k + 3]);
    for (int c = d0; c < d1; c += 4) {
      v128 v = ae_load(y + c);
      FMA(v, s0, ae_load(w0 + c)); FMA(v, s1, ae_load(w1 + c)); FMA(v, s2, ae_load(w2 + c)); FMA(v, s3, ae_load(w3 + c));
      ae_store(y + c, v);
    }
  }
  for (; k < cnt; k++) {
    const float *w0 = (const float *)(base + (size_t)idx[k] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]);
    for (int c = d0; c < d1; c += 4) { v128 v = ae_load(y + c); FMA(v, s0, ae_load(w0 + c)); ae_store(y + c, v); }
  }
}

AE_INLINE void h8(const ae_fp16 *p, v128 *a, v128 *b) {
  const v128 h = ae_load(p);
  *a = ae_h2f_fast(ae_h16_lo(h)); *b = ae_h2f_fast(ae_h16_hi(h));
}

/* f16 rows: the host makes them from finite values only, where ae_h2f_fast is exact */
static void axr_f16(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  int k = 0;
  for (; k + 4 <= cnt; k += 4) {
    const ae_fp16 *w0 = (const ae_fp16 *)(base + (size_t)idx[k] * rs), *w1 = (const ae_fp16 *)(base + (size_t)idx[k + 1] * rs);
    const ae_fp16 *w2 = (const ae_fp16 *)(base + (size_t)idx[k + 2] * rs), *w3 = (const ae_fp16 *)(base + (size_t)idx[k + 3] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]), s1 = wasm_f32x4_splat(coef[k + 1]), s2 = wasm_f32x4_splat(coef[k + 2]), s3 = wasm_f32x4_splat(coef[k + 3]);
    for (int c = d0; c < d1; c += 8) {
      v128 v0 = ae_load(y + c), v1 = ae_load(y + c + 4), a, b;
      h8(w0 + c, &a, &b); FMA(v0, s0, a); FMA(v1, s0, b);
      h8(w1 + c, &a, &b); FMA(v0, s1, a); FMA(v1, s1, b);
      h8(w2 + c, &a, &b); FMA(v0, s2, a); FMA(v1, s2, b);
      h8(w3 + c, &a, &b); FMA(v0, s3, a); FMA(v1, s3, b);
      ae_store(y + c, v0); ae_store(y + c + 4, v1);
    }
  }
  for (; k < cnt; k++) {
    const ae_fp16 *w0 = (const ae_fp16 *)(base + (size_t)idx[k] * rs);
    const v128 s0 = wasm_f32x4_splat(coef[k]);
    for (int c = d0; c < d1; c += 8) {
      v128 v0 = ae_load(y + c), v1 = ae_load(y + c + 4), a, b;
      h8(w0 + c, &a, &b); FMA(v0, s0, a); FMA(v1, s0, b);
      ae_store(y + c, v0); ae_store(y + c + 4, v1);
    }
  }
}

/* one 32-value block: y[0..32) += s * q[0..32) (q as 2 x 16 i8) */
AE_INLINE void blk_axpy(float *y, v128 s, v128 qa, v128 qb) {
  v128 f[4];
  i8_to_f32(qa, f);
  for (int j = 0; j < 4; j++) { v128 v = ae_load(y + 4 * j); FMA(v, s, f[j]); ae_store(y + 4 * j, v); }
  i8_to_f32(qb, f);
  for (int j = 0; j < 4; j++) { v128 v = ae_load(y + 16 + 4 * j); FMA(v, s, f[j]); ae_store(y + 16 + 4 * j, v); }
}

static void axr_q8_0(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  for (int k = 0; k < cnt; k++) {
    const ae_block_q8_0 *w = (const ae_block_q8_0 *)(base + (size_t)idx[k] * rs);
    for (int c = d0; c < d1; c += 32) {
      const ae_block_q8_0 *bk = w + c / 32;
      blk_axpy(y + c, wasm_f32x4_splat(coef[k] * ae_h2f_s(bk->d)), ae_load(bk->qs), ae_load(bk->qs + 16));
    }
  }
}

static void axr_q4_0(const uint8_t *base, size_t rs, const int32_t *idx, const float *coef, int cnt, int d0, int d1, float *y) {
  const v128 m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  for (int k = 0; k < cnt; k++) {
    const ae_block_q4_0 *w = (const ae_block_q4_0 *)(base + (size_t)idx[k] * rs);
    for (int c = d0; c < d1; c += 32) {
      const ae_block_q4_0 *bk = w + c / 32;
      const v128 v = ae_load(bk->qs);
      blk_axpy(y + c, wasm_f32x4_splat(coef[k] * ae_h2f_s(bk->d)), wasm_i8x16_sub(wasm_v128_and(v, m4), eight),
               wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), eight));
    }
  }
}

typedef void (*axpy_fn)(const uint8_t *, size_t, const int32_t *, const float *, int, int, int, float *);

static axpy_fn axpy_for(int t) {
  switch (t) {
    case AE_F32: return axr_f32;
    case AE_F16: return axr_f16;
    case AE_Q8_0: return axr_q8_0;
    case AE_Q4_0: return axr_q4_0;
    default: return 0;
  }
}

/* Neuron-major down over the computed neurons of each token (h != 0; static: only the active list),
 * columns of dim split over threads, then + comp and x += y. Ends with the closing barrier. */
static void down_neuron(ae_ffn_ctx *c, const int32_t *list, int nlist, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const ae_ffn_aux *a = c->a;
  const int D = c->D, H = c->H;
  int d0, d1;
  ae_split_aligned(D, 32, ith, nth, &d0, &d1);
  if (d0 < d1) {
    const axpy_fn f = axpy_for(a->down_type);
    const uint8_t *base = ae_ffn_ptr(a->down_nm);
    const size_t rs = ae_row_size((ae_type)a->down_type, D);
    const float *comp = ae_ffn_ptr(a->comp);
    int32_t idx[AE_FFN_PIECE];
    float coef[AE_FFN_PIECE];
    const int total = list ? nlist : H;
    for (int b = 0; b < c->n; b++) {
      const float *h = m->hb + (size_t)b * H;
      float *y = m->tmp + (size_t)b * D;
      __builtin_memset(y + d0, 0, (size_t)(d1 - d0) * 4);
      for (int p0 = 0; p0 < total; p0 += AE_FFN_PIECE) {
        const int p1 = p0 + AE_FFN_PIECE < total ? p0 + AE_FFN_PIECE : total;
        int cnt = 0;
        for (int p = p0; p < p1; p++) {
          const int i = list ? list[p] : p;
          const float v = h[i];
          if (v != 0.0f) { idx[cnt] = i; coef[cnt] = v; cnt++; }
        }
        if (cnt) f(base, rs, idx, coef, cnt, d0, d1, y);
      }
      if (comp) ae_add(y + d0, comp + d0, d1 - d0);
      ae_add(m->x + (size_t)b * D + d0, y + d0, d1 - d0);
    }
  }
  ae_barrier(pool);
}

/* ---- gathered rows: y[k] = dot(row k, x) for rows at arbitrary addresses (q8_0 / q4_0 weights,
 * q8_0 activation), 4 rows at a time. Per row exactly the reference (ae_vec_dot_q8_0_ref /
 * ae_vec_dot_q4_0_ref): sumi exact per block, then sum += (float)sumi * (d_w * d_x) in block order,
 * which is what every row kernel of the core computes (kernels.h), so dynamic mode with threshold 0
 * gives the dense bits. The activation is prepared once per token (even / odd i16 of each byte pair). */
typedef struct { v128 e0, o0, e1, o1; } gx_blk;

static void gx_prep(const ae_block_q8_0 *x, int nb, gx_blk *xs, float *dx) {
  for (int b = 0; b < nb; b++) {
    const v128 a = ae_load(x[b].qs), c = ae_load(x[b].qs + 16);
    xs[b].e0 = ae_i8_even(a); xs[b].o0 = ae_i8_odd(a);
    xs[b].e1 = ae_i8_even(c); xs[b].o1 = ae_i8_odd(c);
    dx[b] = ae_h2f_s(x[b].d);
  }
}

AE_INLINE v128 gdot_blk_q8(const ae_block_q8_0 *w, const gx_blk *x) {
  const v128 a = ae_load(w->qs), c = ae_load(w->qs + 16);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(a), x->e0), wasm_i32x4_dot_i16x8(ae_i8_odd(a), x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(c), x->e1), wasm_i32x4_dot_i16x8(ae_i8_odd(c), x->o1)));
}
AE_INLINE v128 gdot_blk_q4(const ae_block_q4_0 *w, const gx_blk *x) {
  const v128 v = ae_load(w->qs), m4 = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  const v128 lo = wasm_i8x16_sub(wasm_v128_and(v, m4), eight), hi = wasm_i8x16_sub(wasm_v128_and(wasm_u16x8_shr(v, 4), m4), eight);
  return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(lo), x->e0), wasm_i32x4_dot_i16x8(ae_i8_odd(lo), x->o0)),
                        wasm_i32x4_add(wasm_i32x4_dot_i16x8(ae_i8_even(hi), x->e1), wasm_i32x4_dot_i16x8(ae_i8_odd(hi), x->o1)));
}

/* 4 rows (pointers), blocks [0, nb): per row acc += (float)sumi * (d_w * d_x) in block order. Scales use
 * the fast fp16 conversion (exact for finite halves); a group that meets an inf/nan scale is redone
 * with the exact one (returns 1 then). */
#define GDOT4(T, BLK, exact)                                                                            \
  do {                                                                                                  \
    const T *w0 = (const T *)p0, *w1 = (const T *)p1, *w2 = (const T *)p2, *w3 = (const T *)p3;        \
    for (int b = 0; b < nb; b++) {                                                                      \
      t4[0] = BLK(w0 + b, xs + b); t4[1] = BLK(w1 + b, xs + b); t4[2] = BLK(w2 + b, xs + b); t4[3] = BLK(w3 + b, xs + b); \
      const v128 si = ae_reduce4_i32(t4[0], t4[1], t4[2], t4[3]);                                       \
      v128 h = wasm_i32x4_const_splat(0);                                                               \
      h = wasm_v128_load16_lane(&w0[b].d, h, 1); h = wasm_v128_load16_lane(&w1[b].d, h, 3);             \
      h = wasm_v128_load16_lane(&w2[b].d, h, 5); h = wasm_v128_load16_lane(&w3[b].d, h, 7);             \
      v128 d;                                                                                           \
      if (exact) d = ae_h2f_exact(h); else { bad = ae_h16_infnan_acc(bad, h); d = ae_h2f_fast(h); }     \
      acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(si), wasm_f32x4_mul(d, wasm_v128_load32_splat(dx + b)))); \
    }                                                                                                   \
  } while (0)

static v128 gdot4(int t, const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3, int nb,
                  const gx_blk *xs, const float *dx) {
  v128 acc = wasm_f32x4_splat(0.0f), bad = wasm_i32x4_splat(0);
  volatile v128 t4[4];   /* the stores order V8's schedule row by row (fewer spills) */
  if (t == AE_Q8_0) GDOT4(ae_block_q8_0, gdot_blk_q8, 0); else GDOT4(ae_block_q4_0, gdot_blk_q4, 0);
  if (ae_h16_has_infnan(bad)) {
    acc = wasm_f32x4_splat(0.0f);
    if (t == AE_Q8_0) GDOT4(ae_block_q8_0, gdot_blk_q8, 1); else GDOT4(ae_block_q4_0, gdot_blk_q4, 1);
  }
  return acc;
}

/* rows[k] for k < cnt (cnt >= 1); y[k] out */
static void gdot_rows(int t, const uint8_t *const *rows, int cnt, int nb, const gx_blk *xs, const float *dx, float *y) {
  for (int k = 0; k < cnt; k += 4) {
    const int m = cnt - k < 4 ? cnt - k : 4;
    const uint8_t *p0 = rows[k], *p1 = rows[k + (m > 1)], *p2 = rows[k + (m > 2 ? 2 : 0)], *p3 = rows[k + (m > 3 ? 3 : 0)];
    float o[4];
    ae_store(o, gdot4(t, p0, p1, p2, p3, nb, xs, dx));
    for (int j = 0; j < m; j++) y[k + j] = o[j];
  }
}
#define AE_GX_MAX_BLOCKS 512   /* gathered path for dim <= 16384 (32 KiB of prepared x on the stack) */

/* first index j with list[j] >= v */
static int lower_bound(const int32_t *list, int n, int v) {
  int lo = 0, hi = n;
  while (lo < hi) { const int mid = (lo + hi) >> 1; if (list[mid] < v) lo = mid + 1; else hi = mid; }
  return lo;
}

static int check_neuron_down(const ae_ffn_ctx *c) {
  const ae_ffn_aux *a = c->a;
  if (a->down_mode == AE_FFN_DOWN_ROWS) return AE_OK;
  if (a->down_mode != AE_FFN_DOWN_NEURON || !a->down_nm || !axpy_for(a->down_type) || c->D % 32) return AE_ERR_UNSUPPORTED;
  return AE_OK;
}

static int run_static(ae_ffn_ctx *c, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const ae_ffn_aux *a = c->a;
  const int H = c->H, n = c->n, A = c->rows;
  const int32_t *act = ae_ffn_ptr(a->active);
  if (A > 0 && (!act || !a->gate)) return AE_ERR_INVALID_ARG;
  int st = check_neuron_down(c);
  if (st) return st;
  _Alignas(16) uint8_t xbuf[AE_FFN_XQ_STACK];
  _Alignas(16) float buf[2 * AE_FFN_CHUNK];
  ae_ffn_prep_x(c, xbuf, ith, nth, pool);
  const int rows_down = a->down_mode == AE_FFN_DOWN_ROWS;
  if (rows_down && c->r0 < c->r1) {
    const float *fill = ae_ffn_ptr(a->hfill);
    for (int b = 0; b < n; b++) {
      float *h = m->hb + (size_t)b * H + c->r0;
      if (fill) __builtin_memcpy(h, fill + c->r0, (size_t)(c->r1 - c->r0) * 4);
      else __builtin_memset(h, 0, (size_t)(c->r1 - c->r0) * 4);
    }
  }
  const int j0 = lower_bound(act, A, c->r0), j1 = lower_bound(act, A, c->r1);
  for (int j = j0; j < j1;) {
    const uint8_t *gp, *upp;
    int joint;
    const int cnt = ae_ffn_chunk(c, j, j1, &gp, &upp, &joint);
    for (int b = 0; b < n; b++) {
      ae_ffn_gu(c, gp, upp, joint, cnt, b, buf);
      ae_silu_mul(buf, buf + cnt, cnt);
      float *h = m->hb + (size_t)b * H;
      for (int k = 0; k < cnt; k++) h[act[j + k]] = buf[k];
    }
    j += cnt;
  }
  if (ith == 0) c->L->ffn_active = n * A;
  if (rows_down) {
    ae_ffn_quant_h(c);
    ae_barrier(pool);
    ae_ffn_down_rows(c, ith, nth, pool);
  } else {
    ae_barrier(pool);
    down_neuron(c, act, A, ith, nth, pool);
  }
  return AE_OK;
}

static int run_dynamic(ae_ffn_ctx *c, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const ae_ffn_aux *a = c->a;
  const int H = c->H, n = c->n;
  if (c->rows != H) return AE_ERR_INVALID_ARG;
  int32_t *counts = (int32_t *)(uintptr_t)a->counts;
  if (!counts) return AE_ERR_INVALID_ARG;
  int st = check_neuron_down(c);
  if (st) return st;
  _Alignas(16) uint8_t xbuf[AE_FFN_XQ_STACK];
  _Alignas(16) float g[AE_FFN_CHUNK], u[AE_FFN_CHUNK], ones[AE_FFN_CHUNK];
  for (int k = 0; k < AE_FFN_CHUNK; k++) ones[k] = 1.0f;
  const float thr = a->threshold;
  ae_ffn_prep_x(c, xbuf, ith, nth, pool);
  int32_t count = 0;
  const int nb = c->D / AE_QK8_0;
  const int gather = (c->gt == AE_Q8_0 || c->gt == AE_Q4_0) && nb <= AE_GX_MAX_BLOCKS;
  gx_blk xs[gather ? nb : 1];
  float dx[gather ? nb : 1];
  int prepared = -1;
  const uint8_t *rows[AE_FFN_CHUNK];
  int pos[AE_FFN_CHUNK];
  for (int j = c->r0; j < c->r1;) {
    const uint8_t *gp, *upp;
    int joint;
    const int cnt = ae_ffn_chunk(c, j, c->r1, &gp, &upp, &joint);
    for (int b = 0; b < n; b++) {
      const uint8_t *xb = c->xq + (size_t)b * c->xq_stride;
      ae_matvec(c->gt, gp, c->D, xb, g, 0, cnt);
      ae_silu_mul(g, ones, cnt);                      /* g := silu(g) */
      float *h = m->hb + (size_t)b * H + j;
      if (gather) {
        int na = 0;
        for (int k = 0; k < cnt; k++) {
          if (__builtin_fabsf(g[k]) > thr) { rows[na] = upp + (size_t)k * c->grs; pos[na] = k; na++; }
          h[k] = 0.0f;
        }
        if (na) {
          if (prepared != b) { gx_prep((const ae_block_q8_0 *)xb, nb, xs, dx); prepared = n == 1 ? b : -1; }
          gdot_rows(c->gt, rows, na, nb, xs, dx, u);
          for (int q = 0; q < na; q++) h[pos[q]] = g[pos[q]] * u[q];
          count += na;
        }
        continue;
      }
      for (int k = 0; k < cnt;) {
        if (!(__builtin_fabsf(g[k]) > thr)) { h[k] = 0.0f; k++; continue; }
        int e = k + 1;
        while (e < cnt && __builtin_fabsf(g[e]) > thr) e++;
        ae_matvec(c->gt, upp, c->D, xb, u, k, e);     /* u[k..e) = rows k..e of this chunk */
        for (int q = k; q < e; q++) h[q] = g[q] * u[q];
        count += e - k;
        k = e;
      }
    }
    j += cnt;
  }
  counts[ith] = count;
  /* down: rows, neuron-major, or (neuron_max < 1) decided after the barrier from the total count, the
   * same on every thread: h is quantised for the row-major down in case it is taken */
  const int may_rows = a->down_mode == AE_FFN_DOWN_ROWS || a->neuron_max < 1.0f;
  if (may_rows) ae_ffn_quant_h(c);
  ae_barrier(pool);
  int32_t total = 0;
  for (int t = 0; t < nth; t++) total += counts[t];
  if (ith == 0) c->L->ffn_active = total;
  const int rows_down = a->down_mode == AE_FFN_DOWN_ROWS || (float)total > a->neuron_max * (float)n * (float)H;
  if (rows_down) ae_ffn_down_rows(c, ith, nth, pool);
  else down_neuron(c, 0, 0, ith, nth, pool);
  return AE_OK;
}

AE_INLINE int hist_bin(float v) {
  uint32_t u;
  __builtin_memcpy(&u, &v, 4);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return AE_FFN_HIST_BINS - 1;                /* NaN */
  const int e = (int)(u >> 23) - 127;
  if (e < AE_FFN_HIST_LO) return 0;
  const int k = (e - AE_FFN_HIST_LO) * AE_FFN_HIST_PER + (int)((u >> (23 - 4)) & (AE_FFN_HIST_PER - 1)) + 1;
  return k < AE_FFN_HIST_BINS ? k : AE_FFN_HIST_BINS - 1;
}
static_assert(AE_FFN_HIST_PER == 16, "hist_bin takes 4 mantissa bits");

static int run_profile(ae_ffn_ctx *c, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const ae_ffn_aux *a = c->a;
  const int H = c->H, n = c->n;
  if (c->rows != H || !a->stats || !a->hist) return AE_ERR_INVALID_ARG;
  double *stats = (double *)(uintptr_t)a->stats;
  uint32_t *hist = (uint32_t *)(uintptr_t)a->hist + (size_t)ith * AE_FFN_HIST_BINS;
  const float eps = a->small_eps;
  _Alignas(16) uint8_t xbuf[AE_FFN_XQ_STACK];
  _Alignas(16) float buf[2 * AE_FFN_CHUNK], ones[AE_FFN_CHUNK];
  for (int k = 0; k < AE_FFN_CHUNK; k++) ones[k] = 1.0f;
  ae_ffn_prep_x(c, xbuf, ith, nth, pool);
  for (int j = c->r0; j < c->r1;) {
    const uint8_t *gp, *upp;
    int joint;
    const int cnt = ae_ffn_chunk(c, j, c->r1, &gp, &upp, &joint);
    for (int b = 0; b < n; b++) {
      ae_ffn_gu(c, gp, upp, joint, cnt, b, buf);
      ae_silu_mul(buf, ones, cnt);                    /* s = silu(g) */
      float *h = m->hb + (size_t)b * H + j;
      for (int k = 0; k < cnt; k++) {
        const float s = buf[k], v = s * buf[cnt + k];
        h[k] = v;
        double *p = stats + (size_t)(j + k) * AE_FFN_ST_N;
        const double dv = v, av = __builtin_fabs(dv);
        p[AE_FFN_ST_SUM] += dv;
        p[AE_FFN_ST_SUM2] += dv * dv;
        p[AE_FFN_ST_SUMABS] += av;
        if (av > p[AE_FFN_ST_MAXABS]) p[AE_FFN_ST_MAXABS] = av;
        if (__builtin_fabsf(v) < eps) p[AE_FFN_ST_SMALL] += 1.0;
        if (v == 0.0f) p[AE_FFN_ST_ZERO] += 1.0;
        p[AE_FFN_ST_SUMS] += __builtin_fabsf(s);
        hist[hist_bin(s)]++;
      }
    }
    j += cnt;
  }
  ae_ffn_quant_h(c);
  if (ith == 0) c->L->ffn_active = n * H;
  ae_barrier(pool);
  ae_ffn_down_rows(c, ith, nth, pool);
  return AE_OK;
}

AE_EXPORT int ae_ffn_saturated_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool) {
  ae_ffn_ctx c;
  int st = ae_ffn_setup(&c, m, layer, n, ith, nth);
  if (st) return st;
  if (!c.a) return AE_ERR_INVALID_ARG;
  switch (c.mode) {
    case AE_FFN_SAT_STATIC: return run_static(&c, ith, nth, pool);
    case AE_FFN_SAT_DYNAMIC: return run_dynamic(&c, ith, nth, pool);
    case AE_FFN_PROFILE: return run_profile(&c, ith, nth, pool);
    default: return AE_ERR_INVALID_ARG;
  }
}
