/* The SIMD128 kernels against their scalar references under AddressSanitizer + UndefinedBehaviorSanitizer:
 * built with emscripten (emcc -msimd128 -fsanitize=address,undefined, fuzz/c/build-simd-san.sh) and run by Node, so
 * the very wasm SIMD code the model runs is checked, not a native stand-in. Every buffer is a malloc of exactly the
 * bytes the kernel may touch (ASan's redzones catch a vector load or store past a tail), sizes cover the tails
 * (lengths 1..67 for the row ops, every block count 1..9 and ragged row ranges for the per-dtype kernels), and each
 * result is compared with the reference:
 *   - quantisers (from_float): the SIMD quantisation error is no worse than the reference's worst (per row);
 *   - to_float, matmul vs matvec, axpy_rows, argmax: exactly equal (the kernels promise bit-identity);
 *   - dots (vec_dot, matvec rows): |simd - ref| <= 1e-4 * sum |w_i x_i| + 1e-6 (summation order differs);
 *   - row ops, attention: |simd - ref| <= 2e-4 * (1 + |ref|) (rmsnorm, softmax, activations use approximations).
 * Prints one line per kernel family and "simd-san: N checks, 0 failures"; exits 1 on a mismatch, and the
 * sanitizers abort on any memory or UB error. Usage: node --no-experimental-fetch build/simd-san/simd-san.cjs [seed];
 * `--overflow` instead runs one SIMD kernel on a buffer one float short (ASan must stop it: the harness self-test). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"

static uint32_t g_rng = 12345;
static uint32_t rnd(void) { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 17; g_rng ^= g_rng << 5; return g_rng; }
static float frand(float a) { return ((float)(rnd() & 0xffffff) / 16777216.0f * 2.0f - 1.0f) * a; }
static long g_checks, g_fail;

static void fail(const char *what, const char *name, int n, double got, double want, double tol) {
  if (g_fail < 20) printf("FAIL %s %s n=%d: simd %.9g ref %.9g (tol %.3g)\n", what, name, n, got, want, tol);
  g_fail++;
}
static void close_to(const char *what, const char *name, int n, double got, double want, double tol) {
  g_checks++;
  if (!(fabs(got - want) <= tol)) fail(what, name, n, got, want, tol);
}
static void *xmalloc(size_t n) { void *p = malloc(n ? n : 1); if (!p) { printf("out of memory\n"); exit(2); } return p; }
static float *frandv(int n, float a) { float *x = xmalloc((size_t)n * 4); for (int i = 0; i < n; i++) x[i] = frand(a); return x; }

/* one dtype: quantisers, dequantisers, dots, matvec / matmul */
static void check_dtype(ae_type t) {
  const ae_type_traits *s = ae_traits(t), *r = ae_traits_ref(t);
  if (!s || !r) return;
  const int B = s->blck_size;
  for (int nb = 1; nb <= 9; nb++) {
    const int n = nb * B;
    const size_t rs = ae_row_size(t, n);
    float *x = frandv(n, nb & 1 ? 1.0f : 37.5f);
    if (nb == 3) for (int i = 0; i < n; i += 7) x[i] = 0.0f;
    /* from_float: SIMD error no worse than the reference's worst */
    uint8_t *qs = xmalloc(rs), *qr = xmalloc(rs);
    s->from_float(x, qs, n);
    r->from_float(x, qr, n);
    float *ds = xmalloc((size_t)n * 4), *dr = xmalloc((size_t)n * 4);
    r->to_float(qs, ds, n);
    r->to_float(qr, dr, n);
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(dr[i] - x[i]));
    for (int i = 0; i < n; i++) close_to("from_float error", s->name, n, fabs(ds[i] - x[i]), 0, worst * 1.0001 + 1e-7);
    /* to_float: exact */
    float *ts = xmalloc((size_t)n * 4);
    s->to_float(qr, ts, n);
    for (int i = 0; i < n; i++) { g_checks++; if (memcmp(&ts[i], &dr[i], 4)) fail("to_float", s->name, n, ts[i], dr[i], 0); }
    if (s->is_weight && s->vec_dot) {
      const ae_type at = s->vec_dot_type;
      const size_t ars = ae_row_size(at, n);
      const int nrows = 5, nvec = 3;
      uint8_t *W = xmalloc(rs * nrows);
      float *wf = xmalloc((size_t)n * 4);
      for (int row = 0; row < nrows; row++) { float *w = frandv(n, 2.0f); r->from_float(w, W + rs * row, n); free(w); }
      uint8_t *xq = xmalloc(ars * nvec);
      float *xf = xmalloc((size_t)n * 4 * nvec);
      for (int b = 0; b < nvec; b++) {
        float *a = frandv(n, 3.0f);
        ae_traits_ref(at)->from_float(a, xq + ars * b, n);
        ae_traits_ref(at)->to_float(xq + ars * b, xf + (size_t)n * b, n);
        free(a);
      }
      float y[5 * 3], yr, ym[5 * 3];
      for (int row = 0; row < nrows; row++) {
        r->to_float(W + rs * row, wf, n);
        for (int b = 0; b < nvec; b++) {
          double mag = 0;
          for (int i = 0; i < n; i++) mag += fabs((double)wf[i] * xf[(size_t)n * b + i]);
          float v;
          s->vec_dot(n, &v, W + rs * row, xq + ars * b);
          r->vec_dot(n, &yr, W + rs * row, xq + ars * b);
          close_to("vec_dot", s->name, n, v, yr, 1e-4 * mag + 1e-6);
        }
      }
      /* matvec over ragged row ranges, a y of exactly the rows written */
      for (int r0 = 0; r0 < nrows; r0++)
        for (int r1 = r0 + 1; r1 <= nrows; r1++) {
          float *yy = xmalloc((size_t)r1 * 4);
          s->matvec(W, n, xq, yy, r0, r1);
          for (int row = r0; row < r1; row++) {
            r->vec_dot(n, &yr, W + rs * row, xq);
            r->to_float(W + rs * row, wf, n);
            double mag = 0;
            for (int i = 0; i < n; i++) mag += fabs((double)wf[i] * xf[i]);
            close_to("matvec", s->name, n, yy[row], yr, 1e-4 * mag + 1e-6);
          }
          free(yy);
        }
      /* matmul: equal to matvec per vector, bit for bit */
      if (s->matmul) {
        s->matmul(W, n, xq, ars, nvec, ym, nrows, 0, nrows);
        for (int b = 0; b < nvec; b++) {
          s->matvec(W, n, xq + ars * b, y + nrows * b, 0, nrows);
          for (int row = 0; row < nrows; row++) { g_checks++; if (memcmp(&ym[nrows * b + row], &y[nrows * b + row], 4)) fail("matmul", s->name, n, ym[nrows * b + row], y[nrows * b + row], 0); }
        }
      }
      /* axpy_rows (ffn-saturated down projection): bit for bit */
      if (ae_axpy_rows_supported(t) && n % 32 == 0) {
        int32_t idx[4] = {4, 0, 2, 2};
        float coef[4] = {0.5f, -1.25f, 2.0f, 0.125f};
        for (int d0 = 0; d0 < n; d0 += 32) {
          const int d1 = n;
          float *ya = xmalloc((size_t)d1 * 4), *yb = xmalloc((size_t)d1 * 4);
          for (int i = 0; i < d1; i++) ya[i] = yb[i] = (float)i * 0.01f;
          ae_axpy_rows(t, W, rs, idx, coef, 4, d0, d1, ya);
          ae_axpy_rows_ref(t, W, rs, idx, coef, 4, d0, d1, yb);
          for (int i = 0; i < d1; i++) { g_checks++; if (memcmp(&ya[i], &yb[i], 4)) fail("axpy_rows", s->name, n, ya[i], yb[i], 0); }
          free(ya); free(yb);
        }
      }
      free(W); free(wf); free(xq); free(xf);
    }
    free(x); free(qs); free(qr); free(ds); free(dr); free(ts);
  }
  printf("dtype %-5s from_float / to_float%s%s%s: ok so far (%ld checks, %ld failures)\n", s->name, s->is_weight ? " / vec_dot / matvec" : "",
         s->matmul ? " / matmul" : "", ae_axpy_rows_supported(t) ? " / axpy_rows" : "", g_checks, g_fail);
}

static void check_rows(void) {
  for (int n = 1; n <= 67; n++) {
    float *x = frandv(n, 4.0f), *u = frandv(n, 4.0f), *w = frandv(n, 1.5f);
    float *a = xmalloc((size_t)n * 4), *b = xmalloc((size_t)n * 4), *u2 = xmalloc((size_t)n * 4);
#define ROW_OP(NAME, SIMD, REF)                                                                    \
    memcpy(a, x, (size_t)n * 4); memcpy(b, x, (size_t)n * 4);                                     \
    SIMD; REF;                                                                                     \
    for (int i = 0; i < n; i++) close_to(NAME, "f32", n, a[i], b[i], 2e-4 * (1 + fabs(b[i])));
    ROW_OP("rmsnorm", ae_rmsnorm_simd128(a, x, w, n, 1e-5f), ae_rmsnorm_ref(b, x, w, n, 1e-5f))
    ROW_OP("softmax", ae_softmax_simd128(a, n), ae_softmax_ref(b, n))
    ROW_OP("silu_mul", ae_silu_mul_simd128(a, u, n), ae_silu_mul_ref(b, u, n))
    ROW_OP("gelu", ae_gelu_simd128(a, n), ae_gelu_ref(b, n))
    ROW_OP("gelu_mul", ae_gelu_mul_simd128(a, u, n), ae_gelu_mul_ref(b, u, n))
    ROW_OP("softcap", ae_softcap_simd128(a, n, 30.0f), ae_softcap_ref(b, n, 30.0f))
    ROW_OP("add", ae_add_simd128(a, u, n), ae_add_ref(b, u, n))
#undef ROW_OP
    memcpy(u2, x, (size_t)n * 4);
    g_checks++;
    if (ae_argmax_simd128(x, n) != ae_argmax_ref(x, n)) fail("argmax", "f32", n, ae_argmax_simd128(x, n), ae_argmax_ref(x, n), 0);
    for (int i = 0; i < n; i++) u2[i] = (float)(i % 5); /* ties: lowest index */
    g_checks++;
    if (ae_argmax_simd128(u2, n) != ae_argmax_ref(u2, n)) fail("argmax ties", "f32", n, ae_argmax_simd128(u2, n), ae_argmax_ref(u2, n), 0);
    free(x); free(u); free(w); free(a); free(b); free(u2);
  }
  /* rope: both layouts, rot_dim <= head_dim, cs of exactly rot_dim floats */
  for (int hd = 2; hd <= 80; hd += 2)
    for (int rot = 2; rot <= hd; rot += (hd > 16 ? 14 : 2))
      for (int neox = 0; neox <= 1; neox++) {
        const int nh = 1 + (int)(rnd() % 3);
        float *x = frandv(nh * hd, 2.0f), *a = xmalloc((size_t)nh * hd * 4), *b = xmalloc((size_t)nh * hd * 4), *cs = xmalloc((size_t)rot * 4);
        ae_rope_cos_sin(cs, 1 + (int)(rnd() % 500), rot, 10000.0f);
        memcpy(a, x, (size_t)nh * hd * 4); memcpy(b, x, (size_t)nh * hd * 4);
        ae_rope_simd128(a, nh, hd, rot, cs, neox);
        ae_rope_ref(b, nh, hd, rot, cs, neox);
        for (int i = 0; i < nh * hd; i++) close_to("rope", neox ? "neox" : "norm", hd, a[i], b[i], 2e-5 * (1 + fabs(b[i])));
        free(x); free(a); free(b); free(cs);
      }
  printf("row ops rmsnorm / softmax / silu_mul / gelu / gelu_mul / softcap / add / argmax / rope: ok so far (%ld checks, %ld failures)\n", g_checks, g_fail);
}

static void check_attention(void) {
  for (int hd = 1; hd <= 72; hd += 7)
    for (int nkv = 1; nkv <= 19; nkv += 3) {
      const int stride = hd + (int)(rnd() % 3);
      const size_t kvn = (size_t)(nkv - 1) * stride + hd;
      float *q = frandv(hd, 1.0f), *k = frandv((int)kvn, 1.0f), *v = frandv((int)kvn, 1.0f);
      float *oa = xmalloc((size_t)hd * 4), *ob = xmalloc((size_t)hd * 4), *aa = xmalloc((size_t)nkv * 4), *ab = xmalloc((size_t)nkv * 4);
      const float cap = (hd & 1) ? 0.0f : 20.0f;
      ae_attention_simd128(oa, q, k, v, nkv, hd, stride, 0.125f, cap, aa);
      ae_attention_ref(ob, q, k, v, nkv, hd, stride, 0.125f, cap, ab);
      for (int i = 0; i < hd; i++) close_to("attention", "f32", hd, oa[i], ob[i], 2e-4 * (1 + fabs(ob[i])));
      free(q); free(k); free(v); free(oa); free(ob); free(aa); free(ab);
    }
  /* attn_accum (typed V rows) and attention over a typed KV cache */
  const ae_type kv_types[4] = {AE_F32, AE_F16, AE_Q8_0, AE_Q4_0};
  for (int ti = 0; ti < 4; ti++)
    for (int hd = 32; hd <= 128; hd += 32)
      for (int n = 1; n <= 9; n += 4) {
        const ae_type t = kv_types[ti];
        const size_t rs = ae_kv_row_size(t, hd);
        uint8_t *V = xmalloc(rs * n);
        for (int i = 0; i < n; i++) { float *w = frandv(hd, 1.0f); ae_traits_ref(t)->from_float(w, V + rs * i, hd); free(w); }
        float *att = frandv(n, 1.0f), *oa = xmalloc((size_t)hd * 4), *ob = xmalloc((size_t)hd * 4);
        memset(oa, 0, (size_t)hd * 4); memset(ob, 0, (size_t)hd * 4);
        ae_attn_accum(t, V, n, hd, att, oa);
        ae_attn_accum_ref(t, V, n, hd, att, ob);
        for (int i = 0; i < hd; i++) close_to("attn_accum", ae_traits(t)->name, hd, oa[i], ob[i], 2e-4 * (1 + fabs(ob[i])));
        /* ae_attention_kv: K and V of this dtype, ng = 2 query heads, two runs */
        if (ae_kv_types_ok(t, t, hd)) {
          const int ng = 2, n1 = n, n2 = 1 + n / 2;
          uint8_t *K = xmalloc(rs * (n1 + n2)), *V2 = xmalloc(rs * (n1 + n2));
          for (int i = 0; i < n1 + n2; i++) {
            float *w = frandv(hd, 1.0f); ae_traits_ref(t)->from_float(w, K + rs * i, hd); free(w);
            w = frandv(hd, 1.0f); ae_traits_ref(t)->from_float(w, V2 + rs * i, hd); free(w);
          }
          ae_kv_run run[2] = {{K, V2, t, t, n1}, {K + rs * n1, V2 + rs * n1, t, t, n2}};
          float *q = frandv(ng * hd, 1.0f);
          float *o1 = xmalloc((size_t)ng * hd * 4), *o2 = xmalloc((size_t)ng * hd * 4);
          float *a1 = xmalloc((size_t)ng * (n1 + n2) * 4), *a2 = xmalloc((size_t)ng * (n1 + n2) * 4);
          void *qb1 = xmalloc((size_t)(ng + 1) * AE_KV_PAD(hd) * 4), *qb2 = xmalloc((size_t)(ng + 1) * AE_KV_PAD(hd) * 4);
          ae_attention_kv(o1, hd, q, hd, ng, run, 2, hd, 0.1f, 0.0f, a1, n1 + n2, qb1);
          ae_attention_kv_ref(o2, hd, q, hd, ng, run, 2, hd, 0.1f, 0.0f, a2, n1 + n2, qb2);
          for (int i = 0; i < ng * hd; i++) close_to("attention_kv", ae_traits(t)->name, hd, o1[i], o2[i], 2e-3 * (1 + fabs(o2[i])));
          free(K); free(V2); free(q); free(o1); free(o2); free(a1); free(a2); free(qb1); free(qb2);
        }
        free(V); free(att); free(oa); free(ob);
      }
  printf("attention / attn_accum / attention_kv (f32, f16, q8_0, q4_0): ok so far (%ld checks, %ld failures)\n", g_checks, g_fail);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--overflow")) {
    /* self-test of the harness: a SIMD kernel given a buffer one float short must be stopped by ASan */
    const int n = 13;
    float *x = frandv(n, 1.0f), *w = frandv(n, 1.0f), *y = xmalloc((size_t)(n - 1) * 4);
    ae_rmsnorm_simd128(y, x, w, n, 1e-5f);
    printf("simd-san: the overflow was not detected\n");
    return 0;
  }
  if (argc > 1) g_rng = (uint32_t)strtoul(argv[1], 0, 10) | 1u;
  for (int t = 0; t < AE_TYPE_COUNT; t++) check_dtype((ae_type)t);
  check_rows();
  check_attention();
  printf("simd-san: %ld checks, %ld failures\n", g_checks, g_fail);
  return g_fail ? 1 : 0;
}
