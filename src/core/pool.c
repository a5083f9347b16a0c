#include "core/pool.h"

/* Initialise a pool for nth threads (the caller plus nth-1 workers). @return 0 */
AE_EXPORT int ae_pool_init(ae_pool *p, int nth, int spin) {
  __builtin_memset(p, 0, sizeof *p);
  p->nth = nth < 1 ? 1 : nth;
#if !AE_THREADS
  p->nth = 1;
#endif
  p->spin = spin < 0 ? 0 : spin;
  p->over = -1;
  return p->nth;
}

/* Publish a job: (job, arg, flow) and the new gen under the seqlock `seq`, so a worker that wakes late never pairs
 * one job's gen with another's arguments (with step jobs the caller may run several jobs while a worker sleeps).
 * Returns the new gen. */
static int32_t publish(ae_pool *p, int32_t job, uint32_t arg, int32_t flow) {
  __atomic_add_fetch(&p->seq, 1, __ATOMIC_ACQ_REL);   /* odd: being written */
  AE_STORE(&p->job, job);
  AE_STORE((int32_t *)&p->arg, (int32_t)arg);
  AE_STORE(&p->flow, flow);
  const int32_t g = __atomic_add_fetch(&p->gen, 1, __ATOMIC_ACQ_REL);
  __atomic_add_fetch(&p->seq, 1, __ATOMIC_ACQ_REL);   /* even: consistent */
  ae_notify_all(&p->gen);
  return g;
}

/* Worker body: runs jobs until quit (or the pool is dead), or until it has run max_jobs jobs (max_jobs > 0) and is
 * about to wait for the next one: then it returns `seen`, the gen of the last job it took, and the host calls
 * ae_worker_resume(p, ith, seen, max_jobs) to go on; ae_pool_exited tells the two returns apart. The returns let a
 * browser run this loop in optimised code: V8 replaces a wasm function's code only at its next call (no on-stack
 * replacement), so a loop that never returns would spin and dispatch in the baseline tier (Liftoff) forever. */
static int32_t worker_loop(ae_pool *p, int ith, int32_t seen, int32_t max_jobs) {
  for (int32_t jobs = 0;; jobs++) {
    if (max_jobs > 0 && jobs >= max_jobs) return seen;
    ae_pool_wait(p, &p->gen, seen, p->spin);
    int32_t g, job, flow;
    uint32_t arg;
    for (;;) {   /* a consistent snapshot of the job (see publish) */
      const int32_t s = AE_LOAD(&p->seq);
      if (s & 1) continue;
      g = AE_LOAD(&p->gen);
      job = AE_LOAD(&p->job);
      arg = (uint32_t)AE_LOAD((int32_t *)&p->arg);
      flow = AE_LOAD(&p->flow);
      if (AE_LOAD(&p->seq) == s) break;
    }
    seen = g;
    if (AE_LOAD(&p->quit)) return seen;
    if (AE_LOAD(&p->dead)) return seen; /* another worker died: the pool cannot run jobs any more */
    ae_job_run(job, arg, ith, p->nth, p, g);
    if (!flow && __atomic_sub_fetch(&p->n_pending, 1, __ATOMIC_ACQ_REL) == 0) ae_notify_all(&p->n_pending);
  }
}

/* A worker's first entry: gen0 is the pool's `gen` when the worker was created. */
AE_EXPORT int32_t ae_worker_main(ae_pool *p, int ith, int32_t gen0, int32_t max_jobs) {
  __atomic_add_fetch(&p->n_started, 1, __ATOMIC_ACQ_REL);
  return worker_loop(p, ith, gen0, max_jobs);
}

/* The next entries, with what the previous one returned. */
AE_EXPORT int32_t ae_worker_resume(ae_pool *p, int ith, int32_t seen, int32_t max_jobs) {
  return worker_loop(p, ith, seen, max_jobs);
}

/* After ae_worker_main / ae_worker_resume returned: 1 when the worker is done (ae_pool_quit, or a dead pool), 0
 * when it stopped after max_jobs jobs. */
AE_EXPORT int ae_pool_exited(ae_pool *p) { return AE_LOAD(&p->quit) || AE_LOAD(&p->dead); }

/* Run job(arg) on all nth threads, the caller being ith 0. Returns when all are done, or as soon as the pool is
 * found dead (the caller checks ae_pool_dead and reports AE_ERR_WORKER_DIED). */
AE_EXPORT void ae_pool_run(ae_pool *p, int32_t job, uint32_t arg) {
  const int32_t nth = p->nth;
  if (AE_LOAD(&p->dead)) return;
  int32_t g = 0;
  if (nth > 1) {
    p->work = 0;
    AE_STORE(&p->n_pending, nth - 1);
    g = publish(p, job, arg, 0);
  }
  ae_job_run(job, arg, 0, nth, p, g);
  if (nth > 1) {
    for (;;) {
      int32_t left = AE_LOAD(&p->n_pending);
      if (left == 0 || AE_LOAD(&p->dead)) break;
      ae_pool_wait(p, &p->n_pending, left, p->spin);
    }
  }
}

/* Run a step job (pool.h ae_flow): the counters get the job's tag, the caller runs it as ith 0 and returns when
 * its last step is complete; a worker that is still on an earlier step leaves the job at its next step (`over`). */
AE_EXPORT void ae_pool_run_steps(ae_pool *p, int32_t job, uint32_t arg, int64_t *ctr, int max_steps) {
  const int32_t nth = p->nth;
  if (AE_LOAD(&p->dead)) return;
  if (nth <= 1) { ae_job_run(job, arg, 0, 1, p, 0); return; }
  const int32_t g = AE_LOAD(&p->gen) + 1;   /* only this thread publishes jobs */
  const int64_t t = (int64_t)((uint64_t)(uint32_t)g << 32);
  for (int i = 0; i < 2 * max_steps; i++) AE_STORE(&ctr[i], t);
  publish(p, job, arg, 1);
  ae_job_run(job, arg, 0, nth, p, g);
  AE_STORE(&p->over, g);
}

/* Non-zero (the dead worker's ith) once a worker of the pool died. */
AE_EXPORT int ae_pool_dead(ae_pool *p) { return AE_LOAD(&p->dead); }

/* Ask the workers to return from ae_worker_main. */
AE_EXPORT void ae_pool_quit(ae_pool *p) {
  AE_STORE(&p->quit, 1);
  publish(p, 0, 0, 1);
}
