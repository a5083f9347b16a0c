/**
 * Compute worker (Node worker_threads or a browser Worker): instantiates the modules over the shared
 * memory with its own stacks and runs the pool's worker loop (src/core/pool.c) until told to quit.
 * Message in: WorkerInit. Messages out: { type: 'ready' } | { type: 'exit' } | { type: 'error', message }.
 */
import { instantiateSet } from './instance.js';
import { markPoolDead } from './pool-dead.js';

export interface WorkerInit {
  memory: WebAssembly.Memory;
  modules: Record<string, WebAssembly.Module>;
  stackTops: Record<string, number>;
  driver: string;   // module whose ae_worker_main runs the loop
  pool: number;
  ith: number;
  gen0: number;
}

type Post = (m: unknown) => void;

/** Jobs per call of the worker loop (one decode step is one job). */
const WORKER_JOBS = 64;

function run(init: WorkerInit, post: Post): void {
  try {
    const ex = instantiateSet(init.modules, init.memory, init.stackTops);
    post({ type: 'ready' });
    // the loop returns every WORKER_JOBS jobs and is called again: a browser then runs it in optimised code (V8
    // replaces a wasm function's code only at its next call; src/core/pool.c)
    const d = ex[init.driver];
    let seen = d.ae_worker_main(init.pool, init.ith, init.gen0, WORKER_JOBS);
    while (!d.ae_pool_exited(init.pool)) seen = d.ae_worker_resume(init.pool, init.ith, seen, WORKER_JOBS);
    post({ type: 'exit' });
  } catch (e) {
    // a trap inside a job: nobody else would tell the threads waiting for this one in the pool
    try { markPoolDead(init.memory, init.pool, init.ith); } catch { /* no memory: instantiation failed */ }
    post({ type: 'error', message: String((e as Error)?.message ?? e) });
  }
}

const g = globalThis as any;
if (typeof g.WorkerGlobalScope !== 'undefined' && typeof g.postMessage === 'function') {
  g.onmessage = (ev: MessageEvent) => run(ev.data as WorkerInit, (m) => g.postMessage(m));
} else {
  const wt = await import('node:worker_threads');
  if (!wt.isMainThread && wt.parentPort) {
    const port = wt.parentPort;
    port.once('message', (init: WorkerInit) => run(init, (m) => port.postMessage(m)));
  }
}
