// Measured quality of the q8_0 model against the f32 model on held-out text (tiny-llama-a val.txt).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { evaluate } from '../dist/src/eval.js';
import { tiny, repoRoot } from './helpers/paths.mjs';

test('q8_0 keeps top-1 agreement with f32 >= 95% on validation text (first 8192 predicted tokens)', async () => {
  const text = fs.readFileSync(tiny('val.txt'), 'utf8');
  const opts = { threads: 1, logitsAll: true, maxBatch: 256 };
  const q8 = await load(path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot'), opts);
  const f32 = await load(tiny('tiny-llama-a-f32.gguf'), opts);
  try {
    const r = await evaluate(q8, text, { reference: f32, maxTokens: 8192, window: 256 });
    console.log(`q8_0 vs f32: ${r.tokens} tokens, ppl ${r.perplexity.toFixed(3)} vs ${r.reference.perplexity.toFixed(3)}, KL ${r.reference.kl.toExponential(3)}, top-1 ${(r.reference.top1 * 100).toFixed(2)}%`);
    assert.ok(r.tokens >= 8192);
    assert.ok(r.reference.top1 >= 0.95, `top-1 agreement ${r.reference.top1}`);
    assert.ok(Math.abs(r.reference.ppl_increase_pct) < 2, `perplexity change ${r.reference.ppl_increase_pct}%`);
    assert.ok(r.reference.kl > 0 && r.reference.kl < 1e-2, `KL ${r.reference.kl}`);
  } finally { q8.dispose(); f32.dispose(); }
});

test('evaluating a model against itself gives KL 0 and 100% agreement', async () => {
  const text = fs.readFileSync(tiny('val.txt'), 'utf8').slice(0, 20000);
  const m = await load(path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot'), { logitsAll: true, maxBatch: 128 });
  try {
    const r = await evaluate(m, text, { vsMode: 'dense', window: 128, maxTokens: 1000 });
    assert.equal(r.reference.kl, 0);
    assert.equal(r.reference.top1, 1);
    assert.equal(r.perplexity, r.reference.perplexity);
  } finally { m.dispose(); }
});
