/**
 * Mark a C pool (src/core/pool.h) dead from any thread: a compute worker died, so every thread waiting in the pool
 * (the caller inside a forward pass, the other workers) must give up instead of waiting for it forever. The waits
 * re-check `dead` at least every millisecond; the notifies wake them at once.
 */
import { POOL } from '../generated/abi.js';

export function markPoolDead(memory: WebAssembly.Memory, pool: number, ith: number): void {
  const i32 = new Int32Array(memory.buffer);
  Atomics.compareExchange(i32, (pool + POOL.DEAD) >> 2, 0, ith > 0 ? ith : 1);
  for (const f of [POOL.GEN, POOL.N_PENDING, POOL.BAR_GEN]) Atomics.notify(i32, (pool + f) >> 2);
}
