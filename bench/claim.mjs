// The "cliff score" claim tested (docs/QUALITY.md, "Spectral atlas"): truncate ONE weight matrix at a time
// to 50% rank (plain SVD and activation-aware SVD), measure the held-out perplexity increase, and report the
// Spearman rank correlation of the increase with each score of `aether analyze`. In-process: the truncated
// W_k = B A is written over the matrix in wasm memory (f32 model, so no re-quantisation), evaluated, restored.
//   node bench/claim.mjs [--calib-tokens 8192] [--eval-tokens 8192] [--out /tmp/aether-claim] [--threads 1]
import fs from 'node:fs';
import path from 'node:path';
import { args, machine, repoRoot } from './lib/common.mjs';
import { load } from '../dist/src/index.js';
import { convertModel } from '../dist/src/formats/convert.js';
import { evaluate } from '../dist/src/eval.js';
import { selectDocs } from '../dist/src/profile/text.js';
import { calibrate, calibrationWindows } from '../dist/src/compress/calib.js';
import { analyzeModel, weightMatrix, blockWhitening, MATRIX_INPUT } from '../dist/src/compress/analyze.js';
import { lowRank, matmul, spearman } from '../dist/src/compress/linalg.js';

const { opt } = args();
const OUT = opt('--out', '/tmp/aether-claim');
const CAL = Number(opt('--calib-tokens', '8192')), EV = Number(opt('--eval-tokens', '8192'));
const THREADS = Number(opt('--threads', '1'));
fs.mkdirSync(OUT, { recursive: true });
const VAL = path.join(repoRoot, 'tests/fixtures/tiny-llama-a/val.txt');
const f32 = path.join(OUT, 'tiny-llama-a-f32.rknot');
if (!fs.existsSync(f32)) await convertModel(path.join(repoRoot, 'tests/fixtures/tiny-llama-a/tiny-llama-a-f32.gguf'), f32, { quant: 'f32' });
const text = fs.readFileSync(VAL, 'utf8');
const calibText = selectDocs(text, '0:67').text, evalText = selectDocs(text, '67:').text;

const model = await load(f32, { threads: THREADS, maxBatch: 64, logitsAll: true });
const t0 = Date.now();
const cal = await calibrate(model, calibrationWindows(model, calibText, 256, CAL));
const { matrices } = await analyzeModel(model, { calibration: cal });
process.stderr.write(`calibrated on ${cal.tokens} tokens and analysed ${matrices.length} matrices in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
const ev = async () => (await evaluate(model, evalText, { window: 64, maxTokens: EV })).perplexity;
const base = await ev();
process.stderr.write(`dense perplexity ${base.toFixed(3)} on ${EV} held-out tokens\n`);
const rows = [];
for (const m of matrices) {
  const name = `blk.${m.layer}.${m.name}.weight`;
  const W = weightMatrix(model, name);
  const bytes = model.engine.tensorBytes(name);
  const orig = bytes.slice();
  const k = Math.round(0.5 * Math.min(W.rows, W.cols));
  const row = { ...m, rank: k };
  for (const method of ['svd', 'aa-svd']) {
    const S = method === 'aa-svd' ? blockWhitening(cal, m.layer, MATRIX_INPUT[m.name]) : undefined;
    const { A, B } = lowRank(W, k, S);
    const Wk = Float32Array.from(matmul(B, A).data);
    model.engine.tensorBytes(name).set(new Uint8Array(Wk.buffer));
    const ppl = await ev();
    model.engine.tensorBytes(name).set(orig);
    row[method === 'svd' ? 'svd_ppl_increase_pct' : 'aa_ppl_increase_pct'] = (ppl / base - 1) * 100;
  }
  rows.push(row);
  process.stderr.write(`${name}: cliff ${m.cliff.toFixed(2)}  svd +${row.svd_ppl_increase_pct.toFixed(2)}%  aa-svd +${row.aa_ppl_increase_pct.toFixed(2)}%\n`);
}
if ((await ev()) !== base) throw new Error('restoring the weights did not restore the model');
model.dispose();
const SCORES = ['cliff', 'stable_rank', 'alpha', 'energy50', 'aa_energy50'];
const corr = {};
for (const target of ['svd_ppl_increase_pct', 'aa_ppl_increase_pct']) {
  corr[target] = {};
  for (const s of SCORES) corr[target][s] = spearman(rows.map((r) => r[s]), rows.map((r) => r[target]));
}
const report = { machine: machine(), model: 'tiny-llama-a f32', calib_tokens: cal.tokens, eval_tokens: EV, dense_perplexity: base, rows, spearman: corr,
  cliff_ge_8: rows.filter((r) => r.cliff >= 8).length };
fs.writeFileSync(path.join(OUT, 'claim.json'), JSON.stringify(report, null, 1));
console.log(`| matrix | s1/s2 | stable rank | alpha | energy50 | aa-energy50 | ppl increase, SVD 50% | ppl increase, aa-SVD 50% |\n|---|---|---|---|---|---|---|---|`);
for (const r of rows) console.log(`| blk.${r.layer}.${r.name} | ${r.cliff.toFixed(2)} | ${r.stable_rank.toFixed(1)} | ${r.alpha.toFixed(2)} | ${r.energy50.toFixed(3)} | ${r.aa_energy50.toFixed(5)} | +${r.svd_ppl_increase_pct.toFixed(2)}% | +${r.aa_ppl_increase_pct.toFixed(2)}% |`);
console.log(`\n| Spearman rho with the ppl increase | ${SCORES.join(' | ')} |\n|---|${SCORES.map(() => '---').join('|')}|`);
for (const [t, c] of Object.entries(corr)) console.log(`| ${t} | ${SCORES.map((s) => c[s].toFixed(3)).join(' | ')} |`);
console.log(`\nmatrices with sigma1/sigma2 >= 8: ${report.cliff_ge_8} of ${rows.length}`);
