/** Worker pool: nth-1 workers over the shared memory, driven by the C pool (src/core/pool.h). */
import { AetherError } from '../errors.js';
import { isNode } from './env.js';
import type { WorkerInit } from './worker.js';

interface AnyWorker { postMessage(m: unknown): void; terminate(): unknown }

export class WorkerPool {
  /** Why the pool cannot run any more (a worker exited or failed after start), or undefined. */
  dead: string | undefined;
  private stopping = false;
  private constructor(private readonly workers: AnyWorker[]) {
    workers.forEach((w, i) => {
      const died = (why: string) => { if (!this.stopping && !this.dead) this.dead = `compute worker ${i + 1} ${why}`; };
      const nw = w as { on?: (ev: string, f: (x: any) => void) => void };
      if (typeof nw.on === 'function') {
        nw.on('exit', (code: number) => died(`exited (code ${code})`));
        nw.on('error', (e: Error) => died(`failed: ${e?.message ?? e}`));
        nw.on('message', (m: any) => { if (m?.type === 'error') died(`failed: ${m.message}`); });
      } else {
        const bw = w as Worker;
        bw.addEventListener('error', (ev: ErrorEvent) => died(`failed: ${ev.message}`));
        bw.addEventListener('message', (ev: MessageEvent) => { if (ev.data?.type === 'error') died(`failed: ${ev.data.message}`); });
      }
    });
  }

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
          // the parent's execArgv minus what only applies to a main script (--input-type with -e would kill the worker)
          const execArgv = process.execArgv.filter((a) => !/^--(input-type|eval|print)\b|^-[ep]$/.test(a));
          const nw = execArgv.length === process.execArgv.length ? new NodeWorker(url) : new NodeWorker(url, { execArgv });
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
    this.stopping = true;
    for (const w of this.workers) w.terminate();
    this.workers.length = 0;
  }
}
