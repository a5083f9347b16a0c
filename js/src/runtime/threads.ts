/** Worker pool: nth-1 workers over the shared memory, driven by the C pool (src/core/pool.h). */
import { AetherError } from '../errors.js';
import { isNode } from './env.js';
import type { WorkerInit } from './worker.js';

interface AnyWorker { postMessage(m: unknown): void; terminate(): unknown }

export class WorkerPool {
  private constructor(private readonly workers: AnyWorker[]) {}

  get size(): number { return this.workers.length; }

  /** Start `inits.length` workers and wait until each has instantiated its modules. */
  static async start(inits: WorkerInit[]): Promise<WorkerPool> {
    const url = new URL('./worker.js', import.meta.url);
    const workers: AnyWorker[] = [];
    const ready: Promise<void>[] = [];
    const NodeWorker = isNode ? (await import('node:worker_threads')).Worker : null;
    for (const init of inits) {
      let w: AnyWorker;
      const p = new Promise<void>((resolve, reject) => {
        const onMsg = (m: any) => {
          if (m?.type === 'ready') resolve();
          else if (m?.type === 'error') reject(new AetherError('wasm_error', `worker ${init.ith} failed: ${m.message}`));
        };
        if (NodeWorker) {
          const nw = new NodeWorker(url);
          nw.on('message', onMsg);
          nw.on('error', (e) => reject(new AetherError('wasm_error', `worker ${init.ith} crashed: ${e.message}`)));
          w = nw;
        } else {
          const bw = new Worker(url, { type: 'module' });
          bw.onmessage = (ev) => onMsg(ev.data);
          bw.onerror = (ev) => reject(new AetherError('wasm_error', `worker ${init.ith} crashed: ${ev.message}`));
          w = bw;
        }
      });
      workers.push(w!);
      w!.postMessage(init);
      ready.push(p);
    }
    try {
      await Promise.all(ready);
    } catch (e) {
      for (const w of workers) w.terminate();
      throw e;
    }
    // Workers never keep the process alive once running (they block in wasm until quit).
    for (const w of workers) (w as { unref?: () => void }).unref?.();
    return new WorkerPool(workers);
  }

  terminate(): void {
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }
}
