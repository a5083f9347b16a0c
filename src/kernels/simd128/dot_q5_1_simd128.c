/* q5_1 weights x q8_1 activations, plus q5_1 quantise (the reference quantiser) / dequantise.
 * Per block the 5-bit quants (nibbles | 5th bit from qh) are expanded to bytes, the exact integer dot sum(q x_q) is formed against the
 * activation split once per column chunk (q32_simd128.h), then in float (ggml's vec_dot_q5_1_q8_1 order)
 *   acc += (d_w * d_x) * (float)sumi + m_w * s_x      (block order; exactly ae_vec_dot_q5_1_ref)
 * so any row range gives the reference's bits. Four rows per pass share the activation loads (and keep
 * four weight streams in flight). */
#include "q32_simd128.h"

void ae_from_float_q5_1_simd128(const float *x, void *y, int n) { ae_from_float_q5_1_ref(x, y, n); }

AE_INLINE void expand(const ae_block_q5_1 *b, v128 *w0, v128 *w1) {
  const v128 qs = ae_load(b->qs);
  v128 h0, h1;
  ae_q32_qh(b->qh, &h0, &h1);
  *w0 = wasm_v128_or(ae_q32_lo(qs), h0);
  *w1 = wasm_v128_or(ae_q32_hi(qs), h1);
}

void ae_to_float_q5_1_simd128(const void *x, float *y, int n) {
  const ae_block_q5_1 *b = (const ae_block_q5_1 *)x;
  for (int i = 0; i < n / 32; i++) {
    v128 w0, w1;
    expand(&b[i], &w0, &w1);
    ae_q32_store(y + i * 32, w0, w1, ae_h2f_s(b[i].d), ae_h2f_s(b[i].m), 1);
  }
}

void ae_matvec_rows_q5_1_simd128(const void *W, int ncols, const void *xq, float *y, int r0, int r1) {
  const int nb = ncols / 32;
  const ae_block_q8_1 *x = (const ae_block_q8_1 *)xq;
  ae_q32x xs[AE_Q32_CHUNK];
  float dx[AE_Q32_CHUNK], sx[AE_Q32_CHUNK];
  for (int c0 = 0; c0 < nb; c0 += AE_Q32_CHUNK) {
    const int n = nb - c0 < AE_Q32_CHUNK ? nb - c0 : AE_Q32_CHUNK;
    for (int b = 0; b < n; b++) {
      ae_q32_prep(x[c0 + b].qs, &xs[b]);
      dx[b] = ae_h2f_s(x[c0 + b].d);
      sx[b] = ae_h2f_s(x[c0 + b].s);
    }
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
      const ae_block_q5_1 *w0 = (const ae_block_q5_1 *)W + (size_t)r * nb + c0;
      float s[4];
      for (int k = 0; k < 4; k++) s[k] = c0 ? y[r + k] : 0.0f;
      for (int b = 0; b < n; b++) {
#pragma clang loop unroll(full)
        for (int k = 0; k < 4; k++) {
          const ae_block_q5_1 *wk = w0 + (size_t)k * nb + b;
          v128 a0, a1;
          expand(wk, &a0, &a1);
          s[k] += (ae_h2f_s(wk->d) * dx[b]) * (float)ae_q32_dot(a0, a1, &xs[b]) + ae_h2f_s(wk->m) * sx[b];
        }
      }
      for (int k = 0; k < 4; k++) y[r + k] = s[k];
    }
    for (; r < r1; r++) {
      const ae_block_q5_1 *w = (const ae_block_q5_1 *)W + (size_t)r * nb + c0;
      float s = c0 ? y[r] : 0.0f;
      for (int b = 0; b < n; b++) {
        v128 w0, w1;
        expand(&w[b], &w0, &w1);
        s += (ae_h2f_s(w[b].d) * dx[b]) * (float)ae_q32_dot(w0, w1, &xs[b]) + ae_h2f_s(w[b].m) * sx[b];
      }
      y[r] = s;
    }
  }
}

void ae_vec_dot_q5_1_simd128(int n, float *s, const void *w, const void *x) {
  ae_matvec_rows_q5_1_simd128(w, n, x, s, 0, 1);
}
