/* ffn-fused module (slot 1): SwiGLU FFN with gate and up computed in one pass over x.
 *
 * Per thread (neurons [r0, r1), see src/kernels/ffn_common.h): for each chunk of rows of the tile
 * layout, g and u of every token come from one row-kernel call (interleaved tiles) or two (the model's
 * own matrices), h = silu(g) u is formed on the stack and stored, then the thread quantises its own
 * blocks of h for down. Barriers per layer: 1 (decode, x quantised privately by each thread) or 2
 * (prefill) + 1 after down, against 6 in the core's dense path. Bit-exact with the dense path. */
#include "kernels/ffn_common.h"

AE_EXPORT int ae_ffn_fused_run(ae_model *m, int layer, int n, int ith, int nth, ae_pool *pool) {
  ae_ffn_ctx c;
  int st = ae_ffn_setup(&c, m, layer, n, ith, nth);
  if (st) return st;
  if (c.rows != c.H) return AE_ERR_INVALID_ARG;
  _Alignas(16) uint8_t xbuf[AE_FFN_XQ_STACK];
  _Alignas(16) float buf[2 * AE_FFN_CHUNK];
  ae_ffn_prep_x(&c, xbuf, ith, nth, pool);
  const int H = c.H;
  for (int j = c.r0; j < c.r1;) {
    const uint8_t *gp, *upp;
    int joint;
    const int cnt = ae_ffn_chunk(&c, j, c.r1, &gp, &upp, &joint);
    for (int b = 0; b < n; b++) {
      ae_ffn_gu(&c, gp, upp, joint, cnt, b, buf);
      ae_silu_mul(buf, buf + cnt, cnt);
      __builtin_memcpy(m->hb + (size_t)b * H + j, buf, (size_t)cnt * 4);
    }
    j += cnt;
  }
  ae_ffn_quant_h(&c);
  if (ith == 0) c.L->ffn_active = n * H;
  ae_barrier(pool);
  ae_ffn_down_rows(&c, ith, nth, pool);
  return AE_OK;
}
