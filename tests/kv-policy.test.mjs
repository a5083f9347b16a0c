// KV policies: the compact syntax (--kv-policy / kvPolicy), its structured form (the kv_policy section) and checks.
import test from 'node:test';
import assert from 'node:assert/strict';
import { parseKvPolicy, formatKvPolicy, checkKvPolicy, kvRowBytes } from '../dist/src/formats/kv-policy.js';

test('parseKvPolicy: sinks + window + rest, position ranges, both, full', () => {
  assert.deepEqual(parseKvPolicy('sinks=4:f16,window=64:f16,rest=q8_0'), {
    version: 1, ranges: [{ start: 0, end: 4, dtype: 'f16' }, { start: 4, end: null, dtype: 'q8_0' }], window: { size: 64, dtype: 'f16' }, sinks: 4,
  });
  assert.deepEqual(parseKvPolicy('0-20:f16,21-100:q8_0,101-:q4_0').ranges,
    [{ start: 0, end: 21, dtype: 'f16' }, { start: 21, end: 101, dtype: 'q8_0' }, { start: 101, end: null, dtype: 'q4_0' }]);
  assert.deepEqual(parseKvPolicy('window=32,0-99:q8_0,100-:q4_0').window, { size: 32, dtype: 'f16' });
  assert.deepEqual(parseKvPolicy('rest=q4_0'), { version: 1, ranges: [{ start: 0, end: null, dtype: 'q4_0' }], window: null, sinks: 4 });
  for (const s of ['full', 'none', '']) assert.equal(parseKvPolicy(s), null);
  for (const s of ['sinks=4:f16,window=64:f16,rest=q8_0', '0-20:f16,21-100:q8_0,101-:q4_0', 'window=8:q8_0,0-:f32']) {
    const p = parseKvPolicy(s);
    assert.deepEqual(parseKvPolicy(formatKvPolicy(p)).ranges, p.ranges);
    assert.deepEqual(parseKvPolicy(formatKvPolicy(p)).window, p.window);
  }
  assert.equal(formatKvPolicy(null), 'full');
});

test('parseKvPolicy / checkKvPolicy: errors name the part and what was expected', () => {
  const bad = [
    ['sinks=4:f16,window=64', /dtype of the other positions is missing/],
    ['rest=q5_0', /dtype 'q5_0' is not one of f32, f16, q8_0, q4_0/],
    ['0-20:f16,30-:q8_0', /ranges\[1\]\.start: expected 21/],
    ['0-20:f16,21-40:q8_0', /the last range must be open-ended/],
    ['0-20:f16,21-:q8_0,sinks=4:f16', /either sinks=\/rest= or position ranges/],
    ['window=0:f16,rest=f16', /expected an integer >= 1/],
    ['window=8,window=9,rest=f16', /window given twice/],
    ['20-10:f16', /empty range/],
    ['fast', /cannot read 'fast'/],
    ['0-1:f16,2-3:f16,4-5:f16,6-7:f16,8-:f16', /1\.\.4 ranges/],
  ];
  for (const [s, re] of bad) assert.throws(() => parseKvPolicy(s, '--kv-policy'), (e) => e.code === 'invalid_argument' && re.test(e.message) && /^--kv-policy/.test(e.message), s);
  assert.throws(() => checkKvPolicy({ version: 2 }, 'kv_policy', 'format_error'), { code: 'format_error', message: /kv_policy: version/ });
  assert.throws(() => checkKvPolicy({ version: 1, ranges: [{ start: 0, end: null, dtype: 'f16' }], window: { size: 4, dtype: 'q2_K' }, sinks: 4 }, 'kv_policy', 'format_error'),
    { code: 'format_error', message: /window\.dtype/ });
  assert.equal(kvRowBytes('q4_0', 64), 36);
  assert.equal(kvRowBytes('q8_0', 64), 68);
  assert.equal(kvRowBytes('f16', 48), 96);
});

// ---- the policies in the forward pass, against the scalar reference -------------------------------------------
import { load } from '../dist/src/index.js';
import { generateModel } from './helpers/gen-model.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';
import { logitRuns, sameRunBits, maxRunDiff } from './helpers/logit-runs.mjs';

const PROMPT = Array.from({ length: 37 }, (_, i) => 3 + ((i * 53) % 300));   // prefill in batches of 4 (maxBatch 4)
const DECODE = [280, 12, 99, 300, 4, 77];
const STEPS = PROMPT.length + DECODE.length;
const { runEngine, runRef } = logitRuns(PROMPT, DECODE);

test('KV policies in the forward pass: = the scalar reference (mixed precision, window, local heads); 1 vs 2 threads bit-identical; identities', { timeout: 240_000 }, async () => {
  const { file, cfg, W } = await generateModel('llama', 'f32', 5);
  const open = (o, threads = 1) => load(file, { threads, maxBatch: 4, ...o });
  const plainModel = await open({});
  const plain = runEngine(plainModel);
  plainModel.dispose();
  const plainRef = runRef(createRefModel(cfg, W, { kvDtype: 'f16' }));
  // tolerances as tests/model-generated.test.mjs KV_TOL (a value on a rounding boundary going the other way), q4_0 coarser
  const cases = [
    ['sinks=2:f16,window=6:f16,rest=q8_0', 3e-2, null],
    ['0-9:f16,10-19:q8_0,20-:q4_0', 6e-2, null],
    ['window=5:f32,0-15:q4_0,16-:q8_0', 6e-2, null],
    ['sinks=2:f16,window=6:f16,rest=f16', 3e-3, (l, g) => g === 1],          // KV head 1 of every layer local
    ['sinks=3:f16,window=4:q8_0,rest=q4_0', 6e-2, (l, g) => l === 0 && g === 0],
  ];
  for (const [spec, tol, local] of cases) {
    const runs = [];
    for (const threads of [1, 2]) {
      const m = await open({ kvPolicy: spec }, threads);
      try {
        if (local) for (let l = 0; l < cfg.n_layers; l++) for (let g = 0; g < cfg.n_kv_heads; g++) if (local(l, g)) m.engine.setKvLocal(l, g, true);
        runs.push(runEngine(m));
      } finally { m.dispose(); }
    }
    assert.ok(sameRunBits(runs[0], runs[1]), `${spec}: 1 vs 2 threads differ`);
    const p = parseKvPolicy(spec);
    const d = maxRunDiff(runs[0], runRef(createRefModel(cfg, W, { kvPolicy: { ...p, local } })));
    const off = maxRunDiff(runs[0], plainRef);
    assert.ok(d < tol, `${spec}${local ? ' + local heads' : ''}: max |logit - ref| ${d} >= ${tol}`);
    assert.ok(off > 2 * d, `${spec}: the plain-cache reference (${off}) should be further off than the policy's (${d})`);
    console.log(`${spec}${local ? ' + local heads' : ''}: max |logit - ref| = ${d.toExponential(2)} (plain-cache reference: ${off.toExponential(2)})`);
  }
  // identities: one f16 range, or f16 everywhere with an f16 window, is the plain f16 cache bit for bit
  for (const spec of ['0-:f16', 'sinks=2:f16,window=6:f16,rest=f16', 'window=3:f16,0-4:f16,5-:f16']) {
    const m = await open({ kvPolicy: spec });
    try { assert.ok(sameRunBits(runEngine(m), plain), `${spec} = the plain f16 cache`); } finally { m.dispose(); }
  }
});

test('KV policy at run time: setKvPolicy = loading with it; rollback restores the exact model; local heads; memory by dtype', { timeout: 120_000 }, async () => {
  const { file, cfg } = await generateModel('llama', 'f32', 5);
  const spec = 'sinks=2:f16,window=6:f16,rest=q4_0';
  const loaded = await load(file, { maxBatch: 4, kvPolicy: spec });
  const ref = runEngine(loaded);
  const x = loaded.metrics().kvCache;
  // bytes by dtype: sinks 2 + ring min(64, 6 + 4) rows of f16, 62 rows of q4_0 (16 values padded to a 32-block: 18 bytes)
  const rows = (n, bytes) => cfg.n_layers * 2 * cfg.n_kv_heads * n * bytes;
  assert.deepEqual(x.byDtype.map((d) => [d.dtype, d.bytes]), [['f16', rows(2, 32) + rows(10, 32)], ['q4_0', rows(62, 18)]]);
  assert.equal(x.f16Bytes, rows(64, 32));
  assert.equal(x.savedBytes, x.f16Bytes - rows(12, 32) - rows(62, 18));
  loaded.dispose();

  const m = await load(file, { maxBatch: 4 });
  try {
    const plain = runEngine(m);
    m.setKvPolicy(spec);
    assert.equal(m.kvPolicy(0), 'window=6:f16,0-1:f16,2-:q4_0');
    assert.ok(sameRunBits(runEngine(m), ref), 'switched at run time = loaded with the policy');
    m.engine.setKvLocal(1, 0, true);
    assert.deepEqual(m.approximations().map((a) => a.localKvHeads), [[], [0]]);
    const local = runEngine(m);
    assert.ok(!sameRunBits(local, ref), 'a local head changes the result');
    m.rollback({ kinds: ['heads'] });
    assert.ok(sameRunBits(runEngine(m), ref), 'heads rolled back: the policy alone again');
    m.setKvPolicy(null, [1]);
    assert.deepEqual(m.approximations().map((a) => a.kvPolicy), [spec.replace('sinks=2:f16,window=6:f16,rest=q4_0', 'window=6:f16,0-1:f16,2-:q4_0'), 'full']);
    m.rollback();
    assert.deepEqual(m.approximations().map((a) => a.kvPolicy), ['full', 'full']);
    assert.ok(sameRunBits(runEngine(m), plain), 'rolled back: the exact model bit for bit');
    assert.throws(() => m.engine.setKvLocal(0, 0, true), { code: 'unsupported', message: /no KV policy with a window/ });
    assert.throws(() => m.setKvPolicy('rest=q5_1'), { code: 'invalid_argument' });
    assert.throws(() => m.setHeadMode('local'), { message: /attention_heads section/ });
    m.setHeadMode('local', { heads: [1], layers: [0] });   // adds the default sinks + window policy to layer 0
    assert.deepEqual(m.approximations()[0], { layer: 0, ffn: 'dense', kvPolicy: 'window=64:f16,0-3:f16,4-:f16', localKvHeads: [1],
      storedLocalKvHeads: [], localStorageSavedBytes: 0, compression: 'dense' });
  } finally { m.dispose(); }
});
