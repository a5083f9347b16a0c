#include "core/pool.h"

/* Initialise a pool for nth threads (the caller plus nth-1 workers). @return 0 */
AE_EXPORT int ae_pool_init(ae_pool *p, int nth, int spin) {
  __builtin_memset(p, 0, sizeof *p);
  p->nth = nth < 1 ? 1 : nth;
#if !AE_THREADS
  p->nth = 1;
#endif
  p->spin = spin < 0 ? 0 : spin;
  return p->nth;
}

/* Worker body: runs jobs until quit. gen0 is the pool's `gen` when the worker was created. */
AE_EXPORT int ae_worker_main(ae_pool *p, int ith, int32_t gen0) {
  __atomic_add_fetch(&p->n_started, 1, __ATOMIC_ACQ_REL);
  int32_t seen = gen0;
  for (;;) {
    ae_pool_wait(p, &p->gen, seen, p->spin);
    seen = AE_LOAD(&p->gen);
    if (AE_LOAD(&p->quit)) return 0;
    if (AE_LOAD(&p->dead)) return 1; /* another worker died: the pool cannot run jobs any more */
    ae_job_run(p->job, p->arg, ith, p->nth, p);
    if (__atomic_sub_fetch(&p->n_pending, 1, __ATOMIC_ACQ_REL) == 0) ae_notify_all(&p->n_pending);
  }
}

/* Run job(arg) on all nth threads, the caller being ith 0. Returns when all are done, or as soon as the pool is
 * found dead (the caller checks ae_pool_dead and reports AE_ERR_WORKER_DIED). */
AE_EXPORT void ae_pool_run(ae_pool *p, int32_t job, uint32_t arg) {
  const int32_t nth = p->nth;
  if (AE_LOAD(&p->dead)) return;
  if (nth > 1) {
    p->job = job;
    p->arg = arg;
    p->work = 0;
    AE_STORE(&p->n_pending, nth - 1);
    __atomic_add_fetch(&p->gen, 1, __ATOMIC_ACQ_REL);
    ae_notify_all(&p->gen);
  }
  ae_job_run(job, arg, 0, nth, p);
  if (nth > 1) {
    for (;;) {
      int32_t left = AE_LOAD(&p->n_pending);
      if (left == 0 || AE_LOAD(&p->dead)) break;
      ae_pool_wait(p, &p->n_pending, left, p->spin);
    }
  }
}

/* Non-zero (the dead worker's ith) once a worker of the pool died. */
AE_EXPORT int ae_pool_dead(ae_pool *p) { return AE_LOAD(&p->dead); }

/* Ask the workers to return from ae_worker_main. */
AE_EXPORT void ae_pool_quit(ae_pool *p) {
  AE_STORE(&p->quit, 1);
  __atomic_add_fetch(&p->gen, 1, __ATOMIC_ACQ_REL);
  ae_notify_all(&p->gen);
}
