#!/usr/bin/env node
// Synthetic GGUF files at the exact shapes of the checkpoints people run, for the real-shape benchmarks
// (bench/real-shapes.mjs). Random weights (random quant bytes with fixed block scales chosen so weights have
// a standard deviation of ~0.02), the metadata keys llama.cpp's converter writes for each architecture, and a
// tokenizer vocabulary of the model's real size (SentencePiece-style for Phi-3 / Gemma 2, byte-level BPE with
// a merge hierarchy for Llama 3 / Qwen2 / SmolLM2, the real special tokens at their real ids).
//
//   node bench/gen-gguf.mjs [--model NAME[,NAME]|all] [--quant q4_0,q2_K,q3_K_M,q4_K_M,q5_K_M,q8_0,iq4_xs|all] [--layers N] [--out /work/gen/real-shapes] [--force]
//
// Files: OUT/<model>-<quant>.gguf (never committed; /work/gen is shared scratch); with --layers N (fewer layers,
// every other shape the model's: e.g. the 2-layer Phi-3 of bench/peers.mjs) OUT/<model>-L<N>-<quant>.gguf.
// llama.cpp (node-llama-cpp 3.21.1) loads and runs every file: checked by bench/peers.mjs (llama-native). Generation streams: one
// 4 MiB chunk of one tensor in memory at a time.
//
// Shapes: the Hugging Face config.json values of each checkpoint (MODELS below). Per-tensor types: llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp) for the three file types, see tensorType().
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { args, repoRoot } from './lib/common.mjs';
import { writeGGUF, GGUF_T as T } from './lib/gguf-writer.mjs';

const { BYTE_TO_UNICODE } = await import(path.join(repoRoot, 'dist/src/tokenizer/bpe.js'));

// ---- the checkpoints (config.json of the Hugging Face repositories) ----
export const MODELS = {
  // microsoft/Phi-3-mini-4k-instruct: Phi3ForCausalLM, fused qkv / gate_up, sliding_window 2047
  'phi3-mini-4k': { arch: 'phi3', dim: 3072, layers: 32, heads: 32, kvHeads: 32, headDim: 96, ffn: 8192, vocab: 32064, ctx: 4096,
    ropeBase: 10000, eps: 1e-5, window: 2047, tied: false, tok: 'spm-phi3' },
  // meta-llama/Llama-3.2-1B: rope_scaling llama3 (factor 32, low 1, high 4, original 8192), tied
  'llama-3.2-1b': { arch: 'llama', dim: 2048, layers: 16, heads: 32, kvHeads: 8, headDim: 64, ffn: 8192, vocab: 128256, ctx: 131072,
    ropeBase: 500000, eps: 1e-5, tied: true, llama3: { factor: 32, low: 1, high: 4, orig: 8192 }, tok: 'llama-bpe' },
  // Qwen/Qwen2.5-0.5B: q/k/v biases, tied
  'qwen2.5-0.5b': { arch: 'qwen2', dim: 896, layers: 24, heads: 14, kvHeads: 2, headDim: 64, ffn: 4864, vocab: 151936, ctx: 32768,
    ropeBase: 1000000, eps: 1e-6, tied: true, bias: true, tok: 'qwen2' },
  // google/gemma-2-2b: head_dim 256, GeGLU, soft-caps 50 / 30, sliding_window 4096 on even layers, tied
  'gemma-2-2b': { arch: 'gemma2', dim: 2304, layers: 26, heads: 8, kvHeads: 4, headDim: 256, ffn: 9216, vocab: 256000, ctx: 8192,
    eps: 1e-6, window: 4096, softcap: [50, 30], tied: true, tok: 'spm-gemma' },
  // HuggingFaceTB/SmolLM2-135M / -360M: llama, tied, rope_theta 100000
  'smollm2-135m': { arch: 'llama', dim: 576, layers: 30, heads: 9, kvHeads: 3, headDim: 64, ffn: 1536, vocab: 49152, ctx: 8192,
    ropeBase: 100000, eps: 1e-5, tied: true, tok: 'smollm' },
  'smollm2-360m': { arch: 'llama', dim: 960, layers: 32, heads: 15, kvHeads: 5, headDim: 64, ffn: 2560, vocab: 49152, ctx: 8192,
    ropeBase: 100000, eps: 1e-5, tied: true, tok: 'smollm' },
};
export const QUANTS = ['q4_0', 'q2_K', 'q3_K_M', 'q4_K_M', 'q5_K_M', 'q8_0', 'iq4_xs'];
const FILE_TYPE = { q4_0: 2, q8_0: 7, q2_K: 10, q3_K_M: 12, q4_K_M: 15, q5_K_M: 17, iq4_xs: 30 };   // llama_ftype
const GGML = { f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, iq4_nl: 20, iq4_xs: 23, q2_K: 10, q3_K: 11, q4_K: 12, q5_K: 13, q6_K: 14 };
const BLOCK = { f32: [1, 4], f16: [1, 2], q4_0: [32, 18], q4_1: [32, 20], q5_0: [32, 22], q5_1: [32, 24], q8_0: [32, 34],
  iq4_nl: [32, 18], iq4_xs: [256, 136], q2_K: [256, 84], q3_K: [256, 110], q4_K: [256, 144], q5_K: [256, 176], q6_K: [256, 210] };

/** The tensors of a model in llama.cpp's GGUF naming and order: [name, ne (ggml order)]. */
export function tensorList(m) {
  const qd = m.heads * m.headDim, kvd = m.kvHeads * m.headDim, out = [];
  out.push(['token_embd.weight', [m.dim, m.vocab]]);
  if (m.llama3) out.push(['rope_freqs.weight', [m.headDim / 2]]);
  for (let l = 0; l < m.layers; l++) {
    const p = `blk.${l}.`;
    out.push([p + 'attn_norm.weight', [m.dim]]);
    if (m.arch === 'phi3') out.push([p + 'attn_qkv.weight', [m.dim, qd + 2 * kvd]]);
    else {
      out.push([p + 'attn_q.weight', [m.dim, qd]], [p + 'attn_k.weight', [m.dim, kvd]], [p + 'attn_v.weight', [m.dim, kvd]]);
      if (m.bias) out.push([p + 'attn_q.bias', [qd]], [p + 'attn_k.bias', [kvd]], [p + 'attn_v.bias', [kvd]]);
    }
    out.push([p + 'attn_output.weight', [qd, m.dim]]);
    if (m.arch === 'gemma2') out.push([p + 'post_attention_norm.weight', [m.dim]]);
    out.push([p + 'ffn_norm.weight', [m.dim]]);
    if (m.arch === 'phi3') out.push([p + 'ffn_up.weight', [m.dim, 2 * m.ffn]]);
    else out.push([p + 'ffn_gate.weight', [m.dim, m.ffn]], [p + 'ffn_up.weight', [m.dim, m.ffn]]);
    out.push([p + 'ffn_down.weight', [m.ffn, m.dim]]);
    if (m.arch === 'gemma2') out.push([p + 'post_ffw_norm.weight', [m.dim]]);
  }
  out.push(['output_norm.weight', [m.dim]]);
  if (!m.tied) out.push(['output.weight', [m.dim, m.vocab]]);
  return out;
}

// llama.cpp's use_more_bits (integer division as in C)
const moreBits = (i, n) => i < Math.trunc(n / 8) || i >= Math.trunc(7 * n / 8) || (i - Math.trunc(n / 8)) % 3 === 2;

/**
 * The ggml type llama-quantize gives each tensor for file type `quant` (llama_tensor_get_type, no imatrix):
 *  - 1-D tensors and rope_freqs stay f32;
 *  - the output matrix (output.weight, or token_embd.weight when the embeddings are tied) -> q6_K (q8_0 for
 *    Q8_0 files, and when its row length is not a multiple of 256);
 *  - Q4_K_M: attn_v and ffn_down -> q6_K on the layers use_more_bits picks (the first and last eighth and every
 *    third in between), attn_qkv (Phi-3) -> q5_K, everything else q4_K; token_embd of an untied model q4_K;
 *  - Q5_K_M: the same with q5_K for q4_K and q6_K for Phi-3's attn_qkv;
 *  - Q3_K_M: q3_K, with attn_v q5_K on layers 0-1 and q4_K after, ffn_down q5_K on the first sixteenth of the layers
 *    and q4_K after, attn_output and attn_qkv q4_K;
 *  - Q2_K: q2_K, with attn_v q4_K when n_head / n_head_kv >= 4 (else q3_K), ffn_down and attn_output q3_K;
 *  - IQ4_XS: iq4_xs, with attn_v q5_K when n_head / n_head_kv >= 4 and ffn_down q5_K on the first eighth of the
 *    layers (no imatrix); token_embd of an untied model iq4_xs;
 *  - a K-quant whose row length is not a multiple of 256 falls back: q2_K, q3_K, iq4_xs -> iq4_nl, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0
 *    (and to f16 if not a multiple of 32).
 * Approximation: llama.cpp counts attn_v / ffn_down tensors in file order; here the layer index is used (the same
 * for these dense models).
 */
export function tensorType(m, name, ne, quant) {
  if (ne.length === 1) return 'f32';
  const base = quant === 'q4_K_M' ? 'q4_K' : quant === 'q5_K_M' ? 'q5_K' : quant === 'q3_K_M' ? 'q3_K' : quant;
  const isOutput = name === 'output.weight' || (m.tied && name === 'token_embd.weight');
  let t = base;
  const layer = /^blk\.(\d+)\./.exec(name);
  const il = layer ? Number(layer[1]) : -1;
  if (isOutput) t = quant === 'q8_0' || ne[0] % 256 !== 0 ? 'q8_0' : 'q6_K';
  else if (quant === 'q3_K_M') {
    // attn_v q5_K on the first two layers, then q4_K; ffn_down q5_K on the first sixteenth, then q4_K (not Falcon);
    // attn_output and Phi-3's attn_qkv q4_K
    if (name.endsWith('attn_v.weight')) t = il < 2 ? 'q5_K' : 'q4_K';
    else if (name.endsWith('ffn_down.weight')) t = il < Math.trunc(m.layers / 16) ? 'q5_K' : 'q4_K';
    else if (name.endsWith('attn_output.weight') || name.endsWith('attn_qkv.weight')) t = 'q4_K';
  } else if (quant === 'q2_K') {
    if (name.endsWith('attn_v.weight')) t = m.heads / m.kvHeads >= 4 ? 'q4_K' : 'q3_K';
    else if (name.endsWith('ffn_down.weight') || name.endsWith('attn_output.weight')) t = 'q3_K';
  } else if (quant === 'iq4_xs') {
    if (name.endsWith('attn_v.weight') && m.heads / m.kvHeads >= 4) t = 'q5_K';
    else if (name.endsWith('ffn_down.weight') && il < Math.trunc(m.layers / 8)) t = 'q5_K';
  } else if (quant === 'q4_K_M' || quant === 'q5_K_M') {
    if (name.endsWith('attn_v.weight') && moreBits(il, m.layers)) t = 'q6_K';
    else if (name.endsWith('ffn_down.weight') && moreBits(il, m.layers)) t = 'q6_K';
    else if (name.endsWith('attn_qkv.weight')) t = quant === 'q4_K_M' ? 'q5_K' : 'q6_K';
  }
  if (BLOCK[t][0] === 256 && ne[0] % 256 !== 0) t = { q2_K: 'iq4_nl', q3_K: 'iq4_nl', iq4_xs: 'iq4_nl', q4_K: 'q5_0', q5_K: 'q5_1', q6_K: 'q8_0' }[t];
  if (ne[0] % BLOCK[t][0] !== 0) t = 'f16';
  return t;
}

// ---- tokenizer vocabularies of the real size ----
function letters(i) { let s = ''; i++; while (i > 0) { i--; s = String.fromCharCode(97 + (i % 26)) + s; i = Math.floor(i / 26); } return s; }

function spmVocab(m) {
  const tokens = [], types = [], scores = [];
  const add = (t, ty, sc = 0) => { tokens.push(t); types.push(ty); scores.push(sc); };
  let bos, eos;
  if (m.tok === 'spm-gemma') {
    // gemma: 0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>, then control / turn tokens, byte pieces, words
    add('<pad>', 3); add('<eos>', 3); add('<bos>', 3); add('<unk>', 2); add('<mask>', 4);
    add('<start_of_turn>', 4); add('<end_of_turn>', 4);
    bos = 2; eos = 1;
  } else {
    add('<unk>', 2); add('<s>', 3); add('</s>', 3);
    bos = 1; eos = 32000;   // phi-3: <|endoftext|> (id 32000) ends a generation
  }
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 6);
  const phiSpecials = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>', '<|placeholder4|>',
    '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];
  const nWords = m.vocab - tokens.length - (m.tok === 'spm-phi3' ? 64 : 0);
  for (let i = 0; i < nWords; i++) add((i % 3 === 2 ? '' : '▁') + letters(i), 1, -i - 1);
  if (m.tok === 'spm-phi3') {   // ids 32000..32063: added tokens (llama.cpp's converter pads to vocab_size)
    for (let i = 0; i < 64; i++) add(phiSpecials[i] ?? `<|placeholder${i + 1}|>`, i < phiSpecials.length ? 3 : 5);
  }
  return { model: 'llama', pre: 'default', tokens, types, scores, bos, eos };
}

function bpeVocab(m) {
  const nSpecial = m.tok === 'llama-bpe' ? 256 : m.tok === 'qwen2' ? m.vocab - 151643 : 17;
  const base = m.vocab - nSpecial;
  const tokens = [...BYTE_TO_UNICODE], merges = [], seen = new Set(tokens);
  const atoms = ['Ġ', ...'abcdefghijklmnopqrstuvwxyz'.split('')];
  // merge hierarchy, breadth first: each new token = an earlier token + a letter, so every token is reachable by
  // merges and lengths stay short (2 characters, then 3, ...: 4 at most for these sizes)
  const pool = [...atoms];
  for (let p = 0; tokens.length < base; p++) {
    for (const b of atoms.slice(1)) {
      if (tokens.length >= base) break;
      const a = pool[p], t = a + b;
      if (seen.has(t)) continue;
      seen.add(t); tokens.push(t); merges.push(`${a} ${b}`); pool.push(t);
    }
  }
  const types = tokens.map(() => 1);
  let bos, eos;
  if (m.tok === 'llama-bpe') {
    for (let i = 0; i < 256; i++) {
      const named = { 0: '<|begin_of_text|>', 1: '<|end_of_text|>', 6: '<|start_header_id|>', 7: '<|end_header_id|>', 9: '<|eot_id|>' }[i];
      tokens.push(named ?? `<|reserved_special_token_${i}|>`); types.push(3);
    }
    bos = 128000; eos = 128001;
  } else if (m.tok === 'qwen2') {
    const sp = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>', '<|box_end|>',
      '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>',
      '<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>'];
    for (let i = 0; i < nSpecial; i++) {   // 151643..151664 specials, then the converter's [PAD] entries up to vocab_size
      if (i < sp.length) { tokens.push(sp[i]); types.push(i < 14 ? 3 : 4); } else { tokens.push(`[PAD${151643 + i}]`); types.push(4); }
    }
    bos = 151643; eos = 151645;
  } else {   // smollm: its 17 specials are the first ids in the real vocabulary; here they sit at the end
    for (let i = 0; i < nSpecial; i++) { tokens.push(['<|endoftext|>', '<|im_start|>', '<|im_end|>'][i] ?? `<|special_${i}|>`); types.push(3); }
    bos = base + 1; eos = base + 2;
  }
  return { model: 'gpt2', pre: m.tok, tokens, types, merges, bos, eos };
}

function llama3Factors(rd, base, { factor, low, high, orig }) {
  const out = [];
  const lowWave = orig / low, highWave = orig / high;
  for (let i = 0; i < rd / 2; i++) {
    const wave = 2 * Math.PI * Math.pow(base, (2 * i) / rd);
    if (wave < highWave) out.push(1);
    else if (wave > lowWave) out.push(factor);
    else { const s = (orig / wave - low) / (high - low); out.push(1 / ((1 - s) / factor + s)); }
  }
  return out;
}

/** GGUF metadata of a model (general, architecture keys, tokenizer) as llama.cpp's converter writes them. */
export function metadata(name, m, quant) {
  const kv = [['general.architecture', T.string, m.arch], ['general.type', T.string, 'model'], ['general.name', T.string, `${name} (synthetic)`],
    ['general.alignment', T.u32, 32]];
  const a = (k, t, v) => kv.push([`${m.arch}.${k}`, t, v]);
  if (m.arch === 'phi3') {
    a('context_length', T.u32, m.ctx); a('rope.scaling.original_context_length', T.u32, m.ctx);
    a('embedding_length', T.u32, m.dim); a('feed_forward_length', T.u32, m.ffn); a('block_count', T.u32, m.layers);
    a('attention.head_count', T.u32, m.heads); a('attention.head_count_kv', T.u32, m.kvHeads);
    a('attention.layer_norm_rms_epsilon', T.f32, m.eps); a('rope.dimension_count', T.u32, m.headDim);
    a('rope.freq_base', T.f32, m.ropeBase); kv.push(['general.file_type', T.u32, FILE_TYPE[quant]]);
    a('attention.sliding_window', T.u32, m.window);
  } else {
    a('block_count', T.u32, m.layers); a('context_length', T.u32, m.ctx); a('embedding_length', T.u32, m.dim);
    a('feed_forward_length', T.u32, m.ffn); a('attention.head_count', T.u32, m.heads); a('attention.head_count_kv', T.u32, m.kvHeads);
    if (m.ropeBase) a('rope.freq_base', T.f32, m.ropeBase);
    a('attention.layer_norm_rms_epsilon', T.f32, m.eps);
    if (m.arch === 'gemma2') { a('attention.key_length', T.u32, m.headDim); a('attention.value_length', T.u32, m.headDim); }
    kv.push(['general.file_type', T.u32, FILE_TYPE[quant]]);
    if (m.arch === 'llama') { a('vocab_size', T.u32, m.vocab); a('rope.dimension_count', T.u32, m.headDim); }
    if (m.arch === 'gemma2') {
      a('attn_logit_softcapping', T.f32, m.softcap[0]); a('final_logit_softcapping', T.f32, m.softcap[1]);
      a('attention.sliding_window', T.u32, m.window);
    }
  }
  kv.push(['general.quantization_version', T.u32, 2]);
  const tk = m.tok.startsWith('spm') ? spmVocab(m) : bpeVocab(m);
  if (tk.tokens.length !== m.vocab) throw new Error(`${name}: vocabulary of ${tk.tokens.length}, expected ${m.vocab}`);
  kv.push(['tokenizer.ggml.model', T.string, tk.model], ['tokenizer.ggml.pre', T.string, tk.pre],
    ['tokenizer.ggml.tokens', T.array, [T.string, tk.tokens]]);
  if (tk.scores) kv.push(['tokenizer.ggml.scores', T.array, [T.f32, tk.scores]]);
  kv.push(['tokenizer.ggml.token_type', T.array, [T.i32, tk.types]]);
  if (tk.merges) kv.push(['tokenizer.ggml.merges', T.array, [T.string, tk.merges]]);
  kv.push(['tokenizer.ggml.bos_token_id', T.u32, tk.bos], ['tokenizer.ggml.eos_token_id', T.u32, tk.eos]);
  if (tk.model === 'llama') kv.push(['tokenizer.ggml.unknown_token_id', T.u32, m.tok === 'spm-gemma' ? 3 : 0]);
  if (m.tok === 'spm-gemma') kv.push(['tokenizer.ggml.add_space_prefix', T.bool, false]);
  kv.push(['tokenizer.ggml.add_bos_token', T.bool, m.tok !== 'qwen2']);
  return kv;
}

// ---- tensor data: random quant bytes, fixed block scales ----
function f32ToF16Bits(x) {
  const f = new Float32Array([x]), u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000, e = ((u >>> 23) & 255) - 127 + 15, mant = u & 0x7fffff;
  if (e <= 0) return sign | Math.round(Math.abs(x) * 2 ** 24);   // subnormal half (the q6_K and q5_K scales are: < 2^-14)
  let h = (e << 10) | (mant >>> 13);
  if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) === 0x1000 && (h & 1))) h++;
  return sign | h;
}
// f16 fields per block [byte offset, value]: weights ~ N(0, ~0.02) (see the header)
const SCALES = {
  q4_0: [[0, 0.0043]], q8_0: [[0, 2.7e-4]], q5_0: [[0, 0.0022]], q4_1: [[0, 0.0043], [2, -0.032]], q5_1: [[0, 0.0022], [2, -0.034]],
  iq4_nl: [[0, 3.5e-4]], iq4_xs: [[0, 2e-5]], q2_K: [[80, 8e-4], [82, 1.5e-3]], q3_K: [[108, 6e-4]], q4_K: [[0, 1.06e-4], [2, 8e-4]], q5_K: [[0, 5.3e-5], [2, 8.2e-4]], q6_K: [[208, 1.46e-5]],
};
const CHUNK = 4 << 20;

function smallF32(name, ne, m) {
  const n = ne.reduce((x, y) => x * y, 1), v = new Float32Array(n);
  if (name === 'rope_freqs.weight') v.set(llama3Factors(m.headDim, m.ropeBase, m.llama3));
  else if (name.endsWith('.bias')) for (let i = 0; i < n; i++) v[i] = (Math.random() - 0.5) * 0.02;
  else for (let i = 0; i < n; i++) v[i] = 1 + (Math.random() - 0.5) * 0.1;   // norms (Gemma's stored 1 + w too)
  return Buffer.from(v.buffer);
}

function fillQuant(type, bytes, write) {
  const [, ts] = BLOCK[type];
  const fields = SCALES[type].map(([o, v]) => [o, f32ToF16Bits(v)]);
  const per = Math.max(1, Math.floor(CHUNK / ts)) * ts;
  const buf = Buffer.alloc(Math.min(per, bytes));
  for (let done = 0; done < bytes; done += buf.length) {
    const b = done + buf.length <= bytes ? buf : buf.subarray(0, bytes - done);
    crypto.randomFillSync(b);
    for (let o = 0; o < b.length; o += ts) for (const [so, h] of fields) { b[o + so] = h & 255; b[o + so + 1] = h >> 8; }
    write(b);
  }
}
function fillF16(n, write) {
  const h = f32ToF16Bits(0.02);
  for (let done = 0; done < n; done += CHUNK / 2) {
    const k = Math.min(CHUNK / 2, n - done), b = Buffer.alloc(2 * k);
    for (let i = 0; i < k; i++) b.writeUInt16LE(h ^ ((Math.random() * 0x200) | 0) ^ (Math.random() < 0.5 ? 0x8000 : 0), 2 * i);
    write(b);
  }
}

/** Write OUT/<name>-<quant>.gguf (layers: OUT/<name>-L<layers>-<quant>.gguf); returns { file, bytes, types: { dtype: count } }. */
export async function generate(name, quant, outDir, { force = false, log = () => {}, layers } = {}) {
  let m = MODELS[name];
  if (!m) throw new Error(`unknown model ${name} (one of ${Object.keys(MODELS).join(', ')})`);
  if (!QUANTS.includes(quant)) throw new Error(`unknown quant ${quant} (one of ${QUANTS.join(', ')})`);
  if (layers !== undefined) {
    if (!Number.isInteger(layers) || layers < 1) throw new Error(`layers ${layers}: expected an integer >= 1`);
    m = { ...m, layers };
  }
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `${name}${layers !== undefined ? `-L${layers}` : ''}-${quant}.gguf`);
  const tensors = tensorList(m).map(([tn, ne]) => {
    const type = tensorType(m, tn, ne, quant), [bs, ts] = BLOCK[type];
    return { name: tn, dims: ne, dtype: type, type: GGML[type], bytes: (ne.reduce((x, y) => x * y, 1) / bs) * ts };
  });
  const types = {};
  for (const t of tensors) types[t.dtype] = (types[t.dtype] ?? 0) + t.bytes;
  if (!force && fs.existsSync(file)) return { file, bytes: fs.statSync(file).size, types, cached: true };
  const t0 = Date.now();
  const r = await writeGGUF(file, metadata(name, m, quant), tensors, (t, write) => {
    if (t.dtype === 'f32') write(smallF32(t.name, t.dims, m));
    else if (t.dtype === 'f16') fillF16(t.bytes / 2, write);
    else fillQuant(t.dtype, t.bytes, write);
  });
  log(`${path.basename(file)}: ${(r.fileBytes / 2 ** 20).toFixed(1)} MiB in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return { file, bytes: r.fileBytes, types };
}

// ---- command line ----
if (import.meta.url === `file://${process.argv[1]}`) {
  const a = args();
  const models = (a.opt('--model', 'all') === 'all' ? Object.keys(MODELS) : a.opt('--model').split(','));
  const quants = (a.opt('--quant', 'all') === 'all' ? QUANTS : a.opt('--quant').split(','));
  const out = a.opt('--out', '/work/gen/real-shapes');
  const layers = a.opt('--layers') === undefined ? undefined : Number(a.opt('--layers'));
  for (const name of models) for (const q of quants) {
    const r = await generate(name, q, out, { force: a.has('--force'), log: (s) => console.log(s), layers });
    const mix = Object.entries(r.types).map(([t, b]) => `${t} ${(b / 2 ** 20).toFixed(0)} MiB`).join(', ');
    console.log(`${r.cached ? '(exists) ' : ''}${r.file}: ${(r.bytes / 2 ** 30).toFixed(3)} GiB [${mix}]`);
  }
}
