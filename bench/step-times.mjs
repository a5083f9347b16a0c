#!/usr/bin/env node
// Where a decode token's time goes per step of the forward pass, on thread 0 and on the first worker: time in chunks
// ("work"), time waiting for the step to be complete ("wait"), chunks taken. Needs a build with the step timers of
// bench/step-times.patch (not part of the product: a clock call per step and thread, and switches for experiments):
//   git apply bench/step-times.patch && npm run build:wasm
//   node bench/step-times.mjs MODEL [--threads 2] [--tokens 300] [--steps] [--spin N]
//                             [--lazy 1|2] [--static 1|2] [--nocheck]   (then: git checkout src && npm run build:wasm)
// --steps: a line per step (step, thread 0 work / wait us / chunks, worker work / wait us / chunks);
// --lazy 1: thread 0 takes every chunk (the worker only waits), 2: the worker takes every chunk;
// --static 1|2: chunk k to thread (k mod threads) (2: reversed) instead of claims; --nocheck: ae_forward skips its
// non-finite check of the logits. Decode tokens follow an 8-token prompt and 20 warm-up tokens.
import { args, repoRoot, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt, has } = args();
const file = argv[0];
if (!file || file.startsWith('--')) throw new Error('usage: node bench/step-times.mjs MODEL [--threads 2] [--tokens 300] [--steps]');
const th = Number(opt('--threads', 2)), N = Number(opt('--tokens', 300));
const { Aether } = await import(`${repoRoot}/dist/src/index.js`);
const model = await Aether.load(file, { threads: th, simd: 'relaxed', nCtx: 512, ...(opt('--spin') !== undefined ? { spin: Number(opt('--spin')) } : {}) });
const e = model.engine, X = e.coreExports;
if (typeof X.ae_dbg_ptr !== 'function') throw new Error('this build has no step timers: git apply bench/step-times.patch && npm run build:wasm');
X.ae_dbg_set_lazy(Number(opt('--lazy', 0)));
X.ae_dbg_set_static(Number(opt('--static', 0)));
X.ae_dbg_set_nocheck(has('--nocheck') ? 1 : 0);
const ptr = X.ae_dbg_ptr() >>> 0;
const v = () => new Float64Array(e.heap.view().buffer, ptr, 2 * 3 * 512);   // [thread][step][work ms, wait ms, chunks]
e.forward(Array.from({ length: 8 }, (_, i) => 100 + i), 0);
let pos = 8;
for (let i = 0; i < 20; i++) e.forward([5], pos++);
v().fill(0);
const t0 = performance.now();
for (let i = 0; i < N; i++) { e.forward([5 + (i % 50)], pos++); if (pos > 400) pos = 28; }
const ms = (performance.now() - t0) / N;
const a = v(), us = (x) => (x / N * 1000).toFixed(2);
let work = 0, wait = 0, steps = 0;
const rows = [];
for (let s = 0; s < 512; s++) {
  if (!a[3 * s] && !a[3 * s + 1]) continue;
  steps++; work += a[3 * s]; wait += a[3 * s + 1];
  rows.push(`${s}\t${us(a[3 * s])}\t${us(a[3 * s + 1])}\t${(a[3 * s + 2] / N).toFixed(2)}\t|\t${us(a[1536 + 3 * s])}\t${us(a[1536 + 3 * s + 1])}\t${(a[1536 + 3 * s + 2] / N).toFixed(2)}`);
}
console.log(`${file}: ${th} thread(s), ${N} tokens: ${(ms * 1000).toFixed(1)} us per forward; thread 0 work ${us(work)} us, wait ${us(wait)} us over ${steps} steps`);
if (has('--steps')) { console.log('step\tt0 work\tt0 wait\tt0 chunks\t|\tw work\tw wait\tw chunks'); for (const r of rows) console.log(r); }
process.exit(0);
