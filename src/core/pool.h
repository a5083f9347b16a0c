/* Thread pool over shared linear memory, synchronised by wasm atomics (ggml-style persistent pool).
 *
 * The host starts nth-1 workers (worker_threads / Web Workers); each instantiates the modules over the
 * same memory and calls ae_worker_main(pool, ith, gen0), which never returns until quit. The calling
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
  int32_t pad_[4];
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
static __attribute__((noinline)) int32_t ae_wait32_once(int32_t *p, int32_t v) {
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

/* Pool entry points (src/core/pool.c). */
int ae_pool_init(ae_pool *p, int nth, int spin);
int ae_worker_main(ae_pool *p, int ith, int32_t gen0);
void ae_pool_run(ae_pool *p, int32_t job, uint32_t arg);
void ae_pool_quit(ae_pool *p);
int ae_pool_dead(ae_pool *p);

/* Each module that runs jobs defines this dispatcher (a switch over its job ids). */
void ae_job_run(int32_t job, uint32_t arg, int ith, int nth, ae_pool *pool);

#endif
