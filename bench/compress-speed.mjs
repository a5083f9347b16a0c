// Speed of compressed FFN variants against their dense source, side by side in one run: per file, the FFN of every
// layer alone on one token (decode) and on 64 tokens (a prefill batch) through the engine's FFN-layer job
// (Engine.runFfnLayer: rmsnorm + FFN + residual, the pool's job start included), and whole-model decode tok/s
// (greedy steps after a short prompt). Rounds interleave the files; medians. V8 runs TurboFan only.
//   node bench/compress-speed.mjs [--threads 1] [--rounds 5] [--reps 20] [--label NAME] DENSE.rknot|gguf VARIANT.rknot...
// Random-weight models (generated Phi-3 shapes) are fine for speed: the work does not depend on the values.
import v8 from 'node:v8';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { resolveNodeSource } from '../dist/src/node/convert-on-load.js';
import { args, machine, median } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--no-wasm-lazy-compilation');
const { opt, argv } = args();
const T = Number(opt('--threads', '1')), ROUNDS = Number(opt('--rounds', '5')), REPS = Number(opt('--reps', '20'));
const files = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
if (files.length < 2) { console.error('usage: node bench/compress-speed.mjs [--threads T] DENSE VARIANT...'); process.exit(2); }

const models = [];
for (const f of files) {
  const m = await load(await resolveNodeSource(f), { threads: T, maxBatch: 64, nCtx: 256 });
  models.push({ file: f, m, ffn1: [], ffn64: [], decode: [] });
}
const D = models[0].m.config.dim, NL = models[0].m.config.n_layers;
const x = new Float32Array(64 * D).map((_, i) => Math.sin(i * 0.37));
function ffnTime(m, n) {
  const e = m.engine;
  const t0 = performance.now();
  for (let r = 0; r < REPS; r++) for (let l = 0; l < NL; l++) { e.modelBuf(0, n * D).set(x.subarray(0, n * D)); e.runFfnLayer(l, n); }
  return (performance.now() - t0) / REPS;   // ms per token step (all layers)
}
function decodeTps(m) {
  m.reset();
  const e = m.engine;
  e.forward([1, 2, 3, 4, 5, 6, 7, 8], 0);
  const N = 32, t0 = performance.now();
  for (let i = 0; i < N; i++) e.forward([10 + i], 8 + i);
  return N / ((performance.now() - t0) / 1000);
}
for (const r of models) { ffnTime(r.m, 1); decodeTps(r.m); }   // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const r of models) {
    r.ffn1.push(ffnTime(r.m, 1));
    r.ffn64.push(ffnTime(r.m, 64));
    r.decode.push(decodeTps(r.m));
  }
}
const d = models[0];
console.log(`machine: ${JSON.stringify(machine())}; threads ${T}; ${NL} layers, dim ${D}, hidden ${d.m.config.hidden_dim}; rounds ${ROUNDS} x reps ${REPS}`);
console.log('| file | FFN ms / token (all layers) | FFN speed-up | FFN ms / 64-token batch | speed-up | decode tok/s | decode speed-up |\n|---|---|---|---|---|---|---|');
for (const r of models) {
  const f1 = median(r.ffn1), f64 = median(r.ffn64), dec = median(r.decode);
  console.log(`| ${path.basename(r.file)} | ${f1.toFixed(3)} | ${(median(d.ffn1) / f1).toFixed(2)}x | ${f64.toFixed(2)} | ${(median(d.ffn64) / f64).toFixed(2)}x | ${dec.toFixed(1)} | ${(dec / median(d.decode)).toFixed(2)}x |`);
}
for (const r of models) r.m.dispose();
process.exit(0);
