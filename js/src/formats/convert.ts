/**
 * Converter: GGUF file or Hugging Face folder -> .rknot.
 *
 * - GGUF (archs llama, qwen2, phi3): config from `{arch}.*` keys, tokenizer from tokenizer.ggml.*,
 *   rope_type from the arch (llama -> 'norm', qwen2 / phi3 -> 'neox').
 * - HF folder (config.json: LlamaForCausalLM, Qwen2ForCausalLM, Phi3ForCausalLM + safetensors): names
 *   mapped to GGUF style; q/k weights are kept exactly as stored (HF rotate-half layout) and the config
 *   says rope_type 'neox'.
 * - Phi-3 fused gate_up (GGUF ffn_up with 2*hidden rows, HF gate_up_proj) is split by rows into ffn_gate
 *   (first hidden rows) and ffn_up (next hidden rows): exact, no requantisation. Fused qkv stays fused.
 * - Quantisation: `keep` keeps dtypes (bf16 -> f16); f32 / f16 convert; q8_0 / q4_0 quantise every 2-D
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
import type { RknotConfig, RknotMetadata } from './rknot-read.js';
import { writeRknot, type RknotTensorSpec, type RknotWriteMetadata } from './rknot-write.js';
import { readSafetensorsModel, type SafetensorsTensor } from './safetensors.js';

export const CONVERTER_VERSION = 'aether-convert/0.1.0';
export type QuantMode = 'keep' | 'f32' | 'f16' | 'q8_0' | 'q4_0';
export const QUANT_MODES: readonly QuantMode[] = ['keep', 'f32', 'f16', 'q8_0', 'q4_0'];

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
    names.push(p + 'attn_output.weight', p + 'ffn_norm.weight', p + 'ffn_gate.weight', p + 'ffn_up.weight', p + 'ffn_down.weight');
  }
  names.push('output_norm.weight');
  if (!config.tie_embeddings) names.push('output.weight');
  return names;
}

function targetDtype(shape: number[], src: SourceDType, quant: QuantMode): { dtype: DTypeName; note?: string } {
  if (shape.length === 1) return { dtype: 'f32' };
  switch (quant) {
    case 'keep': return { dtype: src === 'bf16' ? 'f16' : src, note: src === 'bf16' ? 'bf16 stored as f16' : undefined };
    case 'f32': case 'f16': return { dtype: quant };
    case 'q8_0': case 'q4_0':
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

const GGUF_ROPE: Record<string, 'norm' | 'neox'> = { llama: 'norm', qwen2: 'neox', phi3: 'neox' };

async function planGGUF(path: string, quant: QuantMode): Promise<ConversionPlan> {
  const g = await readGGUF(path);
  const m = g.metadata;
  const notes: string[] = [];
  const arch = m.get('general.architecture');
  if (typeof arch !== 'string') throw formatError(path, 'general.architecture', undefined, 'missing or not a string');
  if (!(arch in GGUF_ROPE)) throw new AetherError('unsupported', `${path}: general.architecture '${arch}' is not supported (expected llama, qwen2 or phi3)`, { file: path, field: 'general.architecture' });
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
  const dim = num('embedding_length', true)!;
  const nHeads = num('attention.head_count', true)!;
  const headDim = num('attention.key_length', false) ?? dim / nHeads;
  if (!Number.isInteger(headDim)) throw new AetherError('config_error', `${path}: embedding_length ${dim} is not a multiple of head_count ${nHeads}`, { file: path });
  const vocabMeta = num('vocab_size', false);
  const vocab = embd.dims[1];
  if (vocabMeta !== undefined && vocabMeta !== vocab) throw new AetherError('config_error', `${path}: ${arch}.vocab_size ${vocabMeta} does not match token_embd.weight rows ${vocab}`, { file: path });
  for (const t of g.tensors) {
    if (/^rope_(freqs|factors_long|factors_short)\.weight$/.test(t.name)) {
      throw new AetherError('unsupported', `${path}: tensor ${t.name}: RoPE scaling (llama3 / LongRoPE frequency factors) is not supported yet`, { file: path, field: t.name });
    }
  }
  const scaling = m.get(`${arch}.rope.scaling.type`);
  if (scaling !== undefined && scaling !== 'none' && !(scaling === 'linear' && (m.get(`${arch}.rope.scaling.factor`) ?? 1) === 1)) {
    throw new AetherError('unsupported', `${path}: ${arch}.rope.scaling.type '${String(scaling)}' is not supported`, { file: path, field: `${arch}.rope.scaling.type` });
  }
  const tokenizer = await tokenizerFromGGUF(g);
  const fused = byName.has('blk.0.attn_qkv.weight');
  const config: RknotConfig = {
    arch: arch as RknotConfig['arch'],
    dim,
    n_layers: num('block_count', true)!,
    n_heads: nHeads,
    n_kv_heads: num('attention.head_count_kv', false) ?? nHeads,
    head_dim: headDim,
    hidden_dim: num('feed_forward_length', true)!,
    vocab_size: vocab,
    n_ctx: num('context_length', true)!,
    norm_eps: f32Shortest(num('attention.layer_norm_rms_epsilon', true)!),
    rope_theta: f32Shortest(num('rope.freq_base', false) ?? 10000),
    rope_dim: num('rope.dimension_count', false) ?? headDim,
    rope_type: GGUF_ROPE[arch],
    tie_embeddings: !byName.has('output.weight'),
    qkv_bias: byName.has(fused ? 'blk.0.attn_qkv.bias' : 'blk.0.attn_q.bias'),
    fused_qkv: fused,
    bos_token_id: tokenizer.bos_token_id ?? null,
    eos_token_id: tokenizer.eos_token_id ?? null,
  };
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
  Phi3ForCausalLM: 'phi3',
};

function mapHFName(n: string): { name: string; split?: 'gate_up' } | null | undefined {
  if (n === 'model.embed_tokens.weight') return { name: 'token_embd.weight' };
  if (n === 'model.norm.weight') return { name: 'output_norm.weight' };
  if (n === 'lm_head.weight') return { name: 'output.weight' };
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(n);
  if (!m) return undefined;
  const [, l, mid, kind] = m;
  const map: Record<string, string> = {
    'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
    'self_attn.qkv_proj': 'attn_qkv', 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
    input_layernorm: 'attn_norm', post_attention_layernorm: 'ffn_norm',
  };
  if (mid === 'mlp.gate_up_proj' && kind === 'weight') return { name: `blk.${l}.ffn_gate_up.weight`, split: 'gate_up' };
  if (mid === 'self_attn.rotary_emb.inv_freq') return null;
  const g = map[mid];
  return g ? { name: `blk.${l}.${g}.${kind}` } : undefined;
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
  const rs = hf.rope_scaling as Record<string, unknown> | null | undefined;
  if (rs !== null && rs !== undefined) {
    const t = rs.rope_type ?? rs.type;
    if (!(t === 'default' || (t === 'linear' && rs.factor === 1))) {
      throw new AetherError('unsupported', `${cfgPath}: rope_scaling ${JSON.stringify(rs)} is not supported yet`, { file: cfgPath, field: 'rope_scaling' });
    }
  }
  const dim = int('hidden_size');
  const nHeads = int('num_attention_heads');
  const headDim = int('head_dim', dim / nHeads);
  const prf = hf.partial_rotary_factor === undefined ? 1 : numf('partial_rotary_factor');
  const st = await readSafetensorsModel(dir);
  const tokenizer = await tokenizerFromHFFolder(dir);
  const mapped = new Map<string, SafetensorsTensor>();
  const notes: string[] = [];
  for (const [n, t] of st.tensors) {
    const m = mapHFName(n);
    if (m === null) continue;
    if (m === undefined) throw new AetherError('unsupported', `${t.file}: tensor '${n}' has no mapping for ${archName}`, { file: t.file, field: n });
    mapped.set(m.name, t);
  }
  const embd = mapped.get('token_embd.weight');
  if (!embd || embd.shape.length !== 2) throw new AetherError('config_error', `${dir}: model.embed_tokens.weight is missing or not 2-D`, { file: dir });
  const vocab = embd.shape[0];
  const cfgVocab = int('vocab_size', vocab);
  if (cfgVocab !== vocab) throw new AetherError('config_error', `${cfgPath}: vocab_size ${cfgVocab} does not match model.embed_tokens.weight rows ${vocab}`, { file: cfgPath, field: 'vocab_size' });
  let tie = hf.tie_word_embeddings === true;
  if (tie && mapped.has('output.weight')) {
    mapped.delete('output.weight');
    notes.push('tie_word_embeddings: lm_head.weight ignored');
  }
  if (!tie && !mapped.has('output.weight')) throw new AetherError('config_error', `${dir}: lm_head.weight is missing and tie_word_embeddings is not true`, { file: dir, field: 'lm_head.weight' });
  const fused = mapped.has('blk.0.attn_qkv.weight');
  const eos = Array.isArray(hf.eos_token_id) ? hf.eos_token_id[0] : hf.eos_token_id;
  const bos = Array.isArray(hf.bos_token_id) ? hf.bos_token_id[0] : hf.bos_token_id;
  const config: RknotConfig = {
    arch,
    dim,
    n_layers: int('num_hidden_layers'),
    n_heads: nHeads,
    n_kv_heads: int('num_key_value_heads', nHeads),
    head_dim: headDim,
    hidden_dim: int('intermediate_size'),
    vocab_size: vocab,
    n_ctx: int('max_position_embeddings'),
    norm_eps: numf('rms_norm_eps', 1e-6),
    rope_theta: numf('rope_theta', 10000),
    rope_dim: Math.round(headDim * prf),
    rope_type: 'neox',
    tie_embeddings: tie,
    qkv_bias: mapped.has(fused ? 'blk.0.attn_qkv.bias' : 'blk.0.attn_q.bias'),
    fused_qkv: fused,
    bos_token_id: Number.isSafeInteger(bos) ? (bos as number) : tokenizer.bos_token_id ?? null,
    eos_token_id: Number.isSafeInteger(eos) ? (eos as number) : tokenizer.eos_token_id ?? null,
  };
  tie = config.tie_embeddings;
  const tensors: PlannedTensor[] = [];
  const used = new Set<string>();
  const stDtype = (t: SafetensorsTensor): SourceDType => (t.dtype === 'F32' ? 'f32' : t.dtype === 'F16' ? 'f16' : 'bf16');
  for (const name of tensorOrder(config)) {
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
    tensors.push({
      name, dtype: tgt.dtype, shape,
      src: { file: t.file, name: t.name, offset: t.offset + rowStart * ne0 * (t.dtype === 'F32' ? 4 : 2), dtype: dt, ne0, rows },
      note: [note, tgt.note].filter(Boolean).join('; ') || undefined,
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
 * Convert `input` (GGUF file or HF folder) to `output` (.rknot). Refuses output == any input file
 * (also via OUT.tmp); writes OUT.tmp and renames; on error or abort OUT.tmp is removed.
 */
export async function convertModel(input: string, output: string, opts: ConvertOptions = {}): Promise<ConvertSummary> {
  const t0 = performance.now();
  const quant = opts.quant ?? 'keep';
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  const plan = await planConversion(input, quant);
  for (const f of plan.inputFiles) {
    if (await sameFile(f, output) || await sameFile(f, output + '.tmp')) {
      throw new AetherError('invalid_argument', `output ${output} is the input file ${f}: refusing to overwrite the input`, { file: output });
    }
  }
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
    kv_cache: { dtype: 'f32', n_ctx: plan.config.n_ctx, overflow: 'error' },
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
    const { src } = p;
    const srcRow = sourceBytes(src.dtype, src.ne0);
    const rowsPer = Math.max(1, Math.floor(chunkBytes / Math.max(srcRow, src.ne0 * 4)));
    const fh = await handle(src.file);
    const fsize = fileSizes.get(src.file) ?? (await fh.stat()).size;
    for (let r0 = 0; r0 < src.rows; r0 += rowsPer) {
      const n = Math.min(rowsPer, src.rows - r0);
      const raw = await readExact(fh, src.offset + r0 * srcRow, n * srcRow, src.file, src.name, fsize, scratch.input(n * srcRow));
      if (src.dtype === p.dtype) {
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
        yield convertElements(src.dtype, p.dtype, raw, n * src.ne0, scratch);
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
