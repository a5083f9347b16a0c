/* Prefill GEMM for f16 weights x f32 activations: ae_matmul_rows_f16_simd128.
 *
 * Tile: one weight row x 4 tokens. Each group of 8 halves is converted to floats once (the fast conversion,
 * exact for finite halves, with the inf/nan check of dot_f16_simd128.c; a row that meets one is recomputed
 * with the exact conversion) and multiplied into the 4 tokens' accumulators. Per token this is the
 * operation sequence of the f16 matvec (dot_f16_simd128.c: acc += w_lo x, acc += w_hi x per 8 elements, a
 * 4-element step, s = (acc0 + acc2) + (acc1 + acc3), then the scalar tail), so every y[b][r] equals
 * ae_matvec on token b bit for bit (ae_madd as the matvec: in the relaxed build too, on one host). The conversion, about half the matvec's work, is shared by 4 tokens.
 * Rows in chunks of GEMM_ROWS (kept in cache while every token group passes); a last group of 1-3 tokens
 * repeats its last token in the spare accumulators and stores only the real ones. */
#include "simd128_util.h"

#define GEMM_ROWS 32

AE_INLINE v128 cvt(v128 x32, int exact) { return exact ? ae_h2f_exact(x32) : ae_h2f_fast(x32); }

/* Row h (n halves) x tokens x0..x3; out[t] = dot. Returns 1 if an inf/nan half was seen (when !exact). */
AE_INLINE int row4(int n, const ae_fp16 *h, const float *x0, const float *x1, const float *x2, const float *x3,
                   float *out, int exact) {
  v128 a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0, m = wasm_i32x4_splat(0);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const v128 v = ae_load(h + i);
    if (!exact) m = ae_h16_infnan_acc(m, v);
    const v128 lo = cvt(ae_h16_lo(v), exact), hi = cvt(ae_h16_hi(v), exact);
    a0 = ae_madd(hi, ae_load(x0 + i + 4), ae_madd(lo, ae_load(x0 + i), a0));
    a1 = ae_madd(hi, ae_load(x1 + i + 4), ae_madd(lo, ae_load(x1 + i), a1));
    a2 = ae_madd(hi, ae_load(x2 + i + 4), ae_madd(lo, ae_load(x2 + i), a2));
    a3 = ae_madd(hi, ae_load(x3 + i + 4), ae_madd(lo, ae_load(x3 + i), a3));
  }
  if (i + 4 <= n) {
    const v128 v = wasm_v128_load64_zero(h + i);
    if (!exact) m = ae_h16_infnan_acc(m, v);
    const v128 lo = cvt(ae_h16_lo(v), exact);
    a0 = ae_madd(lo, ae_load(x0 + i), a0);
    a1 = ae_madd(lo, ae_load(x1 + i), a1);
    a2 = ae_madd(lo, ae_load(x2 + i), a2);
    a3 = ae_madd(lo, ae_load(x3 + i), a3);
    i += 4;
  }
  ae_store(out, ae_reduce4_f32(a0, a1, a2, a3));   /* per token (v0 + v2) + (v1 + v3), as ae_hsum_f32 */
  for (; i < n; i++) {
    const float w = ae_h2f_s(h[i]);
    out[0] += w * x0[i]; out[1] += w * x1[i]; out[2] += w * x2[i]; out[3] += w * x3[i];
  }
  return exact ? 0 : ae_h16_has_infnan(m);
}

void ae_matmul_rows_f16_simd128(const void *W, int ncols, const void *xq, size_t xq_stride, int nvec, float *y,
                                int y_stride, int r0, int r1) {
  const size_t xs = xq_stride / sizeof(float);
  for (int rc = r0; rc < r1; rc += GEMM_ROWS) {
    const int re = rc + GEMM_ROWS < r1 ? rc + GEMM_ROWS : r1;
    for (int t0 = 0; t0 < nvec; t0 += 4) {
      const int nt = nvec - t0 < 4 ? nvec - t0 : 4;
      if (nt == 1) {   /* a lone token (a decode step's attention scores with one query head per KV head): the matvec */
        ae_matvec_rows_f16_simd128(W, ncols, (const float *)xq + (size_t)t0 * xs, y + (size_t)t0 * y_stride, rc, re);
        continue;
      }
      const float *x[4];
      for (int t = 0; t < 4; t++) x[t] = (const float *)xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * xs;
      for (int r = rc; r < re; r++) {
        const ae_fp16 *h = (const ae_fp16 *)W + (size_t)r * ncols;
        float out[4];
        if (row4(ncols, h, x[0], x[1], x[2], x[3], out, 0)) row4(ncols, h, x[0], x[1], x[2], x[3], out, 1);
        for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + r] = out[t];
      }
    }
  }
}
