// The forward pass as steps (src/core/pool.h ae_flow; docs/DESIGN.md "Forward pass and threads"): threads claim
// chunks of a step and wait for steps to be complete, never for each other. Checked here:
// - 1, 2 and 3 threads give the same bits (prefill in batches with a tail, decode) for the splits of the step
//   forward: decode attention by KV head with its RoPE and K/V store, token-chunked prefill steps, epilogues; with
//   spinning waits and with blocking waits (spin 0: the worker sleeps and joins steps late), and alternating
//   decode / prefill calls (a worker still inside the previous job must leave it);
// - the single-thread decode rule (singleThreadBelow): decodeBytes is the weight bytes of a token, a decode step
//   below the threshold runs on the caller alone (the pool publishes no job: its gen does not move) with the same
//   bits, prefill still publishes, and 0 turns the rule off.
import test from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../dist/src/index.js';
import { generateModel } from './helpers/gen-model.mjs';

const PROMPT = [1, 17, 290, 33, 5, 260, 301, 44, 120, 7, 19];   // batches of 4 (maxBatch 4) and a tail of 3
const DECODE = [280, 12, 99, 300, 4, 77, 150, 3];

/** Logits after the prompt, after each decode token, then after a second prefill of 5 tokens and 3 more decodes. */
function run(model) {
  const e = model.engine, out = [];
  e.forward(PROMPT, 0);
  out.push(e.logits());
  let pos = PROMPT.length;
  for (const t of DECODE) { e.forward([t], pos++); out.push(e.logits()); }
  e.forward([9, 8, 7, 6, 5], pos); pos += 5;
  out.push(e.logits());
  for (const t of [11, 22, 33]) { e.forward([t], pos++); out.push(e.logits()); }
  return out;
}
const same = (a, b) => a.length === b.length && a.every((x, s) => Buffer.from(x.buffer).equals(Buffer.from(b[s].buffer)));

// shapes: GQA (4 query heads over 2 KV heads), and 6 KV heads (more chunks than threads at decode)
const SHAPES = { gqa: undefined, kv6: { dim: 96, n_heads: 6, n_kv_heads: 6, head_dim: 16, hidden_dim: 192 } };
for (const [arch, dtype, shape] of [['llama', 'q4_0', 'gqa'], ['phi3', 'q8_0', 'gqa'], ['qwen2', 'f32', 'kv6'], ['llama', 'f16', 'kv6']]) {
  test(`${arch} ${dtype} ${shape}: 1, 2 and 3 threads give identical bits (spin 20000 and 0, prefill + decode + prefill)`, async () => {
    const { file } = await generateModel(arch, dtype, 11, SHAPES[shape] ? { shape: SHAPES[shape] } : {});
    const runs = [];
    for (const [threads, spin] of [[1, undefined], [2, undefined], [2, 0], [3, 0]]) {
      const model = await load(file, { threads, maxBatch: 4, spin, singleThreadBelow: 0 });
      try {
        assert.equal(model.threads, threads);
        runs.push({ threads, spin, out: run(model) });
      } finally { model.dispose(); }
    }
    for (const r of runs.slice(1)) assert.ok(same(runs[0].out, r.out), `1 thread vs ${r.threads} threads (spin ${r.spin ?? 'default'}) differ`);
  });
}

test('single-thread decode rule: decodeBytes, no job published below the threshold, the same bits, 0 = off', async () => {
  const { file } = await generateModel('llama', 'q8_0', 12);
  const ref = await load(file, { threads: 1, maxBatch: 4 });
  let want;
  try { want = run(ref); } finally { ref.dispose(); }
  const gen = (model) => new Int32Array(model.engine.heap.memory.buffer, model.engine['pool'], 1)[0];
  for (const below of [0, 1e12]) {
    const model = await load(file, { threads: 2, maxBatch: 4, singleThreadBelow: below });
    try {
      const e = model.engine;
      // the weights one decode token streams: every layer's matrices and the output matrix
      let bytes = e.tensorInfo('output.weight').bytes;
      for (let l = 0; l < model.config.n_layers; l++) {
        for (const n of ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down']) bytes += e.tensorInfo(`blk.${l}.${n}.weight`).bytes;
      }
      assert.equal(e.decodeBytes, bytes);
      const g0 = gen(model);
      e.forward(PROMPT.slice(0, 4), 0);
      const g1 = gen(model);
      assert.ok(g1 > g0, 'a prefill publishes a job to the workers');
      e.forward([5], 4);
      const g2 = gen(model);
      if (below) assert.equal(g2, g1, 'a decode step below the threshold runs on the caller alone');
      else assert.ok(g2 > g1, 'with the rule off a decode step runs on both threads');
      model.reset();
      assert.ok(same(want, run(model)), `singleThreadBelow ${below}: logits differ from 1 thread`);
    } finally { model.dispose(); }
  }
});

test('a pool of more threads than the model was laid out for is refused before any thread runs, and the engine stays usable', async () => {
  const { file } = await generateModel('llama', 'q8_0', 12);
  const model = await load(file, { threads: 2, maxBatch: 4, singleThreadBelow: 0 });
  try {
    const e = model.engine;
    const want = run(model);
    model.reset();
    // the per-thread scratch (attention scores, converted queries) is laid out for cfg.max_threads = 2: a pool whose
    // nth (ae_pool: gen, n_pending, nth, ...) says 3 must not start the forward
    const nth = new Int32Array(e.heap.memory.buffer, e['pool'], 3);
    assert.equal(nth[2], 2);
    nth[2] = 3;
    assert.throws(() => e.forward(PROMPT, 0), (err) => err.code === 'invalid_argument');
    nth[2] = 2;
    model.reset();
    assert.ok(same(want, run(model)), 'the same logits after the refusal');
  } finally { model.dispose(); }
});
