// Generated tiny models of each architecture (llama: GQA + adjacent-pair RoPE; qwen2: QKV bias + NEOX RoPE
// + tied embeddings; phi3: fused qkv + partial NEOX RoPE) vs the scalar JS reference forward, and
// 1 thread vs 2 threads bit for bit.
import test from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../dist/src/index.js';
import { generateModel } from './helpers/gen-model.mjs';
import { createRefModel } from './helpers/ref-forward.mjs';

// Max |logit - reference| allowed. The weights are identical on both sides (the reference uses the
// dequantised values); for q8_0/q4_0 the reference also quantises activations to q8_0 as the wasm path
// does. What is left: f32 vs f64 summation and the vector exp (measured: < 1e-5 for every case; logits
// are O(1..10) here). An activation rounding the other way in an 8-bit step would show as ~1e-3.
const TOL = { f32: 2e-4, f16: 2e-4, q8_0: 2e-4, q4_0: 2e-4 };
const PROMPT = [1, 17, 290, 33, 5, 260, 301];  // prefill in batches of 4 (maxBatch 4)
const DECODE = [280, 12, 99, 300, 4];

for (const arch of ['llama', 'qwen2', 'phi3']) {
  for (const dtype of ['f32', 'f16', 'q8_0', 'q4_0']) {
    test(`${arch} ${dtype}: wasm forward matches the scalar reference; 1 and 2 threads give identical bits`, async () => {
      const { file, cfg, W } = await generateModel(arch, dtype, 3);
      const ref = createRefModel(cfg, W, { quantizedActs: dtype === 'q8_0' || dtype === 'q4_0' });
      const runs = [];
      for (const threads of [1, 2]) {
        const model = await load(file, { threads, maxBatch: 4 });
        try {
          assert.equal(model.threads, threads);
          const out = [];
          model.engine.forward(PROMPT, 0);
          out.push(model.engine.logits());
          DECODE.forEach((t, i) => { model.engine.forward([t], PROMPT.length + i); out.push(model.engine.logits()); });
          runs.push(out);
        } finally { model.dispose(); }
      }
      // reference: token by token
      const refOut = [];
      let lastPrompt;
      PROMPT.forEach((t, i) => { lastPrompt = ref.step(t, i); });
      refOut.push(lastPrompt);
      DECODE.forEach((t, i) => refOut.push(ref.step(t, PROMPT.length + i)));
      let maxDiff = 0;
      for (let s = 0; s < refOut.length; s++) {
        for (let i = 0; i < cfg.vocab_size; i++) maxDiff = Math.max(maxDiff, Math.abs(runs[0][s][i] - refOut[s][i]));
        assert.ok(Buffer.from(runs[0][s].buffer).equals(Buffer.from(runs[1][s].buffer)), `step ${s}: 1 vs 2 threads differ`);
      }
      assert.ok(maxDiff < TOL[dtype], `max |logit diff| ${maxDiff} >= ${TOL[dtype]}`);
      console.log(`${arch} ${dtype}: max |logit - ref| = ${maxDiff.toExponential(2)}`);
    });
  }
}

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
