// CPU seconds of the fast path's two heavy steps on one Phi-3-mini-shape FFN matrix (random values: the work does not
// depend on them): aa-svd factors (lowRankFast) at the rank of a width-0.5 / 0.75 FFN, and analyze's scores
// (matrixScoresFast, plain + activation-aware SLQ). Extrapolates to a 32-layer model (3 FFN matrices per layer for
// compress; 5 matrices per layer for analyze, attn_qkv counted as 1.1x and attn_output as 0.4x an FFN matrix by size).
//   node bench/compress-cost.mjs [--out 8192] [--in 3072] [--tokens 512] [--power-iters 1] [--probes 8] [--steps 48] [--skip-analyze] [--skip-compress]
import v8 from 'node:v8';
import { linalg, lowRankFast, WeightOps, rng } from '../dist/src/compress/fast.js';
import { matrixScoresFast } from '../dist/src/compress/analyze.js';
import { args, machine } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
const { opt, argv } = args();
const flag = (f) => argv.includes(f);
const OUT = Number(opt('--out', '8192')), IN = Number(opt('--in', '3072')), N = Number(opt('--tokens', '512'));
const Q = Number(opt('--power-iters', '1')), P = Number(opt('--probes', '8')), S = Number(opt('--steps', '48'));
const cpu = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1e6; };
const R = rng(5);
const w = Float32Array.from({ length: OUT * IN }, () => 0.02 * R.normal());
const x = Float32Array.from({ length: N * IN }, () => R.normal());
const la = await linalg();
const res = { machine: machine(), shape: [OUT, IN], tokens: N };
for (const ratio of flag('--skip-compress') ? [] : [0.5, 0.75]) {
  const k = Math.round((ratio * IN * OUT) / (IN + OUT) / 32) * 32;
  const c0 = cpu(), w0 = performance.now(), m0 = la.mark();
  lowRankFast(new WeightOps(la, w, OUT, IN, x, 1e-6), k, Q, 1);
  la.release(m0);
  res[`aa_svd_${ratio}`] = { rank: k, cpu_s: cpu() - c0, wall_s: (performance.now() - w0) / 1000 };
  console.log(`aa-svd width ${ratio} (rank ${k}, ${Q} power iterations): ${(cpu() - c0).toFixed(1)} s CPU, ${((performance.now() - w0) / 1000).toFixed(1)} s wall per ${OUT}x${IN} matrix; x 96 matrices = ${((cpu() - c0) * 96 / 60).toFixed(1)} min CPU for 32 layers`);
}
if (!flag('--skip-analyze')) {
  const c0 = cpu(), w0 = performance.now();
  await matrixScoresFast(la, w, OUT, IN, 0, 'ffn_gate', { X: x, ridge: 1e-6 }, { probes: P, steps: S });
  const c = cpu() - c0;
  res.analyze = { probes: P, steps: S, cpu_s: c, wall_s: (performance.now() - w0) / 1000 };
  console.log(`analyze scores (plain + activation-aware SLQ, ${P} probes x ${S} steps): ${c.toFixed(1)} s CPU, ${((performance.now() - w0) / 1000).toFixed(1)} s wall per matrix; x 32 x (3 + 1.1 + 0.4) = ${(c * 32 * 4.5 / 60).toFixed(1)} min CPU for 32 layers`);
}
console.log(JSON.stringify(res));
