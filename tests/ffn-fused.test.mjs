// ffn-fused: gate and up in one pass (model's matrices in place, or interleaved tiles made at load),
// bit for bit equal to the core's dense FFN: logits of whole-model runs (prefill and decode) and FFN
// outputs of single layers, f32 / f16 / q8_0 / q4_0, 1 and 2 threads.
import test from 'node:test';
import assert from 'node:assert/strict';
import { tiny } from './helpers/paths.mjs';
import { Q8, tinyConverted, loadTiny, runLogits, bitDiff, randomRows, ffnLayer } from './helpers/ffn.mjs';

const files = {
  f32: () => tiny('tiny-llama-a-f32.gguf'),
  q8_0: () => Q8,
  f16: () => tinyConverted('f16'),
  q4_0: () => tinyConverted('q4_0'),
};

for (const [dtype, file] of Object.entries(files)) {
  test(`fused == dense bit for bit, tiny-llama-a ${dtype}: logits (prefill, decode) and FFN outputs, tiles 0/32/16, 1 and 2 threads`, async () => {
    const f = await file();
    const logits = {};
    for (const threads of [1, 2]) {
      const model = await loadTiny(f, threads);
      try {
        assert.equal(model.threads, threads);
        const dense = runLogits(model);
        const x = randomRows(5 * model.config.dim, 7);
        const ffnDense = [0, 5].map((l) => ffnLayer(model, l, x, 5));
        const ffnDense1 = ffnLayer(model, 2, x, 1);
        for (const tile of [0, 32, 16]) {
          model.setFfnMode('fused', undefined, { tile });
          const fused = runLogits(model);
          assert.equal(bitDiff(dense[0], fused[0]), 0, `prefill logits, tile ${tile}`);
          assert.equal(bitDiff(dense[1], fused[1]), 0, `decode logits, tile ${tile}`);
          [0, 5].forEach((l, i) => assert.equal(bitDiff(ffnDense[i], ffnLayer(model, l, x, 5)), 0, `FFN output layer ${l}, 5 rows, tile ${tile}`));
          assert.equal(bitDiff(ffnDense1, ffnLayer(model, 2, x, 1)), 0, `FFN output layer 2, 1 row, tile ${tile}`);
          assert.equal(model.engine.ffnActive(2), model.config.hidden_dim);
          model.setFfnMode('dense');
        }
        logits[threads] = dense;
      } finally { model.dispose(); }
    }
    assert.equal(bitDiff(logits[1][0], logits[2][0]), 0, '1 vs 2 threads, prefill');
    assert.equal(bitDiff(logits[1][1], logits[2][1]), 0, '1 vs 2 threads, decode');
  });
}

test('fused greedy generation equals dense (q8_0, 2 threads, 32 tokens)', async () => {
  const model = await loadTiny(Q8, 2);
  try {
    const a = await model.complete('The Debian project is', { greedy: true, maxTokens: 32 });
    model.setFfnMode('fused', undefined, { tile: 32 });
    const b = await model.complete('The Debian project is', { greedy: true, maxTokens: 32 });
    assert.deepEqual(b.tokens, a.tokens);
  } finally { model.dispose(); }
});

test('fused needs its module: a clear error when the model was loaded without it', async () => {
  const { load } = await import('../dist/src/index.js');
  const model = await load(Q8, { maxBatch: 8 });
  try {
    assert.throws(() => model.setFfnMode('fused'), (e) => e.code === 'invalid_argument' && /ffn-fused/.test(e.message));
    model.engine.forward([1, 2, 3], 0);   // still dense and usable
  } finally { model.dispose(); }
});
