/* One layer's FFN alone (AE_JOB_FFN_LAYER), for benchmarks and tests of the FFN modules, and access to
 * the run-state buffers. The host writes n rows of the residual stream at ae_model_buf(m, 0), runs
 * ae_ffn_layer(pool, args) with args.pos = layer, and reads x back: x[b] += FFN(rmsnorm(x[b])). */
#include "model/model.h"

void ae_ffn_layer_job(ae_forward_args *a, int ith, int nth, ae_pool *pool) {
  ae_model *m = a->model;
  const int n = a->n_tokens, l = a->pos;
  if (ith == 0) a->status = AE_OK;
  if (!m->initialised || n <= 0 || n > m->cfg.max_batch || l < 0 || l >= m->cfg.n_layers) {
    if (ith == 0) a->status = AE_ERR_INVALID_ARG;
    return;
  }
  const int D = m->cfg.dim;
  int b0, b1;
  ae_split(n, ith, nth, &b0, &b1);
  for (int b = b0; b < b1; b++)
    ae_rmsnorm(m->xb + (size_t)b * D, m->x + (size_t)b * D, m->layers[l].ffn_norm.data, D, m->cfg.norm_eps);
  ae_barrier(pool);
  const int st = ae_ffn_block(m, l, n, ith, nth, pool);
  if (st && ith == 0) a->status = st;
}

AE_EXPORT int ae_ffn_layer(ae_pool *pool, ae_forward_args *a) {
  ae_pool_run(pool, AE_JOB_FFN_LAYER, (uint32_t)(uintptr_t)a);
  if (ae_pool_dead(pool)) return a->status = AE_ERR_WORKER_DIED;
  return a->status;
}

/* 0 x (max_batch, dim), 1 xb, 2 hb (max_batch, hidden), 3 hb2, 4 tmp (max_batch, dim); NULL otherwise. */
AE_EXPORT float *ae_model_buf(ae_model *m, int which) {
  switch (which) {
    case 0: return m->x;
    case 1: return m->xb;
    case 2: return m->hb;
    case 3: return m->hb2;
    case 4: return m->tmp;
    default: return 0;
  }
}
