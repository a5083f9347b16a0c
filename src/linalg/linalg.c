/*
 * Dense linear algebra of the offline compression tools (aether analyze / compress, js/src/compress/fast.ts):
 * the work that is too slow in JS at Phi-3-mini shapes (Gram matrices of 3072 x 8192 weights and of calibration
 * activations, Cholesky, symmetric eigenvalues of 3072 x 3072 matrices). A module of its own (slot 4), run on
 * one thread over its own memory; never used by the runtime.
 *
 *   ae_la_gemm_nt      C = A B^T (+ C): f32, row-major, both operands with K contiguous; SIMD128 4x2 tiles,
 *                      blocked for the caches; flag AE_LA_UPPER computes only tiles that touch j >= i (Gram
 *                      matrices: the host mirrors). Reference: ae_la_gemm_nt_ref (same loop order per element
 *                      is not promised: sums of K products in another order, f32).
 *   ae_la_chol         lower Cholesky factor in place (f64); 0, or 1 + the failing column.
 *   ae_la_trinv_lower  inverse of a lower-triangular matrix in place (f64).
 *   ae_la_tridiag      Householder reduction of a symmetric matrix (f64, lower triangle used) to tridiagonal form
 *                      (d, e); the matrix is destroyed.
 *   ae_la_tql          eigenvalues of a symmetric tridiagonal matrix (implicit QL with Wilkinson shifts), in d.
 */
#include <stdint.h>
#include <stddef.h>
#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#endif

#define AE_EXPORT __attribute__((visibility("default"), used))
#define AE_LA_ACCUMULATE 1
/* no libc here: sqrt is an instruction (__builtin_sqrt), hypot is written out (scaled, no overflow) */
#define sqrt __builtin_sqrt
#define fabs __builtin_fabs
static double la_hypot(double a, double b) {
  a = fabs(a); b = fabs(b);
  const double m = a > b ? a : b, n = a > b ? b : a;
  if (m == 0.0) return 0.0;
  const double r = n / m;
  return m * sqrt(1.0 + r * r);
}
#define hypot la_hypot
#define AE_LA_UPPER 2

AE_EXPORT void ae_la_gemm_nt_ref(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc, int flags) {
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      if ((flags & AE_LA_UPPER) && j < i) continue;
      float s = 0.0f;
      for (int p = 0; p < K; p++) s += A[(size_t)i * lda + p] * B[(size_t)j * ldb + p];
      C[(size_t)i * ldc + j] = (flags & AE_LA_ACCUMULATE) ? C[(size_t)i * ldc + j] + s : s;
    }
  }
}

#ifdef __wasm_simd128__
static inline float hsum(v128_t v) {
  return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}

/* one element over p in [0, kc) */
static inline float dot1(const float *a, const float *b, int kc) {
  v128_t acc = wasm_f32x4_splat(0.0f);
  int p = 0;
  for (; p + 4 <= kc; p += 4) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(a + p), wasm_v128_load(b + p)));
  float s = hsum(acc);
  for (; p < kc; p++) s += a[p] * b[p];
  return s;
}

/* 4 rows of A x 2 rows of B over p in [0, kc) (kc a multiple of 4) into out[4][2] */
static inline void tile42(const float *a, int lda, const float *b, int ldb, int kc, float out[8]) {
  v128_t c00 = wasm_f32x4_splat(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * (size_t)lda, *a3 = a + 3 * (size_t)lda, *b0 = b, *b1 = b + ldb;
  for (int p = 0; p < kc; p += 4) {
    v128_t x0 = wasm_v128_load(b0 + p), x1 = wasm_v128_load(b1 + p);
    v128_t w = wasm_v128_load(a0 + p);
    c00 = wasm_f32x4_add(c00, wasm_f32x4_mul(w, x0)); c01 = wasm_f32x4_add(c01, wasm_f32x4_mul(w, x1));
    w = wasm_v128_load(a1 + p);
    c10 = wasm_f32x4_add(c10, wasm_f32x4_mul(w, x0)); c11 = wasm_f32x4_add(c11, wasm_f32x4_mul(w, x1));
    w = wasm_v128_load(a2 + p);
    c20 = wasm_f32x4_add(c20, wasm_f32x4_mul(w, x0)); c21 = wasm_f32x4_add(c21, wasm_f32x4_mul(w, x1));
    w = wasm_v128_load(a3 + p);
    c30 = wasm_f32x4_add(c30, wasm_f32x4_mul(w, x0)); c31 = wasm_f32x4_add(c31, wasm_f32x4_mul(w, x1));
  }
  out[0] = hsum(c00); out[1] = hsum(c01); out[2] = hsum(c10); out[3] = hsum(c11);
  out[4] = hsum(c20); out[5] = hsum(c21); out[6] = hsum(c30); out[7] = hsum(c31);
}
#endif


/* f64 helpers: SIMD (two f64x2 accumulators) in the wasm build, scalar references otherwise */
static inline double ddot(const double *a, const double *b, int n) {
#ifdef __wasm_simd128__
  v128_t s0 = wasm_f64x2_splat(0.0), s1 = s0;
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 = wasm_f64x2_add(s0, wasm_f64x2_mul(wasm_v128_load(a + k), wasm_v128_load(b + k)));
    s1 = wasm_f64x2_add(s1, wasm_f64x2_mul(wasm_v128_load(a + k + 2), wasm_v128_load(b + k + 2)));
  }
  s0 = wasm_f64x2_add(s0, s1);
  double s = wasm_f64x2_extract_lane(s0, 0) + wasm_f64x2_extract_lane(s0, 1);
  for (; k < n; k++) s += a[k] * b[k];
  return s;
#else
  double s = 0.0;
  for (int k = 0; k < n; k++) s += a[k] * b[k];
  return s;
#endif
}

/* returns sum a[j] v[j] over j < n and adds vi * a[j] to p[j] (one pass over the row) */
static inline double dot_axpy(const double *a, const double *v, double *p, double vi, int n) {
#ifdef __wasm_simd128__
  v128_t s0 = wasm_f64x2_splat(0.0), s1 = s0, c = wasm_f64x2_splat(vi);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    v128_t a0 = wasm_v128_load(a + j), a1 = wasm_v128_load(a + j + 2);
    s0 = wasm_f64x2_add(s0, wasm_f64x2_mul(a0, wasm_v128_load(v + j)));
    s1 = wasm_f64x2_add(s1, wasm_f64x2_mul(a1, wasm_v128_load(v + j + 2)));
    wasm_v128_store(p + j, wasm_f64x2_add(wasm_v128_load(p + j), wasm_f64x2_mul(c, a0)));
    wasm_v128_store(p + j + 2, wasm_f64x2_add(wasm_v128_load(p + j + 2), wasm_f64x2_mul(c, a1)));
  }
  s0 = wasm_f64x2_add(s0, s1);
  double s = wasm_f64x2_extract_lane(s0, 0) + wasm_f64x2_extract_lane(s0, 1);
  for (; j < n; j++) { s += a[j] * v[j]; p[j] += a[j] * vi; }
  return s;
#else
  double s = 0.0;
  for (int j = 0; j < n; j++) { s += a[j] * v[j]; p[j] += a[j] * vi; }
  return s;
#endif
}

/* a[j] -= vi * p[j] + wi * v[j] for j < n */
static inline void rank2(double *a, const double *p, const double *v, double vi, double wi, int n) {
#ifdef __wasm_simd128__
  v128_t cv = wasm_f64x2_splat(vi), cw = wasm_f64x2_splat(wi);
  int j = 0;
  for (; j + 2 <= n; j += 2)
    wasm_v128_store(a + j, wasm_f64x2_sub(wasm_v128_load(a + j), wasm_f64x2_add(wasm_f64x2_mul(cv, wasm_v128_load(p + j)), wasm_f64x2_mul(cw, wasm_v128_load(v + j)))));
  for (; j < n; j++) a[j] -= vi * p[j] + wi * v[j];
#else
  for (int j = 0; j < n; j++) a[j] -= vi * p[j] + wi * v[j];
#endif
}

#define KC 512   /* floats of K per block: 2 KiB per row */
#define NC 128   /* rows of B per block: 256 KiB, in L2 */

AE_EXPORT void ae_la_gemm_nt(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc, int flags) {
#ifndef __wasm_simd128__
  ae_la_gemm_nt_ref(M, N, K, A, lda, B, ldb, C, ldc, flags);
#else
  const int upper = flags & AE_LA_UPPER;
  if (K == 0 || (K & 3)) { ae_la_gemm_nt_ref(M, N, K, A, lda, B, ldb, C, ldc, flags); return; }
  for (int jc = 0; jc < N; jc += NC) {
    const int jn = jc + NC < N ? jc + NC : N;
    for (int pc = 0; pc < K; pc += KC) {
      const int kc = pc + KC < K ? KC : K - pc;
      const int acc = pc > 0 || (flags & AE_LA_ACCUMULATE);
      const int iend = upper ? (jn < M ? jn : M) : M;   /* rows below the block's last column are below the diagonal */
      for (int i = 0; i < iend; i += 4) {
        const int mr = i + 4 <= M ? 4 : M - i;
        for (int j = jc; j < jn; j += 2) {
          const int nr = j + 2 <= jn ? 2 : jn - j;
          if (upper && j + nr - 1 < i) continue;   /* tile entirely below the diagonal */
          if (mr == 4 && nr == 2) {
            float t[8];
            tile42(A + (size_t)i * lda + pc, lda, B + (size_t)j * ldb + pc, ldb, kc, t);
            for (int r = 0; r < 4; r++) for (int c = 0; c < 2; c++) {
              float *dst = C + (size_t)(i + r) * ldc + j + c;
              *dst = acc ? *dst + t[r * 2 + c] : t[r * 2 + c];
            }
          } else {
            for (int r = 0; r < mr; r++) for (int c = 0; c < nr; c++) {
              float s = dot1(A + (size_t)(i + r) * lda + pc, B + (size_t)(j + c) * ldb + pc, kc);
              float *dst = C + (size_t)(i + r) * ldc + j + c;
              *dst = acc ? *dst + s : s;
            }
          }
        }
      }
    }
  }
#endif
}

AE_EXPORT int ae_la_chol(int n, double *A, int lda) {
  for (int j = 0; j < n; j++) {
    double *aj = A + (size_t)j * lda;
    double d = aj[j];
    d -= ddot(aj, aj, j);
    if (!(d > 0.0)) return j + 1;
    d = sqrt(d);
    aj[j] = d;
    const double inv = 1.0 / d;
    for (int i = j + 1; i < n; i++) {
      double *ai = A + (size_t)i * lda;
      ai[j] = (ai[j] - ddot(ai, aj, j)) * inv;
    }
  }
  for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++) A[(size_t)i * lda + j] = 0.0;
  return 0;
}

/* L^-1 in place, row by row: row i of X = L^-1 solves sum_k L[i][k] X[k][j] = delta_ij */
AE_EXPORT void ae_la_trinv_lower(int n, double *L, int ld) {
  for (int i = 0; i < n; i++) {
    double *li = L + (size_t)i * ld;
    const double d = li[i];
    /* X[i][j] for j < i = -(sum_{k=j}^{i-1} L[i][k] X[k][j]) / d, using the rows k < i already inverted */
    for (int j = 0; j < i; j++) {
      double s = 0.0;
      for (int k = j; k < i; k++) s += li[k] * L[(size_t)k * ld + j];
      li[j] = s;   /* temporarily the sum; L[i][k] for k > j are still original below */
    }
    /* the loop above overwrote li[j] while later j read li[k] for k > j (still original): correct order */
    for (int j = 0; j < i; j++) li[j] = -li[j] / d;
    li[i] = 1.0 / d;
  }
}

/*
 * Householder tridiagonalisation of the symmetric n x n matrix A (row-major, lower triangle read and updated):
 * for column k, v reflects A[k+1:, k] onto a multiple of e1; the trailing block becomes H A H with
 * p = beta A v, w = p - (beta/2)(p.v) v, A -= v w^T + w v^T. d: diagonal, e[0..n-2]: sub-diagonal.
 * v and p are scratch of n doubles each.
 */
AE_EXPORT void ae_la_tridiag(int n, double *A, int lda, double *d, double *e, double *v, double *p) {
  for (int k = 0; k + 2 < n; k++) {
    const int m = n - k - 1;                 /* trailing block rows k+1 .. n-1 */
    double alpha2 = 0.0;
    for (int i = 0; i < m; i++) { double x = A[(size_t)(k + 1 + i) * lda + k]; v[i] = x; alpha2 += x * x; }
    d[k] = A[(size_t)k * lda + k];
    if (alpha2 == 0.0) { e[k] = 0.0; continue; }
    double alpha = sqrt(alpha2);
    if (v[0] > 0) alpha = -alpha;
    e[k] = alpha;
    v[0] -= alpha;
    double vnorm2 = alpha2 - 2.0 * alpha * (v[0] + alpha) + alpha * alpha;   /* ||x - alpha e1||^2 */
    if (!(vnorm2 > 0.0)) continue;
    const double beta = 2.0 / vnorm2;
    /* p = beta * A_sub v (symmetric, from the lower triangle) */
    for (int i = 0; i < m; i++) p[i] = 0.0;
    for (int i = 0; i < m; i++) {
      const double *ai = A + (size_t)(k + 1 + i) * lda + (k + 1);
      const double vi = v[i];
      const double s = dot_axpy(ai, v, p, vi, i);
      p[i] += s + ai[i] * vi;
    }
    double pv = 0.0;
    for (int i = 0; i < m; i++) { p[i] *= beta; pv += p[i] * v[i]; }
    const double h = 0.5 * beta * pv;
    for (int i = 0; i < m; i++) p[i] -= h * v[i];   /* p is now w */
    for (int i = 0; i < m; i++) {
      double *ai = A + (size_t)(k + 1 + i) * lda + (k + 1);
      rank2(ai, p, v, v[i], p[i], i + 1);
    }
  }
  if (n >= 2) { d[n - 2] = A[(size_t)(n - 2) * lda + n - 2]; e[n - 2] = A[(size_t)(n - 1) * lda + n - 2]; }
  if (n >= 1) d[n - 1] = A[(size_t)(n - 1) * lda + n - 1];
}

/* Eigenvalues of the symmetric tridiagonal (d, e) into d (unsorted); e destroyed. 0, or 1 if no convergence. */
AE_EXPORT int ae_la_tql(int n, double *d, double *e) {
  if (n <= 1) return 0;
  e[n - 1] = 0.0;
  for (int l = 0; l < n; l++) {
    int iter = 0, m;
    for (;;) {
      for (m = l; m < n - 1; m++) {
        const double dd = fabs(d[m]) + fabs(d[m + 1]);
        if (fabs(e[m]) <= 2.220446049250313e-16 * dd) break;
      }
      if (m == l) break;
      if (++iter > 60) return 1;
      double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
      double r = hypot(g, 1.0);
      g = d[m] - d[l] + e[l] / (g + (g >= 0 ? r : -r));
      double s = 1.0, c = 1.0, pp = 0.0;
      int i;
      for (i = m - 1; i >= l; i--) {
        double f = s * e[i], b = c * e[i];
        r = hypot(f, g);
        e[i + 1] = r;
        if (r == 0.0) { d[i + 1] -= pp; e[m] = 0.0; break; }
        s = f / r; c = g / r;
        g = d[i + 1] - pp;
        r = (d[i] - g) * s + 2.0 * c * b;
        pp = s * r;
        d[i + 1] = g + pp;
        g = c * r - b;
      }
      if (r == 0.0 && i >= l) continue;
      d[l] -= pp; e[l] = g; e[m] = 0.0;
    }
  }
  return 0;
}
