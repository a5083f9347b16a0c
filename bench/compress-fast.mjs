// Error of the compression tools' fast path (js/src/compress/fast.ts) against the exact one (ml-matrix, float64) on
// a real model's matrices with real calibration:
//   1. aether analyze's scores: every 2-D weight of the chosen layers, fast (SLQ) vs exact; per score the median and
//      largest absolute difference (and the Spearman correlation across matrices, which is what the atlas uses);
//   2. aether compress's aa-svd factors: per FFN matrix, ||(W - B A) S||_F^2 of the randomised range finder (0, 1, 2
//      power iterations) over the exact optimum (the truncated eigendecomposition), at width 0.75 and 0.5.
//   node bench/compress-fast.mjs [--model models/tiny-llama-a-q8_0.rknot] [--calib tests/fixtures/tiny-llama-a/val.txt]
//       [--docs 0:67] [--tokens 2048] [--layers 0,1,2,3,4,5] [--json OUT]
import fs from 'node:fs';
import v8 from 'node:v8';
import { load } from '../dist/src/index.js';
import { selectDocs } from '../dist/src/profile/text.js';
import { calibrate, calibrationWindows, blockMoments } from '../dist/src/compress/calib.js';
import { analyzeModel, weightF32, weightMatrix, blockWhitening, MATRIX_INPUT, calibRidge } from '../dist/src/compress/analyze.js';
import { mat, matmul, lowRank, symmetricFromUpper, spearman } from '../dist/src/compress/linalg.js';
import { linalg, lowRankFast, WeightOps } from '../dist/src/compress/fast.js';
import { args, machine, median } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');
const { opt } = args();
const MODEL = opt('--model', 'models/tiny-llama-a-q8_0.rknot'), CALIB = opt('--calib', 'tests/fixtures/tiny-llama-a/val.txt');
const DOCS = opt('--docs', '0:67'), TOK = Number(opt('--tokens', '2048')), JSON_OUT = opt('--json', '');
const model = await load(MODEL, { threads: 1, maxBatch: 64 });
const NL = model.config.n_layers;
const layers = opt('--layers', '') ? opt('--layers', '').split(',').map(Number) : Array.from({ length: NL }, (_, l) => l);
const text = selectDocs(fs.readFileSync(CALIB, 'utf8'), DOCS).text;
const cal = await calibrate(model, calibrationWindows(model, text, 256, TOK), { mode: 'streamed' });
const out = { machine: machine(), model: MODEL, tokens: cal.tokens, layers };

// 1. analyze
let t0 = performance.now();
const ex = (await analyzeModel(model, { calibration: cal, layers, linalg: 'exact' })).matrices;
const tEx = (performance.now() - t0) / 1000;
t0 = performance.now();
const fa = (await analyzeModel(model, { calibration: cal, layers, linalg: 'fast' })).matrices;
const tFa = (performance.now() - t0) / 1000;
console.log(`${MODEL}: ${ex.length} matrices of layers ${layers.join(',')}, calibration ${cal.tokens} tokens; analyze exact ${tEx.toFixed(1)} s, fast ${tFa.toFixed(1)} s (load ${machine().loadavg.join(', ')})`);
console.log('| score | median abs diff | max abs diff | median rel diff | Spearman(exact, fast) across matrices |\n|---|---|---|---|---|');
out.analyze = {};
for (const k of ['sigma1', 'sigma2', 'cliff', 'stable_rank', 'alpha', 'energy75', 'energy50', 'aa_energy75', 'aa_energy50']) {
  const d = ex.map((m, i) => Math.abs(m[k] - fa[i][k])), r = ex.map((m, i) => Math.abs(m[k] - fa[i][k]) / Math.max(1e-12, Math.abs(m[k])));
  const rho = spearman(ex.map((m) => m[k]), fa.map((m) => m[k]));
  out.analyze[k] = { median_abs: median(d), max_abs: Math.max(...d), median_rel: median(r), spearman: rho };
  console.log(`| ${k} | ${median(d).toExponential(2)} | ${Math.max(...d).toExponential(2)} | ${median(r).toExponential(2)} | ${rho.toFixed(4)} |`);
}

// 2. aa-svd factors
const la = await linalg();
const D = model.config.dim, H = model.config.hidden_dim;
console.log('\n| width | matrix | rank | error / optimum, 0 power iterations | 1 | 2 |\n|---|---|---|---|---|---|');
out.lowrank = [];
for (const ratio of [0.75, 0.5]) {
  const k = Math.max(32, Math.round((ratio * D * H) / (D + H) / 32) * 32);
  for (const l of layers) {
    const st = cal.layer(l);
    for (const name of ['ffn_gate', 'ffn_up', 'ffn_down']) {
      const blk = st.blocks[MATRIX_INPUT[name]];
      const W = weightMatrix(model, `blk.${l}.${name}.weight`);
      const S = blockWhitening(cal, l, MATRIX_INPUT[name]);
      const C = matmul(S, { rows: S.cols, cols: S.rows, data: (() => { const t = new Float64Array(S.data.length); for (let i = 0; i < S.rows; i++) for (let j = 0; j < S.cols; j++) t[j * S.rows + i] = S.data[i * S.cols + j]; return t; })() });
      const err = (B, A) => {
        const E = mat(W.rows, W.cols, W.data), BA = matmul(B, A);
        for (let i = 0; i < E.data.length; i++) E.data[i] -= BA.data[i];
        const EC = matmul(E, C);
        let s = 0;
        for (let i = 0; i < E.data.length; i++) s += EC.data[i] * E.data[i];
        return s;
      };
      const opt = lowRank(W, k, S), eOpt = err(opt.B, opt.A);
      const { w } = weightF32(model, `blk.${l}.${name}.weight`);
      const ratios = [0, 1, 2].map((q) => {
        const m0 = la.mark();
        const f = lowRankFast(new WeightOps(la, w, W.rows, W.cols, blk.X, calibRidge(blk.sq, cal.tokens)), k, q, 1 + l);
        la.release(m0);
        return err(mat(W.rows, k, f.B), mat(k, W.cols, f.A)) / eOpt;
      });
      out.lowrank.push({ ratio, layer: l, name, k, ratios });
      console.log(`| ${ratio} | blk.${l}.${name} | ${k} | ${ratios.map((r) => r.toFixed(4)).join(' | ')} |`);
      void blockMoments;
    }
  }
}
for (const ratio of [0.75, 0.5]) {
  const rs = out.lowrank.filter((x) => x.ratio === ratio);
  console.log(`width ${ratio}: median error / optimum ${[0, 1, 2].map((q) => median(rs.map((x) => x.ratios[q])).toFixed(4)).join(' / ')} (0 / 1 / 2 power iterations), max ${[0, 1, 2].map((q) => Math.max(...rs.map((x) => x.ratios[q])).toFixed(4)).join(' / ')}`);
}
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(out, null, 1));
cal.dispose();
model.dispose();
