// KV heads stored locally (localHeads / setHeadMode(.., { store })): only the sinks and the recent window are kept for
// them (memory saved); their attention equals local attention over the full cache bit for bit; 1 vs 2 threads
// bit-identical; memory accounted (plan, metrics, approximations); run-time storage switches recompute the token
// history, and rolling back gives the full-storage model's logits bit for bit.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { parseKvPolicy } from '../dist/src/formats/kv-policy.js';
import { writeWithSections } from '../dist/src/profile/write.js';
import { generateModel } from './helpers/gen-model.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';
import { logitRuns, sameRunBits, maxRunDiff } from './helpers/logit-runs.mjs';

const SHAPE = { n_heads: 8, n_kv_heads: 4 };   // 4 KV heads: stored and full heads interleave (slot mapping)
const PROMPT = Array.from({ length: 45 }, (_, i) => 3 + ((i * 53) % 300));   // maxBatch 4: the rings wrap many times
const DECODE = [280, 12, 99, 300, 4, 77, 150, 9];
const { runEngine, runRef } = logitRuns(PROMPT, DECODE);

const kvTotal = (m) => m.metrics().kvCache.byDtype.reduce((a, d) => a + d.bytes, 0);

// every KV dtype, one and several segments, sinks inside one segment or across two, ring of the stored heads only
// (every segment at the window's dtype) or of every head
const POLICIES = [
  'sinks=2:f16,window=6:f16,rest=f16',
  'sinks=3:f16,window=4:q8_0,rest=q4_0',
  'sinks=2:q8_0,window=5:q8_0,rest=q8_0',
  'sinks=1:q4_0,window=7:q4_0,rest=q4_0',
  'sinks=2:f32,window=5:f32,rest=f32',
  { version: 1, ranges: [{ start: 0, end: 2, dtype: 'f16' }, { start: 2, end: 20, dtype: 'q8_0' }, { start: 20, end: null, dtype: 'q4_0' }], window: { size: 5, dtype: 'f16' }, sinks: 4 },
];
const STORED = [[0, 2], [1]];   // layer 0: KV heads 0 and 2; layer 1: KV head 1
const name = (p) => typeof p === 'string' ? p : JSON.stringify(p);

test('KV heads stored locally = local attention over the full cache bit for bit (every KV dtype); = the reference; 1 vs 2 threads; memory', { timeout: 300_000 }, async () => {
  const { file, cfg, W } = await generateModel('llama', 'f32', 11, { shape: SHAPE });
  const open = (o, threads = 1) => load(file, { threads, maxBatch: 4, ...o });
  for (const policy of POLICIES) {
    const attn = await open({ kvPolicy: policy });
    let attnOut, attnBytes, attnPlan;
    try {
      STORED.forEach((hs, l) => hs.forEach((g) => attn.engine.setKvLocal(l, g, true)));
      attnOut = runEngine(attn);
      attnBytes = kvTotal(attn);
      attnPlan = attn.engine.plan.kvCache;
    } finally { attn.dispose(); }
    const outs = [];
    for (const threads of [1, 2]) {
      const m = await open({ kvPolicy: policy, localHeads: STORED }, threads);
      try {
        outs.push(runEngine(m));
        if (threads > 1) continue;
        const ap = m.approximations();
        assert.deepEqual(ap.map((a) => a.storedLocalKvHeads), STORED);
        assert.deepEqual(ap.map((a) => a.localKvHeads), STORED, 'stored heads attend locally');
        const x = m.metrics().kvCache;
        const saved = ap.reduce((a, l) => a + l.localStorageSavedBytes, 0);
        assert.equal(x.localHeadsSavedBytes, saved);
        assert.ok(saved > 0, `${name(policy)}: local storage saves memory (${saved} bytes)`);
        assert.equal(attnBytes - kvTotal(m), saved, 'KV bytes by dtype fall by exactly the saved bytes');
        // the plan's KV cache (stores 64-byte aligned: up to 5 per layer) is smaller by the saved bytes
        assert.ok(Math.abs(m.engine.plan.kvCache - (attnPlan - saved)) < 64 * 5 * cfg.n_layers, `the memory plan accounts for it (${m.engine.plan.kvCache} vs ${attnPlan} - ${saved})`);
        // a stored head keeps its sinks (same bits as the full cache's) and the ring; other positions are not stored
        const p = typeof policy === 'string' ? parseKvPolicy(policy) : policy;
        const n = PROMPT.length + DECODE.length;
        assert.throws(() => m.engine.readKv(0, 0, 0, n), { code: 'unsupported' });
        assert.equal(m.engine.readKv(0, 1, 0, p.sinks).length, p.sinks * cfg.head_dim);
        assert.equal(m.engine.readKv(0, 0, 1, n).length, n * cfg.head_dim, 'a full head keeps every position');
        assert.throws(() => m.engine.setKvLocal(0, 0, false), { code: 'unsupported' });
      } finally { m.dispose(); }
    }
    assert.ok(sameRunBits(outs[0], attnOut), `${name(policy)}: stored locally = local attention over the full cache`);
    assert.ok(sameRunBits(outs[0], outs[1]), `${name(policy)}: 1 vs 2 threads`);
    const p = typeof policy === 'string' ? parseKvPolicy(policy) : policy;
    const d = maxRunDiff(outs[0], runRef(createRefModel(cfg, W, { kvPolicy: { ...p, local: (l, g) => STORED[l].includes(g) } })));
    const tol = /q[48]_0/.test(name(policy)) ? 6e-2 : 3e-3;   // as tests/kv-policy.test.mjs
    assert.ok(d < tol, `${name(policy)}: max |logit - ref| ${d} >= ${tol}`);
    console.log(`${name(policy)}: stored locally = local attention bit for bit; max |logit - ref| = ${d.toExponential(2)}`);
  }
});

test('localHeads option: defaults, the file\'s attention_heads classes, errors naming the entry', { timeout: 120_000 }, async () => {
  const { file, cfg } = await generateModel('llama', 'f32', 11, { shape: SHAPE });
  // a layer without a policy gets sinks=4,window=64 at the K dtype (q8_0 here)
  const m = await load(file, { maxBatch: 4, kvDtype: 'q8_0', localHeads: { heads: [[3]], window: 8 } });
  try {
    assert.deepEqual(m.approximations().map((a) => [a.kvPolicy, a.storedLocalKvHeads]), [['window=8:q8_0,0-3:q8_0,4-:q8_0', [3]], ['full', []]]);
  } finally { m.dispose(); }
  for (const [o, re] of [
    [[[4]], /layer 0: KV head 4 is out of range \(0\.\.3\)/],
    [[[0], [0], [0]], /3 layers given, the model has 2/],
    [{ heads: [[0]], window: 0 }, /window: expected an integer >= 1/],
    ['file', /no attention_heads section/],
    [7, /expected per-layer arrays/],
  ]) await assert.rejects(load(file, { localHeads: o }), (e) => e.code === 'invalid_argument' && /^localHeads/.test(e.message) && re.test(e.message), JSON.stringify(o));
  // the file's classes (a hand-written attention_heads section: KV head 1 of layer 0 and 2, 3 of layer 1 local)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-kvheads-'));
  try {
    const kv = [['retrieval', 'local', 'retrieval', 'retrieval'], ['retrieval', 'retrieval', 'local', 'local']];
    const head = (c) => ({ queries: 10, entropy: 1, entropy_rel: 0.5, sink_mass: 0.1, window_mass: 0.9, class: c });
    const section = {
      version: 1, sinks: 2, window: 6, threshold: 0.8, n_layers: cfg.n_layers, n_heads: cfg.n_heads, n_kv_heads: cfg.n_kv_heads,
      calibration: {}, local_fraction: 0.375, local_kv_fraction: 0.375,
      layers: kv.map((k) => ({ heads: k.flatMap((c) => [head(c), head(c)]), kv_heads: k, k_singular_values: [], v_singular_values: [], k_rank90: [], v_rank90: [] })),
    };
    const out = path.join(dir, 'h.rknot');
    await writeWithSections(file, out, { attention_heads: section });
    const f = await load(out, { maxBatch: 4, localHeads: 'file' });
    const g = await load(file, { maxBatch: 4, localHeads: { heads: [[1], [2, 3]], sinks: 2, window: 6 } });
    try {
      assert.deepEqual(f.approximations(), g.approximations());
      assert.deepEqual(f.approximations().map((a) => [a.kvPolicy, a.storedLocalKvHeads]),
        [['window=6:f16,0-1:f16,2-:f16', [1]], ['window=6:f16,0-1:f16,2-:f16', [2, 3]]]);
      assert.ok(sameRunBits(runEngine(f), runEngine(g)), "'file' = the same heads given as a list");
    } finally { f.dispose(); g.dispose(); }
    const h = await load(out, { maxBatch: 4, localHeads: { heads: 'file', window: 9 } });
    try { assert.equal(h.kvPolicy(0), 'window=9:f16,0-1:f16,2-:f16'); } finally { h.dispose(); }
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
});

test('run-time storage switches: store -> the stored model; back to full -> re-allocated, history recomputed = the full model bit for bit', { timeout: 180_000 }, async () => {
  const { file } = await generateModel('llama', 'f32', 11, { shape: SHAPE });
  const policy = 'sinks=2:f16,window=6:f16,rest=f16';
  const m = await load(file, { maxBatch: 4, kvPolicy: policy });
  const stored = await load(file, { maxBatch: 4, kvPolicy: policy, localHeads: [[1, 3], [0]] });
  const full = await load(file, { maxBatch: 4, kvPolicy: policy });
  try {
    const r = await m.complete(PROMPT, { maxTokens: 8, greedy: true });
    const history = [...PROMPT, ...r.tokens.slice(0, -1)];   // the cached tokens (the last one was sampled only)
    const logitsAfter = (x) => { x.engine.forward(history, 0); return [x.engine.logits()]; };
    const before = kvTotal(m);
    // store heads 1, 3 of layer 0 and 0 of layer 1 locally: the cache is re-carved and the history recomputed
    assert.equal(m.setHeadMode('local', { layers: [0], heads: [1, 3], store: true }), history.length);
    assert.equal(m.setHeadMode('local', { layers: [1], heads: [0], store: true }), history.length);
    assert.ok(sameRunBits([m.engine.logits()], logitsAfter(stored)), 'stored at run time = loaded stored, after the same history');
    assert.equal(before - kvTotal(m), m.metrics().kvCache.localHeadsSavedBytes);
    assert.ok(m.metrics().kvCache.localHeadsSavedBytes > 0);
    // continuing the conversation reuses the recomputed cache
    const more = await m.complete([...history, r.tokens.at(-1)], { maxTokens: 3, greedy: true });
    assert.equal(more.stats.prefillTokens, 1, 'only the new token was computed');
    // roll back: full storage again, the history recomputed with every head attending to every position
    m.rollback({ kinds: ['heads'] });
    assert.deepEqual(m.approximations().map((a) => [a.localKvHeads, a.storedLocalKvHeads, a.localStorageSavedBytes]), [[[], [], 0], [[], [], 0]]);
    assert.equal(kvTotal(m), before);
    const hist2 = [...history, r.tokens.at(-1), ...more.tokens.slice(0, -1)];
    full.engine.forward(hist2, 0);
    assert.ok(sameRunBits([m.engine.logits()], [full.engine.logits()]), 'rolled back = the full-storage model after the same history');
    const a = await m.complete([...hist2, more.tokens.at(-1)], { maxTokens: 4, greedy: true });
    const b = await full.complete([...hist2, more.tokens.at(-1)], { maxTokens: 4, greedy: true });
    assert.deepEqual(a.tokens, b.tokens);
    assert.equal(a.stats.prefillTokens, 1, 'the recomputed history was reused');
    // a stored head cannot attend fully without its storage
    m.setHeadMode('local', { layers: [0], heads: [2], store: true });
    assert.throws(() => m.engine.setKvLocal(0, 2, false), { code: 'unsupported', message: /KV head 2/ });
  } finally { m.dispose(); stored.dispose(); full.dispose(); }
});

test('rolling back local storage that no longer fits the memory limit: out_of_memory, nothing changed', { timeout: 60_000 }, async () => {
  const { file } = await generateModel('llama', 'f32', 11, { shape: SHAPE });
  const opts = { maxBatch: 4, kvPolicy: 'sinks=2:f16,window=6:f16,rest=f16', localHeads: [[0, 1, 2, 3], [0, 1, 2, 3]] };
  const probe = await load(file, opts);
  const total = probe.engine.plan.total;
  probe.dispose();
  const m = await load(file, { ...opts, maxMemory: total + 8192 });
  try {
    const r = await m.complete(PROMPT, { maxTokens: 3, greedy: true });
    const logits = m.engine.logits();
    const ap = m.approximations();
    assert.throws(() => m.rollback({ kinds: ['heads'] }), { code: 'out_of_memory', message: /the re-carved KV cache needs/ });
    assert.deepEqual(m.approximations(), ap, 'nothing changed');
    assert.ok(Buffer.from(m.engine.logits().buffer).equals(Buffer.from(logits.buffer)));
    // the cache was kept (the same layout in the same arena): the conversation continues as on an unlimited model
    const again = await m.complete([...PROMPT, ...r.tokens], { maxTokens: 4, greedy: true });
    assert.equal(again.stats.prefillTokens, 1);
    const u = await load(file, opts);
    try {
      await u.complete(PROMPT, { maxTokens: 3, greedy: true });
      assert.deepEqual(again.tokens, (await u.complete([...PROMPT, ...r.tokens], { maxTokens: 4, greedy: true })).tokens);
    } finally { u.dispose(); }
  } finally { m.dispose(); }
});

test('--local-heads: file, every layer, per layer; errors', async () => {
  const { parseLocalHeadsArg, kvPolicyFromArgs } = await import('../dist/cli/kv-options.js');
  assert.equal(parseLocalHeadsArg('file'), 'file');
  assert.deepEqual(parseLocalHeadsArg('1,3'), { heads: [1, 3] });
  assert.deepEqual(parseLocalHeadsArg('0:1,3;2:0'), { heads: [[1, 3], [], [0]] });
  assert.deepEqual(kvPolicyFromArgs({ 'local-heads': '2', 'kv-policy': 'sinks=4:f16,window=32:f16,rest=f16' }),
    { kvPolicy: 'sinks=4:f16,window=32:f16,rest=f16', localHeads: { heads: [2] } });
  for (const s of ['x', '0:a', '1,', ':1']) assert.throws(() => parseLocalHeadsArg(s), { code: 'invalid_argument', message: /--local-heads expects/ }, s);
});
