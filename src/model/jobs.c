/* Job dispatcher of the core module (see src/core/pool.h). */
#include "model/model.h"
#include "model/sampler.h"

void ae_job_run(int32_t job, uint32_t arg, int ith, int nth, ae_pool *pool) {
  switch (job) {
    case AE_JOB_FORWARD: ae_forward_job((ae_forward_args *)(uintptr_t)arg, ith, nth, pool); break;
    case AE_JOB_FFN_LAYER: ae_ffn_layer_job((ae_forward_args *)(uintptr_t)arg, ith, nth, pool); break;
    default: break;
  }
}

/* Run a forward pass on the pool (the caller is thread 0). @return ae_status */
AE_EXPORT int ae_forward(ae_pool *pool, ae_forward_args *a) {
  ae_pool_run(pool, AE_JOB_FORWARD, (uint32_t)(uintptr_t)a);
  return a->status;
}
