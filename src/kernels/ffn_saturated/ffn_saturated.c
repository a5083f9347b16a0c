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
 * ffn_active = neurons whose up row was computed, summed over tokens. Its kernels (neuron-major down,
 * gathered-row dot products) are in src/kernels/simd128/sparse_simd128.c with references in
 * src/kernels/ref/sparse_ref.c. */
#include "kernels/ffn_common.h"

/* Neuron-major down over the computed neurons of each token (h != 0; static: only the active list),
 * columns of dim split over threads, then + comp and x += y. Ends with the closing barrier. */
static void down_neuron(ae_ffn_ctx *c, const int32_t *list, int nlist, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const ae_ffn_aux *a = c->a;
  const int D = c->D, H = c->H;
  int d0, d1;
  ae_split_aligned(D, 32, ith, nth, &d0, &d1);
  if (d0 < d1) {
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
        if (cnt) ae_axpy_rows((ae_type)a->down_type, base, rs, idx, coef, cnt, d0, d1, y);
      }
      if (comp) ae_add(y + d0, comp + d0, d1 - d0);
      ae_add(m->x + (size_t)b * D + d0, y + d0, d1 - d0);
    }
  }
  ae_barrier(pool);
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
  if (a->down_mode != AE_FFN_DOWN_NEURON || !a->down_nm || !ae_axpy_rows_supported(a->down_type) || c->D % 32) return AE_ERR_UNSUPPORTED;
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
  v128 xs[gather ? nb * (AE_GATHER_BLK_BYTES / 16) : 1];   /* x prepared for ae_gather_dot_simd128 */
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
          if (prepared != b) { ae_gather_prep_simd128(xb, nb, xs, dx); prepared = n == 1 ? b : -1; }
          ae_gather_dot_simd128(c->gt, rows, na, nb, xs, dx, u);
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
