/**
 * Converter: GGUF file or Hugging Face folder -> .rknot.
 *
 * - GGUF (archs llama [Llama 2/3.x, SmolLM2], qwen2, qwen3, phi3, gemma, gemma2, gemma3): config from the
 *   `{arch}.*` keys llama.cpp's converter writes (and llama.cpp's loader defaults where a key is optional:
 *   see ggufVariants), tokenizer from tokenizer.ggml.*, rope_type from the arch as llama.cpp's
 *   llama_model_rope_type (llama -> 'norm': its converter permutes q/k; the others -> 'neox').
 * - HF folder (config.json: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM,
 *   GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM + safetensors): names mapped to GGUF style; q/k
 *   weights are kept exactly as stored (HF rotate-half layout) and the config says rope_type 'neox'. Gemma
 *   norms get + 1 (HF computes x * (1 + w); GGUF stores 1 + w, as llama.cpp's converter does), in f32.
 *   Llama 3 rope_scaling becomes a computed `rope_freqs.weight` and Phi-3 LongRoPE factors become
 *   `rope_factors_long/short.weight`, the tensors llama.cpp's converter generates.
 * - Phi-3 fused gate_up (GGUF ffn_up with 2*hidden rows, HF gate_up_proj) is split by rows into ffn_gate
 *   (first hidden rows) and ffn_up (next hidden rows): exact, no requantisation. Fused qkv stays fused.
 * - Quantisation: `keep` keeps dtypes (bf16 too); f32 / f16 / bf16 convert; q8_0 / q5_0 / q4_0 quantise every 2-D
 *   weight (token_embd and output too) with ggml's reference quantisers. 1-D tensors (norms, biases)
 *   are always f32. A tensor whose dtype already is the target is copied byte for byte.
 * - Streaming: one chunk of rows of one tensor in memory at a time; output written to OUT.tmp, renamed.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from '../tokenizer/types.js';
import { tokenizerFromGGUFMetadata, tokenizerFromHFFolder } from '../tokenizer/import.js';
import { DTYPES, type DTypeName } from './dtypes.js';
import { formatError, nodeFs, readExact, type FileHandle } from './fileio.js';
import { readGGUF, type GGUFFile } from './gguf.js';
import { convertElements, ConvertScratch, findBadScale, sourceBytes, ValueError, type SourceDType } from './quantize.js';
import type { RknotConfig, RknotMetadata, RopeScaling } from './rknot-read.js';
import { writeRknot, type RknotTensorSpec, type RknotWriteMetadata } from './rknot-write.js';
import { readSafetensorsModel, type SafetensorsTensor } from './safetensors.js';

export const CONVERTER_VERSION = 'aether-convert/0.1.0';
export type QuantMode = 'keep' | 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q5_0' | 'q4_0';
export const QUANT_MODES: readonly QuantMode[] = ['keep', 'f32', 'f16', 'bf16', 'q8_0', 'q5_0', 'q4_0'];

/**
 * Upper bounds of the sizes a converter input declares, checked before any of them drives a loop or an
 * allocation (the same caps the .rknot reader applies, js/src/formats/rknot-read.ts).
 */
export const CONFIG_LIMITS = {
  n_layers: 4096, dim: 1 << 20, n_heads: 4096, n_kv_heads: 4096, head_dim: 1 << 16, hidden_dim: 1 << 24, n_ctx: 1 << 30,
} as const;

/**
 * Throw config_error unless `value` (read from `field` of `file`) is an integer in 1..`max`; layer counts must also
 * be at most the number of tensors in the input (every layer needs tensors of its own).
 */
export function checkCount(file: string, field: string, value: number, max: number, nTensors?: number): number {
  if (!Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new AetherError('config_error', `${file}: ${field} = ${value}: expected an integer in 1..${max}`, { file, field, value, max });
  }
  if (nTensors !== undefined && value > nTensors) {
    throw new AetherError('config_error', `${file}: ${field} = ${value} layers, but the input has only ${nTensors} tensors`, { file, field, value, tensors: nTensors });
  }
  return value;
}

/** Files of a Hugging Face folder the converter (and the tokenizer import) read, existing or not. */
export const HF_READ_FILES = [
  'config.json', 'model.safetensors', 'model.safetensors.index.json', 'tokenizer.json', 'tokenizer.model',
  'tokenizer_config.json', 'special_tokens_map.json', 'generation_config.json',
] as const;

/** A row range of a tensor in an input file. */
export interface SourceRef {
  file: string;
  /** source tensor name (in the input's naming) */
  name: string;
  /** absolute byte offset of the first row */
  offset: number;
  dtype: SourceDType;
  /** row length (elements) */
  ne0: number;
  rows: number;
}

export interface PlannedTensor extends RknotTensorSpec {
  src: SourceRef;
  note?: string;
  /** the tensor's bytes when they are computed by the converter rather than read (src then names what it came from) */
  data?: Uint8Array;
  /** add 1 to every element (HF Gemma norms -> GGUF convention); the output dtype is f32 */
  addOne?: boolean;
}

export interface ConversionPlan {
  input: string;
  inputFormat: 'gguf' | 'safetensors';
  /** every input file (never overwritten) */
  inputFiles: string[];
  config: RknotConfig;
  tokenizer: TokenizerData;
  tensors: PlannedTensor[];
  name?: string;
  notes: string[];
}

export interface ConvertProgress {
  phase: 'hash' | 'convert';
  done: number;
  total: number;
  tensor?: string;
}

export interface ConvertOptions {
  quant?: QuantMode;
  signal?: AbortSignal;
  onProgress?: (e: ConvertProgress) => void;
  /** sha256 of the input files into metadata.source (default true) */
  hashInput?: boolean;
  /** target bytes of one chunk of rows (default 8 MiB) */
  chunkBytes?: number;
}

export interface ConvertSummary {
  input: string;
  output: string;
  input_format: 'gguf' | 'safetensors';
  arch: string;
  quant: QuantMode;
  n_tensors: number;
  n_params: number;
  input_bytes: number;
  output_bytes: number;
  data_bytes: number;
  seconds: number;
  config: RknotConfig;
  tensors: { name: string; src: string; src_dtype: string; dtype: string; shape: number[]; bytes: number; note?: string }[];
  notes: string[];
}

// ---------------------------------------------------------------------------------------------

function tensorOrder(config: RknotConfig): string[] {
  const names = ['token_embd.weight'];
  const late: string[] = [];
  if (config.rope_scaling?.type === 'llama3') late.push('rope_freqs.weight');
  if (config.rope_scaling?.type === 'longrope') late.push('rope_factors_long.weight', 'rope_factors_short.weight');
  for (let l = 0; l < config.n_layers; l++) {
    const p = `blk.${l}.`;
    names.push(p + 'attn_norm.weight');
    if (config.fused_qkv) {
      names.push(p + 'attn_qkv.weight');
      if (config.qkv_bias) names.push(p + 'attn_qkv.bias');
    } else {
      names.push(p + 'attn_q.weight', p + 'attn_k.weight', p + 'attn_v.weight');
      if (config.qkv_bias) names.push(p + 'attn_q.bias', p + 'attn_k.bias', p + 'attn_v.bias');
    }
    if (config.qk_norm) names.push(p + 'attn_q_norm.weight', p + 'attn_k_norm.weight');
    names.push(p + 'attn_output.weight');
    if (config.post_norms) names.push(p + 'post_attention_norm.weight');
    names.push(p + 'ffn_norm.weight', p + 'ffn_gate.weight', p + 'ffn_up.weight', p + 'ffn_down.weight');
    if (config.post_norms) names.push(p + 'post_ffw_norm.weight');
  }
  names.push('output_norm.weight');
  if (!config.tie_embeddings) names.push('output.weight');
  return [...names, ...late];
}

function targetDtype(shape: number[], src: SourceDType, quant: QuantMode): { dtype: DTypeName; note?: string } {
  if (shape.length === 1) return { dtype: 'f32' };
  switch (quant) {
    case 'keep': return { dtype: src };
    case 'f32': case 'f16': case 'bf16': return { dtype: quant };
    case 'q8_0': case 'q5_0': case 'q4_0':
      if (shape[0] % 32 !== 0) return { dtype: 'f16', note: `row length ${shape[0]} is not a multiple of 32: stored f16` };
      return { dtype: quant };
  }
}

/** Shortest decimal that rounds to the same float32 (1e-5 instead of 0.000009999999747378752). */
export function f32Shortest(v: number): number {
  if (!Number.isFinite(v)) return v;
  const f = Math.fround(v);
  if (f !== v) return v;
  for (let p = 1; p <= 9; p++) {
    const x = parseFloat(v.toPrecision(p));
    if (Math.fround(x) === f) return x;
  }
  return v;
}

function tokenizerFromGGUF(g: GGUFFile): TokenizerData {
  try {
    return tokenizerFromGGUFMetadata(g.metadata);
  } catch (e) {
    if (e instanceof AetherError) throw new AetherError(e.code, `${g.path}: ${e.message}`, { file: g.path, ...e.details });
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// GGUF

// RoPE layout per architecture, as llama.cpp's llama_model_rope_type (src/llama-model.cpp): LLAMA_ROPE_TYPE_NORM for
// llama (convert_hf_to_gguf.py's LlamaModel permutes q/k for it), LLAMA_ROPE_TYPE_NEOX for the others.
const GGUF_ROPE: Record<string, 'norm' | 'neox'> = {
  llama: 'norm', qwen2: 'neox', qwen3: 'neox', phi3: 'neox', gemma: 'neox', gemma2: 'neox', gemma3: 'neox',
};

type Num = (key: string, required: boolean) => number | undefined;

/**
 * Architecture variants of a GGUF file: the keys llama.cpp's converter writes (conversion/llama.py, phi.py, qwen.py,
 * gemma.py on ggml-org/llama.cpp; key names in gguf-py/gguf/constants.py) and, where a key is optional, the default
 * llama.cpp's loader uses (src/models/<arch>.cpp load_arch_hparams):
 *  - gemma*: GeGLU (LLM_FFN_GELU), embeddings * sqrt(dim) (f32), norms as stored (the converter wrote 1 + w);
 *  - gemma2/3: q scale 1/sqrt(head_dim), except the 27B models (46 / 62 layers): 1/sqrt(dim / n_heads) (llama.cpp's
 *    f_attention_scale; the converter writes no query_pre_attn_scalar);
 *  - gemma2: `attn_logit_softcapping` [50], `final_logit_softcapping` [30], `attention.sliding_window` [4096],
 *    `attention.sliding_window_pattern` [2: even layers slide];
 *  - gemma3: `attention.sliding_window` (required), pattern [6: layers i % 6 < 5 slide], local RoPE base
 *    `rope.freq_base_swa` [10000] without linear scaling, `final_logit_softcapping` when present;
 *  - phi3: `attention.sliding_window` (0 = none); every layer slides when it is shorter than the context. Note:
 *    llama.cpp ignores Phi-3's window ("Phi SWA is currently disabled", PR 13676); Hugging Face applies it, and so
 *    do we, so outputs differ from llama.cpp's past 2047 tokens on Phi-3-mini-4k;
 *  - RoPE: `rope_freqs.weight` (Llama 3.x llama3 scaling, made by LlamaModel.generate_extra_tensors) -> llama3;
 *    `rope_factors_long/short.weight` (Phi3MiniModel.generate_extra_tensors) with `rope.scaling.original_context_length`
 *    and `rope.scaling.attn_factor` [1] -> longrope; `rope.scaling.type` 'linear' with `rope.scaling.factor` -> linear;
 *    any other scaling type (yarn, ...) is refused.
 */
function ggufVariants(path: string, g: GGUFFile, arch: string, num: Num, byName: Map<string, unknown>,
  dims: { dim: number; nHeads: number; headDim: number; nLayers: number; ropeDim: number; nCtx: number }): Partial<RknotConfig> {
  const m = g.metadata;
  const v: Partial<RknotConfig> = {};
  const gemma = arch === 'gemma' ? 1 : arch === 'gemma2' ? 2 : arch === 'gemma3' ? 3 : 0;
  const unsupported = (field: string, msg: string) => new AetherError('unsupported', `${path}: ${field}: ${msg}`, { file: path, field });
  if (gemma) {
    v.ffn_act = 'gelu_tanh';
    v.embd_scale = Math.fround(Math.sqrt(dims.dim));
  }
  if (gemma >= 2) {
    const big = (gemma === 2 && dims.nLayers === 46) || (gemma === 3 && dims.nLayers === 62);
    if (big) v.attn_scale = Math.fround(1 / Math.sqrt(Math.floor(dims.dim / dims.nHeads)));
  }
  if (gemma === 2) {
    v.attn_softcap = f32Shortest(num('attn_logit_softcapping', false) ?? 50);
    v.final_softcap = f32Shortest(num('final_logit_softcapping', false) ?? 30);
  } else {
    const a = num('attn_logit_softcapping', false), f = num('final_logit_softcapping', false);
    if (a) v.attn_softcap = f32Shortest(a);
    if (f) v.final_softcap = f32Shortest(f);
  }
  // sliding window
  const swKey = `${arch}.attention.sliding_window`;
  let window = num('attention.sliding_window', gemma === 3);
  if (gemma === 2 && window === undefined) window = 4096;
  if (window !== undefined && (!Number.isInteger(window) || window < 0)) throw formatError(path, swKey, undefined, `expected a non-negative integer, got ${window}`);
  if (window) {
    const patKey = `${arch}.attention.sliding_window_pattern`;
    const pat = m.get(patKey);
    let swa: boolean[];
    if (Array.isArray(pat)) {
      if (pat.length !== dims.nLayers) throw formatError(path, patKey, undefined, `has ${pat.length} entries, expected one per layer (${dims.nLayers})`);
      swa = pat.map((x) => Boolean(x));
    } else {
      // llama.cpp's llama_hparams::set_swa_pattern(n): layer il slides iff n == 0 || il % n < n - 1 (so 1 = none, 0 = all)
      const period = pat !== undefined ? pat : gemma === 2 ? 2 : gemma === 3 ? 6 : 0;
      if (typeof period !== 'number' || !Number.isInteger(period) || period < 0) throw formatError(path, patKey, undefined, `expected a non-negative integer or a per-layer array, got ${String(pat)}`);
      swa = Array.from({ length: dims.nLayers }, (_, il) => period === 0 || il % period < period - 1);
    }
    if (window < dims.nCtx && swa.some(Boolean)) {
      v.sliding_window = window;
      v.swa_layers = swa;
    }
  }
  if (gemma === 3) v.rope_theta_swa = f32Shortest(num('rope.freq_base_swa', false) ?? 10000);
  else {
    const swaBase = num('rope.freq_base_swa', false);
    if (swaBase !== undefined) v.rope_theta_swa = f32Shortest(swaBase);
  }
  // RoPE scaling
  const hasFreqs = byName.has('rope_freqs.weight');
  const hasLong = byName.has('rope_factors_long.weight'), hasShort = byName.has('rope_factors_short.weight');
  const stype = m.get(`${arch}.rope.scaling.type`);
  const sfactor = num('rope.scaling.factor', false);
  if (hasLong !== hasShort) throw new AetherError('config_error', `${path}: rope_factors_long.weight and rope_factors_short.weight come as a pair (found only ${hasLong ? 'long' : 'short'})`, { file: path });
  if (hasFreqs && hasLong) throw unsupported('rope_freqs.weight', 'both llama3 rope_freqs and LongRoPE factor tensors are present');
  if (hasFreqs) {
    v.rope_scaling = { type: 'llama3' } as RopeScaling;
  } else if (hasLong) {
    const orig = num('rope.scaling.original_context_length', true)!;
    if (!Number.isInteger(orig) || orig <= 0) throw formatError(path, `${arch}.rope.scaling.original_context_length`, undefined, `expected a positive integer, got ${orig}`);
    v.rope_scaling = { type: 'longrope', original_context: orig, attn_factor: f32Shortest(num('rope.scaling.attn_factor', false) ?? 1) };
  } else if (stype !== undefined && stype !== 'none') {
    if (stype === 'linear') {
      if (sfactor !== undefined && sfactor !== 1) {
        if (!(sfactor > 0)) throw formatError(path, `${arch}.rope.scaling.factor`, undefined, `expected a positive number, got ${sfactor}`);
        v.rope_scaling = { type: 'linear', factor: f32Shortest(sfactor) };
      }
    } else {
      throw unsupported(`${arch}.rope.scaling.type`, `RoPE scaling '${String(stype)}' is not supported (supported: linear, llama3 via rope_freqs.weight, LongRoPE via rope_factors_long/short.weight)`);
    }
  }
  if ((hasFreqs || hasLong) && dims.ropeDim % 2) throw new AetherError('config_error', `${path}: rope dimension ${dims.ropeDim} is odd`, { file: path });
  return v;
}

/** The conversion plan of a GGUF file (planConversion for a GGUF path; exported for the fuzzers, fuzz/targets.mjs). */
export async function planGGUF(path: string, quant: QuantMode): Promise<ConversionPlan> {
  return planGGUFFile(await readGGUF(path), quant);
}

/**
 * The conversion plan of a parsed GGUF (its header, metadata and tensor table; `g.path` names it in messages): the
 * config, tokenizer and, per target tensor, the source row range. Used by the converter and by the GGUF loader
 * (loader/gguf.ts), which places the same bytes straight into wasm memory.
 */
export function planGGUFFile(g: GGUFFile, quant: QuantMode): ConversionPlan {
  const path = g.path;
  const m = g.metadata;
  const notes: string[] = [];
  const arch = m.get('general.architecture');
  if (typeof arch !== 'string') throw formatError(path, 'general.architecture', undefined, 'missing or not a string');
  if (!(arch in GGUF_ROPE)) throw new AetherError('unsupported', `${path}: general.architecture '${arch}' is not supported (expected ${Object.keys(GGUF_ROPE).join(', ')})`, { file: path, field: 'general.architecture' });
  const num = (key: string, required: boolean): number | undefined => {
    const full = `${arch}.${key}`;
    const v = m.get(full);
    if (v === undefined) {
      if (required) throw new AetherError('format_error', `${path}: metadata key '${full}' is missing`, { file: path, field: full });
      return undefined;
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      const what = Array.isArray(v) ? 'an array (per-layer values are not supported)' : `type ${g.metadataTypes.get(full)}`;
      throw new AetherError(Array.isArray(v) ? 'unsupported' : 'format_error', `${path}: metadata key '${full}' is ${what}, expected a number`, { file: path, field: full });
    }
    return v;
  };
  const byName = new Map(g.tensors.map((t) => [t.name, t]));
  const embd = byName.get('token_embd.weight');
  if (!embd || embd.dims.length !== 2) throw new AetherError('config_error', `${path}: token_embd.weight is missing or not 2-D`, { file: path, field: 'token_embd.weight' });
  const K = (k: string) => `${arch}.${k}`;
  const dim = checkCount(path, K('embedding_length'), num('embedding_length', true)!, CONFIG_LIMITS.dim);
  const nHeads = checkCount(path, K('attention.head_count'), num('attention.head_count', true)!, CONFIG_LIMITS.n_heads);
  // counts bounded before anything loops over them (block_count 2^31-1 used to build names until the heap died)
  checkCount(path, K('block_count'), num('block_count', true)!, CONFIG_LIMITS.n_layers, g.tensors.length);
  checkCount(path, K('context_length'), num('context_length', true)!, CONFIG_LIMITS.n_ctx);
  checkCount(path, K('feed_forward_length'), num('feed_forward_length', true)!, CONFIG_LIMITS.hidden_dim);
  const kvh = num('attention.head_count_kv', false);
  if (kvh !== undefined) checkCount(path, K('attention.head_count_kv'), kvh, CONFIG_LIMITS.n_kv_heads);
  const kl = num('attention.key_length', false);
  if (kl !== undefined) checkCount(path, K('attention.key_length'), kl, CONFIG_LIMITS.head_dim);
  const headDim = kl ?? dim / nHeads;
  if (!Number.isInteger(headDim)) throw new AetherError('config_error', `${path}: embedding_length ${dim} is not a multiple of head_count ${nHeads}`, { file: path });
  const vocabMeta = num('vocab_size', false);
  const vocab = embd.dims[1];
  if (vocabMeta !== undefined && vocabMeta !== vocab) throw new AetherError('config_error', `${path}: ${arch}.vocab_size ${vocabMeta} does not match token_embd.weight rows ${vocab}`, { file: path });
  const tokenizer = tokenizerFromGGUF(g);
  const fused = byName.has('blk.0.attn_qkv.weight');
  const nLayers = num('block_count', true)!;
  const nCtx = num('context_length', true)!;
  const ropeDim = num('rope.dimension_count', false) ?? headDim;
  const config: RknotConfig = {
    arch: arch as RknotConfig['arch'],
    dim,
    n_layers: nLayers,
    n_heads: nHeads,
    n_kv_heads: num('attention.head_count_kv', false) ?? nHeads,
    head_dim: headDim,
    hidden_dim: num('feed_forward_length', true)!,
    vocab_size: vocab,
    n_ctx: nCtx,
    norm_eps: f32Shortest(num('attention.layer_norm_rms_epsilon', true)!),
    rope_theta: f32Shortest(num('rope.freq_base', false) ?? 10000),
    rope_dim: ropeDim,
    rope_type: GGUF_ROPE[arch],
    tie_embeddings: !byName.has('output.weight'),
    qkv_bias: byName.has(fused ? 'blk.0.attn_qkv.bias' : 'blk.0.attn_q.bias'),
    fused_qkv: fused,
    bos_token_id: tokenizer.bos_token_id ?? null,
    eos_token_id: tokenizer.eos_token_id ?? null,
    ...(byName.has('blk.0.attn_q_norm.weight') ? { qk_norm: true } : {}),
    ...(byName.has('blk.0.post_attention_norm.weight') ? { post_norms: true } : {}),
    ...ggufVariants(path, g, arch, num, byName, { dim, nHeads, headDim, nLayers, ropeDim, nCtx }),
  };
  if (arch === 'qwen3' && !config.qk_norm) throw new AetherError('config_error', `${path}: qwen3 needs blk.N.attn_q_norm.weight / attn_k_norm.weight`, { file: path, field: 'blk.0.attn_q_norm.weight' });
  if ((arch === 'gemma2' || arch === 'gemma3') && !config.post_norms) throw new AetherError('config_error', `${path}: ${arch} needs blk.N.post_attention_norm.weight / post_ffw_norm.weight`, { file: path, field: 'blk.0.post_attention_norm.weight' });
  if (arch === 'gemma3' && !config.qk_norm) throw new AetherError('config_error', `${path}: gemma3 needs blk.N.attn_q_norm.weight / attn_k_norm.weight`, { file: path, field: 'blk.0.attn_q_norm.weight' });
  const tensors: PlannedTensor[] = [];
  const used = new Set<string>();
  const ref = (srcName: string, rowStart = 0, rowCount?: number): SourceRef => {
    const t = byName.get(srcName)!;
    const ne0 = t.dims[0];
    const rowsTotal = t.dims.slice(1).reduce((a, b) => a * b, 1);
    const rb = sourceBytes(t.dtype, ne0);
    used.add(srcName);
    return { file: path, name: srcName, offset: t.offset + rowStart * rb, dtype: t.dtype, ne0, rows: rowCount ?? rowsTotal };
  };
  for (const name of tensorOrder(config)) {
    const m2 = /^blk\.(\d+)\.ffn_(gate|up)\.weight$/.exec(name);
    if (arch === 'phi3' && m2 && !byName.has(`blk.${m2[1]}.ffn_gate.weight`)) {
      // fused gate_up: GGUF ffn_up holds [gate; up] rows
      const srcName = `blk.${m2[1]}.ffn_up.weight`;
      const t = byName.get(srcName);
      const h = config.hidden_dim;
      if (!t || t.dims.length !== 2 || t.dims[1] !== 2 * h) {
        throw new AetherError('config_error', `${path}: ${srcName} has shape [${t?.dims.join(', ')}], expected [${dim}, ${2 * h}] (phi3 fused gate_up)`, { file: path, field: srcName });
      }
      const shape = [t.dims[0], h];
      const tgt = targetDtype(shape, t.dtype, quant);
      tensors.push({ name, dtype: tgt.dtype, shape, src: ref(srcName, m2[2] === 'gate' ? 0 : h, h), note: `rows ${m2[2] === 'gate' ? 0 : h}..${m2[2] === 'gate' ? h : 2 * h} of fused ${srcName}${tgt.note ? '; ' + tgt.note : ''}` });
      continue;
    }
    const t = byName.get(name);
    if (!t) throw new AetherError('config_error', `${path}: tensor '${name}' is missing (needed by ${arch} with ${config.n_layers} layers)`, { file: path, field: name });
    const tgt = targetDtype(t.dims, t.dtype, quant);
    tensors.push({ name, dtype: tgt.dtype, shape: [...t.dims], src: ref(name), note: tgt.note });
  }
  const extra = g.tensors.filter((t) => !used.has(t.name)).map((t) => t.name);
  if (extra.length) {
    throw new AetherError('unsupported', `${path}: unexpected tensor(s) for ${arch}: ${extra.slice(0, 8).join(', ')}${extra.length > 8 ? ', ...' : ''}`, { file: path, tensors: extra });
  }
  const name = typeof m.get('general.name') === 'string' ? (m.get('general.name') as string) : undefined;
  return { input: path, inputFormat: 'gguf', inputFiles: [path], config, tokenizer, tensors, name, notes };
}

// ---------------------------------------------------------------------------------------------
// Hugging Face folder

const HF_ARCH: Record<string, RknotConfig['arch']> = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  Phi3ForCausalLM: 'phi3',
  GemmaForCausalLM: 'gemma',
  Gemma2ForCausalLM: 'gemma2',
  Gemma3ForCausalLM: 'gemma3',
  Gemma3ForConditionalGeneration: 'gemma3',   // the text model of Gemma 3 4B+ (text_config; vision tensors skipped)
};

/** HF tensor name -> GGUF-style name (gguf-py/gguf/tensor_mapping.py's mapping for these models). */
function mapHFName(n: string, arch: RknotConfig['arch']): { name: string; split?: 'gate_up' } | null | undefined {
  // Gemma 3 multimodal checkpoints: the language model under language_model.*, vision parts skipped
  if (/^(vision_tower|multi_modal_projector)\./.test(n)) return null;
  n = n.replace(/^language_model\.model\./, 'model.').replace(/^language_model\.lm_head\./, 'lm_head.');
  if (n === 'model.embed_tokens.weight') return { name: 'token_embd.weight' };
  if (n === 'model.norm.weight') return { name: 'output_norm.weight' };
  if (n === 'lm_head.weight') return { name: 'output.weight' };
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(n);
  if (!m) return undefined;
  const [, l, mid, kind] = m;
  // Gemma 2/3: post_attention_layernorm is the attention post-norm, pre_feedforward_layernorm the FFN input norm
  const gemmaPost = arch === 'gemma2' || arch === 'gemma3';
  const map: Record<string, string> = {
    'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
    'self_attn.qkv_proj': 'attn_qkv', 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
    'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm',
    input_layernorm: 'attn_norm', post_attention_layernorm: gemmaPost ? 'post_attention_norm' : 'ffn_norm',
    ...(gemmaPost ? { pre_feedforward_layernorm: 'ffn_norm', post_feedforward_layernorm: 'post_ffw_norm' } : {}),
  };
  if (mid === 'mlp.gate_up_proj' && kind === 'weight') return { name: `blk.${l}.ffn_gate_up.weight`, split: 'gate_up' };
  if (mid === 'self_attn.rotary_emb.inv_freq') return null;
  const g = map[mid];
  return g ? { name: `blk.${l}.${g}.${kind}` } : undefined;
}

/** Llama 3 RoPE frequency divisors, the formula of llama.cpp's LlamaModel.generate_extra_tensors (conversion/llama.py). */
export function llama3RopeFactors(ropeDim: number, base: number, factor: number, lowFreqFactor: number, highFreqFactor: number, origCtx: number): Float32Array {
  const out = new Float32Array(ropeDim / 2);
  const lowWave = origCtx / lowFreqFactor, highWave = origCtx / highFreqFactor;
  for (let i = 0; i < ropeDim / 2; i++) {
    const freq = Math.fround(1 / Math.pow(base, (2 * i) / ropeDim));
    const wave = (2 * Math.PI) / freq;
    if (wave < highWave) out[i] = 1;
    else if (wave > lowWave) out[i] = factor;
    else {
      const smooth = (origCtx / wave - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return out;
}

/**
 * Newer transformers write `rope_parameters` ({rope_type, rope_theta, factor, ...}, or per attention type
 * {full_attention: {...}, sliding_attention: {...}}) instead of rope_theta / rope_scaling / rope_local_base_freq:
 * map it to the older fields (an explicit older field wins).
 */
function normaliseRopeParameters(cfgPath: string, hf: Record<string, unknown>): Record<string, unknown> {
  const rp = hf.rope_parameters;
  if (rp === undefined || rp === null) return hf;
  if (typeof rp !== 'object' || Array.isArray(rp)) throw formatError(cfgPath, 'rope_parameters', undefined, 'expected an object');
  const r = rp as Record<string, unknown>;
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const full = isObj(r.full_attention) ? r.full_attention : r;
  const sliding = isObj(r.sliding_attention) ? r.sliding_attention : undefined;
  const out = { ...hf };
  if (out.rope_theta === undefined && typeof full.rope_theta === 'number') out.rope_theta = full.rope_theta;
  if (out.rope_local_base_freq === undefined && sliding && typeof sliding.rope_theta === 'number') out.rope_local_base_freq = sliding.rope_theta;
  const t = full.rope_type ?? full.type;
  if ((out.rope_scaling === undefined || out.rope_scaling === null) && t !== undefined && t !== 'default') {
    const { rope_theta: _t, ...scaling } = full;
    out.rope_scaling = scaling;
  }
  if (out.partial_rotary_factor === undefined && typeof full.partial_rotary_factor === 'number') out.partial_rotary_factor = full.partial_rotary_factor;
  return out;
}

interface HFVariants {
  variants: Partial<RknotConfig>;
  /** computed tensors (name -> f32 values) */
  extra: Map<string, Float32Array>;
}

/**
 * Architecture variants from a Hugging Face config.json (the fields transformers' modeling code reads):
 * Gemma: GeGLU (gelu_pytorch_tanh), embeddings * sqrt(hidden_size), q scale query_pre_attn_scalar^-1/2 (2/3),
 * attn_logit_softcapping / final_logit_softcapping (2), sliding_window with layer_types or the pattern (2: even layers;
 * 3: sliding_window_pattern, layer i slides iff (i + 1) % pattern != 0), rope_local_base_freq (3); rope_scaling:
 * linear (factor), llama3 (-> rope_freqs.weight), longrope / su (Phi-3: long_factor / short_factor -> tensors,
 * attention factor sqrt(1 + ln(s) / ln(orig)) with s = max_position_embeddings / original_max_position_embeddings,
 * or rope_scaling.attention_factor); Phi-3 sliding_window (all layers).
 */
function hfVariants(cfgPath: string, hf: Record<string, unknown>, arch: RknotConfig['arch'], dims: { dim: number; nLayers: number; nCtx: number; ropeDim: number; ropeTheta: number }): HFVariants {
  const variants: Partial<RknotConfig> = {};
  const extra = new Map<string, Float32Array>();
  const numOr = (k: string, def: number | undefined): number | undefined => {
    const v = hf[k];
    if (v === undefined || v === null) return def;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw formatError(cfgPath, k, undefined, `expected a number, got ${JSON.stringify(v)}`);
    return v;
  };
  const gemma = arch === 'gemma' ? 1 : arch === 'gemma2' ? 2 : arch === 'gemma3' ? 3 : 0;
  if (gemma) {
    const act = hf.hidden_activation ?? hf.hidden_act;
    if (act !== undefined && act !== null && act !== 'gelu_pytorch_tanh' && act !== 'gelu') {
      throw new AetherError('unsupported', `${cfgPath}: hidden_activation ${JSON.stringify(act)} is not supported (Gemma uses gelu_pytorch_tanh)`, { file: cfgPath, field: 'hidden_activation' });
    }
    variants.ffn_act = 'gelu_tanh';
    variants.embd_scale = Math.fround(Math.sqrt(dims.dim));
  }
  if (gemma >= 2) {
    const qs = numOr('query_pre_attn_scalar', undefined);
    if (qs !== undefined) {
      if (!(qs > 0)) throw formatError(cfgPath, 'query_pre_attn_scalar', undefined, `expected a positive number, got ${qs}`);
      variants.attn_scale = Math.fround(1 / Math.sqrt(qs));
    }
    const a = numOr('attn_logit_softcapping', undefined), f = numOr('final_logit_softcapping', undefined);
    if (a) variants.attn_softcap = f32Shortest(Math.fround(a));
    if (f) variants.final_softcap = f32Shortest(Math.fround(f));
  }
  // sliding window
  const window = numOr('sliding_window', undefined);
  if (window !== undefined && (gemma >= 2 || arch === 'phi3')) {
    if (!Number.isInteger(window) || window < 0) throw formatError(cfgPath, 'sliding_window', undefined, `expected a non-negative integer, got ${window}`);
    let swa: boolean[];
    const lt = hf.layer_types;
    if (Array.isArray(lt)) {
      if (lt.length !== dims.nLayers) throw formatError(cfgPath, 'layer_types', undefined, `has ${lt.length} entries, expected ${dims.nLayers}`);
      swa = lt.map((t, i) => {
        if (t !== 'sliding_attention' && t !== 'full_attention') throw formatError(cfgPath, `layer_types[${i}]`, undefined, `expected 'sliding_attention' or 'full_attention', got ${JSON.stringify(t)}`);
        return t === 'sliding_attention';
      });
    } else if (gemma === 2) swa = Array.from({ length: dims.nLayers }, (_, i) => i % 2 === 0);
    else if (gemma === 3) {
      const pat = numOr('sliding_window_pattern', 6)!;
      if (!Number.isInteger(pat) || pat < 1) throw formatError(cfgPath, 'sliding_window_pattern', undefined, `expected a positive integer, got ${pat}`);
      swa = Array.from({ length: dims.nLayers }, (_, i) => (i + 1) % pat !== 0);
    } else swa = Array.from({ length: dims.nLayers }, () => true);
    if (window > 0 && window < dims.nCtx && swa.some(Boolean)) {
      variants.sliding_window = window;
      variants.swa_layers = swa;
    }
  }
  if (gemma === 3) variants.rope_theta_swa = f32Shortest(Math.fround(numOr('rope_local_base_freq', 10000)!));
  // RoPE scaling
  const rs = (hf.rope_scaling ?? null) as Record<string, unknown> | null;
  if (rs !== null) {
    if (typeof rs !== 'object' || Array.isArray(rs)) throw formatError(cfgPath, 'rope_scaling', undefined, 'expected an object or null');
    const t = rs.rope_type ?? rs.type;
    const num = (k: string, def?: number): number => {
      const v = rs[k] ?? def;
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw formatError(cfgPath, `rope_scaling.${k}`, undefined, `expected a positive number, got ${JSON.stringify(rs[k])}`);
      return v;
    };
    if (t === 'default') { /* none */ }
    else if (t === 'linear') {
      const factor = num('factor');
      if (factor !== 1) variants.rope_scaling = { type: 'linear', factor: f32Shortest(Math.fround(factor)) };
    } else if (t === 'llama3') {
      const factor = num('factor', 8), lo = num('low_freq_factor', 1), hi = num('high_freq_factor', 4);
      const orig = num('original_max_position_embeddings', 8192);
      if (lo === hi) throw formatError(cfgPath, 'rope_scaling', undefined, 'low_freq_factor equals high_freq_factor');
      variants.rope_scaling = { type: 'llama3', factor, low_freq_factor: lo, high_freq_factor: hi, original_context: orig };
      extra.set('rope_freqs.weight', llama3RopeFactors(dims.ropeDim, dims.ropeTheta, factor, lo, hi, orig));
    } else if (t === 'longrope' || t === 'su') {
      const orig = numOr('original_max_position_embeddings', undefined) ?? num('original_max_position_embeddings');
      const long = rs.long_factor, short = rs.short_factor;
      const half = dims.ropeDim / 2;
      for (const [k, v] of [['long_factor', long], ['short_factor', short]] as const) {
        if (!Array.isArray(v) || v.length !== half || !v.every((x) => typeof x === 'number' && Number.isFinite(x) && x > 0)) {
          throw formatError(cfgPath, `rope_scaling.${k}`, undefined, `expected ${half} positive numbers (rope dimension / 2)`);
        }
      }
      const scale = dims.nCtx / orig;
      const af = typeof rs.attention_factor === 'number' ? rs.attention_factor
        : scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(orig)) : 1;
      variants.rope_scaling = { type: 'longrope', original_context: orig, attn_factor: f32Shortest(Math.fround(af)) };
      extra.set('rope_factors_long.weight', Float32Array.from(long as number[]));
      extra.set('rope_factors_short.weight', Float32Array.from(short as number[]));
    } else {
      throw new AetherError('unsupported', `${cfgPath}: rope_scaling ${JSON.stringify({ ...rs, long_factor: undefined, short_factor: undefined })} is not supported (supported: linear, llama3, longrope)`, { file: cfgPath, field: 'rope_scaling' });
    }
  }
  return { variants, extra };
}

async function planHF(dir: string, quant: QuantMode): Promise<ConversionPlan> {
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  const cfgPath = pathMod.join(dir, 'config.json');
  let hf: Record<string, unknown>;
  try {
    hf = JSON.parse(await fsp.readFile(cfgPath, 'utf8'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new AetherError('load_error', `${dir}: no config.json (expected a Hugging Face model folder)`, { file: cfgPath });
    throw formatError(cfgPath, 'config.json', undefined, `does not parse: ${(e as Error).message}`);
  }
  const archs = hf.architectures;
  const archName = Array.isArray(archs) ? String(archs[0]) : undefined;
  const arch = archName ? HF_ARCH[archName] : undefined;
  if (!arch) throw new AetherError('unsupported', `${cfgPath}: architectures ${JSON.stringify(archs)} is not supported (expected ${Object.keys(HF_ARCH).join(', ')})`, { file: cfgPath, field: 'architectures' });
  // multimodal checkpoints (Gemma 3 4B+) keep the language model's settings in text_config
  if (hf.text_config !== null && typeof hf.text_config === 'object') hf = { ...hf, ...(hf.text_config as Record<string, unknown>) };
  hf = normaliseRopeParameters(cfgPath, hf);
  const int = (k: string, def?: number): number => {
    const v = hf[k] ?? def;
    if (!Number.isSafeInteger(v) || (v as number) <= 0) throw formatError(cfgPath, k, undefined, `expected a positive integer, got ${JSON.stringify(hf[k])}`);
    return v as number;
  };
  const numf = (k: string, def?: number): number => {
    const v = hf[k] ?? def;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw formatError(cfgPath, k, undefined, `expected a number, got ${JSON.stringify(hf[k])}`);
    return v;
  };
  const dim = checkCount(cfgPath, 'hidden_size', int('hidden_size'), CONFIG_LIMITS.dim);
  const nHeads = checkCount(cfgPath, 'num_attention_heads', int('num_attention_heads'), CONFIG_LIMITS.n_heads);
  const headDim = checkCount(cfgPath, 'head_dim', int('head_dim', dim / nHeads), CONFIG_LIMITS.head_dim);
  // counts bounded before anything loops over them or allocates (num_hidden_layers 2^31-1 used to exhaust the heap)
  checkCount(cfgPath, 'num_hidden_layers', int('num_hidden_layers'), CONFIG_LIMITS.n_layers);
  checkCount(cfgPath, 'max_position_embeddings', int('max_position_embeddings'), CONFIG_LIMITS.n_ctx);
  checkCount(cfgPath, 'intermediate_size', int('intermediate_size'), CONFIG_LIMITS.hidden_dim);
  checkCount(cfgPath, 'num_key_value_heads', int('num_key_value_heads', nHeads), CONFIG_LIMITS.n_kv_heads);
  const prf = hf.partial_rotary_factor === undefined ? 1 : numf('partial_rotary_factor');
  const st = await readSafetensorsModel(dir);
  const tokenizer = await tokenizerFromHFFolder(dir);
  const mapped = new Map<string, SafetensorsTensor>();
  const notes: string[] = [];
  for (const [n, t] of st.tensors) {
    const m = mapHFName(n, arch);
    if (m === null) continue;
    if (m === undefined) throw new AetherError('unsupported', `${t.file}: tensor '${n}' has no mapping for ${archName}`, { file: t.file, field: n });
    mapped.set(m.name, t);
  }
  const embd = mapped.get('token_embd.weight');
  if (!embd || embd.shape.length !== 2) throw new AetherError('config_error', `${dir}: model.embed_tokens.weight is missing or not 2-D`, { file: dir });
  const vocab = embd.shape[0];
  const cfgVocab = int('vocab_size', vocab);
  if (cfgVocab !== vocab) throw new AetherError('config_error', `${cfgPath}: vocab_size ${cfgVocab} does not match model.embed_tokens.weight rows ${vocab}`, { file: cfgPath, field: 'vocab_size' });
  // Gemma configs default to tied embeddings (and their checkpoints have no lm_head)
  let tie = hf.tie_word_embeddings === true || (arch.startsWith('gemma') && hf.tie_word_embeddings === undefined);
  if (tie && mapped.has('output.weight')) {
    mapped.delete('output.weight');
    notes.push('tie_word_embeddings: lm_head.weight ignored');
  }
  if (!tie && !mapped.has('output.weight')) throw new AetherError('config_error', `${dir}: lm_head.weight is missing and tie_word_embeddings is not true`, { file: dir, field: 'lm_head.weight' });
  const fused = mapped.has('blk.0.attn_qkv.weight');
  const eos = Array.isArray(hf.eos_token_id) ? hf.eos_token_id[0] : hf.eos_token_id;
  const bos = Array.isArray(hf.bos_token_id) ? hf.bos_token_id[0] : hf.bos_token_id;
  const nLayers = checkCount(cfgPath, 'num_hidden_layers', int('num_hidden_layers'), CONFIG_LIMITS.n_layers, st.tensors.size);
  const nCtx = int('max_position_embeddings');
  const ropeTheta = numf('rope_theta', 10000);
  const ropeDim = Math.round(headDim * prf);
  const { variants, extra: computedTensors } = hfVariants(cfgPath, hf, arch, { dim, nLayers, nCtx, ropeDim, ropeTheta });
  const config: RknotConfig = {
    arch,
    dim,
    n_layers: nLayers,
    n_heads: nHeads,
    n_kv_heads: int('num_key_value_heads', nHeads),
    head_dim: headDim,
    hidden_dim: int('intermediate_size'),
    vocab_size: vocab,
    n_ctx: nCtx,
    norm_eps: f32Shortest(Math.fround(numf('rms_norm_eps', 1e-6))),
    rope_theta: f32Shortest(Math.fround(ropeTheta)),
    rope_dim: ropeDim,
    rope_type: 'neox',
    tie_embeddings: tie,
    qkv_bias: mapped.has(fused ? 'blk.0.attn_qkv.bias' : 'blk.0.attn_q.bias'),
    fused_qkv: fused,
    bos_token_id: Number.isSafeInteger(bos) ? (bos as number) : tokenizer.bos_token_id ?? null,
    eos_token_id: Number.isSafeInteger(eos) ? (eos as number) : tokenizer.eos_token_id ?? null,
    ...(mapped.has('blk.0.attn_q_norm.weight') ? { qk_norm: true } : {}),
    ...(mapped.has('blk.0.post_attention_norm.weight') ? { post_norms: true } : {}),
    ...variants,
  };
  if (arch === 'qwen3' && !config.qk_norm) throw new AetherError('config_error', `${dir}: Qwen3 needs self_attn.q_norm / k_norm weights`, { file: dir });
  if ((arch === 'gemma2' || arch === 'gemma3') && !config.post_norms) throw new AetherError('config_error', `${dir}: ${archName} needs post_attention_layernorm / post_feedforward_layernorm weights`, { file: dir });
  tie = config.tie_embeddings;
  const tensors: PlannedTensor[] = [];
  const used = new Set<string>();
  const stDtype = (t: SafetensorsTensor): SourceDType => (t.dtype === 'F32' ? 'f32' : t.dtype === 'F16' ? 'f16' : 'bf16');
  for (const name of tensorOrder(config)) {
    const computed = computedTensors.get(name);
    if (computed) {
      tensors.push({
        name, dtype: 'f32', shape: [computed.length], data: new Uint8Array(computed.buffer),
        src: { file: cfgPath, name: `config.json rope_scaling`, offset: 0, dtype: 'f32', ne0: computed.length, rows: 1 },
        note: name === 'rope_freqs.weight' ? 'computed from rope_scaling (llama3), as llama.cpp\'s converter does' : `from rope_scaling.${name.includes('long') ? 'long' : 'short'}_factor`,
      });
      continue;
    }
    const g = /^blk\.(\d+)\.ffn_(gate|up)\.weight$/.exec(name);
    let t = mapped.get(name);
    let rowStart = 0, rowCount: number | undefined, srcKey = name, note: string | undefined;
    if (!t && g && mapped.has(`blk.${g[1]}.ffn_gate_up.weight`)) {
      srcKey = `blk.${g[1]}.ffn_gate_up.weight`;
      t = mapped.get(srcKey)!;
      const h = config.hidden_dim;
      if (t.shape.length !== 2 || t.shape[0] !== 2 * h) throw new AetherError('config_error', `${t.file}: ${t.name} has shape [${t.shape.join(', ')}], expected [${2 * h}, ${dim}]`, { file: t.file, field: t.name });
      rowStart = g[2] === 'gate' ? 0 : h;
      rowCount = h;
      note = `rows ${rowStart}..${rowStart + h} of fused ${t.name}`;
    }
    if (!t) throw new AetherError('config_error', `${dir}: tensor for '${name}' is missing (needed by ${archName} with ${config.n_layers} layers)`, { file: dir, field: name });
    if (t.shape.length < 1 || t.shape.length > 2) throw new AetherError('unsupported', `${t.file}: ${t.name} has ${t.shape.length} dims (expected 1 or 2)`, { file: t.file, field: t.name });
    used.add(srcKey);
    const ne0 = t.shape[t.shape.length - 1];
    const rows = rowCount ?? (t.shape.length === 2 ? t.shape[0] : 1);
    const dt = stDtype(t);
    const shape = t.shape.length === 2 ? [ne0, rows] : [ne0];
    const tgt = targetDtype(shape, dt, quant);
    // Gemma's RMSNorm computes x * (1 + w): store 1 + w (the GGUF convention, which the forward uses)
    const addOne = arch.startsWith('gemma') && name.endsWith('norm.weight');
    tensors.push({
      name, dtype: tgt.dtype, shape,
      src: { file: t.file, name: t.name, offset: t.offset + rowStart * ne0 * (t.dtype === 'F32' ? 4 : 2), dtype: dt, ne0, rows },
      note: [note, tgt.note, addOne ? '1 + w (Gemma norm)' : undefined].filter(Boolean).join('; ') || undefined,
      ...(addOne ? { addOne: true } : {}),
    });
  }
  const extra = [...mapped.keys()].filter((k) => !used.has(k));
  if (extra.length) throw new AetherError('unsupported', `${dir}: unexpected tensor(s) for ${archName}: ${extra.slice(0, 8).map((k) => mapped.get(k)!.name).join(', ')}`, { file: dir });
  const inputFiles = [cfgPath, ...st.files.map((f) => f.path)];
  return { input: dir, inputFormat: 'safetensors', inputFiles, config, tokenizer, tensors, name: pathMod.basename(pathMod.resolve(dir)), notes };
}

/** Read an input (GGUF file or HF folder) and plan the output tensors; reads no tensor data. */
export async function planConversion(input: string, quant: QuantMode = 'keep'): Promise<ConversionPlan> {
  if (!QUANT_MODES.includes(quant)) throw new AetherError('invalid_argument', `--quant ${quant}: expected one of ${QUANT_MODES.join(', ')}`);
  const fsp = await nodeFs();
  const st = await fsp.stat(input).catch(() => undefined);
  if (!st) throw new AetherError('load_error', `${input}: no such file or directory`, { file: input });
  if (st.isDirectory()) return planHF(input, quant);
  const fh = await fsp.open(input, 'r');
  let magic: Uint8Array;
  try {
    magic = await readExact(fh, 0, Math.min(4, st.size), input, 'magic', st.size);
  } finally {
    await fh.close();
  }
  if (magic.length === 4 && String.fromCharCode(...magic) === 'GGUF') return planGGUF(input, quant);
  if (input.endsWith('.safetensors')) {
    const pathMod = await import('node:path');
    return planHF(pathMod.dirname(input), quant);
  }
  return planGGUF(input, quant); // readGGUF reports the bad magic
}

// ---------------------------------------------------------------------------------------------

async function sha256File(path: string, signal: AbortSignal | undefined, onChunk: (n: number) => void): Promise<string> {
  const crypto = await import('node:crypto');
  const fs = await import('node:fs');
  const h = crypto.createHash('sha256');
  const s = fs.createReadStream(path, { highWaterMark: 4 << 20 });
  try {
    for await (const chunk of s) {
      if (signal?.aborted) throw new AetherError('aborted', `${path}: hashing aborted`);
      h.update(chunk as Uint8Array);
      onChunk((chunk as Uint8Array).length);
    }
  } finally {
    s.destroy();
  }
  return h.digest('hex');
}

async function sameFile(a: string, b: string): Promise<boolean> {
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  if (pathMod.resolve(a) === pathMod.resolve(b)) return true;
  const [sa, sb] = await Promise.all([fsp.stat(a).catch(() => undefined), fsp.stat(b).catch(() => undefined)]);
  return !!sa && !!sb && sa.dev === sb.dev && sa.ino === sb.ino;
}

/**
 * Refuse an output path (or its OUT.tmp) that is an input file: any file of the input, by path or by inode
 * (hard links, symlinks), every existing file of an HF input folder (tokenizer.model, tokenizer_config.json, ...),
 * and the names the HF reader looks for even when absent (writing one would change what the folder means).
 */
export async function checkOutputPath(input: string, output: string, inputFiles: string[]): Promise<void> {
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  const refuse = (f: string) => {
    throw new AetherError('invalid_argument', `output ${output} is the input file ${f}: refusing to overwrite the input`, { file: output, input: f });
  };
  const outs = [output, output + '.tmp'];
  const inDir = (await fsp.stat(input).catch(() => undefined))?.isDirectory() ? input : undefined;
  const candidates = [...inputFiles];
  if (inDir) {
    for (const n of HF_READ_FILES) candidates.push(pathMod.join(inDir, n));
    for (const n of await fsp.readdir(inDir).catch(() => [] as string[])) candidates.push(pathMod.join(inDir, n));
  }
  for (const o of outs) {
    for (const f of candidates) if (await sameFile(f, o)) refuse(f);
    if (inDir) {
      // the same folder reached by another path (symlink, ..): compare the parent folder's identity and the name
      const [a, b] = await Promise.all([fsp.realpath(inDir).catch(() => undefined), fsp.realpath(pathMod.dirname(o)).catch(() => undefined)]);
      const base = pathMod.basename(o);
      if (a && b && a === b && ((HF_READ_FILES as readonly string[]).includes(base) || base.endsWith('.safetensors') || base.endsWith('.json'))) {
        refuse(pathMod.join(inDir, base));
      }
    }
  }
}

/**
 * Convert `input` (GGUF file or HF folder) to `output` (.rknot). Refuses output == any input file
 * (also via OUT.tmp); writes OUT.tmp and renames; on error or abort OUT.tmp is removed.
 */
export async function convertModel(input: string, output: string, opts: ConvertOptions = {}): Promise<ConvertSummary> {
  const t0 = performance.now();
  const quant = opts.quant ?? 'keep';
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  const plan = await planConversion(input, quant);
  await checkOutputPath(input, output, plan.inputFiles);
  if ((await fsp.stat(output).catch(() => undefined))?.isDirectory()) throw new AetherError('invalid_argument', `output ${output} is a directory`);
  const sizes = await Promise.all(plan.inputFiles.map(async (f) => (await fsp.stat(f)).size));
  const inputBytes = sizes.reduce((a, b) => a + b, 0);

  const files: { name: string; size: number; sha256?: string }[] = plan.inputFiles.map((f, i) => ({ name: pathMod.basename(f), size: sizes[i] }));
  if (opts.hashInput !== false) {
    let done = 0;
    for (let i = 0; i < plan.inputFiles.length; i++) {
      files[i].sha256 = await sha256File(plan.inputFiles[i], opts.signal, (n) => {
        done += n;
        opts.onProgress?.({ phase: 'hash', done, total: inputBytes });
      });
    }
  }
  const meta: RknotWriteMetadata = {
    config: plan.config,
    tokenizer: plan.tokenizer,
    tensors: plan.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })),
    kv_cache: { n_ctx: plan.config.n_ctx, overflow: 'error' },
    source: {
      converter: CONVERTER_VERSION,
      input: pathMod.basename(pathMod.resolve(input)),
      input_format: plan.inputFormat,
      files,
      quant,
      ...(plan.name ? { name: plan.name } : {}),
    },
  };

  const chunkBytes = opts.chunkBytes ?? 8 << 20;
  const handles = new Map<string, FileHandle>();
  const fileSizes = new Map(plan.inputFiles.map((f, i) => [f, sizes[i]]));
  const handle = async (f: string) => {
    let h = handles.get(f);
    if (!h) { h = await fsp.open(f, 'r'); handles.set(f, h); }
    return h;
  };
  // chunks are written before the next one is produced (writeRknot awaits each write), so buffers are reused
  const scratch = new ConvertScratch();
  async function* chunks(p: PlannedTensor): AsyncIterable<Uint8Array> {
    if (p.data) { yield p.data; return; }
    const { src } = p;
    const srcRow = sourceBytes(src.dtype, src.ne0);
    const rowsPer = Math.max(1, Math.floor(chunkBytes / Math.max(srcRow, src.ne0 * 4)));
    const fh = await handle(src.file);
    const fsize = fileSizes.get(src.file) ?? (await fh.stat()).size;
    for (let r0 = 0; r0 < src.rows; r0 += rowsPer) {
      const n = Math.min(rowsPer, src.rows - r0);
      const raw = await readExact(fh, src.offset + r0 * srcRow, n * srcRow, src.file, src.name, fsize, scratch.input(n * srcRow));
      if (src.dtype === p.dtype && !p.addOne) {
        if (DTYPES[p.dtype].scaleOffsets) {
          const bad = findBadScale(p.dtype, raw);
          if (bad >= 0) {
            const at = src.offset + r0 * srcRow + bad * DTYPES[p.dtype].typeSize;
            throw formatError(src.file, src.name, at, `block has a NaN or Inf scale (${p.dtype})`);
          }
        }
        yield raw;
        continue;
      }
      try {
        if (p.addOne) {
          // f32 copy (the scratch buffer is reused by the next chunk), then x + 1 in f32
          const f = new Float32Array(new Uint8Array(convertElements(src.dtype, 'f32', raw, n * src.ne0, scratch)).buffer);
          for (let i = 0; i < f.length; i++) f[i] = f[i] + 1;
          yield new Uint8Array(f.buffer);
        } else {
          yield convertElements(src.dtype, p.dtype, raw, n * src.ne0, scratch);
        }
      } catch (e) {
        if (e instanceof ValueError) {
          const el = r0 * src.ne0 + e.index;
          throw new AetherError('format_error', `${src.file}: tensor '${src.name}' element ${el} (row ${Math.floor(el / src.ne0)}): ${e.what}: ${e.value}`, { file: src.file, field: src.name, element: el });
        }
        throw e;
      }
    }
  }
  let written: RknotMetadata;
  let fileSize: number;
  try {
    const res = await writeRknot(output, meta, (spec, i) => chunks(plan.tensors[i]), {
      signal: opts.signal,
      onProgress: (e) => opts.onProgress?.({ phase: 'convert', done: e.written, total: e.total, tensor: e.tensor }),
    });
    written = res.meta;
    fileSize = res.fileSize;
  } finally {
    for (const h of handles.values()) await h.close();
  }
  const nParams = plan.tensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
  const dataBytes = written.tensors.reduce((a, t) => a + t.bytes, 0);
  return {
    input, output, input_format: plan.inputFormat, arch: plan.config.arch, quant,
    n_tensors: plan.tensors.length, n_params: nParams, input_bytes: inputBytes, output_bytes: fileSize, data_bytes: dataBytes,
    seconds: (performance.now() - t0) / 1000,
    config: plan.config,
    tensors: plan.tensors.map((t, i) => ({ name: t.name, src: t.src.name, src_dtype: t.src.dtype, dtype: t.dtype, shape: t.shape, bytes: written.tensors[i].bytes, ...(t.note ? { note: t.note } : {}) })),
    notes: plan.notes,
  };
}
