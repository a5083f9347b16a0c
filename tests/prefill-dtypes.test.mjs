// Prefill (tokens in batches: each dtype's GEMM kernel, ae_matmul, with 4-token tiles and 1-3 token tails) gives
// the same logits, bit for bit, as feeding the tokens one at a time (the matvec kernels), on 1 and 2 threads, for
// the dtypes of real GGUF files: a Q4_K_M-style mix (q4_K, q6_K, and q5_0 where llama.cpp falls back because a
// row is not a multiple of 256), the legacy 32-blocks q5_0 / q4_1 / q5_1, and a q5_K / bf16 / q4_1 / q5_1 mix.
// q4_K / q6_K weights come from the C reference quantiser (the JS converter cannot produce them).
// Run: node --test tests/prefill-dtypes.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import { load } from '../dist/src/index.js';
import { generateModel, tensorRole, K_SHAPE, Q4_K_M } from './helpers/gen-model.mjs';
import { cEncoder } from './helpers/kernels.mjs';

const encodeRef = await cEncoder(['q2_K', 'q3_K', 'q4_K', 'q6_K', 'iq4_nl', 'iq4_xs']);

// K_SHAPE's hidden 544 = 17 x 32: ffn_down rows (544 elements) cannot be k-quants -> q5_0, as llama.cpp's Q4_K_M does
// llama.cpp's Q3_K_M: q3_K, with attn_v / ffn_down / attn_output in q4_K / q5_K on some layers, the output q6_K
const Q3_K_M = { token_embd: 'q3_K', attn_q: 'q3_K', attn_k: 'q3_K', attn_v: 'q5_K', attn_qkv: 'q3_K', attn_output: 'q4_K',
  ffn_gate: 'q3_K', ffn_up: 'q3_K', ffn_down: 'q5_0', output: 'q6_K' };
// llama.cpp's Q2_K: q2_K, with attn_v / attn_output / ffn_down in q3_K (ffn_down's rows of 544: its fallback iq4_nl), the
// output q6_K
const Q2_K = { token_embd: 'q2_K', attn_q: 'q2_K', attn_k: 'q2_K', attn_v: 'q3_K', attn_qkv: 'q2_K', attn_output: 'q3_K',
  ffn_gate: 'q2_K', ffn_up: 'q2_K', ffn_down: 'iq4_nl', output: 'q6_K' };
const MIX = { token_embd: 'q5_1', attn_q: 'q5_K', attn_k: 'q4_1', attn_v: 'q5_1', attn_qkv: 'q5_K', attn_output: 'bf16',
  ffn_gate: 'q5_K', ffn_up: 'q4_1', ffn_down: 'q5_1', output: 'q5_0' };

const CASES = [
  ['llama', 'Q4_K_M-style', { shape: K_SHAPE, dtypeOf: (n) => Q4_K_M[tensorRole(n)], encode: encodeRef }],
  ['phi3', 'Q4_K_M-style', { shape: K_SHAPE, dtypeOf: (n) => Q4_K_M[tensorRole(n)], encode: encodeRef }],
  ['llama', 'Q3_K_M-style', { shape: K_SHAPE, dtypeOf: (n) => Q3_K_M[tensorRole(n)], encode: encodeRef }],
  ['llama', 'Q2_K-style', { shape: K_SHAPE, dtypeOf: (n) => Q2_K[tensorRole(n)], encode: encodeRef }],
  ['llama', 'q5_0', {}], ['llama', 'q4_1', {}], ['qwen2', 'q5_1', {}], ['qwen2', 'iq4_nl', { encode: encodeRef }],
  // IQ4_XS-style: iq4_xs, with llama.cpp's fallback iq4_nl for ffn_down (rows of 544)
  ['llama', 'IQ4_XS-style', { shape: K_SHAPE, dtypeOf: (n) => (tensorRole(n) === 'ffn_down' ? 'iq4_nl' : 'iq4_xs'), encode: encodeRef }],
  ['llama', 'q5_K/bf16/q4_1/q5_1 mix', { shape: K_SHAPE, dtypeOf: (n) => MIX[tensorRole(n)] }],
];

for (const [arch, what, opts] of CASES) {
  test(`${arch} ${what}: prefill == token by token, bit for bit (1 and 2 threads)`, async () => {
    const { file, dtypes } = await generateModel(arch, opts.dtypeOf ? 'f32' : what, 9, opts);
    if (what === 'Q4_K_M-style') for (const d of ['q4_K', 'q6_K', 'q5_0']) assert.ok([...dtypes.values()].includes(d), `the model has ${d} tensors`);
    if (what === 'Q2_K-style') for (const d of ['q2_K', 'q3_K', 'iq4_nl', 'q6_K']) assert.ok([...dtypes.values()].includes(d), `the model has ${d} tensors`);
    if (what === 'Q3_K_M-style') for (const d of ['q3_K', 'q4_K', 'q5_K', 'q6_K']) assert.ok([...dtypes.values()].includes(d), `the model has ${d} tensors`);
    const prompt = [1, 17, 290, 33, 5, 260, 301, 44, 120, 7, 19, 88, 3];   // 13 tokens: batches of 8 and 5 (tiles of 4 + a 1-token tail)
    for (const threads of [1, 2]) {
      const model = await load(file, { threads, maxBatch: 8 });
      try {
        model.engine.forward(prompt, 0);
        const batched = model.engine.logits();
        assert.ok(batched.every(Number.isFinite), 'finite logits');
        model.reset();
        prompt.forEach((t, i) => model.engine.forward([t], i));
        const single = model.engine.logits();
        assert.ok(Buffer.from(batched.buffer).equals(Buffer.from(single.buffer)), `${threads} thread(s): prefill logits differ from token-by-token`);
      } finally { model.dispose(); }
    }
  });
}
