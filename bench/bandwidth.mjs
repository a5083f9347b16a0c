#!/usr/bin/env node
// Streaming-read bandwidth of this machine from wasm SIMD128, on 1 and N threads at once: the ceiling of a decode
// step, which streams every weight byte once per token. Each thread (a worker_thread) owns a wasm memory of --mib
// MiB (filled, so every page is real) and reads it with the probe of bench/kernel-ab.mjs (16-byte loads, 4
// independent xor chains); the threads start together (Atomics on a shared counter) and the wall time until the
// last one finishes gives the aggregate GB/s. Configurations are interleaved round by round; best and median per
// configuration. Answers "does 2-thread decode double, or is the memory bus the limit?" (issue 15 item 3).
//   node bench/bandwidth.mjs [--threads 1,2] [--mib 256] [--passes 4] [--rounds 7] [--split] [--json]
// --split: --mib is the working set of all threads together, each reading MIB / threads of it (what a decode does
//   with one model's weights: 1 thread reads them all, 2 threads half each); without it every thread reads --mib.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { args, machine, median } from './lib/common.mjs';

const { has, opt } = args();
const threadsList = String(opt('--threads', '1,2')).split(',').map(Number);
const MIB = Number(opt('--mib', 256)), PASSES = Number(opt('--passes', 4)), ROUNDS = Number(opt('--rounds', 7));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-bw-'));
const c = path.join(tmp, 'probe.c'), wasmFile = path.join(tmp, 'probe.wasm');
fs.writeFileSync(c, `#include <wasm_simd128.h>
__attribute__((visibility("default"))) int probe(const void *p, unsigned bytes) {
  const v128_t *v = (const v128_t *)p;
  v128_t a = wasm_i32x4_splat(0), b = a, c = a, d = a;
  for (unsigned i = 0; i < bytes / 16; i += 4) { a = wasm_v128_xor(a, v[i]); b = wasm_v128_xor(b, v[i + 1]); c = wasm_v128_xor(c, v[i + 2]); d = wasm_v128_xor(d, v[i + 3]); }
  return wasm_i32x4_extract_lane(wasm_v128_xor(wasm_v128_xor(a, b), wasm_v128_xor(c, d)), 0);
}`);
execFileSync('clang', ['--target=wasm32', '-O3', '-msimd128', '-nostdlib', '-Wl,--no-entry', '-Wl,--export=probe', '-Wl,--import-memory',
  '-Wl,--max-memory=4294967296', c, '-o', wasmFile], { stdio: 'inherit' });
const wasm = fs.readFileSync(wasmFile);
fs.rmSync(tmp, { recursive: true, force: true });

const workerCode = `
const { parentPort, workerData } = require('node:worker_threads');
const { wasm, bytes, passes, sync, id } = workerData;
const mem = new WebAssembly.Memory({ initial: Math.ceil((bytes + 65536) / 65536), maximum: 65536 });
const X = new WebAssembly.Instance(new WebAssembly.Module(wasm), { env: { memory: mem } }).exports;
const u32 = new Uint32Array(mem.buffer, 65536, bytes / 4);
for (let i = 0; i < u32.length; i++) u32[i] = (i * 2654435761) >>> 0;
X.probe(65536, bytes);   // tier up, touch
const s = new Int32Array(sync);
parentPort.on('message', (round) => {
  Atomics.add(s, 0, 1);                                     // ready
  while (Atomics.load(s, 1) !== round) ;                    // start flag (spin: the start must be simultaneous)
  const t0 = performance.now();
  let x = 0;
  for (let p = 0; p < passes; p++) x ^= X.probe(65536, bytes);
  parentPort.postMessage({ ms: performance.now() - t0, x });
});
parentPort.postMessage('ready');
`;

const SPLIT = has('--split');
const bytesOf = (T) => Math.floor((SPLIT ? MIB / T : MIB) * 2 ** 20 / 1024) * 1024;
const pools = new Map();
for (const T of threadsList) {
  const bytes = bytesOf(T);
  const sync = new SharedArrayBuffer(8);
  const ws = [];
  for (let i = 0; i < T; i++) {
    const w = new Worker(workerCode, { eval: true, workerData: { wasm, bytes, passes: PASSES, sync, id: i } });
    await new Promise((r) => w.once('message', r));
    ws.push(w);
  }
  pools.set(T, { ws, s: new Int32Array(sync), gbs: [] });
}
let round = 0;
for (let r = 0; r < ROUNDS; r++) {
  for (const T of threadsList) {
    const { ws, s } = pools.get(T);
    round++;
    Atomics.store(s, 0, 0);
    const done = ws.map((w) => new Promise((res) => w.once('message', res)));
    ws.forEach((w) => w.postMessage(round));
    while (Atomics.load(s, 0) !== T) await new Promise((res) => setImmediate(res));
    const t0 = performance.now();
    Atomics.store(s, 1, round);
    await Promise.all(done);
    const ms = performance.now() - t0;
    pools.get(T).gbs.push((T * PASSES * bytesOf(T)) / ms / 1e6);
  }
}
const out = { machine: machine(), mib: MIB, split: SPLIT, passes: PASSES, rounds: ROUNDS, results: threadsList.map((T) => ({ threads: T, best_gbs: Math.max(...pools.get(T).gbs), median_gbs: median(pools.get(T).gbs), all: pools.get(T).gbs })) };
for (const { ws } of pools.values()) for (const w of ws) await w.terminate();
if (has('--json')) console.log(JSON.stringify(out, null, 1));
else {
  console.log(`streaming read, wasm SIMD128, ${MIB} MiB ${SPLIT ? 'split over the threads' : 'per thread'} x ${PASSES} passes, ${ROUNDS} interleaved rounds; load ${out.machine.loadavg.map((x) => x.toFixed(1)).join(' / ')}; THP ${out.machine.thp ?? 'n/a'}`);
  const base = out.results[0];
  for (const r of out.results) console.log(`  ${r.threads} thread(s): best ${r.best_gbs.toFixed(1)} GB/s, median ${r.median_gbs.toFixed(1)} GB/s (x${(r.median_gbs / base.median_gbs).toFixed(2)} of ${base.threads} thread median)`);
}
