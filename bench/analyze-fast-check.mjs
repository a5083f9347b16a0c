// aether analyze's fast path (SLQ spectra) against exact eigenvalues at a large shape: for the chosen matrices of a
// model, the exact spectrum of the smaller Gram matrix (wasm f32 Gram, f64 Householder tridiagonalisation + QL:
// src/linalg/linalg.c) against matrixScoresFast (no calibration). Prints both score sets and the time of each.
//   node bench/analyze-fast-check.mjs MODEL.rknot [--matrices blk.0.ffn_down,blk.0.ffn_gate] [--probes 8] [--steps 48]
import v8 from 'node:v8';
import { load } from '../dist/src/index.js';
import { weightF32, matrixScoresFast } from '../dist/src/compress/analyze.js';
import { energyKept, powerLawAlpha } from '../dist/src/compress/linalg.js';
import { linalg, UPPER } from '../dist/src/compress/fast.js';
import { args, machine } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
const { opt, argv } = args();
const file = argv.find((a) => !a.startsWith('--') && a.endsWith('.rknot'));
const names = opt('--matrices', 'blk.0.ffn_down,blk.0.ffn_gate').split(',');
const probes = Number(opt('--probes', '8')), steps = Number(opt('--steps', '48'));
const model = await load(file, { threads: 1, maxBatch: 1, nCtx: 16 });
const la = await linalg();
console.log(`machine ${JSON.stringify(machine())}; ${file}; SLQ ${probes} probes x ${steps} steps`);
for (const name of names) {
  const { w, rows, cols } = weightF32(model, `${name}.weight`);
  const m0 = la.mark();
  let t0 = performance.now();
  const W = la.matF32(rows, cols, w);
  const A = cols <= rows ? la.transpose(W) : W;            // rows of A: the vectors of the smaller Gram
  const n = A.rows, G = la.matF32(n, n);
  la.gemmNT(A, A, G, UPPER);
  la.mirrorUpper(G);
  const Gd = la.matF64(n, n, la.f32(G));
  const ev = la.symEigvals(Gd);
  const tEx = (performance.now() - t0) / 1000;
  la.release(m0);
  const sv = Float64Array.from(ev, (v) => Math.sqrt(Math.max(0, v)));
  const full = sv.length, r75 = Math.round(0.75 * full), r50 = Math.round(0.5 * full);
  let fro = 0; for (const s of sv) fro += s * s;
  const pl = powerLawAlpha(sv.map((s) => s * s));
  const exact = { sigma1: sv[0], sigma2: sv[1], stable_rank: fro / sv[0] ** 2, alpha: pl.alpha, energy75: energyKept(sv, r75), energy50: energyKept(sv, r50) };
  t0 = performance.now();
  const fast = await matrixScoresFast(la, w, rows, cols, 0, name, undefined, { probes, steps });
  const tFa = (performance.now() - t0) / 1000;
  console.log(`${name} ${rows}x${cols}: exact ${tEx.toFixed(1)} s, fast ${tFa.toFixed(1)} s`);
  for (const k of Object.keys(exact)) console.log(`  ${k.padEnd(12)} exact ${exact[k].toPrecision(6)}  fast ${fast[k].toPrecision(6)}  diff ${(fast[k] - exact[k]).toExponential(2)}`);
}
model.dispose();
