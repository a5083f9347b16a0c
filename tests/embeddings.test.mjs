// model.embed(): mean over the tokens of the final-normed last hidden state (the output head's input),
// L2-normalised. Checked against the scalar reference forward (tests/helpers/ref-forward.mjs) on generated
// models, for batching and thread invariance, and through the OpenAI-shaped createEmbedding.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { generateModel } from './helpers/gen-model.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const dot = (a, b) => a.reduce((s, v, i) => s + v * b[i], 0);

test('embedding = normalised mean of the reference final-normed hidden states (llama, qwen2 f32)', async () => {
  for (const arch of ['llama', 'qwen2']) {
    const { file, cfg, W } = await generateModel(arch, 'f32', 5);
    const m = await load(file, { maxBatch: 4, kvDtype: 'f32' }); // the reference keeps K/V in f32
    try {
      const ids = [1, 17, 40, 99, 3, 250, 8, 61, 12, 7]; // 10 tokens: 3 batches of at most 4
      const ref = createRefModel(cfg, W);
      const mean = new Float64Array(cfg.dim);
      ids.forEach((t, pos) => { ref.step(t, pos); ref.hidden().forEach((v, i) => { mean[i] += v / ids.length; }); });
      const norm = Math.hypot(...mean);
      const want = mean.map((v) => v / norm);
      const got = m.engine.meanHidden(ids);
      const gn = Math.hypot(...got);
      for (let i = 0; i < cfg.dim; i++) assert.ok(Math.abs(got[i] / gn - want[i]) < 2e-5, `${arch} dim ${i}: ${got[i] / gn} vs ${want[i]}`);
      assert.ok(Math.abs(gn - norm) / norm < 1e-5, 'unnormalised mean too');
      // the wrong variant (no final norm) would be far off: the reference's raw residual differs
    } finally { m.dispose(); }
  }
});

test('embed(): unit vectors, deterministic, batch size and thread count do not change them, cache reused', async () => {
  const texts = ['How do I install a package with apt?', 'Installing software packages using apt-get', 'The weather in Paris is sunny today'];
  const m1 = await load(MODEL, { threads: 1 });
  const m2 = await load(MODEL, { threads: 2, maxBatch: 3 });
  try {
    const a = await m1.embed(texts);
    const b = await m2.embed(texts);
    assert.equal(a.length, 3);
    for (const [i, v] of a.entries()) {
      assert.ok(v instanceof Float32Array && v.length === m1.config.dim);
      assert.ok(Math.abs(dot(v, v) - 1) < 1e-5);
      assert.deepEqual(b[i], v, '2 threads, batches of 3: bit-identical');
    }
    const single = await m1.embed(texts[1]);
    assert.deepEqual(single, a[1]);
    assert.ok(dot(a[0], a[1]) < 0.9999, 'different texts, different vectors');
    // the KV cache holds the last text: a generation after it still matches a fresh model
    const g = await m1.complete('The Debian project is', { maxTokens: 8, greedy: true });
    const fresh = await m2.complete('The Debian project is', { maxTokens: 8, greedy: true });
    assert.deepEqual(g.tokens, fresh.tokens);
    const tooLong = 'word '.repeat(400);
    await assert.rejects(m1.embed(tooLong), (e) => e.code === 'invalid_argument' && /context length/.test(e.message));
    await assert.rejects(m1.embed([1, 2]), (e) => e.code === 'invalid_argument');
  } finally { m1.dispose(); m2.dispose(); }
});

test('createEmbedding: OpenAI shape, usage, base64 encoding', async () => {
  const m = await load(MODEL);
  try {
    const r = await m.createEmbedding({ input: ['hello world', 'apt-get install'], model: 'x' });
    assert.equal(r.object, 'list');
    assert.equal(r.model, 'x');
    assert.equal(r.data.length, 2);
    assert.deepEqual(r.data.map((d) => [d.object, d.index]), [['embedding', 0], ['embedding', 1]]);
    assert.equal(r.usage.prompt_tokens, m.tokenize('hello world').length + m.tokenize('apt-get install').length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
    assert.deepEqual(r.data[0].embedding, Array.from(await m.embed('hello world')));
    const b = await m.createEmbedding({ input: 'hello world', encoding_format: 'base64' });
    const bytes = Buffer.from(b.data[0].embedding, 'base64');
    assert.deepEqual(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)), r.data[0].embedding);
    for (const [req, param] of [[{ input: 5 }, 'input'], [{ input: [] }, 'input'], [{ input: 'x', encoding_format: 'hex' }, 'encoding_format'], [{ input: 'x', dimensions: 8 }, 'dimensions']]) {
      await assert.rejects(m.createEmbedding(req), (e) => e.code === 'invalid_argument' && e.details?.param === param, JSON.stringify(req));
    }
  } finally { m.dispose(); }
});
