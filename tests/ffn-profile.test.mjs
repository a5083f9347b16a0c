// Saturation profiler: the profile pass is the dense computation bit for bit, its statistics do not
// depend on the thread count, `aether profile` writes masks / thresholds / compensation that load back
// and drive the static and dynamic modes. Calibration uses val.txt documents 0..5 only.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { tiny, repoRoot } from './helpers/paths.mjs';
import { Q8, loadTiny, runLogits, bitDiff, maxAbsDiff, randomRows, ffnLayer } from './helpers/ffn.mjs';
import { profileModel } from '../dist/src/profile/profile.js';
import { selectDocs } from '../dist/src/profile/text.js';
import { b64decode } from '../dist/src/formats/saturation.js';
import { evaluate } from '../dist/src/eval.js';

const H = 768, NL = 6;
const val = () => fs.readFileSync(tiny('val.txt'), 'utf8');
const popcount = (m) => m.reduce((a, b) => { let c = 0; for (; b; b &= b - 1) c++; return a + c; }, 0);

test('profile mode is the dense FFN bit for bit; statistics are identical with 1 and 2 threads', async () => {
  const calib = selectDocs(val(), '0:6').text;
  const res = [];
  for (const threads of [1, 2]) {
    const model = await loadTiny(Q8, threads, { maxBatch: 128 });
    try {
      const dense = runLogits(model);
      model.ffn.startProfile(Array(NL).fill(0.01));
      const prof = runLogits(model);
      assert.equal(bitDiff(dense[0], prof[0]), 0, 'profile prefill');
      assert.equal(bitDiff(dense[1], prof[1]), 0, 'profile decode');
      model.setFfnMode('dense');
      const r = await profileModel(model, calib, { window: 128, maxTokens: 1500, levels: [0.25, 0.5] });
      assert.equal(r.tokens, 1500);
      for (const P of r.layers) assert.equal(P.hist.reduce((a, b) => a + b, 0), r.tokens * H, 'histogram holds every (token, neuron)');
      assert.deepEqual(model.ffn.modes, Array(NL).fill('dense'), 'profiling restores the modes');
      res.push(r.saturation);
    } finally { model.dispose(); }
  }
  assert.deepEqual(res[0].levels, res[1].levels);
  assert.deepEqual(res[0].layers, res[1].layers);
});

test('aether profile writes masks, thresholds and compensation that load back and drive static / dynamic', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-prof-'));
  const out = path.join(dir, 'tiny-sat.rknot');
  try {
    const r = JSON.parse(execFileSync('node', ['dist/cli/aether.js', 'profile', Q8, '--calib', tiny('val.txt'), '--docs', '0:6',
      '--target-sparsity', '0.25,0.5', '--max-tokens', '2000', '--window', '128', '-o', out, '--json'], { cwd: repoRoot, encoding: 'utf8' }));
    assert.equal(r.tokens, 2000);
    assert.equal(r.layers.length, NL);
    for (const l of r.layers) { assert.equal(l.frozen['0.25'], 192); assert.equal(l.frozen['0.5'], 384); assert.ok(l.always_zero_neurons >= 0); }
    const model = await loadTiny(out, 1, { maxBatch: 128, logitsAll: true });
    try {
      const s = model.metadata.saturation;
      assert.equal(s.version, 1);
      assert.equal(s.method, 'variance');
      assert.equal(s.calibration.docs, '0:6');
      assert.deepEqual(s.levels.map((l) => l.sparsity), [0.25, 0.5]);
      for (let l = 0; l < NL; l++) {
        const m25 = b64decode(s.levels[0].layers[l].frozen), m50 = b64decode(s.levels[1].layers[l].frozen);
        assert.equal(m25.length, H / 8);
        assert.equal(popcount(m25), 192);
        assert.equal(popcount(m50), 384);
        for (let i = 0; i < H / 8; i++) assert.equal(m25[i] & ~m50[i], 0, 'levels are nested (same score order)');
        assert.ok(s.levels[0].layers[l].threshold > 0 && s.levels[1].layers[l].threshold > s.levels[0].layers[l].threshold);
        assert.equal(typeof s.levels[0].layers[l].compensation, 'string');
        assert.equal(typeof s.layers[l].mean, 'string');
      }
      const dense = runLogits(model);
      // static: 25% of each layer's neurons computed no more
      model.setFfnMode('static', undefined, { sparsity: 0.25 });
      const st = runLogits(model);
      for (let l = 0; l < NL; l++) assert.equal(model.engine.ffnActive(l), 576);
      assert.ok(maxAbsDiff(dense[0], st[0]) > 0);
      // compensation as a bias (neuron-major down) == as the frozen neurons' mean h (rows down), up to rounding
      const x = randomRows(2 * model.config.dim, 3);
      const a = ffnLayer(model, 2, x, 2);
      model.setFfnMode('static', undefined, { sparsity: 0.25, down: 'rows' });
      const b = ffnLayer(model, 2, x, 2);
      assert.ok(maxAbsDiff(a, b) < 0.05, `compensation bias vs mean fill: ${maxAbsDiff(a, b)}`);
      model.setFfnMode('static', undefined, { sparsity: 0.25, compensation: false });
      assert.ok(maxAbsDiff(a, ffnLayer(model, 2, x, 2)) > 0, 'compensation changes the output');
      // dynamic at the 0.5 level skips about half of the neurons on held-out text
      const held = selectDocs(val(), '67:').text;
      const rep = await evaluate(model, held, { window: 128, maxTokens: 600, mode: 'dynamic', vsMode: 'dense' });
      model.setFfnMode('dynamic', undefined, { sparsity: 0.5 });
      const rep2 = await evaluate(model, held, { window: 128, maxTokens: 600, mode: 'dynamic', vsMode: 'dense' });
      assert.ok(rep2.ffn_sparsity > 0.35 && rep2.ffn_sparsity < 0.65, `dynamic 0.5 sparsity ${rep2.ffn_sparsity}`);
      assert.ok(rep2.reference.kl < 0.05 && rep2.reference.top1 > 0.85, JSON.stringify(rep2.reference));
      assert.ok(rep.ffn_sparsity > 0.15, `dynamic (first level) sparsity ${rep.ffn_sparsity}`);
      model.setFfnMode('dense');
      assert.equal(bitDiff(dense[0], runLogits(model)[0]), 0, 'rollback');
    } finally { model.dispose(); }
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
});
