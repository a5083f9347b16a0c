/**
 * Worker pool: nth-1 workers over the shared memory, driven by the C pool (src/core/pool.h).
 *
 * Node: the compute workers belong to a watchdog thread (supervisor.ts) whose event loop is never blocked, so a
 * worker that dies while the caller waits inside a forward pass marks the C pool dead at once (the waits give up,
 * ae_forward returns AE_ERR_WORKER_DIED -> `worker_died`). Browsers: the engine's Worker owns them directly; a worker
 * that traps marks the pool dead itself (worker.ts), other deaths are seen by the next call ('error' events).
 */
import { AetherError } from '../errors.js';
import { isNode } from './env.js';
import { markPoolDead } from './pool-dead.js';
import type { WorkerInit } from './worker.js';

interface AnyWorker { postMessage(m: unknown): void; terminate(): unknown }

export class WorkerPool {
  /** Why the pool cannot run any more (a worker exited or failed after start), or undefined. */
  dead: string | undefined;
  private stopping = false;
  private constructor(private readonly workers: AnyWorker[], private readonly supervisor: AnyWorker | null, private readonly n: number) {}

  get size(): number { return this.n; }

  /** Start `inits.length` workers and wait until each has instantiated its modules. */
  static async start(inits: WorkerInit[]): Promise<WorkerPool> {
    if (isNode) return WorkerPool.startNode(inits);
    const url = new URL('./worker.js', import.meta.url);
    const workers: Worker[] = [];
    const ready: Promise<void>[] = [];
    for (const init of inits) {
      const bw = new Worker(url, { type: 'module' });
      ready.push(new Promise<void>((resolve, reject) => {
        bw.onmessage = (ev) => {
          if (ev.data?.type === 'ready') resolve();
          else if (ev.data?.type === 'error') reject(new AetherError('wasm_error', `worker ${init.ith} failed: ${ev.data.message}`));
        };
        bw.onerror = (ev) => reject(new AetherError('wasm_error', `worker ${init.ith} crashed: ${ev.message}`));
      }));
      workers.push(bw);
      bw.postMessage(init);
    }
    try {
      await Promise.all(ready);
    } catch (e) {
      for (const w of workers) w.terminate();
      throw e;
    }
    const pool = new WorkerPool(workers, null, workers.length);
    workers.forEach((bw, i) => {
      const died = (why: string) => pool.died(inits[i], why);
      bw.addEventListener('error', (ev: ErrorEvent) => died(`failed: ${ev.message}`));
      bw.addEventListener('message', (ev: MessageEvent) => { if (ev.data?.type === 'error') died(`failed: ${ev.data.message}`); });
    });
    return pool;
  }

  private static async startNode(inits: WorkerInit[]): Promise<WorkerPool> {
    const { Worker: NodeWorker } = await import('node:worker_threads');
    // The parent's execArgv minus what only applies to a main script (--input-type with -e would kill the worker).
    // An explicit list is checked by Node, which refuses V8 and per-process flags there (--expose-gc, --no-liftoff):
    // those apply to the whole process already, so the ones it names are dropped and the start retried once.
    let execArgv: string[] | undefined = process.execArgv.filter((a) => !/^--(input-type|eval|print)\b|^-[ep]$/.test(a));
    if (execArgv.length === process.execArgv.length) execArgv = undefined;
    const url = new URL('./supervisor.js', import.meta.url);
    let sup: InstanceType<typeof NodeWorker>;
    try {
      sup = new NodeWorker(url, execArgv ? { execArgv } : {});
    } catch (e: any) {
      if (e?.code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || !execArgv) throw e;
      const refused = new Set(String(e.message).replace(/^[^:]*:\s*/, '').split(/,\s*/));
      execArgv = execArgv.filter((a) => !refused.has(a));
      sup = new NodeWorker(url, { execArgv });
    }
    let pool: WorkerPool | undefined;
    let fail: (e: Error) => void = () => {};
    const ready = new Promise<void>((resolve, reject) => {
      fail = reject;
      sup.on('message', (m: any) => {
        if (m?.type === 'ready') resolve();
        else if (m?.type === 'error') reject(new AetherError('wasm_error', m.message));
        else if (m?.type === 'died') pool?.died(inits[m.ith - 1], String(m.why));
      });
    });
    sup.on('error', (e: Error) => { fail(new AetherError('wasm_error', `worker watchdog crashed: ${e.message}`)); pool?.died(inits[0], `watchdog failed: ${e.message}`); });
    sup.on('exit', (code: number) => { fail(new AetherError('wasm_error', `worker watchdog exited (code ${code})`)); pool?.died(inits[0], `watchdog exited (code ${code})`); });
    sup.postMessage({ type: 'start', inits, execArgv });
    try {
      await ready;
    } catch (e) {
      void sup.terminate();
      throw e;
    }
    // Workers never keep the process alive once running (they block in wasm until quit).
    sup.unref();
    pool = new WorkerPool([], sup, inits.length);
    return pool;
  }

  private died(init: WorkerInit | undefined, why: string): void {
    if (this.stopping || this.dead) return;
    this.dead = `compute worker ${init?.ith ?? '?'} ${why}`;
    if (init) try { markPoolDead(init.memory, init.pool, init.ith); } catch { /* memory gone */ }
  }

  /** Fault injection for tests (Node): kill worker `ith` now, or as soon as the pool starts its next job. */
  kill(ith: number, atNextJob = false): void {
    this.supervisor?.postMessage({ type: atNextJob ? 'kill-at-job' : 'kill', ith });
  }

  terminate(): void {
    this.stopping = true;
    this.supervisor?.terminate();
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }
}
