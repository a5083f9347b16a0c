// Generated tiny models of each architecture (random weights, seeded), written as .rknot, with the
// dequantised f32 weights the scalar reference forward uses.
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { writeRknot } from '../../dist/src/formats/rknot.js';
import { encodeFromF32, decodeToF32 } from '../../dist/src/formats/quantize.js';

export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
}

/** A small SentencePiece-style vocabulary: specials, 256 byte pieces, then some words. */
export function tinyTokenizer(vocab) {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`); types.push(6); }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (let i = 0; tokens.length < vocab; i++) {
    tokens.push(i < 26 ? '▁' + letters[i] : letters[i % 26] + letters[Math.floor(i / 26) % 26]);
    types.push(1);
  }
  return { model: 'llama', tokens, scores: tokens.map((_, i) => -i), token_type: types, bos_token_id: 1, eos_token_id: 2, unknown_token_id: 0, add_bos_token: true };
}

/** A 2-D tensor's role: its name without the block prefix and the `.weight` suffix (blk.3.ffn_down.weight -> ffn_down). */
export const tensorRole = (name) => name.replace(/^blk\.\d+\./, '').replace(/\.weight$/, '');
/** A shape for k-quant models: rows of 256 and 1024, and a hidden size of 544 = 17 x 32, whose ffn_down rows cannot be
 *  k-quants (llama.cpp's Q4_K_M falls back to q5_0 there). */
export const K_SHAPE = { dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 544, vocab_size: 320 };
/** llama.cpp's Q4_K_M by role (attn_v and the output q6_K; ffn_down: the q5_0 fallback of K_SHAPE's rows of 544). */
export const Q4_K_M = { token_embd: 'q4_K', attn_q: 'q4_K', attn_k: 'q4_K', attn_v: 'q6_K', attn_qkv: 'q4_K', attn_output: 'q4_K',
  ffn_gate: 'q4_K', ffn_up: 'q4_K', ffn_down: 'q5_0', output: 'q6_K' };

export const ARCHS = {
  llama: { arch: 'llama', rope_type: 'norm', rope_dim: 16, qkv_bias: false, fused_qkv: false, tie_embeddings: false },
  qwen2: { arch: 'qwen2', rope_type: 'neox', rope_dim: 16, qkv_bias: true, fused_qkv: false, tie_embeddings: true },
  phi3: { arch: 'phi3', rope_type: 'neox', rope_dim: 8, qkv_bias: false, fused_qkv: true, tie_embeddings: false },
};

/**
 * Write a model of `arch` with 2-D weights in `dtype` into a temp .rknot.
 * opts.shape overrides dims (dim, n_heads, n_kv_heads, head_dim, hidden_dim, vocab_size); opts.dtypeOf(name)
 * gives a 2-D tensor's dtype (default `dtype`); opts.values(name, shape) may return a tensor's values (Float32Array,
 * row-major: row r of a [ne0, ne1] matrix at r * ne0) instead of random ones.
 * @returns {{ file, cfg, W: Map<string, Float32Array>, bytes: Map<string, Uint8Array>, dtypes: Map<string, string> }}
 *   W holds the dequantised weights, bytes the encoded ones.
 */
export async function generateModel(arch, dtype = 'f32', seed = 1, opts = {}) {
  const a = ARCHS[arch];
  const cfg = {
    arch, dim: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, head_dim: 16, hidden_dim: 160, vocab_size: 320, n_ctx: 64,
    norm_eps: 1e-5, rope_theta: 10000, rope_dim: a.rope_dim, rope_type: a.rope_type, tie_embeddings: a.tie_embeddings,
    qkv_bias: a.qkv_bias, fused_qkv: a.fused_qkv, bos_token_id: 1, eos_token_id: 2, ...(opts.shape ?? {}),
  };
  const r = rng(seed * 7919 + arch.length);
  const D = cfg.dim, H = cfg.hidden_dim, qd = cfg.n_heads * cfg.head_dim, kvd = cfg.n_kv_heads * cfg.head_dim;
  const specs = [];
  const add = (name, shape, scale, isMatrix, offset = 0) => {
    const n = shape.reduce((x, y) => x * y, 1);
    let v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = offset + (r() * 2 - 1) * scale;
    const fixed = opts.values?.(name, shape);   // hand-set weights (tests/helpers/retrieval-model.mjs)
    if (fixed) { if (fixed.length !== n) throw new Error(`${name}: ${fixed.length} values, expected ${n}`); v = fixed; }
    specs.push({ name, shape, values: v, dtype: isMatrix ? (opts.dtypeOf?.(name) ?? dtype) : 'f32' });
  };
  add('token_embd.weight', [D, cfg.vocab_size], 0.5, true);
  for (let l = 0; l < cfg.n_layers; l++) {
    const p = `blk.${l}.`;
    add(p + 'attn_norm.weight', [D], 0.2, false, 1);
    if (cfg.fused_qkv) add(p + 'attn_qkv.weight', [D, qd + 2 * kvd], 0.25, true);
    else { add(p + 'attn_q.weight', [D, qd], 0.25, true); add(p + 'attn_k.weight', [D, kvd], 0.25, true); add(p + 'attn_v.weight', [D, kvd], 0.25, true); }
    if (cfg.qkv_bias) { add(p + 'attn_q.bias', [qd], 0.1, false); add(p + 'attn_k.bias', [kvd], 0.1, false); add(p + 'attn_v.bias', [kvd], 0.1, false); }
    add(p + 'attn_output.weight', [qd, D], 0.15, true);
    add(p + 'ffn_norm.weight', [D], 0.2, false, 1);
    add(p + 'ffn_gate.weight', [D, H], 0.2, true);
    add(p + 'ffn_up.weight', [D, H], 0.2, true);
    add(p + 'ffn_down.weight', [H, D], 0.1, true);
  }
  add('output_norm.weight', [D], 0.2, false, 1);
  if (!cfg.tie_embeddings) add('output.weight', [D, cfg.vocab_size], 0.3, true);

  const W = new Map();
  const bytes = new Map();
  for (const s of specs) {
    // opts.encode(dtype, values): bytes for dtypes the JS converter cannot produce (q4_K / q6_K), or undefined
    const enc = opts.encode?.(s.dtype, s.values) ?? encodeFromF32(s.dtype, s.values);
    bytes.set(s.name, enc);
    W.set(s.name, decodeToF32(s.dtype, enc, s.values.length));
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-gen-'));
  const file = path.join(dir, `${arch}-${dtype}.rknot`);
  await writeRknot(file, {
    config: cfg, tokenizer: tinyTokenizer(cfg.vocab_size),
    tensors: specs.map((s) => ({ name: s.name, dtype: s.dtype, shape: s.shape })),
  }, (spec) => bytes.get(spec.name));
  return { file, cfg, W, bytes, dtypes: new Map(specs.map((s) => [s.name, s.dtype])) };
}
