// Speed of compressed FFN variants against their dense source, side by side in one run: per file, the FFN of every
// layer alone on one token (decode) and on 64 tokens (a prefill batch) through the engine's FFN-layer job
// (Engine.runFfnLayer: rmsnorm + FFN + residual, the pool's job start included), and whole-model decode tok/s
// (greedy forward steps after an 8-token prompt). The dense file stays loaded; the variants are loaded one at a time
// (Phi-3-mini-size files: two in memory at once, not five) and each is measured in rounds interleaved with the dense
// file, so every ratio comes from the same minutes. Medians over rounds.
//
// Every figure is given twice: by wall-clock time and by the CPU time of the process (process.cpuUsage, user +
// system). With --threads 1 the forward runs on the main thread only, so CPU time is the work done, unaffected by
// the time the OS gives other processes: on this shared 2-core machine (load averages 10-20) wall-clock figures of
// short runs swing by 3-10x between rounds (the previous version of this bench measured wall time only and reported
// a dense FFN 20x slower than a pruned one on tiny-llama-a), CPU-time figures by a few percent. V8 runs TurboFan only.
//
//   node bench/compress-speed.mjs [--threads 1] [--rounds 5] [--reps 20] [--decode 32] [--json OUT] DENSE VARIANT...
// Random-weight models (generated Phi-3 shapes) are fine for speed: the work does not depend on the values.
import fs from 'node:fs';
import v8 from 'node:v8';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { resolveNodeSource } from '../dist/src/node/convert-on-load.js';
import { args, machine, median } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
v8.setFlagsFromString('--no-wasm-lazy-compilation');
const { opt, argv } = args();
const T = Number(opt('--threads', '1')), ROUNDS = Number(opt('--rounds', '5')), REPS = Number(opt('--reps', '20'));
const NDEC = Number(opt('--decode', '32')), JSON_OUT = opt('--json', '');
const files = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
if (files.length < 2) { console.error('usage: node bench/compress-speed.mjs [--threads T] DENSE VARIANT...'); process.exit(2); }

const cpuNow = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1e6; };
/** run f, return [wall s, cpu s] */
function timed(f) {
  const w0 = performance.now(), c0 = cpuNow();
  f();
  return [(performance.now() - w0) / 1000, cpuNow() - c0];
}
async function open(file) {
  const m = await load(await resolveNodeSource(file), { threads: T, maxBatch: 64, nCtx: 256 });
  return { file, m, ffn1: [], ffn64: [], decode: [] };
}
let X;
function ffnTime(m, n, reps) {
  const e = m.engine, D = m.config.dim, NL = m.config.n_layers;
  X ??= new Float32Array(64 * D).map((_, i) => Math.sin(i * 0.37));
  return timed(() => {
    for (let r = 0; r < reps; r++) for (let l = 0; l < NL; l++) { e.modelBuf(0, n * D).set(X.subarray(0, n * D)); e.runFfnLayer(l, n); }
  }).map((s) => (1000 * s) / reps);   // ms per step (all layers)
}
function decodeTps(m, n) {
  m.reset();
  const e = m.engine;
  e.forward([1, 2, 3, 4, 5, 6, 7, 8], 0);
  return timed(() => { for (let i = 0; i < n; i++) e.forward([10 + i], 8 + i); }).map((s) => n / s);
}
function measure(r, big) {
  r.ffn1.push(ffnTime(r.m, 1, REPS));
  r.ffn64.push(ffnTime(r.m, 64, Math.max(1, Math.round(REPS / (big ? 16 : 4)))));
  r.decode.push(decodeTps(r.m, NDEC));
}
const med = (xs, k) => median(xs.map((x) => x[k]));

const dense = await open(files[0]);
const cfg = dense.m.config, big = cfg.dim >= 2048;
ffnTime(dense.m, 1, 1); decodeTps(dense.m, 4);   // warm-up
const rows = [];
const load0 = machine().loadavg;
for (const f of files.slice(1)) {
  const v = await open(f);
  ffnTime(v.m, 1, 1); decodeTps(v.m, 4);
  const d = { file: dense.file, m: dense.m, ffn1: [], ffn64: [], decode: [] };
  for (let round = 0; round < ROUNDS; round++) {
    // alternate which goes first
    if (round % 2 === 0) { measure(d, big); measure(v, big); } else { measure(v, big); measure(d, big); }
  }
  const row = { file: path.basename(f), size: fs.statSync(f).size, dense_size: fs.statSync(files[0]).size };
  for (const k of [0, 1]) {
    const tag = k === 0 ? 'wall' : 'cpu';
    row[tag] = {
      dense_ffn1_ms: med(d.ffn1, k), ffn1_ms: med(v.ffn1, k), dense_ffn64_ms: med(d.ffn64, k), ffn64_ms: med(v.ffn64, k),
      dense_decode_tps: med(d.decode, k), decode_tps: med(v.decode, k),
    };
  }
  rows.push(row);
  v.m.dispose();
  process.stderr.write(`${row.file}: cpu decode ${row.cpu.decode_tps.toFixed(2)} vs dense ${row.cpu.dense_decode_tps.toFixed(2)} tok/s\n`);
}
const mach = machine();
console.log(`machine: ${JSON.stringify(mach)} (load average at start ${load0.join(', ')}); threads ${T}; ${cfg.n_layers} layers, dim ${cfg.dim}, hidden ${cfg.hidden_dim}; rounds ${ROUNDS} x reps ${REPS}, decode ${NDEC} tokens; dense file ${path.basename(files[0])}`);
for (const tag of ['cpu', 'wall']) {
  console.log(`\n${tag === 'cpu' ? 'CPU time of the process (work done)' : 'wall-clock time (includes waiting for a CPU)'}:`);
  console.log('| variant | file MB | FFN ms / token (dense) | FFN speed-up | FFN ms / 64 tokens (dense) | speed-up | decode tok/s (dense) | decode speed-up |\n|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const x = r[tag];
    console.log(`| ${r.file} | ${(r.size / 1e6).toFixed(1)} (${(r.dense_size / 1e6).toFixed(1)}) | ${x.ffn1_ms.toFixed(3)} (${x.dense_ffn1_ms.toFixed(3)}) | ${(x.dense_ffn1_ms / x.ffn1_ms).toFixed(2)}x | ${x.ffn64_ms.toFixed(2)} (${x.dense_ffn64_ms.toFixed(2)}) | ${(x.dense_ffn64_ms / x.ffn64_ms).toFixed(2)}x | ${x.decode_tps.toFixed(2)} (${x.dense_decode_tps.toFixed(2)}) | ${(x.decode_tps / x.dense_decode_tps).toFixed(2)}x |`);
  }
}
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify({ machine: mach, load_start: load0, threads: T, rounds: ROUNDS, reps: REPS, decode: NDEC, config: { n_layers: cfg.n_layers, dim: cfg.dim, hidden: cfg.hidden_dim }, rows }, null, 1));
dense.m.dispose();
process.exit(0);
