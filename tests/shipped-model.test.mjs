// The shipped model (models/tiny-llama-a-q8_0.rknot) carries saturation metadata profiled on val.txt
// documents 0..66, disjoint from the documents 67..134 its quality is evaluated on (docs/QUALITY.md), so the
// static / dynamic FFN modes work out of the box (CLI, library; the browser demo: tests/browser.test.mjs).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const cli = (...args) => promisify(execFile)(process.execPath, ['dist/cli/aether.js', ...args], { cwd: repoRoot, timeout: 300_000 });

test('saturation metadata: calibrated on val.txt documents 0..66 only, levels 0.1..0.9 for every layer', async () => {
  const m = await load(MODEL);
  try {
    const s = m.metadata.saturation;
    assert.ok(s, 'the shipped model has a saturation section');
    assert.equal(s.calibration.text, 'val.txt');
    assert.equal(s.calibration.docs, '0:67');
    assert.equal(s.calibration.of_documents, 135);
    const [a, b] = s.calibration.docs.split(':').map(Number);
    assert.ok(b <= 67 && a >= 0, 'calibration documents end before the evaluation documents (67..134)');
    assert.deepEqual(s.levels.map((l) => l.sparsity), [0.1, 0.25, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]);
    for (const l of s.levels) assert.equal(l.layers.length, m.config.n_layers);
  } finally { m.dispose(); }
});

test('dynamic and static modes run on the shipped model, skip neurons, and stay close to dense on held-out text', async () => {
  const m = await load(MODEL, { modules: ['ffn-saturated'] });
  try {
    const dense = await m.complete('The Debian project is', { maxTokens: 16, greedy: true });
    m.setFfnMode('dynamic', undefined, { sparsity: 0.5 });
    const dyn = await m.complete('The Debian project is', { maxTokens: 16, greedy: true });
    assert.equal(dyn.tokens.length, 16);
    const counts = Array.from({ length: m.config.n_layers }, (_, l) => m.engine.ffnActive(l));
    assert.ok(counts.every((c) => c > 0 && c < m.config.hidden_dim), `dynamic 0.5 computes a part of the neurons: ${counts}`);
    m.setFfnMode('static', undefined, { sparsity: 0.25 });
    const st = await m.complete('The Debian project is', { maxTokens: 16, greedy: true });
    assert.equal(st.tokens.length, 16);
    assert.equal(dense.tokens.length, 16);
  } finally { m.dispose(); }
  // CLI: aether run --ffn dynamic, and eval on held-out documents against dense
  const { stdout } = await cli('run', MODEL, '-p', 'The Debian project is', '-n', '8', '--greedy', '--ffn', 'dynamic', '--json');
  assert.equal(JSON.parse(stdout).n_generated, 8);
  const ev = JSON.parse((await cli('eval', MODEL, '--text', 'tests/fixtures/tiny-llama-a/val.txt', '--docs', '67:', '--vs-dense',
    '--mode', 'dynamic', '--sparsity', '0.5', '--max-tokens', '1500', '--json')).stdout);
  assert.equal(ev.docs, '67:');
  assert.ok(ev.reference.top1 > 0.9, `top-1 agreement with dense ${ev.reference.top1}`);
  assert.ok(Math.abs(ev.reference.ppl_increase_pct) < 2, `perplexity increase ${ev.reference.ppl_increase_pct}%`);
  const sparsity = ev.ffn_sparsity;
  assert.ok(sparsity > 0.4, `FFN sparsity achieved ${sparsity}`);
});
