// logit_bias and log-probabilities in the C sampler (src/model/sampler.c), through the engine and the API.
// Log-probabilities: log-softmax at temperature 1 of the logits after the repetition penalty and the bias.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const PROMPT = 'The Debian project is';

/** float64 log-softmax of `logits` after adding `bias` (Map id -> b; b <= -100 bans). */
function logSoftmax(logits, bias = new Map()) {
  const l = Float64Array.from(logits);
  for (const [t, b] of bias) l[t] = b <= -100 ? -Infinity : l[t] + b;
  let mx = -Infinity;
  for (const v of l) if (v > mx) mx = v;
  let sum = 0;
  for (const v of l) sum += Math.exp(v - mx);
  const lse = mx + Math.log(sum);
  return l.map((v) => v - lse);
}

test('engine: logprob of the sampled token and top alternatives equal a JS log-softmax of the logits', async () => {
  const m = await load(MODEL);
  try {
    const e = m.engine;
    const ids = m.tokenize(PROMPT);
    e.forward(ids, 0);
    const logits = e.logits();
    const bias = new Map([[ids[1], 3.5], [100, -2], [200, -100]]);
    for (const [name, params] of [['greedy', { temperature: 0 }], ['sampled', { temperature: 1.3, topK: 0, topP: 1, minP: 0 }]]) {
      e.forward(ids, 0);
      const ref = logSoftmax(e.logits(), bias);
      const r = e.sample({ ...params, logitBias: bias, topLogprobs: 7 }, e.seedRng(5), []);
      assert.ok(Math.abs(r.logprob - ref[r.token]) < 2e-5, `${name}: ${r.logprob} vs ${ref[r.token]}`);
      const order = [...ref.keys()].sort((a, b) => ref[b] - ref[a] || a - b).slice(0, 7);
      assert.deepEqual(r.top.map((t) => t.token), order, name);
      r.top.forEach((t, i) => assert.ok(Math.abs(t.logprob - ref[order[i]]) < 2e-5, `${name} top ${i}`));
      assert.ok(!r.top.some((t) => t.token === 200), 'banned token not among the top');
      // the probabilities of the top list are a proper part of a distribution
      const mass = r.top.reduce((a, t) => a + Math.exp(t.logprob), 0);
      assert.ok(mass > 0 && mass <= 1 + 1e-6);
    }
    // no bias: the same against the raw logits
    e.forward(ids, 0);
    const r = e.sample({ temperature: 0, topLogprobs: 3 }, e.seedRng(1), []);
    const ref = logSoftmax(logits);
    assert.ok(Math.abs(r.logprob - ref[r.token]) < 2e-5);
    assert.equal(r.top[0].token, r.token, 'greedy picks the most probable token');
  } finally { m.dispose(); }
});

test('logit bias forces a token (+100), bans one (-100), and shifts greedy choices', async () => {
  const m = await load(MODEL);
  try {
    const target = m.tokenize(' package', { addBos: false }).at(-1);
    const forced = await m.complete(PROMPT, { maxTokens: 6, temperature: 1, seed: 3, logitBias: { [target]: 100 } });
    assert.deepEqual(forced.tokens, Array(6).fill(target));
    const greedy = await m.complete(PROMPT, { maxTokens: 12, greedy: true });
    const ban = greedy.tokens[0];
    const banned = await m.complete(PROMPT, { maxTokens: 12, greedy: true, logitBias: new Map([[ban, -100]]) });
    assert.ok(!banned.tokens.includes(ban), 'banned token appears');
    assert.notEqual(banned.tokens[0], ban);
    // sampled at a high temperature over the whole vocabulary, a banned token never appears
    const hot = await m.complete(PROMPT, { maxTokens: 40, temperature: 3, topK: 0, topP: 1, minP: 0, seed: 11, logitBias: { [ban]: -100 } });
    assert.ok(!hot.tokens.includes(ban));
    // a bias within range changes choices but bans nothing
    const nudged = await m.complete(PROMPT, { maxTokens: 12, greedy: true, logitBias: { [greedy.tokens[0]]: -5 } });
    assert.notDeepEqual(nudged.tokens, greedy.tokens);
  } finally { m.dispose(); }
});

test('generate(): pieces carry logprobs; same seed, same logprobs; bad bias -> invalid_argument', async () => {
  const m = await load(MODEL);
  try {
    const pieces = [];
    for await (const p of m.generate(PROMPT, { maxTokens: 8, seed: 4, temperature: 0.9, topLogprobs: 3 })) pieces.push(p);
    assert.equal(pieces.length, 8);
    for (const p of pieces) {
      assert.ok(p.logprob <= 0 && Number.isFinite(p.logprob));
      assert.equal(p.topLogprobs.length, 3);
      assert.ok(p.topLogprobs[0].logprob >= p.topLogprobs[1].logprob && p.topLogprobs[1].logprob >= p.topLogprobs[2].logprob);
      assert.ok(p.logprob <= p.topLogprobs[0].logprob + 1e-6);
      const t = p.topLogprobs[0];
      assert.equal(t.text, new TextDecoder().decode(Uint8Array.from(t.bytes)));
    }
    const again = [];
    for await (const p of m.generate(PROMPT, { maxTokens: 8, seed: 4, temperature: 0.9, logprobs: true })) again.push(p);
    assert.deepEqual(again.map((p) => [p.token, p.logprob]), pieces.map((p) => [p.token, p.logprob]));
    assert.equal(again[0].topLogprobs, undefined);
    for (const bad of [{ x: 1 }, { 5: 101 }, { 5: 'a' }, { [-1]: 1 }, { 99999999: 1 }]) {
      await assert.rejects(m.complete(PROMPT, { maxTokens: 2, logitBias: bad }), (e) => e.code === 'invalid_argument', JSON.stringify(bad));
    }
    await assert.rejects(m.complete(PROMPT, { maxTokens: 2, topLogprobs: 21 }), (e) => e.code === 'invalid_argument');
  } finally { m.dispose(); }
});

test('ignoreEos: an end-of-generation token forced by the bias stops generate() unless ignoreEos (then exactly maxTokens tokens); bad values refused', async () => {
  const m = await load(MODEL);
  try {
    const eos = Number(m.metadata['tokenizer.ggml.eos_token_id'] ?? 2);
    assert.ok(m.tokenizer.isEog(eos), `token ${eos} is an end-of-generation token`);
    const stopped = await m.complete(PROMPT, { maxTokens: 5, greedy: true, logitBias: { [eos]: 100 } });
    assert.deepEqual([stopped.tokens.length, m.stats.finishReason], [0, 'stop']);
    const kept = await m.complete(PROMPT, { maxTokens: 5, greedy: true, logitBias: { [eos]: 100 }, ignoreEos: true });
    assert.deepEqual(kept.tokens, Array(5).fill(eos));
    assert.equal(m.stats.finishReason, 'length');
    await assert.rejects(m.complete(PROMPT, { maxTokens: 2, ignoreEos: 'yes' }), (e) => e.code === 'invalid_argument' && /ignoreEos/.test(e.message));
  } finally { m.dispose(); }
});
