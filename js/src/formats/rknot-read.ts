/**
 * .rknot reading and validation (format: docs/rknot.md, the only copy of the spec): the fixed header,
 * the JSON metadata, the tensor table, and the per-tensor checks (checksum, block scales) shared by the
 * file readers (rknot-node.ts) and the streaming loader (js/src/loader/stream.ts). Browser-safe.
 */
import { AetherError } from '../errors.js';
import type { TokenizerData } from '../tokenizer/types.js';
import { formatChecksum, parseChecksum } from './checksum.js';
import { DTYPES, isDTypeName, tensorBytes, type DTypeName } from './dtypes.js';
import { findBadScale } from './quantize.js';

/** "RKNOT\0\r\n" */
export const RKNOT_MAGIC = new Uint8Array([0x52, 0x4b, 0x4e, 0x4f, 0x54, 0x00, 0x0d, 0x0a]);
export const RKNOT_VERSION = 1;
export const RKNOT_HEADER_SIZE = 32;
export const RKNOT_ALIGNMENT = 64;
export const RKNOT_MAX_JSON = 256 << 20;
/**
 * Required features this reader implements. A writer lists in `format.required_features` every feature its
 * config uses (writeRknot adds them from the config: `configFeatures`), so a reader that predates one refuses
 * the file instead of ignoring, say, the RoPE scaling and producing garbage.
 */
export const RKNOT_FEATURES = ['rope_scaling', 'sliding_window', 'softcap', 'qk_norm', 'post_norms', 'gelu_ffn', 'embd_scale', 'attn_scale', 'ffn_compressed'] as const;
export const RKNOT_KNOWN_FEATURES: ReadonlySet<string> = new Set<string>(RKNOT_FEATURES);

export type RknotArch = 'llama' | 'qwen2' | 'phi3' | 'qwen3' | 'gemma' | 'gemma2' | 'gemma3';
export type RopeType = 'norm' | 'neox';

/**
 * RoPE scaling (config.rope_scaling), with llama.cpp's semantics:
 *  - linear: angles of full-attention layers times 1 / factor (Gemma 3 4B+ global layers);
 *  - llama3: frequency divisors in tensor `rope_freqs.weight` [rope_dim / 2] (the optional other fields are
 *    informational: a GGUF carries only the tensor);
 *  - longrope: tensors `rope_factors_long.weight` / `rope_factors_short.weight` [rope_dim / 2]; the long factors are
 *    used when the runtime context exceeds `original_context`, the short ones otherwise; cos / sin are multiplied
 *    by `attn_factor` (Phi-3 / 3.5 128k).
 */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor?: number; low_freq_factor?: number; high_freq_factor?: number; original_context?: number }
  | { type: 'longrope'; original_context: number; attn_factor: number };

export interface RknotConfig {
  arch: RknotArch;
  dim: number;
  n_layers: number;
  n_heads: number;
  n_kv_heads: number;
  head_dim: number;
  hidden_dim: number;
  vocab_size: number;
  /** context length the model was trained for */
  n_ctx: number;
  norm_eps: number;
  rope_theta: number;
  /** number of rotated dims per head (<= head_dim, even) */
  rope_dim: number;
  /** 'norm': adjacent pairs (x[2i], x[2i+1]) (GGUF llama); 'neox': rotate-half (x[i], x[i + rope_dim/2]) */
  rope_type: RopeType;
  tie_embeddings: boolean;
  qkv_bias: boolean;
  fused_qkv: boolean;
  bos_token_id: number | null;
  eos_token_id: number | null;
  // ---- architecture variants (absent = the llama default in brackets) ----
  /** FFN gate activation ['silu']: 'gelu_tanh' = GeGLU (Gemma) */
  ffn_act?: 'silu' | 'gelu_tanh';
  /** token embeddings are multiplied by this [1] (Gemma: sqrt(dim)) */
  embd_scale?: number;
  /** q.k scale [1 / sqrt(head_dim)] (Gemma 2/3: query_pre_attn_scalar^-1/2) */
  attn_scale?: number;
  /** attention scores -> cap tanh(s / cap) [none] (Gemma 2: 50) */
  attn_softcap?: number;
  /** logits -> cap tanh(l / cap) [none] (Gemma 2: 30) */
  final_softcap?: number;
  /** RMSNorm of each q / k head before RoPE: tensors attn_q_norm / attn_k_norm [head_dim] [false] (Qwen3, Gemma 3) */
  qk_norm?: boolean;
  /** RMSNorm of the attention and FFN outputs before their residual adds: post_attention_norm / post_ffw_norm [dim] [false] (Gemma 2/3) */
  post_norms?: boolean;
  /** [none] */
  rope_scaling?: RopeScaling;
  /** window of the SWA layers: a query at position p sees positions p - sliding_window + 1 .. p [none] */
  sliding_window?: number;
  /** per layer: true = sliding-window layer (length n_layers; needs sliding_window) [all false] */
  swa_layers?: boolean[];
  /** RoPE base of the SWA layers, which then use no linear scaling (Gemma 3 local layers: 10000) [rope_theta, same scaling] */
  rope_theta_swa?: number;
}

/** Features (RKNOT_FEATURES) a config uses. */
export function configFeatures(c: Partial<RknotConfig>): string[] {
  const f: string[] = [];
  if (c.rope_scaling) f.push('rope_scaling');
  if (c.sliding_window || c.rope_theta_swa !== undefined || c.swa_layers?.some(Boolean)) f.push('sliding_window');
  if (c.attn_softcap || c.final_softcap) f.push('softcap');
  if (c.qk_norm) f.push('qk_norm');
  if (c.post_norms) f.push('post_norms');
  if (c.ffn_act !== undefined && c.ffn_act !== 'silu') f.push('gelu_ffn');
  if (c.embd_scale !== undefined && c.embd_scale !== 1) f.push('embd_scale');
  if (c.attn_scale !== undefined) f.push('attn_scale');
  return f;
}

export interface RknotTensor {
  name: string;
  dtype: DTypeName;
  /** ggml order: shape[0] = row length (ne0), shape[1] = rows */
  shape: number[];
  /** byte offset in the data section (multiple of 64) */
  offset: number;
  bytes: number;
  /** 'crc32:' + 8 lowercase hex digits, CRC-32 (zlib) of the tensor's bytes */
  checksum: string;
}

export interface RknotFormatInfo {
  version: number;
  required_features: string[];
  optional_features: string[];
}

export interface RknotKVCachePolicy {
  /** KV-cache dtype of K and V (the loader's kvDtype option overrides it; absent: the runtime default, f16). */
  dtype?: KvCacheDtype;
  /** Per-cache dtypes (llama.cpp cache_type_k / cache_type_v); override dtype. */
  dtype_k?: KvCacheDtype;
  dtype_v?: KvCacheDtype;
  n_ctx?: number;
  overflow?: 'error' | string;
}
/** The dtypes a KV cache may have. */
export const KV_CACHE_DTYPES = ['f32', 'f16', 'q8_0', 'q4_0'] as const;
export type KvCacheDtype = typeof KV_CACHE_DTYPES[number];

export interface RknotMetadata {
  format: RknotFormatInfo;
  config: RknotConfig;
  tokenizer: TokenizerData;
  tensors: RknotTensor[];
  kv_cache?: RknotKVCachePolicy;
  saturation?: Record<string, unknown>;
  compression?: Record<string, unknown>;
  quality?: Record<string, unknown>[];
  source?: Record<string, unknown>;
  /** unknown optional keys are preserved */
  [key: string]: unknown;
}

export interface RknotHeader {
  version: number;
  flags: number;
  jsonLength: number;
  /** bytes of the data section (multiple of 64) */
  dataSize: number;
  /** absolute file offset of the data section: align64(32 + jsonLength) */
  dataOffset: number;
}

export function fmtErr(file: string, field: string, offset: number | undefined, msg: string, code: 'format_error' | 'unsupported' | 'config_error' = 'format_error'): AetherError {
  const at = offset === undefined ? '' : ` at byte ${offset}`;
  return new AetherError(code, `${file}: ${field}${at}: ${msg}`, { file, field, offset });
}

export const align64 = (n: number): number => Math.ceil(n / RKNOT_ALIGNMENT) * RKNOT_ALIGNMENT;

/**
 * Parse the fixed 32-byte header. `bytes` must hold at least 32 bytes (else format_error: truncated).
 * `fileSize`, when known, is checked against dataOffset + dataSize.
 */
export function parseRknotHeader(bytes: Uint8Array, fileName: string, fileSize?: number): RknotHeader {
  if (bytes.length < RKNOT_HEADER_SIZE) {
    throw fmtErr(fileName, 'header', bytes.length, `truncated: the header needs ${RKNOT_HEADER_SIZE} bytes, got ${bytes.length}`);
  }
  for (let i = 0; i < 8; i++) {
    if (bytes[i] !== RKNOT_MAGIC[i]) {
      const got = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join(' ');
      throw fmtErr(fileName, 'magic', 0, `not a .rknot file: expected magic 52 4b 4e 4f 54 00 0d 0a ("RKNOT\\0\\r\\n"), got ${got}`);
    }
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, RKNOT_HEADER_SIZE);
  const version = dv.getUint32(8, true);
  if (version === 0) throw fmtErr(fileName, 'version', 8, `format version 0 is invalid (expected ${RKNOT_VERSION})`);
  if (version > RKNOT_VERSION) throw fmtErr(fileName, 'version', 8, `format version ${version} is newer than this reader (supports ${RKNOT_VERSION})`, 'unsupported');
  const flags = dv.getUint32(12, true);
  if (flags !== 0) throw fmtErr(fileName, 'flags', 12, `unknown flag bits 0x${flags.toString(16)} (version ${version} defines none)`, 'unsupported');
  const jl = dv.getBigUint64(16, true);
  if (jl === 0n || jl > BigInt(RKNOT_MAX_JSON)) throw fmtErr(fileName, 'json_length', 16, `JSON metadata length ${jl}, expected 1..${RKNOT_MAX_JSON}`);
  const ds = dv.getBigUint64(24, true);
  if (ds > BigInt(Number.MAX_SAFE_INTEGER) || ds % 64n !== 0n) throw fmtErr(fileName, 'data_size', 24, `data section size ${ds} is not a multiple of 64 below 2^53`);
  const jsonLength = Number(jl);
  const dataSize = Number(ds);
  const dataOffset = align64(RKNOT_HEADER_SIZE + jsonLength);
  if (fileSize !== undefined) {
    const want = dataOffset + dataSize;
    if (fileSize < want) throw fmtErr(fileName, 'file size', fileSize, `truncated: the header says the file has ${want} bytes (data section ${dataSize} bytes at ${dataOffset}), got ${fileSize}`);
    if (fileSize > want) throw fmtErr(fileName, 'file size', want, `${fileSize - want} unexpected bytes after the data section (expected file size ${want})`);
  }
  return { version, flags, jsonLength, dataSize, dataOffset };
}

/** Decode + parse the JSON metadata (bytes [32, 32 + jsonLength)). Not validated: see validateRknotMetadata. */
export function parseRknotJson(bytes: Uint8Array, fileName: string): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw fmtErr(fileName, 'metadata', RKNOT_HEADER_SIZE, 'JSON metadata is not valid UTF-8');
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fmtErr(fileName, 'metadata', RKNOT_HEADER_SIZE, `JSON metadata does not parse: ${(e as Error).message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// validation

const ARCHS = ['llama', 'qwen2', 'phi3', 'qwen3', 'gemma', 'gemma2', 'gemma3'];
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Check everything about the metadata that can be checked without the tensor bytes: format version and
 * features, config values, tokenizer, tensor table (names, dtypes, shapes, sizes, alignment, range,
 * overlap, checksum syntax), and that every tensor the config implies exists with the right shape.
 * `fileSize` (if known) and `header` (if given) add the range checks against the data section.
 * Errors: format_error (structure), unsupported (newer version, unknown required feature),
 * config_error (config inconsistent with itself or the tensors). Returns the metadata, typed.
 */
export function validateRknotMetadata(meta: unknown, fileSize: number | undefined, fileName: string, header?: RknotHeader): RknotMetadata {
  const F = (field: string, msg: string) => fmtErr(fileName, field, undefined, msg);
  const C = (field: string, msg: string) => fmtErr(fileName, field, undefined, msg, 'config_error');
  if (!isObj(meta)) throw F('metadata', 'JSON metadata is not an object');
  // format
  const fmt = meta.format;
  if (!isObj(fmt)) throw F('format', 'missing or not an object');
  if (fmt.version !== (header?.version ?? RKNOT_VERSION)) {
    if (typeof fmt.version === 'number' && fmt.version > RKNOT_VERSION) throw fmtErr(fileName, 'format.version', undefined, `format version ${fmt.version} is newer than this reader (supports ${RKNOT_VERSION})`, 'unsupported');
    throw F('format.version', `expected ${header?.version ?? RKNOT_VERSION}, got ${JSON.stringify(fmt.version)}`);
  }
  for (const k of ['required_features', 'optional_features'] as const) {
    const v = fmt[k];
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw F(`format.${k}`, 'expected an array of strings');
  }
  for (const f of fmt.required_features as string[]) {
    if (!RKNOT_KNOWN_FEATURES.has(f)) {
      throw fmtErr(fileName, 'format.required_features', undefined, `the file requires feature '${f}' which this reader does not implement (known: ${[...RKNOT_KNOWN_FEATURES].join(', ') || 'none'})`, 'unsupported');
    }
  }

  // config
  const c = meta.config;
  if (!isObj(c)) throw F('config', 'missing or not an object');
  if (typeof c.arch !== 'string') throw F('config.arch', 'missing');
  if (!ARCHS.includes(c.arch)) throw fmtErr(fileName, 'config.arch', undefined, `architecture '${c.arch}' is not supported (expected ${ARCHS.join(', ')})`, 'unsupported');
  const posInt = (k: string, max = 1 << 30) => {
    const v = c[k];
    if (!Number.isSafeInteger(v) || (v as number) <= 0 || (v as number) > max) throw F(`config.${k}`, `expected a positive integer <= ${max}, got ${JSON.stringify(v)}`);
    return v as number;
  };
  const dim = posInt('dim', 1 << 20), nLayers = posInt('n_layers', 4096), nHeads = posInt('n_heads', 4096), nKv = posInt('n_kv_heads', 4096);
  const headDim = posInt('head_dim', 1 << 16), hidden = posInt('hidden_dim', 1 << 24), vocab = posInt('vocab_size', 1 << 24);
  posInt('n_ctx', 1 << 30);
  const ropeDim = posInt('rope_dim', 1 << 16);
  for (const k of ['norm_eps', 'rope_theta']) {
    const v = c[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw F(`config.${k}`, `expected a finite positive number, got ${JSON.stringify(v)}`);
  }
  if (c.rope_type !== 'norm' && c.rope_type !== 'neox') throw F('config.rope_type', `expected 'norm' or 'neox', got ${JSON.stringify(c.rope_type)}`);
  for (const k of ['tie_embeddings', 'qkv_bias', 'fused_qkv']) if (typeof c[k] !== 'boolean') throw F(`config.${k}`, `expected a boolean, got ${JSON.stringify(c[k])}`);
  for (const k of ['bos_token_id', 'eos_token_id']) {
    const v = c[k];
    if (v !== null && v !== undefined && (!Number.isSafeInteger(v) || (v as number) < 0 || (v as number) >= vocab)) throw C(`config.${k}`, `expected a token id in [0, ${vocab}) or null, got ${JSON.stringify(v)}`);
  }
  if (nHeads % nKv !== 0) throw C('config.n_kv_heads', `n_heads ${nHeads} is not a multiple of n_kv_heads ${nKv}`);
  if (ropeDim > headDim || ropeDim % 2 !== 0) throw C('config.rope_dim', `rope_dim ${ropeDim} must be even and <= head_dim ${headDim}`);
  // architecture variants
  const posNum = (k: string, v: unknown, allowZero = false) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0) || v > 3e38) {
      throw F(k, `expected a finite ${allowZero ? 'non-negative' : 'positive'} number, got ${JSON.stringify(v)}`);
    }
    return v;
  };
  if (c.ffn_act !== undefined && c.ffn_act !== 'silu' && c.ffn_act !== 'gelu_tanh') throw F('config.ffn_act', `expected 'silu' or 'gelu_tanh', got ${JSON.stringify(c.ffn_act)}`);
  for (const k of ['embd_scale', 'attn_scale', 'rope_theta_swa']) if (c[k] !== undefined) posNum(`config.${k}`, c[k]);
  for (const k of ['attn_softcap', 'final_softcap']) if (c[k] !== undefined) posNum(`config.${k}`, c[k], true);
  for (const k of ['qk_norm', 'post_norms']) if (c[k] !== undefined && typeof c[k] !== 'boolean') throw F(`config.${k}`, `expected a boolean, got ${JSON.stringify(c[k])}`);
  const rs = c.rope_scaling;
  if (rs !== undefined) {
    if (!isObj(rs)) throw F('config.rope_scaling', 'expected an object');
    if (rs.type === 'linear') posNum('config.rope_scaling.factor', rs.factor);
    else if (rs.type === 'llama3') { for (const k of ['factor', 'low_freq_factor', 'high_freq_factor', 'original_context']) if (rs[k] !== undefined) posNum(`config.rope_scaling.${k}`, rs[k]); }
    else if (rs.type === 'longrope') {
      posNum('config.rope_scaling.attn_factor', rs.attn_factor);
      if (!Number.isSafeInteger(rs.original_context) || (rs.original_context as number) <= 0) throw F('config.rope_scaling.original_context', `expected a positive integer, got ${JSON.stringify(rs.original_context)}`);
    } else throw fmtErr(fileName, 'config.rope_scaling.type', undefined, `RoPE scaling ${JSON.stringify(rs.type)} is not supported (expected 'linear', 'llama3' or 'longrope')`, 'unsupported');
  }
  if (c.sliding_window !== undefined && (!Number.isSafeInteger(c.sliding_window) || (c.sliding_window as number) < 0 || (c.sliding_window as number) > 0x7fffffff)) {
    throw F('config.sliding_window', `expected a non-negative integer, got ${JSON.stringify(c.sliding_window)}`);
  }
  if (c.swa_layers !== undefined) {
    if (!Array.isArray(c.swa_layers) || c.swa_layers.length !== nLayers || !c.swa_layers.every((x) => typeof x === 'boolean')) {
      throw F('config.swa_layers', `expected an array of ${nLayers} booleans (one per layer)`);
    }
    if (c.swa_layers.some(Boolean) && !c.sliding_window) throw C('config.swa_layers', 'marks sliding-window layers but config.sliding_window is not set');
  }

  // tokenizer
  const tk = meta.tokenizer;
  if (!isObj(tk)) throw F('tokenizer', 'missing or not an object');
  if (tk.model !== 'llama' && tk.model !== 'gpt2') throw fmtErr(fileName, 'tokenizer.model', undefined, `tokenizer model ${JSON.stringify(tk.model)} is not supported (expected 'llama' or 'gpt2')`, 'unsupported');
  if (!Array.isArray(tk.tokens) || tk.tokens.length === 0) throw F('tokenizer.tokens', 'expected a non-empty array of strings');
  const nTok = tk.tokens.length;
  for (let i = 0; i < nTok; i++) if (typeof tk.tokens[i] !== 'string') throw F(`tokenizer.tokens[${i}]`, 'expected a string');
  if (nTok > vocab) throw C('tokenizer.tokens', `${nTok} tokens but config.vocab_size is ${vocab}`);
  for (const k of ['scores', 'token_type']) {
    const v = tk[k];
    if (v === undefined) continue;
    if (!Array.isArray(v) || v.length !== nTok || !v.every((x) => typeof x === 'number')) throw F(`tokenizer.${k}`, `expected an array of ${nTok} numbers`);
  }
  if (tk.merges !== undefined && (!Array.isArray(tk.merges) || !tk.merges.every((x) => typeof x === 'string'))) throw F('tokenizer.merges', 'expected an array of strings');
  for (const k of ['bos_token_id', 'eos_token_id', 'unknown_token_id', 'padding_token_id']) {
    const v = tk[k];
    if (v !== undefined && v !== null && (!Number.isSafeInteger(v) || (v as number) < 0 || (v as number) >= vocab)) throw F(`tokenizer.${k}`, `expected a token id in [0, ${vocab}), got ${JSON.stringify(v)}`);
  }

  // tensors
  if (!Array.isArray(meta.tensors)) throw F('tensors', 'expected an array');
  const dataSize = header?.dataSize;
  const dataLimit = dataSize ?? (fileSize !== undefined ? fileSize : Number.MAX_SAFE_INTEGER);
  const byName = new Map<string, RknotTensor>();
  const ranges: { name: string; start: number; end: number }[] = [];
  meta.tensors.forEach((t: unknown, i: number) => {
    if (!isObj(t)) throw F(`tensors[${i}]`, 'expected an object');
    if (typeof t.name !== 'string' || t.name.length === 0 || t.name.length > 256) throw F(`tensors[${i}].name`, 'expected a non-empty string (at most 256 characters)');
    const name = t.name;
    if (byName.has(name)) throw F(name, 'duplicate tensor name');
    if (!isDTypeName(t.dtype)) {
      throw F(`${name}.dtype`, `unknown dtype ${JSON.stringify(t.dtype)} (expected one of ${Object.keys(DTYPES).join(', ')})`);
    }
    if (!Array.isArray(t.shape) || t.shape.length < 1 || t.shape.length > 4) throw F(`${name}.shape`, `expected 1 to 4 dims, got ${JSON.stringify(t.shape)}`);
    const expect = tensorBytes(t.dtype, t.shape as number[]);
    if (typeof expect === 'string') throw F(`${name}.shape`, expect);
    if (!Number.isSafeInteger(t.offset) || (t.offset as number) < 0) throw F(`${name}.offset`, `expected a non-negative integer, got ${JSON.stringify(t.offset)}`);
    const off = t.offset as number;
    if (off % RKNOT_ALIGNMENT !== 0) throw F(`${name}.offset`, `offset ${off} is not a multiple of ${RKNOT_ALIGNMENT}`);
    if (t.bytes !== expect) throw F(`${name}.bytes`, `${t.dtype} [${(t.shape as number[]).join(', ')}] takes ${expect} bytes, the table says ${JSON.stringify(t.bytes)}`);
    if (off + expect > dataLimit) {
      throw F(`${name}.offset`, `tensor data [${off}, ${off + expect}) is out of range of the ${dataLimit}-byte data section`);
    }
    if (parseChecksum(t.checksum) === undefined) throw F(`${name}.checksum`, `expected 'crc32:' + 8 lowercase hex digits, got ${JSON.stringify(t.checksum)}`);
    byName.set(name, t as unknown as RknotTensor);
    ranges.push({ name, start: off, end: off + expect });
  });
  ranges.sort((a, b) => a.start - b.start);
  for (let i = 1; i < ranges.length; i++) {
    if (ranges[i].start < ranges[i - 1].end) {
      throw F(`${ranges[i].name}.offset`, `tensor data [${ranges[i].start}, ${ranges[i].end}) overlaps tensor '${ranges[i - 1].name}' [${ranges[i - 1].start}, ${ranges[i - 1].end})`);
    }
  }

  // tensors implied by the config
  const q = nHeads * headDim, kv = nKv * headDim;
  const want = (name: string, shape: number[]) => {
    const t = byName.get(name);
    if (!t) throw C(name, `missing: the config (${c.arch}, ${nLayers} layers${c.fused_qkv ? ', fused_qkv' : ''}${c.qkv_bias ? ', qkv_bias' : ''}) needs it with shape [${shape.join(', ')}]`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw C(`${name}.shape`, `shape [${t.shape.join(', ')}] does not match the config: expected [${shape.join(', ')}] (dim ${dim}, n_heads ${nHeads}, n_kv_heads ${nKv}, head_dim ${headDim}, hidden_dim ${hidden}, vocab_size ${vocab})`);
    }
    if (shape.length === 1 && t.dtype !== 'f32') throw C(`${name}.dtype`, `norm and bias vectors must be f32, got ${t.dtype}`);
  };
  const forbid = (name: string, why: string) => { if (byName.has(name)) throw C(name, `present but ${why}`); };
  want('token_embd.weight', [dim, vocab]);
  want('output_norm.weight', [dim]);
  if (c.tie_embeddings) forbid('output.weight', 'config.tie_embeddings is true');
  else want('output.weight', [dim, vocab]);
  for (let l = 0; l < nLayers; l++) {
    const p = `blk.${l}.`;
    want(p + 'attn_norm.weight', [dim]);
    if (c.fused_qkv) {
      want(p + 'attn_qkv.weight', [dim, q + 2 * kv]);
      for (const n of ['attn_q', 'attn_k', 'attn_v']) forbid(p + n + '.weight', 'config.fused_qkv is true');
      if (c.qkv_bias) want(p + 'attn_qkv.bias', [q + 2 * kv]);
      else forbid(p + 'attn_qkv.bias', 'config.qkv_bias is false');
    } else {
      want(p + 'attn_q.weight', [dim, q]);
      want(p + 'attn_k.weight', [dim, kv]);
      want(p + 'attn_v.weight', [dim, kv]);
      forbid(p + 'attn_qkv.weight', 'config.fused_qkv is false');
      const biases: [string, number][] = [['attn_q.bias', q], ['attn_k.bias', kv], ['attn_v.bias', kv]];
      for (const [n, len] of biases) {
        if (c.qkv_bias) want(p + n, [len]);
        else forbid(p + n, 'config.qkv_bias is false');
      }
    }
    want(p + 'attn_output.weight', [q, dim]);
    want(p + 'ffn_norm.weight', [dim]);
    // a compressed FFN variant (aether compress; shapes checked by the C validator) may replace the dense weights
    const variant = byName.has(p + 'ffn_gate_a.weight');
    if (variant && !(fmt.required_features as string[] | undefined ?? []).includes('ffn_compressed')) {
      throw F('format.required_features', `tensor '${p}ffn_gate_a.weight' is a compressed FFN variant but the file does not require feature 'ffn_compressed'`);
    }
    if (!variant || byName.has(p + 'ffn_gate.weight') || byName.has(p + 'ffn_up.weight') || byName.has(p + 'ffn_down.weight')) {
      want(p + 'ffn_gate.weight', [dim, hidden]);
      want(p + 'ffn_up.weight', [dim, hidden]);
      want(p + 'ffn_down.weight', [hidden, dim]);
    }
    for (const [flag, names, shape] of [['qk_norm', ['attn_q_norm.weight', 'attn_k_norm.weight'], [headDim]], ['post_norms', ['post_attention_norm.weight', 'post_ffw_norm.weight'], [dim]]] as const) {
      for (const n of names) {
        if (c[flag]) want(p + n, [...shape]);
        else forbid(p + n, `config.${flag} is not true`);
      }
    }
  }
  const ropeFactorTensors: Record<string, string[]> = { llama3: ['rope_freqs.weight'], longrope: ['rope_factors_long.weight', 'rope_factors_short.weight'] };
  const needRope = ropeFactorTensors[(rs as { type?: string } | undefined)?.type ?? ''] ?? [];
  for (const n of ['rope_freqs.weight', 'rope_factors_long.weight', 'rope_factors_short.weight']) {
    if (needRope.includes(n)) want(n, [ropeDim / 2]);
    else forbid(n, `config.rope_scaling is not ${n === 'rope_freqs.weight' ? "'llama3'" : "'longrope'"}`);
  }
  if (byName.has(`blk.${nLayers}.attn_norm.weight`)) throw C(`blk.${nLayers}.attn_norm.weight`, `present but config.n_layers is ${nLayers}`);

  // optional sections: light type checks, unknown keys preserved
  if (meta.kv_cache !== undefined) {
    const k = meta.kv_cache;
    if (!isObj(k)) throw F('kv_cache', 'expected an object');
    for (const f of ['dtype', 'dtype_k', 'dtype_v'] as const) {
      if (k[f] !== undefined && !(KV_CACHE_DTYPES as readonly unknown[]).includes(k[f])) throw F(`kv_cache.${f}`, `expected one of ${KV_CACHE_DTYPES.map((d) => `'${d}'`).join(', ')}, got ${JSON.stringify(k[f])}`);
    }
    if (k.n_ctx !== undefined && (!Number.isSafeInteger(k.n_ctx) || (k.n_ctx as number) <= 0)) throw F('kv_cache.n_ctx', `expected a positive integer, got ${JSON.stringify(k.n_ctx)}`);
    if (k.overflow !== undefined && typeof k.overflow !== 'string') throw F('kv_cache.overflow', 'expected a string');
  }
  for (const k of ['saturation', 'compression', 'source']) if (meta[k] !== undefined && !isObj(meta[k])) throw F(k, 'expected an object');
  if (meta.quality !== undefined && (!Array.isArray(meta.quality) || !meta.quality.every(isObj))) throw F('quality', 'expected an array of objects');
  if (header && fileSize !== undefined) checkRknotFileSize(header, fileSize, fileName);
  return meta as RknotMetadata;
}

/** Throw format_error unless the file is exactly dataOffset + dataSize bytes long. */
export function checkRknotFileSize(h: RknotHeader, fileSize: number, fileName: string): void {
  const want = h.dataOffset + h.dataSize;
  if (fileSize < want) throw fmtErr(fileName, 'file size', fileSize, `truncated: expected ${want} bytes (data section ${h.dataSize} bytes at ${h.dataOffset}), got ${fileSize}`);
  if (fileSize > want) throw fmtErr(fileName, 'file size', want, `${fileSize - want} unexpected bytes after the data section (expected file size ${want})`);
}

// ---------------------------------------------------------------------------------------------
// tensor data checks shared by the readers and the streaming loader

/** Throw checksum_error if the CRC does not match. */
export function checkTensorChecksum(t: RknotTensor, crc: number, fileName: string): void {
  const want = parseChecksum(t.checksum);
  if (want !== crc >>> 0) {
    throw new AetherError('checksum_error', `${fileName}: tensor '${t.name}': checksum mismatch: the file says ${t.checksum}, the data hashes to ${formatChecksum(crc)}`,
      { file: fileName, tensor: t.name, expected: t.checksum, actual: formatChecksum(crc) });
  }
}

/** Throw format_error if a block scale of a quantised tensor is NaN/Inf. `bytes` = the tensor's bytes from block `fromBlock`. */
export function checkBlockScales(t: RknotTensor, bytes: Uint8Array, fileName: string, dataOffset?: number, fromBlock = 0, toBlock = -1): void {
  const bad = findBadScale(t.dtype, bytes, fromBlock, toBlock);
  if (bad >= 0) {
    const ts = DTYPES[t.dtype].typeSize;
    const rel = t.offset + bad * ts;
    const where = dataOffset === undefined ? `data-section offset ${rel}` : `byte ${dataOffset + rel}`;
    throw new AetherError('format_error', `${fileName}: tensor '${t.name}': block ${bad} at ${where} has a NaN or Inf scale (${t.dtype})`,
      { file: fileName, tensor: t.name, block: bad, offset: dataOffset === undefined ? rel : dataOffset + rel });
  }
}
