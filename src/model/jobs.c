/* Job dispatcher of the core module (see src/core/pool.h). */
#include "model/model.h"
#include "model/sampler.h"

void ae_job_run(int32_t job, uint32_t arg, int ith, int nth, ae_pool *pool, int32_t tag) {
  switch (job) {
    case AE_JOB_FORWARD: ae_forward_job((ae_forward_args *)(uintptr_t)arg, ith, nth, pool, tag); break;
    case AE_JOB_FFN_LAYER: ae_ffn_layer_job((ae_forward_args *)(uintptr_t)arg, ith, nth, pool); break;
    default: break;
  }
}

/* Every layer runs the core's dense FFN (the FFN modules and compressed variants meet at barriers of all threads). */
static int all_dense(const ae_model *m) {
  for (int l = 0; l < m->cfg.n_layers; l++)
    if (m->layers[l].cmp_mode != AE_CMP_DENSE || m->layers[l].ffn_mode != AE_FFN_DENSE) return 0;
  return 1;
}

/* Run a forward pass on the pool (the caller is thread 0). NaN / Inf in the logits it produced (corrupt weights,
 * overflow) -> AE_ERR_NONFINITE instead of a sampler picking garbage. @return ae_status */
AE_EXPORT int ae_forward(ae_pool *pool, ae_forward_args *a) {
  const ae_model *mm = a->model;
  /* the per-thread scratch (att, qconv) is laid out for cfg.max_threads threads: a larger pool would write past it */
  if (mm->initialised && pool->nth > mm->cfg.max_threads) return a->status = AE_ERR_INVALID_ARG;
  /* the output head's chunk summaries describe the logits of the forward that wrote them: none until this one has */
  if (mm->initialised && a->want_all >= 0 && !a->hidden_sum) ((ae_model *)mm)->out_nparts = 0;
  if (a->n_tokens == 1 && mm->initialised && mm->decode_bytes < mm->single_below && all_dense(mm)) {
    /* a small decode step: on this thread alone (the same bits; docs/DESIGN.md "Forward pass and threads") */
    if (ae_pool_dead(pool)) return a->status = AE_ERR_WORKER_DIED;
    ae_job_run(AE_JOB_FORWARD, (uint32_t)(uintptr_t)a, 0, 1, pool, 0);
  } else {
    ae_pool_run_steps(pool, AE_JOB_FORWARD, (uint32_t)(uintptr_t)a, mm->flow, ae_forward_max_steps(&mm->cfg));
  }
  if (ae_pool_dead(pool)) return a->status = AE_ERR_WORKER_DIED; /* the results are garbage */
  if (a->status == AE_OK && a->want_all >= 0) {   /* (want_all < 0: no logits, nothing to check) */
    const ae_model *m = a->model;
    const size_t rows = a->want_all > 0 && m->cfg.logits_all ? (size_t)a->n_tokens : 1;
    int bad = 0;
    if (m->out_nparts > 0 && rows == 1)   /* the output head's chunk summaries (forward.c out_part_of) */
      for (int i = 0; i < m->out_nparts; i++) bad |= m->out_part[i].bad;
    else bad = ae_any_nonfinite(m->logits, rows * (size_t)m->cfg.vocab);
    if (bad) a->status = AE_ERR_NONFINITE;
  }
  return a->status;
}
