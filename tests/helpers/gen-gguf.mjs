// Small GGUF files of each architecture the converter supports, written with the metadata keys and tensor names
// llama.cpp's converter writes for that architecture, so that GGUF -> .rknot -> wasm forward can be checked against
// the scalar reference (tests/helpers/ref-forward.mjs) end to end. Random weights (seeded).
//
// Where the keys come from (ggml-org/llama.cpp; names in gguf-py/gguf/constants.py, Keys.LLM / Keys.Attention /
// Keys.Rope and TENSOR_NAMES):
//  - every arch: TextModel.set_gguf_parameters in conversion/base.py: {arch}.block_count, context_length,
//    embedding_length, feed_forward_length, attention.head_count, attention.head_count_kv, rope.freq_base,
//    attention.layer_norm_rms_epsilon, attention.key_length / value_length (when config.json has head_dim),
//    general.file_type; rope.scaling.type/factor for 'linear' rope_scaling, nothing for 'llama3';
//  - llama (Llama 3.x, SmolLM2): conversion/llama.py LlamaModel adds {arch}.vocab_size, rope.dimension_count, and for
//    rope_type 'llama3' the tensor rope_freqs.weight (generate_extra_tensors); q/k permuted for NORM RoPE;
//  - qwen2 / qwen3: conversion/qwen.py (Qwen3Model extends Qwen2Model): qwen3 adds blk.N.attn_q_norm / attn_k_norm;
//  - phi3: conversion/phi.py Phi3MiniModel.set_gguf_parameters (its own, no super call): context_length,
//    rope.scaling.original_context_length, embedding_length, feed_forward_length, block_count, head_count,
//    head_count_kv, layer_norm_rms_epsilon, rope.dimension_count, rope.freq_base, file_type,
//    attention.sliding_window; for 128k models rope.scaling.attn_factor and rope_factors_long/short.weight;
//    fused blk.N.attn_qkv and ffn_up = [gate; up];
//  - gemma: conversion/gemma.py GemmaModel: context_length, embedding_length, block_count, feed_forward_length,
//    head_count, head_count_kv, layer_norm_rms_epsilon, key_length, value_length, file_type (no rope.freq_base);
//    norms hold 1 + w; no output.weight; tokenizer add_space_prefix false;
//  - gemma2: Gemma2Model: the gemma keys + attn_logit_softcapping, final_logit_softcapping,
//    attention.sliding_window; blk.N.post_attention_norm, post_ffw_norm (ffn_norm = HF pre_feedforward_layernorm);
//  - gemma3: Gemma3Model: TextModel keys (rope.freq_base = global base, rope.scaling linear for 4B+, rope.freq_base_swa
//    = local base in newer converters) + attention.sliding_window (final_logit_softcapping only when set);
//    attn_q_norm / attn_k_norm / post norms.
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { buildGGUF, GGUF_T as T, writeSafetensors } from './formats.mjs';
import { encodeFromF32, decodeToF32 } from '../../dist/src/formats/quantize.js';
import { BYTE_TO_UNICODE } from '../../dist/src/tokenizer/bpe.js';
import { rng, tinyTokenizer } from './gen-model.mjs';
import { f32Shortest } from '../../dist/src/formats/convert.js';

import { DTYPES } from '../../dist/src/formats/dtypes.js';

const GGML_TYPE = Object.fromEntries(Object.values(DTYPES).map((d) => [d.name, d.ggmlId]));

/** A small byte-level BPE vocabulary (GGUF tokenizer.ggml.model 'gpt2'): 256 byte characters, merges, specials. */
export function tinyBpeTokenizer(vocab, pre, specials) {
  const tokens = [...BYTE_TO_UNICODE];
  const merges = [];
  const words = ['Ġt', 'he', 'Ġthe', 'in', 'er', 'Ġa', 'on', 're', 'at', 'en', 'Ġs', 'Ġo', 'es', 'Ġw', 'or', 'it', 'an', 'is'];
  for (const w of words) {
    if (tokens.length >= vocab - specials.length) break;
    const cut = w.length === 2 ? 1 : w.startsWith('Ġ') && w.length === 4 ? 2 : 1;
    const a = w.slice(0, cut), b = w.slice(cut);
    if (!tokens.includes(a) || !tokens.includes(b)) continue;
    merges.push(`${a} ${b}`); tokens.push(w);
  }
  while (tokens.length < vocab - specials.length) tokens.push(`<|reserved_${tokens.length}|>`);
  const types = tokens.map((t) => (t.startsWith('<|reserved_') ? 3 : 1));
  for (const sp of specials) { tokens.push(sp); types.push(3); }
  return { tokens, types, merges, pre };
}

const D = 64, NH = 4, NKV = 2, HIDDEN = 160, VOCAB = 320;
const SHAPE0 = { D, NH, NKV, HIDDEN, VOCAB };

/**
 * Variants: name -> { arch, layers, headDim, ... }. Each writes what llama.cpp's converter writes for such a model
 * (at toy sizes). `expect` is the .rknot config the converter must produce from it (checked by the tests).
 */
export const GGUF_VARIANTS = {
  // Llama-3.2-1B-style: tied embeddings, llama3 RoPE scaling (rope_freqs), theta 500000, Llama 3 BPE (llama-bpe)
  llama3: { arch: 'llama', layers: 2, headDim: 16, tied: true, ropeBase: 500000, llama3: { factor: 32, low: 1, high: 4, orig: 8 }, vocab: 'llama-bpe' },
  // SmolLM2-style: llama arch, tied, theta 100000, GPT-2 style BPE with the 'smollm' pre-tokenizer
  smollm2: { arch: 'llama', layers: 2, headDim: 16, tied: true, ropeBase: 100000, vocab: 'smollm' },
  qwen2: { arch: 'qwen2', layers: 2, headDim: 16, tied: true, bias: true, ropeBase: 1000000, vocab: 'qwen2' },
  // Qwen3-0.6B-style: head_dim (key_length) != dim / heads, q/k norms, no bias, tied
  qwen3: { arch: 'qwen3', layers: 2, headDim: 32, tied: true, qkNorm: true, ropeBase: 1000000, keyLength: true, vocab: 'qwen2' },
  // Phi-3-mini-4k-style: fused qkv and gate_up, sliding window shorter than the context
  phi3: { arch: 'phi3', layers: 2, headDim: 16, fused: true, ropeBase: 10000, window: 5, vocab: 'spm' },
  // Phi-3.5-mini / Phi-3-mini-128k-style: LongRoPE long/short factors and attention factor, window >= context
  'phi3-128k': { arch: 'phi3', layers: 2, headDim: 16, fused: true, ropeBase: 10000, window: 262144, longrope: { orig: 16 }, nCtx: 64, vocab: 'spm' },
  // Gemma-2B-style: head_dim 32 with dim 64 (key_length), GeGLU, sqrt(dim) embeddings, tied, 1 + w norms
  gemma: { arch: 'gemma', layers: 2, headDim: 32, tied: true, gemma: 1, keyLength: true, noRopeBase: true, vocab: 'spm-gemma' },
  // Gemma-2-2B-style: + soft-caps (small caps so they matter at toy scale), post norms, even layers slide
  gemma2: { arch: 'gemma2', layers: 3, headDim: 32, tied: true, gemma: 2, keyLength: true, noRopeBase: true, window: 5, softcap: [8, 3], vocab: 'spm-gemma' },
  // Gemma-3-4B-style: 5 local : 1 global (7 layers: 0-4 and 6 slide), local base 10000, global 1e6 with linear x8, q/k norms
  gemma3: { arch: 'gemma3', layers: 7, headDim: 32, tied: true, gemma: 3, keyLength: true, ropeBase: 1000000, window: 5, linear: 8, swaBase: 10000, vocab: 'spm-gemma' },
};

function llama3Factors(rd, base, { factor, low, high, orig }) {
  // the formula of LlamaModel.generate_extra_tensors (conversion/llama.py), reimplemented
  const out = new Float32Array(rd / 2);
  const lowWave = orig / low, highWave = orig / high;
  for (let i = 0; i < rd / 2; i++) {
    const freq = 1 / Math.pow(base, (2 * i) / rd);
    const wave = 2 * Math.PI / freq;
    if (wave < highWave) out[i] = 1;
    else if (wave > lowWave) out[i] = factor;
    else { const smooth = (orig / wave - low) / (high - low); out[i] = 1 / ((1 - smooth) / factor + smooth); }
  }
  return out;
}

/**
 * Write GGUF variant `name` with 2-D weights in `dtype` to a temp file. opts.shape overrides { D, NH, NKV,
 * HIDDEN, VOCAB } and opts.headDim the variant's head dim (the K-quants need rows that are multiples of 256).
 * @returns {{ file, cfg, W, variant }} cfg: the config the reference runs (rknot style), W: dequantised weights by
 *          .rknot tensor name (phi3's fused gate_up split into ffn_gate / ffn_up, as the converter stores it).
 */
export function generateGGUF(name, dtype = 'f32', seed = 1, opts = {}) {
  const v = GGUF_VARIANTS[name];
  if (!v) throw new Error(`unknown GGUF variant ${name}`);
  const { D, NH, NKV, HIDDEN, VOCAB } = { ...SHAPE0, ...opts.shape };
  const arch = v.arch, hd = opts.headDim ?? v.headDim, L = v.layers, qd = NH * hd, kvd = NKV * hd;
  const nCtx = v.nCtx ?? 64;
  const rd = hd;
  const r = rng(seed * 104729 + name.length * 31 + name.charCodeAt(0));
  const tensors = [];   // { name, dims, dtype, values }
  const add = (tname, dims, scale, offset = 0, forceF32 = false) => {
    const n = dims.reduce((a, b) => a * b, 1);
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = offset + (r() * 2 - 1) * scale;
    tensors.push({ name: tname, dims, dtype: dims.length === 1 || forceF32 ? 'f32' : dtype, values: x });
    return x;
  };
  const normOffset = 1;   // llama.cpp's converter stores Gemma norms as 1 + w: values around 1 either way
  add('token_embd.weight', [D, VOCAB], v.gemma ? 0.08 : 0.5);
  for (let l = 0; l < L; l++) {
    const p = `blk.${l}.`;
    add(p + 'attn_norm.weight', [D], 0.2, normOffset);
    if (v.fused) add(p + 'attn_qkv.weight', [D, qd + 2 * kvd], 0.25);
    else { add(p + 'attn_q.weight', [D, qd], 0.25); add(p + 'attn_k.weight', [D, kvd], 0.25); add(p + 'attn_v.weight', [D, kvd], 0.25); }
    if (v.bias) { add(p + 'attn_q.bias', [qd], 0.1); add(p + 'attn_k.bias', [kvd], 0.1); add(p + 'attn_v.bias', [kvd], 0.1); }
    if (v.qkNorm || v.gemma === 3) { add(p + 'attn_q_norm.weight', [hd], 0.3, 1); add(p + 'attn_k_norm.weight', [hd], 0.3, 1); }
    add(p + 'attn_output.weight', [qd, D], 0.15);
    if (v.gemma >= 2) add(p + 'post_attention_norm.weight', [D], 0.2, normOffset);
    add(p + 'ffn_norm.weight', [D], 0.2, normOffset);
    if (v.fused) add(p + 'ffn_up.weight', [D, 2 * HIDDEN], 0.2);
    else { add(p + 'ffn_gate.weight', [D, HIDDEN], 0.2); add(p + 'ffn_up.weight', [D, HIDDEN], 0.2); }
    add(p + 'ffn_down.weight', [HIDDEN, D], 0.1);
    if (v.gemma >= 2) add(p + 'post_ffw_norm.weight', [D], 0.2, normOffset);
  }
  add('output_norm.weight', [D], 0.2, normOffset);
  if (!v.tied) add('output.weight', [D, VOCAB], 0.3);
  if (v.llama3) tensors.push({ name: 'rope_freqs.weight', dims: [rd / 2], dtype: 'f32', values: llama3Factors(rd, v.ropeBase, v.llama3) });
  if (v.longrope) {
    // LongRoPE factors are >= 1, growing with the dimension index (like Phi-3's short_factor / long_factor lists)
    const long = new Float32Array(rd / 2), short = new Float32Array(rd / 2);
    for (let i = 0; i < rd / 2; i++) { long[i] = 1 + 3 * (i / (rd / 2)) ** 2 + r() * 0.2; short[i] = 1 + 0.5 * (i / (rd / 2)) + r() * 0.05; }
    tensors.push({ name: 'rope_factors_long.weight', dims: [rd / 2], dtype: 'f32', values: long });
    tensors.push({ name: 'rope_factors_short.weight', dims: [rd / 2], dtype: 'f32', values: short });
  }

  // ---- metadata (in the converter's order: general, arch keys, tokenizer) ----
  const kv = [['general.architecture', T.string, arch], ['general.name', T.string, `tiny-${name}`], ['general.alignment', T.u32, 32]];
  const a = (k, t, val) => kv.push([`${arch}.${k}`, t, val]);
  const attnFactor = v.longrope ? Math.sqrt(1 + Math.log(nCtx / v.longrope.orig) / Math.log(v.longrope.orig)) : undefined;
  if (arch === 'phi3') {
    a('context_length', T.u32, nCtx);
    a('rope.scaling.original_context_length', T.u32, v.longrope?.orig ?? nCtx);
    a('embedding_length', T.u32, D); a('feed_forward_length', T.u32, HIDDEN); a('block_count', T.u32, L);
    a('attention.head_count', T.u32, NH); a('attention.head_count_kv', T.u32, NKV);
    a('attention.layer_norm_rms_epsilon', T.f32, 1e-5); a('rope.dimension_count', T.u32, rd);
    a('rope.freq_base', T.f32, v.ropeBase); kv.push(['general.file_type', T.u32, 1]);
    a('attention.sliding_window', T.u32, v.window ?? 0);
    if (attnFactor !== undefined) a('rope.scaling.attn_factor', T.f32, attnFactor);
  } else {
    a('block_count', T.u32, L); a('context_length', T.u32, nCtx); a('embedding_length', T.u32, D);
    a('feed_forward_length', T.u32, HIDDEN); a('attention.head_count', T.u32, NH); a('attention.head_count_kv', T.u32, NKV);
    if (v.linear) { a('rope.scaling.type', T.string, 'linear'); a('rope.scaling.factor', T.f32, v.linear); }
    if (!v.noRopeBase) a('rope.freq_base', T.f32, v.ropeBase);
    if (v.swaBase) a('rope.freq_base_swa', T.f32, v.swaBase);
    a('attention.layer_norm_rms_epsilon', T.f32, v.gemma ? 1e-6 : 1e-5);
    if (v.keyLength) { a('attention.key_length', T.u32, hd); a('attention.value_length', T.u32, hd); }
    kv.push(['general.file_type', T.u32, 1]);
    if (arch === 'llama') { a('vocab_size', T.u32, VOCAB); a('rope.dimension_count', T.u32, rd); }
    if (v.gemma === 2) { a('attn_logit_softcapping', T.f32, v.softcap[0]); a('final_logit_softcapping', T.f32, v.softcap[1]); a('attention.sliding_window', T.u32, v.window); }
    if (v.gemma === 3) a('attention.sliding_window', T.u32, v.window);
  }
  // tokenizer
  if (v.vocab === 'spm' || v.vocab === 'spm-gemma') {
    const tk = tinyTokenizer(VOCAB);
    kv.push(['tokenizer.ggml.model', T.string, 'llama'], ['tokenizer.ggml.pre', T.string, 'default'],
      ['tokenizer.ggml.tokens', T.array, [T.string, tk.tokens]], ['tokenizer.ggml.scores', T.array, [T.f32, tk.scores]],
      ['tokenizer.ggml.token_type', T.array, [T.i32, tk.token_type]],
      ['tokenizer.ggml.bos_token_id', T.u32, 1], ['tokenizer.ggml.eos_token_id', T.u32, 2], ['tokenizer.ggml.unknown_token_id', T.u32, 0]);
    if (v.vocab === 'spm-gemma') kv.push(['tokenizer.ggml.add_space_prefix', T.bool, false]);
  } else {
    const specials = v.vocab === 'llama-bpe' ? ['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>'] : v.vocab === 'qwen2' ? ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] : ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
    const tk = tinyBpeTokenizer(VOCAB, v.vocab, specials);
    kv.push(['tokenizer.ggml.model', T.string, 'gpt2'], ['tokenizer.ggml.pre', T.string, v.vocab],
      ['tokenizer.ggml.tokens', T.array, [T.string, tk.tokens]], ['tokenizer.ggml.token_type', T.array, [T.i32, tk.types]],
      ['tokenizer.ggml.merges', T.array, [T.string, tk.merges]],
      ['tokenizer.ggml.bos_token_id', T.u32, VOCAB - 3], ['tokenizer.ggml.eos_token_id', T.u32, VOCAB - (v.vocab === 'llama-bpe' ? 1 : 3)]);
  }

  // ---- tensor data ----
  const infos = [], chunks = [], W = new Map();
  let off = 0;
  for (const t of tensors) {
    const bytes = Buffer.from(encodeFromF32(t.dtype, t.values));
    const deq = decodeToF32(t.dtype, new Uint8Array(bytes), t.values.length);
    infos.push({ name: t.name, dims: t.dims, type: GGML_TYPE[t.dtype], offset: off });
    const padded = Math.ceil(bytes.length / 32) * 32;
    chunks.push(bytes, Buffer.alloc(padded - bytes.length));
    off += padded;
    const m = /^blk\.(\d+)\.ffn_up\.weight$/.exec(t.name);
    if (v.fused && m) {   // [gate; up] rows
      W.set(`blk.${m[1]}.ffn_gate.weight`, deq.slice(0, HIDDEN * D));
      W.set(t.name, deq.slice(HIDDEN * D));
    } else W.set(t.name, deq);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-gguf-'));
  const file = path.join(dir, `${name}-${dtype}.gguf`);
  fs.writeFileSync(file, buildGGUF({ kv, tensors: infos, data: Buffer.concat(chunks) }));

  // ---- the config the reference runs (and the converter must produce) ----
  const swa = v.window && v.window < nCtx
    ? Array.from({ length: L }, (_, il) => (v.gemma === 2 ? il % 2 < 1 : v.gemma === 3 ? il % 6 < 5 : true)) : undefined;
  const cfg = {
    arch, dim: D, n_layers: L, n_heads: NH, n_kv_heads: NKV, head_dim: hd, hidden_dim: HIDDEN, vocab_size: VOCAB, n_ctx: nCtx,
    norm_eps: v.gemma ? 1e-6 : 1e-5, rope_theta: v.noRopeBase ? 10000 : v.ropeBase, rope_dim: rd, rope_type: arch === 'llama' ? 'norm' : 'neox',
    ...(v.gemma ? { ffn_act: 'gelu_tanh', embd_scale: Math.fround(Math.sqrt(D)) } : {}),
    ...(v.gemma === 2 ? { attn_softcap: v.softcap[0], final_softcap: v.softcap[1] } : {}),
    ...(swa ? { sliding_window: v.window, swa_layers: swa } : {}),
    ...(v.swaBase ? { rope_theta_swa: v.swaBase } : {}),
    ...(v.linear ? { rope_scaling: { type: 'linear', factor: v.linear } } : {}),
    ...(v.llama3 ? { rope_scaling: { type: 'llama3' } } : {}),
    ...(v.longrope ? { rope_scaling: { type: 'longrope', original_context: v.longrope.orig, attn_factor: f32Shortest(Math.fround(attnFactor)) } } : {}),
  };
  return { file, cfg, W, variant: v };
}

// ---------------------------------------------------------------------------------------------
// Hugging Face folders of the same variants (config.json with the fields transformers reads, safetensors with HF tensor
// names, a byte-level BPE tokenizer.json). Gemma norms are stored as w (HF computes x * (1 + w)); the converter adds 1.

const HF_ARCH_NAMES = { llama: 'LlamaForCausalLM', qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM', phi3: 'Phi3ForCausalLM', gemma: 'GemmaForCausalLM', gemma2: 'Gemma2ForCausalLM', gemma3: 'Gemma3ForCausalLM' };

/**
 * HF folder of variant `name`. @returns {{ dir, cfg, W }}: cfg / W as generateGGUF's, for the HF layout (rope_type
 * 'neox' for every arch; W holds the values the converter must produce: Gemma norms fround(w + 1), llama3 factors from
 * the rope_scaling formula).
 */
/**
 * opts.ropeParameters: write newer transformers' `rope_parameters` instead of rope_theta / rope_scaling /
 * rope_local_base_freq; opts.multimodal (gemma3): the Gemma3ForConditionalGeneration layout (text_config,
 * language_model.model.* tensors, vision tensors the converter must skip).
 */
export function generateHF(name, seed = 1, opts = {}) {
  const g = generateGGUF(name, 'f32', seed);   // same random weights (GGUF convention)
  const v = g.variant, arch = v.arch, L = v.layers, hd = v.headDim;
  fs.rmSync(path.dirname(g.file), { recursive: true, force: true });
  const W = new Map();
  const st = [];
  const hfNorm = (x) => (v.gemma ? x.map((y) => Math.fround(y - 1)) : x);   // stored w; the model uses 1 + w
  const put = (hfName, shape, ggufName, norm = false) => {
    const x = g.W.get(ggufName);
    if (!x) throw new Error(`generateHF: no tensor ${ggufName} for ${hfName}`);
    const stored = norm ? hfNorm(x) : x;
    st.push([hfName, shape, stored]);
    W.set(ggufName, norm && v.gemma ? stored.map((y) => Math.fround(y + 1)) : stored);
  };
  put('model.embed_tokens.weight', [VOCAB, D], 'token_embd.weight');
  for (let l = 0; l < L; l++) {
    const p = `blk.${l}.`, h = `model.layers.${l}.`;
    put(h + 'input_layernorm.weight', [D], p + 'attn_norm.weight', true);
    if (v.fused) put(h + 'self_attn.qkv_proj.weight', [(NH + 2 * NKV) * hd, D], p + 'attn_qkv.weight');
    else {
      put(h + 'self_attn.q_proj.weight', [NH * hd, D], p + 'attn_q.weight');
      put(h + 'self_attn.k_proj.weight', [NKV * hd, D], p + 'attn_k.weight');
      put(h + 'self_attn.v_proj.weight', [NKV * hd, D], p + 'attn_v.weight');
    }
    if (v.bias) for (const [x, n] of [['q', NH], ['k', NKV], ['v', NKV]]) put(h + `self_attn.${x}_proj.bias`, [n * hd], p + `attn_${x}.bias`);
    if (g.W.has(p + 'attn_q_norm.weight')) {
      put(h + 'self_attn.q_norm.weight', [hd], p + 'attn_q_norm.weight', true);
      put(h + 'self_attn.k_norm.weight', [hd], p + 'attn_k_norm.weight', true);
    }
    put(h + 'self_attn.o_proj.weight', [D, NH * hd], p + 'attn_output.weight');
    if (v.gemma >= 2) {
      put(h + 'post_attention_layernorm.weight', [D], p + 'post_attention_norm.weight', true);
      put(h + 'pre_feedforward_layernorm.weight', [D], p + 'ffn_norm.weight', true);
      put(h + 'post_feedforward_layernorm.weight', [D], p + 'post_ffw_norm.weight', true);
    } else put(h + 'post_attention_layernorm.weight', [D], p + 'ffn_norm.weight', true);
    if (v.fused) {
      const gate = g.W.get(p + 'ffn_gate.weight'), up = g.W.get(p + 'ffn_up.weight');
      const gu = new Float32Array(gate.length + up.length); gu.set(gate); gu.set(up, gate.length);
      st.push([h + 'mlp.gate_up_proj.weight', [2 * HIDDEN, D], gu]);
      W.set(p + 'ffn_gate.weight', gate); W.set(p + 'ffn_up.weight', up);
    } else {
      put(h + 'mlp.gate_proj.weight', [HIDDEN, D], p + 'ffn_gate.weight');
      put(h + 'mlp.up_proj.weight', [HIDDEN, D], p + 'ffn_up.weight');
    }
    put(h + 'mlp.down_proj.weight', [D, HIDDEN], p + 'ffn_down.weight');
  }
  put('model.norm.weight', [D], 'output_norm.weight', true);
  if (!v.tied) put('lm_head.weight', [VOCAB, D], 'output.weight');

  const nCtx = g.cfg.n_ctx;
  const hf = {
    architectures: [HF_ARCH_NAMES[arch]], model_type: arch, hidden_size: D, intermediate_size: HIDDEN, num_attention_heads: NH,
    num_key_value_heads: NKV, num_hidden_layers: L, max_position_embeddings: nCtx, rms_norm_eps: g.cfg.norm_eps,
    rope_theta: g.cfg.rope_theta, vocab_size: VOCAB, tie_word_embeddings: !!v.tied, bos_token_id: VOCAB - 3, eos_token_id: VOCAB - 1,
    ...(v.keyLength || hd !== D / NH ? { head_dim: hd } : {}),
  };
  if (v.llama3) {
    hf.rope_scaling = { rope_type: 'llama3', factor: v.llama3.factor, low_freq_factor: v.llama3.low, high_freq_factor: v.llama3.high, original_max_position_embeddings: v.llama3.orig };
  }
  if (arch === 'phi3') {
    hf.sliding_window = v.window;
    hf.original_max_position_embeddings = v.longrope?.orig ?? nCtx;
    if (v.longrope) {
      hf.rope_scaling = { type: 'longrope', long_factor: [...g.W.get('rope_factors_long.weight')], short_factor: [...g.W.get('rope_factors_short.weight')] };
      W.set('rope_factors_long.weight', g.W.get('rope_factors_long.weight'));
      W.set('rope_factors_short.weight', g.W.get('rope_factors_short.weight'));
    }
  }
  if (v.llama3) W.set('rope_freqs.weight', g.W.get('rope_freqs.weight'));
  if (v.gemma) hf.hidden_activation = 'gelu_pytorch_tanh';
  if (v.gemma >= 2) { hf.query_pre_attn_scalar = hd; hf.sliding_window = v.window; }
  if (v.gemma === 2) { hf.attn_logit_softcapping = v.softcap[0]; hf.final_logit_softcapping = v.softcap[1]; }
  if (v.gemma === 3) {
    hf.sliding_window_pattern = 6; hf.rope_local_base_freq = v.swaBase; hf.rope_scaling = { rope_type: 'linear', factor: v.linear };
    hf.final_logit_softcapping = null; hf.attn_logit_softcapping = null;
  }

  let config = hf;
  if (opts.ropeParameters) {
    const base = { rope_type: 'default', rope_theta: hf.rope_theta };
    const full = hf.rope_scaling ? { ...base, ...hf.rope_scaling, rope_type: hf.rope_scaling.rope_type ?? hf.rope_scaling.type } : base;
    config = { ...hf, rope_parameters: hf.rope_local_base_freq ? { full_attention: full, sliding_attention: { rope_type: 'default', rope_theta: hf.rope_local_base_freq } } : full };
    delete config.rope_theta; delete config.rope_scaling; delete config.rope_local_base_freq;
  }
  if (opts.multimodal) {
    const { architectures, ...text } = config;
    config = { architectures: ['Gemma3ForConditionalGeneration'], model_type: 'gemma3', text_config: { ...text, model_type: 'gemma3_text' }, vision_config: { hidden_size: 16 } };
    for (const t of st) t[0] = t[0].replace(/^model\./, 'language_model.model.');
    st.push(['vision_tower.vision_model.embeddings.patch_embedding.weight', [16, 4], new Float32Array(64)]);
    st.push(['multi_modal_projector.mm_input_projection_weight', [16, D], new Float32Array(16 * D)]);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-hf-'));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 1));
  writeSafetensors(path.join(dir, 'model.safetensors'), st.map(([name, shape, x]) => [name, 'F32', shape, x]));
  const specials = ['<|begin|>', '<|endoftext|>', '<|end|>'];
  const tk = tinyBpeTokenizer(VOCAB, 'gpt2', specials);
  const vocab = {};
  tk.tokens.forEach((t, i) => { if (i < VOCAB - specials.length) vocab[t] = i; });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify({
    version: '1.0', added_tokens: specials.map((c, i) => ({ id: VOCAB - specials.length + i, content: c, special: true })),
    normalizer: null, pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null, decoder: { type: 'ByteLevel' }, model: { type: 'BPE', vocab, merges: tk.merges },
  }));
  const cfg = { ...g.cfg, rope_type: 'neox' };
  if (v.llama3) cfg.rope_scaling = { type: 'llama3' };
  if (v.gemma >= 2) cfg.attn_scale = Math.fround(1 / Math.sqrt(hd));
  return { dir, cfg, W, variant: v, hf };
}
