// Sampler (src/model/sampler.c) through the engine: seeds, greedy equivalences, the distribution it
// draws from, and the truncations (top-k, top-p, min-p, repetition penalty).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { SMP } from '../dist/src/generated/abi.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const PROMPT = 'The Debian project is';

test('same seed, same output; other seeds differ; 2 threads sample the same tokens', async () => {
  const m1 = await load(MODEL, { threads: 1 });
  const m2 = await load(MODEL, { threads: 2 });
  try {
    const opts = { maxTokens: 40, seed: 1234, temperature: 0.9, topK: 40, topP: 0.95, minP: 0.02 };
    const a = await m1.complete(PROMPT, opts);
    const b = await m1.complete(PROMPT, opts);
    const c = await m2.complete(PROMPT, opts);
    assert.deepEqual(a.tokens, b.tokens);
    assert.deepEqual(a.tokens, c.tokens);
    const others = [];
    for (const seed of [1, 2, 3]) others.push((await m1.complete(PROMPT, { ...opts, seed })).tokens.join(','));
    assert.ok(others.some((t) => t !== a.tokens.join(',')), 'different seeds should give some different text');
  } finally { m1.dispose(); m2.dispose(); }
});

test('top-k 1 and min-p 1 sample the greedy tokens at any temperature', async () => {
  const m = await load(MODEL);
  try {
    const greedy = (await m.complete(PROMPT, { greedy: true, maxTokens: 24 })).tokens;
    assert.deepEqual((await m.complete(PROMPT, { temperature: 1.5, topK: 1, seed: 9, maxTokens: 24 })).tokens, greedy);
    assert.deepEqual((await m.complete(PROMPT, { temperature: 1.5, topK: 0, topP: 1, minP: 1, seed: 9, maxTokens: 24 })).tokens, greedy);
  } finally { m.dispose(); }
});

test('repetition penalty lowers repeats in greedy text', async () => {
  const m = await load(MODEL);
  try {
    const plain = (await m.complete(PROMPT, { greedy: true, maxTokens: 48 })).tokens;
    const pen = (await m.complete(PROMPT, { greedy: true, maxTokens: 48, repeatPenalty: 1.5, repeatLastN: 64 })).tokens;
    const distinct = (t) => new Set(t).size;
    assert.ok(distinct(pen) > distinct(plain), `distinct tokens ${distinct(pen)} vs ${distinct(plain)}`);
  } finally { m.dispose(); }
});

/** A seeded LCG: floats in [0, 1). */
function lcg(seed) {
  return () => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed / 2 ** 32; };
}

/** Write crafted logits into the engine's logits buffer and draw `n` samples. */
function draw(model, logits, params, n, seed = 7, recent = []) {
  const eng = model.engine;
  const V = model.config.vocab_size;
  const ptr = eng.coreExports.ae_model_logits(eng.modelPtr);
  const counts = new Map();
  let rng = eng.seedRng(seed);
  for (let i = 0; i < n; i++) {
    const buf = eng.heap.f32(ptr, V);
    buf.fill(-1e9);
    logits.forEach((v, j) => { buf[j] = v; });
    const r = eng.sample(params, rng, recent);
    rng = r.rng;
    counts.set(r.token, (counts.get(r.token) ?? 0) + 1);
  }
  return counts;
}

test('temperature sampling follows softmax(logits / T); top-p, min-p and top-k cut the tail', async () => {
  const m = await load(MODEL);
  try {
    const logits = [2.0, 1.0, 0.5, 0.0, -1.0];
    const N = 20000;
    for (const T of [1, 0.5]) {
      const c = draw(m, logits, { temperature: T, topK: 0, topP: 1, minP: 0 }, N);
      const z = logits.map((l) => Math.exp(l / T)), s = z.reduce((a, b) => a + b);
      logits.forEach((_, j) => {
        const p = z[j] / s, got = (c.get(j) ?? 0) / N, sd = Math.sqrt(p * (1 - p) / N);
        assert.ok(Math.abs(got - p) < 5 * sd + 1e-3, `T=${T} token ${j}: ${got} vs ${p}`);
      });
      assert.equal([...c.keys()].filter((k) => k >= logits.length).length, 0);
    }
    // p = [0.563, 0.207, 0.126, 0.076, 0.028] at T = 1
    const topP = draw(m, logits, { temperature: 1, topK: 0, topP: 0.7, minP: 0 }, 4000);
    assert.deepEqual([...topP.keys()].sort(), [0, 1], 'top-p 0.7 keeps the two most likely');
    const minP = draw(m, logits, { temperature: 1, topK: 0, topP: 1, minP: 0.2 }, 4000);
    assert.deepEqual([...minP.keys()].sort(), [0, 1, 2], 'min-p 0.2 keeps p >= 0.113');
    const topK = draw(m, logits, { temperature: 1, topK: 3, topP: 1, minP: 0 }, 4000);
    assert.deepEqual([...topK.keys()].sort(), [0, 1, 2]);
    // repetition penalty 10 on token 0 (positive logit divided): token 1 becomes the greedy choice
    const rep = draw(m, logits, { temperature: 0, repeatPenalty: 10 }, 1, 7, [0, 0, 3]);
    assert.deepEqual([...rep.keys()], [1]);
  } finally { m.dispose(); }
});

test('greedy picks from the output head\'s chunk summaries equal the argmax of the logits (1 and 2 threads; after the sampler changed them)', async () => {
  const argmax = (l) => { let b = 0; for (let i = 1; i < l.length; i++) if (l[i] > l[b]) b = i; return b; };
  for (const threads of [1, 2]) {
    const m = await load(MODEL, { threads });
    try {
      const e = m.engine, V = m.config.vocab_size;
      const prompt = m.tokenize(PROMPT);
      e.forward(prompt, 0);
      let pos = prompt.length, rng = e.seedRng(3);
      for (let i = 0; i < 12; i++) {
        const want = argmax(e.logits());
        // src/model/model.c ae_model_greedy: from the summaries (one per decode chunk of the output head)
        assert.equal(e.coreExports.ae_model_greedy(e.modelPtr, V), want);
        const r = e.sample({ temperature: 0 }, rng, []);
        assert.equal(r.token, want, `${threads} threads, token ${i}`);
        assert.equal(r.rng, rng, 'greedy leaves the RNG alone');
        e.forward([r.token], pos++);
      }
      // the repetition penalty writes the logits: a greedy pick after it reads the written ones
      const before = argmax(e.logits());
      e.sample({ temperature: 0, repeatPenalty: 1e6 }, rng, [before]);
      const after = e.logits();
      assert.notEqual(argmax(after), before);
      assert.equal(e.sample({ temperature: 0 }, rng, []).token, argmax(after));
    } finally { m.dispose(); }
  }
});

test('top-k off: the lazy best-first walk (ae_sample) draws the token of the fully sorted specification (ae_sample_sorted), bit for bit', async () => {
  const m = await load(MODEL);
  try {
    const e = m.engine, x = e.coreExports, V = m.config.vocab_size;
    const ptr = x.ae_model_logits(e.modelPtr) >>> 0;
    const rnd = lcg(99);
    // logit shapes: flat (random weights), peaked (a trained model), ties, bans (-inf), a few tokens only
    const shapes = {
      flat: (i) => rnd() * 2,
      peaked: (i) => (i % 97 === 5 ? 8 + rnd() * 4 : rnd() * 6 - 3),
      ties: (i) => Math.floor(rnd() * 4),
      bans: (i) => (rnd() < 0.5 ? -Infinity : rnd() * 3),
      few: (i) => (i < 7 ? i * 0.5 : -1e9),
      signedZeros: (i) => (i % 7 === 0 ? -0.5 : i % 2 ? -0 : 0),   // -0 and +0 tie (sorted by id)
    };
    const params = [
      { temperature: 1, topK: 0, topP: 1, minP: 0 },
      { temperature: 0.7, topK: 0, topP: 0.9, minP: 0 },
      { temperature: 1.3, topK: 0, topP: 0.5, minP: 0.05 },
      { temperature: 0.8, topK: 0, topP: 1, minP: 0.3 },
      { temperature: 2, topK: V + 5, topP: 0.999, minP: 0 },
      { temperature: 1, topK: 0, topP: 0.01, minP: 0 },
    ];
    let n = 0, distinct = new Set();
    for (const [name, f] of Object.entries(shapes)) {
      const L = Float32Array.from({ length: V }, (_, i) => f(i));
      for (const p of params) {
        let rng = e.seedRng(n + 1);
        for (let k = 0; k < 6; k++, n++) {
          e.heap.f32(ptr, V).set(L);
          const got = e.sample(p, rng, []);
          // the same sampler block (engine.sample filled it), the same RNG state and logits: the sorted draw
          e.heap.f32(ptr, V).set(L);
          const dv = e.heap.view();
          dv.setBigUint64(e.sampler + SMP.RNG, rng, true);
          const want = x.ae_sample_sorted(e.sampler, ptr, V);
          assert.equal(got.token, want, `${name} ${JSON.stringify(p)} draw ${k}`);
          assert.equal(got.rng, dv.getBigUint64(e.sampler + SMP.RNG, true));
          assert.ok(L[got.token] > -Infinity, 'a banned token was drawn');
          if (name === 'few') assert.ok(got.token < 7);
          distinct.add(got.token);
          rng = got.rng;
        }
      }
    }
    assert.ok(distinct.size > 20, `draws should spread (${distinct.size} distinct tokens)`);
    x.ae_model_logits_changed(e.modelPtr);
  } finally { m.dispose(); }
});

test('frequency and presence penalties: logit -= count x frequency + presence per distinct recent token, after the repetition penalty (llama.cpp order)', async () => {
  const m = await load(MODEL);
  try {
    const e = m.engine, V = m.config.vocab_size;
    const ptr = e.coreExports.ae_model_logits(e.modelPtr) >>> 0;
    const base = [2.0, 1.0, 0.5, 0.0, -1.0];
    const f = Math.fround;
    const run = (params, recent) => {
      const buf = e.heap.f32(ptr, V);
      buf.fill(-1e9);
      base.forEach((v, j) => { buf[j] = v; });
      const r = e.sample({ temperature: 0, ...params }, e.seedRng(1), recent);
      return { token: r.token, l: Array.from(e.heap.f32(ptr, 5)) };
    };
    // token 0 twice, token 3 once, ids outside the vocabulary ignored
    const recent = [0, 3, 0, -5, V + 7];
    const a = run({ frequencyPenalty: 0.7, presencePenalty: 0.4 }, recent);
    assert.deepEqual(a.l, [f(2 - f(f(2 * f(0.7)) + f(0.4))), 1, 0.5, f(0 - f(f(0.7) + f(0.4))), -1]);
    assert.equal(a.token, 1, 'greedy picks the argmax after the penalties');
    const b = run({ repeatPenalty: 2, frequencyPenalty: 0.25, presencePenalty: -0.5 }, recent);
    assert.deepEqual(b.l, [f(f(2 / 2) - f(f(2 * 0.25) + f(-0.5))), 1, 0.5, f(f(0 * 2) - f(f(0.25) + f(-0.5))), -1]);
    assert.equal(b.token, 0);
    // off (0, 0): the logits are untouched and the greedy pick is the plain argmax
    assert.deepEqual(run({ frequencyPenalty: 0, presencePenalty: 0 }, recent).l, base.map(f));
    // in generation: a strong frequency penalty gives more distinct tokens
    const plain = (await m.complete(PROMPT, { greedy: true, maxTokens: 48 })).tokens;
    const pen = (await m.complete(PROMPT, { greedy: true, maxTokens: 48, frequencyPenalty: 1.5, repeatLastN: 64 })).tokens;
    const distinct = (t) => new Set(t).size;
    assert.ok(distinct(pen) > distinct(plain), `distinct tokens ${distinct(pen)} vs ${distinct(plain)}`);
    await assert.rejects(m.complete(PROMPT, { frequencyPenalty: NaN }), (err) => err.code === 'invalid_argument');
  } finally { m.dispose(); }
});

test('top-k selection (its 4-wide skip of logits below the worst kept one): the k best ids, ties to the lower id, as a sort', async () => {
  const m = await load(MODEL);
  try {
    const e = m.engine, V = m.config.vocab_size;
    const ptr = e.coreExports.ae_model_logits(e.modelPtr) >>> 0;
    const rnd = lcg(5);
    const shapes = [
      (i) => Math.floor(rnd() * 8),                              // many ties
      (i) => i * 1e-3,                                           // rising: every block enters the heap
      (i) => -i * 1e-3,                                          // falling: nothing after the first k enters
      (i) => (rnd() < 0.3 ? -Infinity : rnd()),                  // bans
      (i) => (i % 4 === 3 ? 5 + rnd() : rnd()),                   // the best in the last lane of each block
    ];
    for (const [si, f] of shapes.entries()) {
      const L = Float32Array.from({ length: V }, (_, i) => f(i));
      const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => (L[b] - L[a]) || (a - b));
      for (const k of [1, 3, 20]) {
        e.heap.f32(ptr, V).set(L);
        const r = e.sample({ temperature: 0, topLogprobs: k }, e.seedRng(1), []);
        assert.deepEqual(r.top.map((t) => t.token), order.slice(0, k), `shape ${si}, k ${k}`);
        e.heap.f32(ptr, V).set(L);
        // top-k sampling keeps only those k: every draw is among them
        let rng = e.seedRng(2);
        for (let d = 0; d < 20; d++) {
          e.heap.f32(ptr, V).set(L);
          const s = e.sample({ temperature: 1.5, topK: k, topP: 1, minP: 0 }, rng, []);
          rng = s.rng;
          assert.ok(order.slice(0, k).includes(s.token), `shape ${si}, top-k ${k}: drew ${s.token}`);
        }
      }
    }
    e.coreExports.ae_model_logits_changed(e.modelPtr);
  } finally { m.dispose(); }
});
