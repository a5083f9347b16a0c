// A retrieval test that can fail: a hand-constructed model whose head 0 retrieves a planted key by content
// (tests/helpers/retrieval-model.mjs). With the whole context kept for head 0 (full cache, q4_0 old positions, head 1
// stored locally) the key is reproduced from every depth; with head 0 stored locally (sinks + window) only from the
// sinks and the window. tiny-llama-a cannot retrieve even with the full cache (docs/QUALITY.md), so it cannot tell
// these apart; this model can.
import test from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../dist/src/index.js';
import { retrievalModel, retrievalPrompt, KEYS } from './helpers/retrieval-model.mjs';

const LEN = 250, SINKS = 4, WINDOW = 16;
const DEPTHS = [0, 3, 4, 10, 40, 80, 125, 170, 220, 233, 234, 240, 249];
const argmax = (x) => { let b = 0; for (let i = 1; i < x.length; i++) if (x[i] > x[b]) b = i; return b; };

/** Per depth: whether the greedy token after the query is the planted key, and the logits. */
function retrieve(m) {
  return DEPTHS.map((pos, i) => {
    const key = (pos + i) % KEYS.length;
    m.engine.forward(retrievalPrompt(LEN, pos, key), 0);
    const logits = m.engine.logits();
    return { pos, ok: argmax(logits) === KEYS[key], logits };
  });
}

test('retrieval model: the key from every depth with the whole context; a head stored locally retrieves only from its sinks and window', { timeout: 120_000 }, async () => {
  const { file } = await retrievalModel(256);
  const policy = `sinks=${SINKS}:f16,window=${WINDOW}:f16,rest=f16`;
  const cases = {
    full: { kvPolicy: 'full' },
    q4_0: { kvPolicy: 'full', kvDtype: 'q4_0' },
    'sinks + window + q4_0 (every head full attention)': { kvPolicy: `sinks=${SINKS}:f16,window=${WINDOW}:f16,rest=q4_0` },
    policy: { kvPolicy: policy },
    'head 1 stored locally': { kvPolicy: policy, localHeads: [[1]] },
    'head 0 stored locally': { kvPolicy: policy, localHeads: [[0]] },
    'both stored locally': { kvPolicy: policy, localHeads: [0, 1] },
  };
  const res = {};
  for (const [name, o] of Object.entries(cases)) {
    const m = await load(file, o);
    try { res[name] = retrieve(m); } finally { m.dispose(); }
    console.log(`${name}: ${res[name].filter((r) => r.ok).length}/${DEPTHS.length} keys retrieved (${res[name].map((r) => (r.ok ? 1 : 0)).join('')})`);
  }
  for (const name of ['full', 'q4_0', 'sinks + window + q4_0 (every head full attention)', 'policy', 'head 1 stored locally']) {
    assert.ok(res[name].every((r) => r.ok), `${name}: every depth retrieved`);
  }
  // the query at position LEN sees positions LEN - WINDOW + 1 .. LEN in its window
  const visible = (pos) => pos < SINKS || pos > LEN - WINDOW;
  for (const name of ['head 0 stored locally', 'both stored locally']) {
    assert.deepEqual(res[name].map((r) => r.ok), DEPTHS.map(visible), `${name}: retrieved exactly from the sinks and the window`);
  }
  // head 1 carries nothing: storing it locally changes no bit
  assert.ok(res['head 1 stored locally'].every((r, i) => Buffer.from(r.logits.buffer).equals(Buffer.from(res.policy[i].logits.buffer))));
});
