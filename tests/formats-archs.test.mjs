// Converter on synthetic qwen2 / phi3 inputs (GGUF and HF folders): biases, tied embeddings, fused qkv kept,
// fused gate_up split by rows (exact), BF16 safetensors, neox rope.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { convertModel } from '../dist/src/formats/convert.js';
import { openRknot, readRknotTensor } from '../dist/src/formats/rknot.js';
import { encodeF16, decodeToF32, quantizeQ8_0 } from '../dist/src/formats/quantize.js';
import { tinyModel, makeTmpDir, buildGGUF, GGUF_T as T, assertAetherError, writeSafetensors } from './helpers/formats.mjs';

const M = tinyModel();
const tmp = makeTmpDir('archs');
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const DIM = 64, HEADS = 2, KV = 1, HD = 32, HIDDEN = 128, VOCAB = 32;

function randF32(n, seed) {
  const x = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (s * 1664525 + 1013904223) >>> 0; x[i] = (s / 2 ** 32 - 0.5) * 0.2; }
  return x;
}
const bytesOf = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const eqBytes = (a, b) => Buffer.compare(bytesOf(a), bytesOf(b)) === 0;

/** GGUF with f16 2-D weights and f32 1-D tensors: tensors = [[name, dims]]. Returns { file, data: Map name -> Float32Array }. */
function writeGGUF(file, arch, kvExtra, tensors) {
  const kv = [
    ['general.architecture', T.string, arch], ['general.alignment', T.u32, 32],
    [`${arch}.embedding_length`, T.u32, DIM], [`${arch}.block_count`, T.u32, 1], [`${arch}.attention.head_count`, T.u32, HEADS],
    [`${arch}.attention.head_count_kv`, T.u32, KV], [`${arch}.feed_forward_length`, T.u32, HIDDEN], [`${arch}.context_length`, T.u32, 128],
    [`${arch}.attention.layer_norm_rms_epsilon`, T.f32, 1e-6], [`${arch}.rope.freq_base`, T.f32, 1000000],
    ['tokenizer.ggml.model', T.string, 'gpt2'],
    ['tokenizer.ggml.tokens', T.array, [T.string, Array.from({ length: VOCAB }, (_, i) => `tok${i}`)]],
    ['tokenizer.ggml.merges', T.array, [T.string, ['t o', 'to k']]],
    ['tokenizer.ggml.eos_token_id', T.u32, 2],
    ...kvExtra,
  ];
  const infos = [];
  const chunks = [];
  const data = new Map();
  let off = 0;
  tensors.forEach(([name, dims], i) => {
    const x = randF32(dims.reduce((a, b) => a * b, 1), i + 7);
    data.set(name, x);
    const b = dims.length === 1 ? bytesOf(x) : bytesOf(encodeF16(x));
    infos.push({ name, dims, type: dims.length === 1 ? 0 : 1, offset: off });
    const padded = Math.ceil(b.length / 32) * 32;
    chunks.push(b, Buffer.alloc(padded - b.length));
    off += padded;
  });
  fs.writeFileSync(file, buildGGUF({ kv, tensors: infos, data: Buffer.concat(chunks) }));
  return { file, data };
}

const f16Bytes = (x) => encodeF16(x);

test('qwen2 GGUF: biases, tied embeddings, neox; q8_0 from f16', async () => {
  const { file, data } = writeGGUF(path.join(tmp, 'qwen2.gguf'), 'qwen2', [], [
    ['token_embd.weight', [DIM, VOCAB]], ['blk.0.attn_norm.weight', [DIM]],
    ['blk.0.attn_q.weight', [DIM, HEADS * HD]], ['blk.0.attn_q.bias', [HEADS * HD]],
    ['blk.0.attn_k.weight', [DIM, KV * HD]], ['blk.0.attn_k.bias', [KV * HD]],
    ['blk.0.attn_v.weight', [DIM, KV * HD]], ['blk.0.attn_v.bias', [KV * HD]],
    ['blk.0.attn_output.weight', [HEADS * HD, DIM]], ['blk.0.ffn_norm.weight', [DIM]],
    ['blk.0.ffn_gate.weight', [DIM, HIDDEN]], ['blk.0.ffn_up.weight', [DIM, HIDDEN]], ['blk.0.ffn_down.weight', [HIDDEN, DIM]],
    ['output_norm.weight', [DIM]],
  ]);
  const out = path.join(tmp, 'qwen2.rknot');
  await convertModel(file, out, { quant: 'keep' });
  const { meta } = await openRknot(out);
  const c = meta.config;
  assert.deepEqual([c.arch, c.rope_type, c.tie_embeddings, c.qkv_bias, c.fused_qkv, c.rope_theta, c.norm_eps, c.eos_token_id], ['qwen2', 'neox', true, true, false, 1000000, 1e-6, 2]);
  assert.equal(meta.tokenizer.model, 'gpt2');
  assert.ok(!meta.tensors.some((t) => t.name === 'output.weight'));
  const bias = await readRknotTensor(out, 'blk.0.attn_k.bias');
  assert.equal(bias.info.dtype, 'f32');
  assert.ok(eqBytes(bias.data, data.get('blk.0.attn_k.bias')));
  assert.ok(eqBytes((await readRknotTensor(out, 'blk.0.attn_q.weight')).data, f16Bytes(data.get('blk.0.attn_q.weight'))));
  const q8 = path.join(tmp, 'qwen2-q8.rknot');
  await convertModel(file, q8, { quant: 'q8_0' });
  const w = await readRknotTensor(q8, 'blk.0.ffn_down.weight');
  assert.equal(w.info.dtype, 'q8_0');
  // f16 input is upcast exactly and quantised like ggml (f16 -> f32 -> q8_0)
  assert.ok(eqBytes(w.data, quantizeQ8_0(decodeToF32('f16', f16Bytes(data.get('blk.0.ffn_down.weight')), HIDDEN * DIM))));
  assert.equal((await readRknotTensor(q8, 'blk.0.attn_v.bias')).info.dtype, 'f32');
});

test('phi3 GGUF: fused qkv kept, fused ffn_up split into ffn_gate (first rows) and ffn_up (next rows), exactly', async () => {
  const { file, data } = writeGGUF(path.join(tmp, 'phi3.gguf'), 'phi3', [['phi3.rope.dimension_count', T.u32, HD]], [
    ['token_embd.weight', [DIM, VOCAB]], ['blk.0.attn_norm.weight', [DIM]],
    ['blk.0.attn_qkv.weight', [DIM, (HEADS + 2 * KV) * HD]], ['blk.0.attn_output.weight', [HEADS * HD, DIM]],
    ['blk.0.ffn_norm.weight', [DIM]], ['blk.0.ffn_up.weight', [DIM, 2 * HIDDEN]], ['blk.0.ffn_down.weight', [HIDDEN, DIM]],
    ['output_norm.weight', [DIM]], ['output.weight', [DIM, VOCAB]],
  ]);
  for (const quant of ['keep', 'q4_0']) {
    const out = path.join(tmp, `phi3-${quant}.rknot`);
    await convertModel(file, out, { quant });
    const { meta } = await openRknot(out);
    assert.deepEqual([meta.config.arch, meta.config.rope_type, meta.config.fused_qkv, meta.config.tie_embeddings], ['phi3', 'neox', true, false]);
    const up = data.get('blk.0.ffn_up.weight');
    const gateWant = up.subarray(0, DIM * HIDDEN), upWant = up.subarray(DIM * HIDDEN);
    const enc = (x) => (quant === 'keep' ? f16Bytes(x) : null);
    const gate = await readRknotTensor(out, 'blk.0.ffn_gate.weight');
    const up2 = await readRknotTensor(out, 'blk.0.ffn_up.weight');
    assert.deepEqual(gate.info.shape, [DIM, HIDDEN]);
    assert.deepEqual(up2.info.shape, [DIM, HIDDEN]);
    if (quant === 'keep') {
      assert.ok(eqBytes(gate.data, enc(gateWant)));
      assert.ok(eqBytes(up2.data, enc(upWant)));
      assert.ok(eqBytes((await readRknotTensor(out, 'blk.0.attn_qkv.weight')).data, f16Bytes(data.get('blk.0.attn_qkv.weight'))));
    } else {
      assert.equal(gate.info.dtype, 'q4_0');
      // splitting rows of a row-wise block format is exact: quantise(split) == split(quantise)
      const whole = (await import('../dist/src/formats/quantize.js')).quantizeQ4_0(decodeToF32('f16', f16Bytes(up), up.length));
      const half = whole.length / 2;
      assert.ok(eqBytes(gate.data, whole.subarray(0, half)));
      assert.ok(eqBytes(up2.data, whole.subarray(half)));
    }
  }
});

test('GGUF with unexpected tensors or an unsupported RoPE scaling is refused', async () => {
  const base = [
    ['token_embd.weight', [DIM, VOCAB]], ['blk.0.attn_norm.weight', [DIM]], ['blk.0.attn_q.weight', [DIM, HEADS * HD]],
    ['blk.0.attn_k.weight', [DIM, KV * HD]], ['blk.0.attn_v.weight', [DIM, KV * HD]], ['blk.0.attn_output.weight', [HEADS * HD, DIM]],
    ['blk.0.ffn_norm.weight', [DIM]], ['blk.0.ffn_gate.weight', [DIM, HIDDEN]], ['blk.0.ffn_up.weight', [DIM, HIDDEN]], ['blk.0.ffn_down.weight', [HIDDEN, DIM]],
    ['output_norm.weight', [DIM]],
  ];
  const { file } = writeGGUF(path.join(tmp, 'extra.gguf'), 'llama', [], [...base, ['blk.0.attn_sinks.weight', [HEADS]]]);
  await assertAetherError(() => convertModel(file, path.join(tmp, 'x.rknot')), 'unsupported', [file, 'unexpected tensor', 'blk.0.attn_sinks.weight']);
  assert.ok(!fs.existsSync(path.join(tmp, 'x.rknot.tmp')));
  const yarn = writeGGUF(path.join(tmp, 'yarn.gguf'), 'llama', [['llama.rope.scaling.type', T.string, 'yarn'], ['llama.rope.scaling.factor', T.f32, 4]], base);
  await assertAetherError(() => convertModel(yarn.file, path.join(tmp, 'x.rknot')), 'unsupported', [yarn.file, 'llama.rope.scaling.type', 'yarn']);
  // LongRoPE factors come as a pair
  const half = writeGGUF(path.join(tmp, 'half.gguf'), 'phi3', [], [...base, ['rope_factors_long.weight', [HD / 2]]]);
  await assertAetherError(() => convertModel(half.file, path.join(tmp, 'x.rknot')), 'config_error', [half.file, 'rope_factors_short.weight']);
  assert.ok(!fs.existsSync(path.join(tmp, 'x.rknot.tmp')));
});

// ---------------------------------------------------------------------------------------------
// HF folders

function hfFolder(name, config, tensors) {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  for (const f of ['tokenizer.model', 'tokenizer_config.json']) fs.copyFileSync(path.join(M.hf, f), path.join(dir, f));
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
  return dir;
}

const HF_VOCAB = 4096; // the copied tokenizer.model has 4096 pieces

test('HF Qwen2 folder: BF16 weights kept bf16 (keep) or -> f16, biases f32, tied embeddings (lm_head ignored), neox', async () => {
  const x = (n, s) => randF32(n, s);
  const L = 'model.layers.0.';
  const t = [
    ['model.embed_tokens.weight', 'BF16', [HF_VOCAB, DIM], x(HF_VOCAB * DIM, 1)],
    [L + 'input_layernorm.weight', 'BF16', [DIM], x(DIM, 2)],
    [L + 'self_attn.q_proj.weight', 'BF16', [HEADS * HD, DIM], x(HEADS * HD * DIM, 3)], [L + 'self_attn.q_proj.bias', 'BF16', [HEADS * HD], x(HEADS * HD, 4)],
    [L + 'self_attn.k_proj.weight', 'BF16', [KV * HD, DIM], x(KV * HD * DIM, 5)], [L + 'self_attn.k_proj.bias', 'BF16', [KV * HD], x(KV * HD, 6)],
    [L + 'self_attn.v_proj.weight', 'BF16', [KV * HD, DIM], x(KV * HD * DIM, 7)], [L + 'self_attn.v_proj.bias', 'BF16', [KV * HD], x(KV * HD, 8)],
    [L + 'self_attn.o_proj.weight', 'BF16', [DIM, HEADS * HD], x(HEADS * HD * DIM, 9)],
    [L + 'post_attention_layernorm.weight', 'BF16', [DIM], x(DIM, 10)],
    [L + 'mlp.gate_proj.weight', 'BF16', [HIDDEN, DIM], x(HIDDEN * DIM, 11)], [L + 'mlp.up_proj.weight', 'BF16', [HIDDEN, DIM], x(HIDDEN * DIM, 12)],
    [L + 'mlp.down_proj.weight', 'BF16', [DIM, HIDDEN], x(HIDDEN * DIM, 13)],
    ['model.norm.weight', 'BF16', [DIM], x(DIM, 14)],
    ['lm_head.weight', 'BF16', [HF_VOCAB, DIM], x(HF_VOCAB * DIM, 1)],
  ];
  const dir = hfFolder('qwen2-hf', {
    architectures: ['Qwen2ForCausalLM'], hidden_size: DIM, num_hidden_layers: 1, num_attention_heads: HEADS, num_key_value_heads: KV,
    intermediate_size: HIDDEN, vocab_size: HF_VOCAB, max_position_embeddings: 512, rms_norm_eps: 1e-6, rope_theta: 1000000,
    tie_word_embeddings: true, bos_token_id: 1, eos_token_id: [2, 3],
  }, t);
  const out = path.join(tmp, 'qwen2-hf.rknot');
  const summary = await convertModel(dir, out, { quant: 'keep' });
  const { meta } = await openRknot(out);
  const c = meta.config;
  assert.deepEqual([c.arch, c.rope_type, c.tie_embeddings, c.qkv_bias, c.fused_qkv, c.n_ctx, c.eos_token_id, c.vocab_size], ['qwen2', 'neox', true, true, false, 512, 2, HF_VOCAB]);
  assert.ok(!meta.tensors.some((u) => u.name === 'output.weight'));
  assert.ok(summary.notes.some((n) => /lm_head/.test(n)));
  const bf = (a) => { const u = new Uint32Array(a.length); const s = new Uint32Array(a.buffer, a.byteOffset, a.length); for (let i = 0; i < a.length; i++) u[i] = s[i] & 0xffff0000; return new Float32Array(u.buffer); };
  const q = await readRknotTensor(out, 'blk.0.attn_q.weight');
  assert.equal(q.info.dtype, 'bf16');
  assert.deepEqual(q.info.shape, [DIM, HEADS * HD]);
  const top = (a) => { const u = new Uint32Array(a.buffer, a.byteOffset, a.length), h = new Uint16Array(a.length); for (let i = 0; i < a.length; i++) h[i] = u[i] >>> 16; return new Uint8Array(h.buffer); };
  assert.ok(eqBytes(q.data, top(t[2][3])), 'bf16 weights copied byte for byte');
  const out16 = path.join(tmp, 'qwen2-hf-f16.rknot');
  await convertModel(dir, out16, { quant: 'f16' });
  const q16 = await readRknotTensor(out16, 'blk.0.attn_q.weight');
  assert.equal(q16.info.dtype, 'f16');
  assert.ok(eqBytes(q16.data, encodeF16(bf(t[2][3]))));
  const b = await readRknotTensor(out, 'blk.0.attn_q.bias');
  assert.equal(b.info.dtype, 'f32');
  assert.ok(eqBytes(b.data, bf(t[3][3])));
});

test('HF Phi3 folder: qkv_proj kept fused, gate_up_proj split by rows, lm_head -> output', async () => {
  const x = (n, s) => randF32(n, s);
  const L = 'model.layers.0.';
  const gateUp = x(2 * HIDDEN * DIM, 5);
  const t = [
    ['model.embed_tokens.weight', 'F32', [HF_VOCAB, DIM], x(HF_VOCAB * DIM, 1)],
    [L + 'input_layernorm.weight', 'F32', [DIM], x(DIM, 2)],
    [L + 'self_attn.qkv_proj.weight', 'F32', [(HEADS + 2 * KV) * HD, DIM], x((HEADS + 2 * KV) * HD * DIM, 3)],
    [L + 'self_attn.o_proj.weight', 'F32', [DIM, HEADS * HD], x(HEADS * HD * DIM, 4)],
    [L + 'post_attention_layernorm.weight', 'F32', [DIM], x(DIM, 6)],
    [L + 'mlp.gate_up_proj.weight', 'F32', [2 * HIDDEN, DIM], gateUp],
    [L + 'mlp.down_proj.weight', 'F32', [DIM, HIDDEN], x(HIDDEN * DIM, 7)],
    ['model.norm.weight', 'F32', [DIM], x(DIM, 8)],
    ['lm_head.weight', 'F32', [HF_VOCAB, DIM], x(HF_VOCAB * DIM, 9)],
  ];
  const dir = hfFolder('phi3-hf', {
    architectures: ['Phi3ForCausalLM'], hidden_size: DIM, num_hidden_layers: 1, num_attention_heads: HEADS, num_key_value_heads: KV,
    intermediate_size: HIDDEN, vocab_size: HF_VOCAB, max_position_embeddings: 4096, rms_norm_eps: 1e-5, rope_theta: 10000,
    rope_scaling: null, tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2,
  }, t);
  const out = path.join(tmp, 'phi3-hf.rknot');
  await convertModel(dir, out, { quant: 'keep' });
  const { meta } = await openRknot(out);
  assert.deepEqual([meta.config.arch, meta.config.fused_qkv, meta.config.tie_embeddings, meta.config.rope_type], ['phi3', true, false, 'neox']);
  const gate = await readRknotTensor(out, 'blk.0.ffn_gate.weight');
  const up = await readRknotTensor(out, 'blk.0.ffn_up.weight');
  assert.ok(eqBytes(gate.data, gateUp.subarray(0, HIDDEN * DIM)));
  assert.ok(eqBytes(up.data, gateUp.subarray(HIDDEN * DIM)));
  assert.ok(eqBytes((await readRknotTensor(out, 'blk.0.attn_qkv.weight')).data, t[2][3]));
  assert.ok(eqBytes((await readRknotTensor(out, 'output.weight')).data, t[8][3]));
  // a malformed LongRoPE config and an unsupported scaling are refused clearly
  const cfg0 = JSON.parse(fs.readFileSync(path.join(dir, 'config.json')));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg0, original_max_position_embeddings: 64, rope_scaling: { type: 'longrope', long_factor: [1], short_factor: [1] } }));
  await assertAetherError(() => convertModel(dir, path.join(tmp, 'p.rknot')), 'format_error', ['rope_scaling.long_factor', `${HD / 2} positive numbers`]);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ ...cfg0, rope_scaling: { rope_type: 'yarn', factor: 4 } }));
  await assertAetherError(() => convertModel(dir, path.join(tmp, 'p.rknot')), 'unsupported', ['rope_scaling', 'yarn']);
});
