// Generated tiny models of each architecture (llama: GQA + adjacent-pair RoPE; qwen2: QKV bias + NEOX RoPE
// + tied embeddings; phi3: fused qkv + partial NEOX RoPE) vs the scalar JS reference forward, and
// 1 thread vs 2 threads bit for bit. KV cache: the default f16 for every weight dtype, and f32 / q8_0 / q4_0 on the
// f32 and q8_0 models (the reference stores K and V rounded as the cache does: tests/helpers/ref-forward.mjs kvDtype).
import test from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../dist/src/index.js';
import { generateModel } from './helpers/gen-model.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';
import { logitRuns, sameRunBits, maxRunDiff } from './helpers/logit-runs.mjs';

// Max |logit - reference| allowed. The weights are identical on both sides (the reference uses the
// dequantised values); for q8_0/q4_0 the reference also quantises activations to q8_0 as the wasm path
// does. What is left: f32 vs f64 summation and the vector exp (measured: < 1e-5 for every case; logits
// are O(1..10) here). An activation rounding the other way in an 8-bit step would show as ~1e-3.
const TOL = { f32: 2e-4, f16: 2e-4, q8_0: 2e-4, q4_0: 2e-4 };
const PROMPT = [1, 17, 290, 33, 5, 260, 301];  // prefill in batches of 4 (maxBatch 4)
const DECODE = [280, 12, 99, 300, 4];
const steps = logitRuns(PROMPT, DECODE);

// Every weight dtype with an f32 KV cache (the tight bounds above); KV caches f16 (the default) and q8_0 on f32 and
// f16 weights: the reference rounds K and V as the cache does, so what is left is a value on a rounding boundary
// going the other way (f32 vs float64 arithmetic before the rounding): KV_TOL, and the reference without the
// rounding must be further off (the rounding is what is being checked).
const KV_TOL = { f16: 3e-3, q8_0: 3e-2 };
const CASES = [];
for (const arch of ['llama', 'qwen2', 'phi3']) {
  for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) CASES.push([arch, dtype, 'f32']);
  CASES.push([arch, 'f32', 'f16'], [arch, 'f32', 'q8_0'], [arch, 'f16', undefined]);
}
for (const [arch, dtype, kvDtype] of CASES) {
  {
    const kv = kvDtype ?? 'f16';
    test(`${arch} ${dtype}, KV ${kvDtype ?? 'f16 (default)'}: wasm forward matches the scalar reference; 1 and 2 threads give identical bits`, async () => {
      const { file, cfg, W } = await generateModel(arch, dtype, 3);
      const ref = createRefModel(cfg, W, { quantizedActs: dtype === 'q8_0' || dtype === 'q4_0', kvDtype: kv });
      const plain = kv !== 'f32' ? createRefModel(cfg, W, { quantizedActs: dtype === 'q8_0' || dtype === 'q4_0' }) : null;
      const runs = [];
      for (const threads of [1, 2]) {
        const model = await load(file, { threads, maxBatch: 4, kvDtype });
        assert.deepEqual(model.engine.plan.kvDtype, { k: kv, v: kv });
        try {
          assert.equal(model.threads, threads);
          runs.push(steps.runEngine(model));
        } finally { model.dispose(); }
      }
      assert.ok(sameRunBits(runs[0], runs[1]), '1 vs 2 threads differ');
      // reference: token by token
      const maxDiff = maxRunDiff(runs[0], steps.runRef(ref));
      const tol = kv === 'f32' ? TOL[dtype] : KV_TOL[kv];
      assert.ok(maxDiff < tol, `max |logit diff| ${maxDiff} >= ${tol}`);
      let note = '';
      if (plain) {
        const off = maxRunDiff(runs[0], steps.runRef(plain));
        assert.ok(off > 2 * maxDiff, `the reference without KV rounding (${off}) should be further off than with it (${maxDiff})`);
        note = ` (reference without KV rounding: ${off.toExponential(2)})`;
      }
      console.log(`${arch} ${dtype} KV ${kv}: max |logit - ref| = ${maxDiff.toExponential(2)}${note}`);
    });
  }
}

// A prompt chunk that is not the prompt's last runs no output head (Engine.forward noLogits, want_all -1 in C): the
// logits stay what they were, the KV cache is filled as usual, so the last chunk's logits equal one forward's.
test('llama q4_0: chunks without logits then the last chunk == one forward, and a chunk without logits leaves the logits', async () => {
  const { file } = await generateModel('llama', 'q4_0', 5);
  const prompt = [1, 17, 290, 33, 5, 260, 301, 44, 120, 7, 19];
  for (const threads of [1, 2]) {
    const model = await load(file, { threads, maxBatch: 16 });
    try {
      const e = model.engine;
      e.forward(prompt, 0);
      const whole = e.logits();
      model.reset();
      e.forward([3, 4, 5], 0);
      const before = e.logits();
      assert.ok(!Buffer.from(before.buffer).equals(Buffer.from(whole.buffer)));
      model.reset();
      e.forward(prompt.slice(0, 4), 0, false, 0, true);
      assert.ok(Buffer.from(e.logits().buffer).equals(Buffer.from(before.buffer)), `${threads} thread(s): a chunk without logits changed them`);
      e.forward(prompt.slice(4, 9), 4, false, 0, true);
      e.forward(prompt.slice(9), 9);
      assert.ok(Buffer.from(e.logits().buffer).equals(Buffer.from(whole.buffer)), `${threads} thread(s): chunked prefill logits differ from one forward`);
    } finally { model.dispose(); }
  }
});

// Prefill (tokens in batches: the GEMM kernels, 4-token tiles plus a tail) gives the same bits as feeding the
// tokens one by one (the matvec kernels), on 1 and 2 threads: every kernel of the batched path computes
// each token's values with the per-token operation sequence.
for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) {
  test(`llama ${dtype}: prefill == token by token, bit for bit (1 and 2 threads)`, async () => {
    const { file } = await generateModel('llama', dtype, 5);
    const prompt = [1, 17, 290, 33, 5, 260, 301, 44, 120, 7, 19];   // 11 tokens: batches of 8 and 3
    for (const threads of [1, 2]) {
      const model = await load(file, { threads, maxBatch: 8 });
      try {
        model.engine.forward(prompt, 0);
        const batched = model.engine.logits();
        model.reset();
        prompt.forEach((t, i) => model.engine.forward([t], i));
        const single = model.engine.logits();
        assert.ok(Buffer.from(batched.buffer).equals(Buffer.from(single.buffer)), `${threads} thread(s): prefill logits differ from token-by-token`);
      } finally { model.dispose(); }
    }
  });
}
