/* Thread pool over shared linear memory, synchronised by wasm atomics (ggml-style persistent pool).
 *
 * The host starts nth-1 workers (worker_threads / Web Workers); each instantiates the modules over the
 * same memory and calls ae_worker_main(pool, ith, gen0, max_jobs), which runs jobs until quit (returning every
 * max_jobs jobs so that the host can call it again in a later tier: pool.c). The calling
 * thread runs ae_pool_run(pool, job, arg): it publishes the job, bumps `gen`, takes part as ith = 0,
 * and returns when every thread is done. Inside a job, threads split work by (ith, nth) and meet at
 * ae_barrier(). Waiting is a short spin, then memory.atomic.wait32 (a pure spin collapses when
 * threads outnumber free cores). Without threads (AE_THREADS == 0) nth is always 1. */
#ifndef AE_POOL_H
#define AE_POOL_H
#include "core/common.h"

typedef struct ae_pool {
  int32_t gen;        /* job generation, bumped by ae_pool_run */
  int32_t n_pending;  /* workers that have not finished the current job */
  int32_t nth;        /* threads taking part, including the caller */
  int32_t job;        /* job id, see ae_job_run */
  uint32_t arg;       /* job argument (pointer into linear memory) */
  int32_t quit;       /* set to make workers return */
  int32_t bar_count;  /* barrier arrivals */
  int32_t bar_gen;    /* barrier generation */
  int32_t spin;       /* spin iterations before waiting */
  int32_t n_started;  /* workers that entered ae_worker_main */
  int32_t work;       /* work-sharing counter of the current job (ae_dyn_claim), zeroed by ae_pool_run */
  int32_t dead;       /* set (to the worker's ith) by the host when a worker died: every wait gives up */
  int32_t seq;        /* seqlock over (gen, job, arg, flow): odd while ae_pool_run publishes a job */
  int32_t sleepers;   /* threads blocked in a step wait (ae_flow_wait): a step's completion notifies only then */
  int32_t flow;       /* 1: the current job synchronises by steps (ae_flow); the caller does not wait for workers */
  int32_t over;       /* gen of the last step job that finished: a worker still inside it leaves at its next step */
} ae_pool;
static_assert(sizeof(ae_pool) == 64, "ae_pool is 64 bytes (one cache line)");

#define AE_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define AE_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* One memory.atomic.wait32, alone in a function that is never inlined and touches no memory after it.
 * V8's baseline wasm compiler (Liftoff; Node 20 on x64: code that is not tiered up yet, or all code with
 * --liftoff-only) leaves state that later code in the same function relies on corrupted after an
 * atomic.wait32 (seen: loads after the wait read the wrong values; SIMD values live across the wait came
 * back wrong). Inlined into a barrier between SIMD loops this made 2 threads compute garbage in the
 * factored FFN; a wait loop in one function came back with gen != seen and re-ran jobs (a hang). Called
 * as a function, the caller's state survives as across any call. tests/compress.test.mjs checks 1 vs 2
 * threads with blocking waits (spin 0). */
static __attribute__((noinline, unused)) int32_t ae_wait32_once(int32_t *p, int32_t v) {
#if AE_THREADS
  /* Timed: on Node's main thread a notify that races with the start of a wait was seen to be lost now
   * and then (a hang with an infinite timeout); the caller re-checks every millisecond. */
  return __builtin_wasm_memory_atomic_wait32(p, v, 1000000);
#else
  (void)p; (void)v;
  return 1;
#endif
}

/* Wait while *p == v, or until the pool is marked dead: a worker that died (killed, trapped, out of memory) never
 * arrives, so the host sets pool->dead (a watchdog thread sees the worker exit; a worker that traps sets it itself,
 * js/src/runtime/threads.ts) and every waiting thread gives up instead of blocking forever. */
AE_INLINE void ae_pool_wait(ae_pool *pool, int32_t *p, int32_t v, int32_t spin) {
  for (int32_t i = 0; i < spin; i++)
    if (AE_LOAD(p) != v || AE_LOAD(&pool->dead)) return;
#if AE_THREADS
  /* Timed waits (ae_wait32_once): on Node's main thread a notify that races with the start of a wait was seen
   * to be lost now and then (a hang with an infinite timeout); re-checking every millisecond bounds that, and
   * bounds how long a dead pool goes unnoticed. */
  while (AE_LOAD(p) == v && !AE_LOAD(&pool->dead)) ae_wait32_once(p, v);
#endif
}

AE_INLINE void ae_notify_all(int32_t *p) {
#if AE_THREADS
  __builtin_wasm_memory_atomic_notify(p, 0x7fffffff);
#else
  (void)p;
#endif
}

/* All nth threads of the current job meet here (or nobody waits any more once the pool is dead: the job's
 * results are then garbage, and ae_forward reports AE_ERR_WORKER_DIED). */
AE_INLINE void ae_barrier(ae_pool *p) {
  const int32_t nth = p->nth;
  if (nth <= 1) return;
  const int32_t g = AE_LOAD(&p->bar_gen);
  if (__atomic_add_fetch(&p->bar_count, 1, __ATOMIC_ACQ_REL) == nth) {
    __atomic_store_n(&p->bar_count, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->bar_gen, 1, __ATOMIC_RELEASE);
    ae_notify_all(&p->bar_gen);
  } else {
    ae_pool_wait(p, &p->bar_gen, g, p->spin);
  }
}

/* ---- dynamic work sharing inside a job -------------------------------------------------------------
 * A "section" of nchunks independent chunks (e.g. row ranges of a matmul) is shared by claiming chunk
 * indices from p->work: a thread the OS deschedules does not hold back chunks the others could run. Every
 * thread claims until its first failed claim, so one section advances the counter by exactly
 * nchunks + nth and each thread knows where the next section starts without talking to the others
 * (d->base). Sections must be separated by a barrier (claims of two sections must not interleave).
 * Which thread runs a chunk never changes its result (per-chunk work is independent of the others), so
 * 1 and N threads stay bit-identical. With one thread the chunks simply run in order. */
typedef struct { ae_pool *pool; int32_t base, next; int nth; } ae_dyn;

AE_INLINE ae_dyn ae_dyn_start(ae_pool *p, int nth) { ae_dyn d = {p, 0, 0, nth}; return d; }
/* Next chunk of the current section of nchunks chunks, or -1 (then the section is over for this thread). */
AE_INLINE int ae_dyn_claim(ae_dyn *d, int nchunks) {
  if (d->nth <= 1) {
    if (d->next < nchunks) return d->next++;
    d->next = 0;
    return -1;
  }
  const int32_t v = __atomic_fetch_add(&d->pool->work, 1, __ATOMIC_RELAXED) - d->base;
  if (v < nchunks) return v;
  d->base += nchunks + d->nth;
  return -1;
}

/* ---- steps: synchronisation by work, not by threads (the forward pass; docs/DESIGN.md "Forward pass and threads")
 * A step job is a sequence of steps; step s is nchunks independent chunks and an optional epilogue. A thread
 * claims chunks of the current step until none is left, then waits until the step is complete (every chunk done
 * and the epilogue, which the thread that finished the last chunk runs), then goes on to the next step. So a
 * thread waits for *work* in progress, never for another thread to arrive: a thread the OS deschedules while it
 * holds no chunk holds nobody, and when it runs again it finds the finished steps complete and goes on (or leaves
 * a job that is over). The caller (ith 0) returns when its last step is complete, without waiting for the
 * workers (ae_pool_run_steps).
 *
 * Counters: two int64 per step (claims, done), the job's tag (its gen) in the high 32 bits, reset by the caller
 * before it publishes the job. Claims are compare-and-swap on (tag, count), so a worker still inside an earlier job
 * never takes a chunk of a later one: its tag no longer matches and it leaves. done counts finished chunks; the
 * thread that makes it nchunks runs the epilogue and adds one more (complete = nchunks + 1).
 * Which thread runs a chunk never changes its result, so 1 and N threads stay bit-identical. With one thread
 * (nth 1) no counter is touched: chunks and epilogues run in order. */
typedef struct {
  ae_pool *pool;
  int64_t *ctr;      /* 2 * max_steps counters */
  int32_t tag;       /* gen of the job this thread runs */
  int32_t step, max_steps, nth, next;
  int32_t live;      /* 0 once the job was found over (or superseded): the thread leaves the job */
} ae_flow;

#define AE_FLOW_TAG(v) ((int32_t)((uint64_t)(v) >> 32))

AE_INLINE ae_flow ae_flow_start(ae_pool *p, int64_t *ctr, int max_steps, int32_t tag, int nth) {
  ae_flow f = {p, ctr, tag, 0, max_steps, nth, 0, 1};
  return f;
}

/* Whether this thread's job is still running: a worker leaves a finished job at the next step it reaches
 * (before it reads any state the host may have changed since). */
AE_INLINE int ae_flow_live(ae_flow *f) {
  if (f->nth <= 1) return 1;
  if (!f->live || f->step >= f->max_steps || AE_LOAD(&f->pool->over) == f->tag || AE_LOAD(&f->pool->dead)) f->live = 0;
  return f->live;
}

/* Next chunk of the current step, or -1 (none left, or the job is over: see f->live). */
AE_INLINE int ae_flow_claim(ae_flow *f, int nchunks) {
  if (f->nth <= 1) return f->next < nchunks ? f->next++ : -1;
  if (!ae_flow_live(f)) return -1;
  int64_t *c = f->ctr + 2 * f->step;
  int64_t v = AE_LOAD(c);
  for (;;) {
    if (AE_FLOW_TAG(v) != f->tag) { f->live = 0; return -1; }
    const int32_t k = (int32_t)(uint32_t)v;
    if (k >= nchunks) return -1;
    if (__atomic_compare_exchange_n(c, &v, v + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return k;
  }
}

/* A chunk of the current step is done. Returns 1 to the thread that finished the last one: it runs the step's
 * epilogue, then calls ae_flow_complete. */
AE_INLINE int ae_flow_done(ae_flow *f, int nchunks) {
  if (f->nth <= 1) return f->next == nchunks;
  const int64_t v = __atomic_add_fetch(f->ctr + 2 * f->step + 1, 1, __ATOMIC_ACQ_REL);
  return (int32_t)(uint32_t)v == nchunks;
}

/* The epilogue is done: the step is complete; wake the threads that sleep on it. */
AE_INLINE void ae_flow_complete(ae_flow *f) {
  if (f->nth <= 1) return;
  int64_t *d = f->ctr + 2 * f->step + 1;
  __atomic_add_fetch(d, 1, __ATOMIC_ACQ_REL);
  if (AE_LOAD(&f->pool->sleepers)) ae_notify_all((int32_t *)d);
}

/* Wait until the current step is complete, then move to the next. Returns 0 when the job is over for this thread
 * (it must leave the job). */
AE_INLINE int ae_flow_wait(ae_flow *f, int nchunks) {
  if (f->nth <= 1) { f->next = 0; f->step++; return 1; }
  ae_pool *p = f->pool;
  int64_t *d = f->ctr + 2 * f->step + 1;
  const int32_t want = nchunks + 1;
  int64_t v = AE_LOAD(d);
  if (f->live && (AE_FLOW_TAG(v) != f->tag || (int32_t)(uint32_t)v != want)) {
    for (int32_t i = 0; i < p->spin; i++) {
      v = AE_LOAD(d);
      if (AE_FLOW_TAG(v) != f->tag || (int32_t)(uint32_t)v == want || AE_LOAD(&p->dead)) break;
    }
#if AE_THREADS
    if (AE_FLOW_TAG(v) == f->tag && (int32_t)(uint32_t)v != want) {
      __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
      for (;;) {
        v = AE_LOAD(d);
        if (AE_FLOW_TAG(v) != f->tag || (int32_t)(uint32_t)v == want || AE_LOAD(&p->dead) || AE_LOAD(&p->over) == f->tag) break;
        ae_wait32_once((int32_t *)d, (int32_t)(uint32_t)v);
      }
      __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
    }
#endif
  }
  if (AE_FLOW_TAG(v) != f->tag || (int32_t)(uint32_t)v != want) f->live = 0;
  f->step++;
  return f->live;
}

/* Pool entry points (src/core/pool.c). */
int ae_pool_init(ae_pool *p, int nth, int spin);
int32_t ae_worker_main(ae_pool *p, int ith, int32_t gen0, int32_t max_jobs);
int32_t ae_worker_resume(ae_pool *p, int ith, int32_t seen, int32_t max_jobs);
int ae_pool_exited(ae_pool *p);
void ae_pool_run(ae_pool *p, int32_t job, uint32_t arg);
/* Run a step job (ae_flow over ctr: 2 * max_steps counters): resets the counters for the job's tag, runs it as
 * ith 0 and returns when ith 0 finished its last step, without waiting for the workers (which leave the job at
 * their next step). */
void ae_pool_run_steps(ae_pool *p, int32_t job, uint32_t arg, int64_t *ctr, int max_steps);
void ae_pool_quit(ae_pool *p);
int ae_pool_dead(ae_pool *p);

/* Each module that runs jobs defines this dispatcher (a switch over its job ids). tag: the job's gen (step jobs
 * pass it to ae_flow_start). */
void ae_job_run(int32_t job, uint32_t arg, int ith, int nth, ae_pool *pool, int32_t tag);

#endif
