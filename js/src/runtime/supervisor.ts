/**
 * Watchdog of a Node worker pool (js/src/runtime/threads.ts): a small thread that owns the compute workers. The
 * thread that runs a forward pass waits inside wasm, so it cannot see a worker's 'exit' or 'error' event until the
 * pass is over, and the pass cannot end without the worker. This thread's event loop stays free: when a compute
 * worker exits or fails (killed, trapped, out of memory) before it was told to quit, it marks the C pool dead in
 * shared memory (markPoolDead: every wait gives up, ae_forward returns AE_ERR_WORKER_DIED) and tells the owner.
 *
 * Messages in: { type: 'start', inits, execArgv } | { type: 'kill', ith } | { type: 'kill-at-job', ith } (fault
 * injection for tests: terminate worker `ith` now, or as soon as the pool starts its next job, i.e. while the caller
 * is inside that job).
 * Messages out: { type: 'ready' } (all workers instantiated) | { type: 'error', message } (start failed)
 * | { type: 'died', ith, why }.
 */
import { Worker, parentPort } from 'node:worker_threads';
import { POOL } from '../generated/abi.js';
import { markPoolDead } from './pool-dead.js';
import type { WorkerInit } from './worker.js';

interface Start { type: 'start'; inits: WorkerInit[]; execArgv?: string[] }

if (parentPort) {
  const port = parentPort;
  const workers: Worker[] = [];
  let init0: WorkerInit | undefined;
  port.on('message', (m: any) => {
    if (m?.type === 'start') start(m as Start);
    else if (m?.type === 'kill') void workers[m.ith - 1]?.terminate();
    else if (m?.type === 'kill-at-job' && init0) {
      const i32 = new Int32Array(init0.memory.buffer), g = (init0.pool + POOL.GEN) >> 2;
      const gen = Atomics.load(i32, g);
      while (Atomics.load(i32, g) === gen) Atomics.wait(i32, g, gen, 1000);
      void workers[m.ith - 1]?.terminate();
    }
  });

  function start(m: Start): void {
    init0 = m.inits[0];
    let pending = m.inits.length, failed = false;
    const url = new URL('./worker.js', import.meta.url);
    for (const init of m.inits) {
      const w = m.execArgv ? new Worker(url, { execArgv: m.execArgv }) : new Worker(url);
      let quit = false;
      const died = (why: string) => {
        if (quit) return;
        quit = true;
        markPoolDead(init.memory, init.pool, init.ith);
        port.postMessage({ type: 'died', ith: init.ith, why });
      };
      w.on('message', (msg: any) => {
        if (msg?.type === 'ready') { if (--pending === 0 && !failed) port.postMessage({ type: 'ready' }); }
        else if (msg?.type === 'exit') quit = true; // returned from ae_worker_main after ae_pool_quit
        else if (msg?.type === 'error') {
          if (pending > 0 && !failed) { failed = true; port.postMessage({ type: 'error', message: `worker ${init.ith} failed: ${msg.message}` }); }
          died(`failed: ${msg.message}`);
        }
      });
      w.on('error', (e: Error) => {
        if (pending > 0 && !failed) { failed = true; port.postMessage({ type: 'error', message: `worker ${init.ith} crashed: ${e?.message ?? e}` }); }
        died(`failed: ${e?.message ?? e}`);
      });
      w.on('exit', (code: number) => died(`exited (code ${code})`));
      workers.push(w);
      w.postMessage(init);
    }
  }
}
