/* Shared FFN code of the ffn-fused and ffn-saturated modules (inline; each module links its own copy of
 * the kernels, built from the same sources and flags as the core's, so per-row arithmetic is identical).
 *
 * One call of a module's run function is one layer's FFN for n tokens on one thread of the pool:
 *   input  m->xb[b * dim]  (RMS-normed residual stream, written by the core)
 *   output m->x[b * dim] += FFN(xb[b])   (the residual add is done here, row by row: an f32 add is
 *          correctly rounded, so this equals the core's ae_add bit for bit)
 * Work split: neurons [r0, r1) per thread (aligned to the block of the down activation dtype, so each
 * thread can quantise its own blocks of h), output rows / columns of dim per thread for down. Every
 * value is computed by the same code whatever nth is (1 vs N threads bit-identical).
 *
 * Bit-exactness with the core's dense path: g and u rows use ae_matvec (per-row arithmetic independent
 * of the row range and grouping, src/kernels/kernels.h), h = ae_silu_mul (element-wise, position
 * independent), h is quantised per block with the same from_float, and down uses ae_matvec/ae_matmul
 * on the same quantised rows. silu(g) for statistics is ae_silu_mul(g, 1): g / (1 + e^-g) * 1 is exactly
 * the intermediate of ae_silu_mul(g, u), and s * u is its final multiply. */
#ifndef AE_FFN_COMMON_H
#define AE_FFN_COMMON_H
#include "model/act.h"
#include "kernels/ffn_aux.h"
#include "kernels/simd128/simd128_util.h"

#define AE_FFN_CHUNK 256           /* gate/up rows per kernel call, one token (stack buffers) */
#define AE_FFN_CHUNK_BATCH 16      /* with several tokens: rows whose weights stay in cache while every token passes */
#define AE_FFN_XQ_STACK 40960      /* bytes of stack for a privately quantised x (n == 1) */
#define AE_FFN_PIECE 2048          /* neurons per piece of the neuron-major down */

typedef struct {
  ae_model *m;
  ae_layer *L;
  const ae_ffn_aux *a;
  int D, H, n, mode;
  ae_type gt, gvt;                 /* gate/up dtype and its activation dtype */
  size_t grs;                      /* gate/up row bytes */
  const uint8_t *gate, *up;        /* tile layout */
  int tile, rows;
  size_t tstride;
  const uint8_t *xq;               /* prepared x of token 0 */
  size_t xq_stride;
  ae_type dt, dvt;                 /* row-major down dtype and its activation dtype */
  uint8_t *hq;                     /* quantised h (hb2 region) or h itself */
  size_t hq_stride;
  int r0, r1;                      /* this thread's neurons */
  int chunk;                       /* rows per kernel call */
} ae_ffn_ctx;

AE_INLINE const void *ae_ffn_ptr(uint32_t p) { return (const void *)(uintptr_t)p; }

/* Fill the context and check what every thread can check on its own (same answer everywhere: no
 * barrier has run yet, so an error return leaves nothing half done). */
static int ae_ffn_setup(ae_ffn_ctx *c, ae_model *m, int layer, int n, int ith, int nth) {
  if (!m || !m->initialised || layer < 0 || layer >= m->cfg.n_layers || n <= 0 || n > m->cfg.max_batch) return AE_ERR_INVALID_ARG;
  if (nth > m->cfg.max_threads) return AE_ERR_INVALID_ARG;
  ae_layer *L = &m->layers[layer];
  /* SwiGLU with the residual add right after down only (no GeGLU, no post-FFN norm: the dense path does those) */
  if (m->cfg.ffn_act != AE_ACT_SILU || L->ffn_post_norm.data) return AE_ERR_UNSUPPORTED;
  const ae_ffn_aux *a = (const ae_ffn_aux *)L->ffn_aux;
  c->m = m; c->L = L; c->a = a; c->n = n; c->mode = L->ffn_mode;
  c->chunk = n == 1 ? AE_FFN_CHUNK : AE_FFN_CHUNK_BATCH;
  c->D = m->cfg.dim; c->H = m->cfg.hidden_dim;
  if (a && a->magic != AE_FFN_AUX_MAGIC) return AE_ERR_INVALID_ARG;
  if (a && (a->gate || c->mode == AE_FFN_SAT_STATIC)) {   /* static: compacted rows (possibly none) */
    c->gt = (ae_type)a->gu_type; c->gate = ae_ffn_ptr(a->gate); c->up = ae_ffn_ptr(a->up);
    c->tile = a->gu_tile; c->rows = a->gu_rows; c->tstride = a->gu_tile_stride;
  } else {
    if (L->w_gate.type != L->w_up.type) return AE_ERR_UNSUPPORTED;
    c->gt = (ae_type)L->w_gate.type; c->gate = L->w_gate.data; c->up = L->w_up.data;
    c->tile = c->H; c->rows = c->H; c->tstride = 0;
  }
  const ae_type_traits *tr = ae_traits(c->gt);
  if (!tr || c->tile <= 0 || c->rows < 0 || c->rows > c->H || (c->rows > 0 && (!c->gate || !c->up))) return AE_ERR_INVALID_ARG;
  c->gvt = tr->vec_dot_type;
  c->grs = ae_row_size(c->gt, c->D);
  c->dt = (ae_type)L->w_down.type;
  c->dvt = ae_traits(c->dt)->vec_dot_type;
  const int blk = c->dvt == AE_F32 ? 4 : ae_traits(c->dvt)->blck_size;
  ae_split_aligned(c->H, blk < 4 ? 4 : blk, ith, nth, &c->r0, &c->r1);
  if (c->dvt == AE_F32) { c->hq = (uint8_t *)m->hb; c->hq_stride = (size_t)c->H * 4; }
  else { c->hq = (uint8_t *)m->hb2; c->hq_stride = (size_t)c->H * 4; }   /* row_size(vt, H) <= 4 H */
  return AE_OK;
}

/* x for the gate/up rows: f32 weights read xb; otherwise one token is quantised privately on the stack
 * by every thread (no barrier), several tokens into the shared buffer (split by token, then a barrier). */
static void ae_ffn_prep_x(ae_ffn_ctx *c, uint8_t *stackbuf, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  if (c->gvt == AE_F32) { c->xq = (const uint8_t *)m->xb; c->xq_stride = (size_t)c->D * 4; return; }
  const size_t rs = ae_row_size(c->gvt, c->D);
  if (c->n == 1 && rs <= AE_FFN_XQ_STACK) {
    ae_quantize_row(c->gt, m->xb, stackbuf, c->D);
    c->xq = stackbuf; c->xq_stride = rs;
    return;
  }
  c->xq = ae_act_prep(m, c->gt, m->xb, c->D, c->D, c->n, &c->xq_stride, ith, nth);
  ae_barrier(pool);
}

/* Rows [j, j + cnt) of one tile: pointers to the first gate and up row; *joint when up follows gate
 * directly (interleaved tile taken whole: one kernel call over 2 cnt rows). */
AE_INLINE int ae_ffn_chunk(const ae_ffn_ctx *c, int j, int jend, const uint8_t **gp, const uint8_t **upp, int *joint) {
  const int t = j / c->tile, k = j % c->tile;
  int cnt = c->tile - k;
  if (cnt > jend - j) cnt = jend - j;
  if (cnt > c->chunk) cnt = c->chunk;
  const size_t off = (size_t)t * c->tstride + (size_t)k * c->grs;
  *gp = c->gate + off; *upp = c->up + off;
  *joint = *upp == *gp + (size_t)cnt * c->grs;
  return cnt;
}

/* g = buf[0..cnt), u = buf[cnt..2 cnt) of token b */
AE_INLINE void ae_ffn_gu(const ae_ffn_ctx *c, const uint8_t *gp, const uint8_t *upp, int joint, int cnt, int b, float *buf) {
  const uint8_t *xb = c->xq + (size_t)b * c->xq_stride;
  if (joint) ae_matvec(c->gt, gp, c->D, xb, buf, 0, 2 * cnt);
  else {
    ae_matvec(c->gt, gp, c->D, xb, buf, 0, cnt);
    ae_matvec(c->gt, upp, c->D, xb, buf + cnt, 0, cnt);
  }
}

/* Quantise this thread's blocks [r0, r1) of h (every token) for the row-major down. */
static void ae_ffn_quant_h(ae_ffn_ctx *c) {
  if (c->dvt == AE_F32 || c->r0 >= c->r1) return;
  const size_t off = ae_row_size(c->dvt, c->r0);
  for (int b = 0; b < c->n; b++)
    ae_quantize_row(c->dt, c->m->hb + (size_t)b * c->H + c->r0, c->hq + (size_t)b * c->hq_stride + off, c->r1 - c->r0);
}

/* Row-major down on this thread's rows of dim, then x += it. Ends with the layer's closing barrier. */
static void ae_ffn_down_rows(ae_ffn_ctx *c, int ith, int nth, ae_pool *pool) {
  ae_model *m = c->m;
  const int D = c->D;
  int d0, d1;
  ae_split_aligned(D, 4, ith, nth, &d0, &d1);
  if (d0 < d1) {
    if (c->n == 1) ae_matvec(c->dt, c->L->w_down.data, c->H, c->hq, m->tmp, d0, d1);
    else ae_matmul(c->dt, c->L->w_down.data, c->H, c->hq, c->hq_stride, c->n, m->tmp, D, d0, d1);
    for (int b = 0; b < c->n; b++) ae_add(m->x + (size_t)b * D + d0, m->tmp + (size_t)b * D + d0, d1 - d0);
  }
  ae_barrier(pool);
}

#endif
