// Compression suite (aether analyze / compress): the linear algebra against ml-matrix, the calibration
// capture hook (no effect on the forward, 1 vs 2 threads identical), and `aether analyze` on tiny-llama-a.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Matrix, SingularValueDecomposition } from 'ml-matrix';
import { repoRoot, tiny } from './helpers/paths.mjs';
import { Q8, loadTiny, runLogits, bitDiff, randomRows } from './helpers/ffn.mjs';
import { mat, matmul, singularValues, lowRank, whitening, symmetricFromUpper, accumulateGram, powerLawAlpha, spearman, energyKept, transpose } from '../dist/src/compress/linalg.js';
import { calibrate, calibrationWindows } from '../dist/src/compress/calib.js';
import { selectDocs } from '../dist/src/profile/text.js';
import { openRknot } from '../dist/src/formats/rknot-node.js';

const rand = (r, c, seed) => mat(r, c, randomRows(r * c, seed));
const fro = (A) => Math.sqrt(A.data.reduce((a, v) => a + v * v, 0));
const sub = (A, B) => ({ rows: A.rows, cols: A.cols, data: A.data.map((v, i) => v - B.data[i]) });

test('singular values and truncations match ml-matrix SVD (tall and wide)', () => {
  for (const [r, c] of [[40, 24], [24, 40]]) {
    const W = rand(r, c, r * 7 + c);
    const ref = new SingularValueDecomposition(new Matrix(Array.from({ length: r }, (_, i) => Array.from(W.data.subarray(i * c, (i + 1) * c)))), { autoTranspose: true }).diagonal;
    const s = singularValues(W);
    for (let i = 0; i < ref.length; i++) assert.ok(Math.abs(s[i] - ref[i]) < 1e-9 * ref[0], `sigma ${i}: ${s[i]} vs ${ref[i]}`);
    const k = 10;
    const { B, A } = lowRank(W, k);
    const err = fro(sub(W, matmul(B, A)));
    const want = Math.sqrt(ref.slice(k).reduce((a, v) => a + v * v, 0));   // Eckart-Young
    assert.ok(Math.abs(err - want) < 1e-9 * want, `rank-${k} error ${err} vs ${want}`);
    assert.ok(Math.abs(energyKept(s, k) - (1 - want ** 2 / fro(W) ** 2)) < 1e-12);
  }
});

test('activation-aware truncation minimises ||(W - W_k) X|| and beats plain SVD on it', () => {
  const out = 30, inp = 20, N = 400, k = 8;
  const W = rand(out, inp, 3);
  // inputs with very unequal feature scales (what RMSNorm outputs look like)
  const X = randomRows(N * inp, 5).map((v, i) => v * (1 + 20 * ((i % inp) === 3) + 5 * ((i % inp) === 11)));
  const acc = new Float64Array(inp * inp);
  accumulateGram(acc, inp, Float32Array.from(X), N);
  const C = symmetricFromUpper(acc, inp, 1 / N);
  const { S, ridge } = whitening(C);
  const SSt = matmul(S, transpose(S));
  for (let i = 0; i < inp * inp; i++) {
    const want = C.data[i] + (i % (inp + 1) === 0 ? ridge : 0);   // S S^T = C + ridge I
    assert.ok(Math.abs(SSt.data[i] - want) < 1e-9 * C.data[3 * inp + 3], `S S^T [${i}]`);
  }
  const Xm = transpose(mat(N, inp, X));  // inp x N
  const errOn = (B, A) => fro(matmul(sub(W, matmul(B, A)), Xm));
  const aa = lowRank(W, k, S), plain = lowRank(W, k);
  const want = Math.sqrt(N * aa.sigma.slice(k).reduce((a, v) => a + v * v, 0));
  assert.ok(Math.abs(errOn(aa.B, aa.A) - want) < 1e-4 * want, `aa error ${errOn(aa.B, aa.A)} vs tail ${want}`);
  assert.ok(errOn(aa.B, aa.A) < 0.9 * errOn(plain.B, plain.A), 'activation-aware truncation is better on W X');
  // wide matrix path (out < in)
  const W2 = rand(12, 20, 9), aa2 = lowRank(W2, 5, S);
  const want2 = Math.sqrt(N * aa2.sigma.slice(5).reduce((a, v) => a + v * v, 0));
  const e2 = fro(matmul(sub(W2, matmul(aa2.B, aa2.A)), Xm));
  assert.ok(Math.abs(e2 - want2) < 1e-4 * want2, `wide aa error ${e2} vs ${want2}`);
});

test('power-law alpha (Hill MLE, xmin by KS) recovers the exponent of Pareto samples; Spearman', () => {
  for (const alpha of [2, 3.5]) {
    const u = randomRows(4000, 11).map((v) => (v + 1) / 2 + 1e-9);
    const x = Array.from(u, (v) => Math.pow(v, -1 / (alpha - 1)));   // Pareto(xmin 1, alpha)
    const fit = powerLawAlpha(x);
    assert.ok(Math.abs(fit.alpha - alpha) < 0.2, `alpha ${fit.alpha} vs ${alpha}`);
  }
  assert.equal(spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1);
  assert.equal(spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1);
  assert.ok(Math.abs(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) - 0.8) < 1e-12);
});

test('calibration capture does not change the forward; moments identical with 1 and 2 threads', async () => {
  const text = selectDocs(fs.readFileSync(tiny('val.txt'), 'utf8'), '0:2').text;
  const res = [];
  for (const threads of [1, 2]) {
    const model = await loadTiny(Q8, threads);
    try {
      const before = runLogits(model);
      const wins = calibrationWindows(model, text, 64, 300);
      const cal = await calibrate(model, wins);
      assert.equal(cal.tokens, 300);
      const after = runLogits(model);
      assert.equal(bitDiff(before[0], after[0]) + bitDiff(before[1], after[1]), 0, 'capture off again: same logits');
      // the last layer's captured h equals the dense FFN's h left in hb by a forward of the same tokens
      const L = model.config.n_layers - 1, H = model.config.hidden_dim, eng = model.engine;
      const area = eng.heap.alloc(eng.captureOffset(4) * 4, 64);
      eng.setCapture(L, area);
      model.reset(); eng.forward(wins[0].slice(0, 16), 0);
      eng.setCapture(L, 0);
      const h = eng.heap.f32(area + eng.captureOffset(3) * 4, 16 * H);
      assert.equal(bitDiff(h, eng.modelBuf(2, 16 * H)), 0, 'captured h == hb');
      res.push(cal.layers.map((x) => [x.blocks.ffn.xx, x.blocks.down.sum]));
    } finally { model.dispose(); }
  }
  for (let l = 0; l < res[0].length; l++) for (let j = 0; j < 2; j++) assert.deepEqual(res[0][l][j], res[1][l][j]);
});

test('aether analyze: table scores, atlas in the output metadata, SVG chart', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-analyze-'));
  const out = path.join(dir, 'atlas.rknot'), svg = path.join(dir, 'atlas.svg');
  const stdout = execFileSync(process.execPath, [path.join(repoRoot, 'dist/cli/aether.js'), 'analyze', Q8, '--calib', tiny('val.txt'),
    '--docs', '0:67', '--max-tokens', '512', '--layers', '0,5', '-o', out, '--chart', svg, '--json'], { encoding: 'utf8' });
  const r = JSON.parse(stdout);
  assert.equal(r.matrices.length, 14);
  for (const m of r.matrices) {
    assert.ok(m.sigma1 >= m.sigma2 && m.sigma2 > 0);
    assert.ok(Math.abs(m.cliff - m.sigma1 / m.sigma2) < 1e-9);
    assert.ok(m.stable_rank >= 1 && m.stable_rank <= Math.min(m.rows, m.cols));
    assert.ok(m.energy50 > 0 && m.energy50 <= m.energy75 && m.energy75 <= 1);
    assert.ok(m.aa_energy50 > 0 && m.aa_energy50 <= m.aa_energy75 && m.aa_energy75 <= 1 + 1e-12);
    assert.ok(m.alpha > 1 && m.alpha_tail >= 10);
  }
  assert.deepEqual(r.atlas.layers.map((L) => L.layer), [0, 5]);
  return openRknot(out).then(({ meta }) => {
    assert.deepEqual(meta.compression.atlas.layers.map((L) => L.mode), r.atlas.layers.map((L) => L.mode));
    assert.equal(meta.compression.atlas.calibration.tokens, 512);
    const s = fs.readFileSync(svg, 'utf8');
    assert.match(s, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.ok(s.trimEnd().endsWith('</svg>'));
    assert.equal((s.match(/<g class="panel"/g) ?? []).length, 4);
    assert.equal((s.match(/class="series" data-matrix="ffn_down"/g) ?? []).length, 4, 'one ffn_down line per panel');
    assert.ok(!/NaN|undefined/.test(s));
  });
});
