/* q5_0 weights x q8_0 activations, plus q5_0 quantise (the reference quantiser) / dequantise.
 * Per block the 5-bit quants are expanded to signed bytes q - 16 (nibbles | 5th bit from qh), the exact
 * integer dot is formed against the activation split once per column chunk (q32_simd128.h), then
 *   acc += (float)sumi * (d_w * d_x)      (block order; exactly ae_vec_dot_q5_0_ref)
 * so any row range gives the reference's bits. Four rows per pass share the activation loads (and keep
 * four weight streams in flight: with two, a 17 MB matrix ran at 0.8 GB/s from DRAM on this VM). */
#include "q32_simd128.h"

void ae_from_float_q5_0_simd128(const float *x, void *y, int n) { ae_from_float_q5_0_ref(x, y, n); }

AE_INLINE void expand(const ae_block_q5_0 *b, v128 *w0, v128 *w1) {
  v128 h0, h1;
  ae_q32_qh(b->qh, &h0, &h1);
  const v128 qs = ae_load(b->qs), sixteen = wasm_i8x16_splat(16);
  *w0 = wasm_i8x16_sub(wasm_v128_or(ae_q32_lo(qs), h0), sixteen);
  *w1 = wasm_i8x16_sub(wasm_v128_or(ae_q32_hi(qs), h1), sixteen);
}

void ae_to_float_q5_0_simd128(const void *x, float *y, int n) {
  const ae_block_q5_0 *b = (const ae_block_q5_0 *)x;
  for (int i = 0; i < n / AE_QK5_0; i++) {
    v128 w0, w1;
    expand(&b[i], &w0, &w1);
    ae_q32_store(y + i * AE_QK5_0, w0, w1, ae_h2f_s(b[i].d), 0.0f, 0);
  }
}

void ae_matvec_rows_q5_0_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / AE_QK5_0;
  const ae_block_q8_0 *x = (const ae_block_q8_0 *)xq;
  ae_q32x xs[AE_Q32_CHUNK];
  float dx[AE_Q32_CHUNK];
  for (int c0 = 0; c0 < nb; c0 += AE_Q32_CHUNK) {
    const int n = nb - c0 < AE_Q32_CHUNK ? nb - c0 : AE_Q32_CHUNK;
    for (int b = 0; b < n; b++) { ae_q32_prep(x[c0 + b].qs, &xs[b]); dx[b] = ae_h2f_s(x[c0 + b].d); }
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
      const ae_block_q5_0 *w0 = (const ae_block_q5_0 *)W + (size_t)r * nb + c0;
      float s[4];
      for (int k = 0; k < 4; k++) s[k] = c0 ? y[r + k] : 0.0f;
      for (int b = 0; b < n; b++) {
#pragma clang loop unroll(full)
        for (int k = 0; k < 4; k++) {
          const ae_block_q5_0 *wk = w0 + (size_t)k * nb + b;
          v128 a0, a1;
          expand(wk, &a0, &a1);
          s[k] += (float)ae_q32_dot(a0, a1, &xs[b]) * (ae_h2f_s(wk->d) * dx[b]);
        }
      }
      for (int k = 0; k < 4; k++) y[r + k] = s[k];
    }
    for (; r < r1; r++) {
      const ae_block_q5_0 *w = (const ae_block_q5_0 *)W + (size_t)r * nb + c0;
      float s = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        v128 w0, w1;
        expand(&w[b], &w0, &w1);
        s += (float)ae_q32_dot(w0, w1, &xs[b]) * (ae_h2f_s(w[b].d) * dx[b]);
      }
      y[r] = s;
    }
  }
}

void ae_vec_dot_q5_0_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q5_0_simd128(w, n, x, s, 0, 1);
}
