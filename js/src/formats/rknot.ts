/*
 * .rknot format specification (the same text as docs/rknot.md).
 *
 * # The .rknot model format, version 1
 *
 * A .rknot file holds one model: a small fixed header, UTF-8 JSON metadata (config, tokenizer, tensor table,
 * optional sections) and a data section that is laid out **exactly as it will be in wasm linear memory**.
 * The loader copies the whole data section to one 64-byte-aligned base address; tensor `t` then lives at
 * `base + t.offset`. No per-tensor placement, no conversion at load time.
 *
 * All integers are little-endian.
 *
 * ## File layout
 *
 * | offset | size | field |
 * |---|---|---|
 * | 0 | 8 | magic `52 4B 4E 4F 54 00 0D 0A` = `"RKNOT\0\r\n"` (the NUL and CR LF catch text-mode transfers) |
 * | 8 | 4 | u32 format version = 1 |
 * | 12 | 4 | u32 flags = 0 (version 1 defines no flags; a reader refuses any set bit: `unsupported`) |
 * | 16 | 8 | u64 `json_length`: bytes of JSON metadata, 1 .. 256 MiB |
 * | 24 | 8 | u64 `data_size`: bytes of the data section, a multiple of 64 |
 * | 32 | json_length | JSON metadata, UTF-8 (may end with spaces) |
 * | 32 + json_length | | zero padding up to `data_offset = align64(32 + json_length)` |
 * | data_offset | data_size | data section |
 *
 * The file size is exactly `data_offset + data_size` (shorter: truncated; longer: trailing bytes; both are
 * `format_error`). Inside the data section every tensor starts at a multiple of 64 bytes; the bytes between
 * tensors and after the last one (up to `data_size`) are zero. Writers lay tensors out in table order
 * (`token_embd`, then each block in order, then `output_norm`, `output`) so a forward pass reads the file front
 * to back, but readers must not rely on the order: they use the offsets.
 *
 * ## JSON metadata
 *
 * ```jsonc
 * {
 *   "format": { "version": 1, "required_features": [], "optional_features": [] },
 *   "config": { ... },
 *   "tokenizer": { ... },          // a TokenizerData (js/src/tokenizer/types.ts)
 *   "tensors": [ { "name", "dtype", "shape", "offset", "bytes", "checksum" }, ... ],
 *   // optional sections:
 *   "kv_cache": { "dtype": "f32", "n_ctx": 256, "overflow": "error" },
 *   "source": { "converter": "aether-convert/0.1.0", "input": "x.gguf", "input_format": "gguf",
 *               "files": [ { "name", "size", "sha256" } ], "quant": "q8_0", "name": "..." },
 *   "saturation": { ... },         // per-layer bitmasks (base64), thresholds, compensation (written by the profiler)
 *   "compression": { ... },        // per-layer modes
 *   "quality": [ { ... } ]         // reports
 * }
 * ```
 *
 * Unknown top-level keys are preserved by tools and ignored by the loader.
 *
 * ### format
 * - `version` must equal the header version.
 * - `required_features`: names of features a reader must implement to use the file. A reader refuses a file
 *   that lists a feature it does not know (`unsupported`, naming the feature). Defined: `rope_scaling`,
 *   `sliding_window`, `softcap`, `qk_norm`, `post_norms`, `gelu_ffn`, `embd_scale`, `attn_scale` (the config
 *   fields below that use them); `writeRknot` lists every feature the config uses, so a reader that predates one
 *   refuses the file instead of silently ignoring it.
 * - `optional_features`: features a reader may ignore.
 *
 * ### config
 *
 * | key | type | meaning |
 * |---|---|---|
 * | `arch` | `"llama"` \| `"qwen2"` \| `"qwen3"` \| `"phi3"` \| `"gemma"` \| `"gemma2"` \| `"gemma3"` | architecture (informational for the forward pass, which follows the fields below) |
 * | `dim` | int | model width (embedding length) |
 * | `n_layers` | int | blocks |
 * | `n_heads`, `n_kv_heads` | int | query heads, key/value heads (`n_heads % n_kv_heads == 0`) |
 * | `head_dim` | int | per-head width (need not equal dim / n_heads) |
 * | `hidden_dim` | int | FFN width (per gate / up matrix) |
 * | `vocab_size` | int | rows of `token_embd` (>= number of tokenizer tokens) |
 * | `n_ctx` | int | trained context length |
 * | `norm_eps` | number | RMSNorm epsilon |
 * | `rope_theta` | number | RoPE base |
 * | `rope_dim` | int | rotated dims per head (even, <= head_dim) |
 * | `rope_type` | `"norm"` \| `"neox"` | `norm`: adjacent pairs (x[2i], x[2i+1]), GGUF `llama`; `neox`: rotate-half (x[i], x[i + rope_dim/2]), GGUF `qwen2` / `phi3` and **every** Hugging Face checkpoint (q/k weights are kept exactly as stored by HF, unpermuted) |
 * | `tie_embeddings` | bool | output projection = `token_embd` (then there is no `output.weight`) |
 * | `qkv_bias` | bool | q, k, v have biases |
 * | `fused_qkv` | bool | one `attn_qkv` matrix (rows: q, then k, then v) instead of three |
 * | `bos_token_id`, `eos_token_id` | int \| null | |
 *
 * Architecture variants (optional; absent = the llama behaviour in brackets):
 *
 * | key | type | meaning |
 * |---|---|---|
 * | `ffn_act` | `"silu"` \| `"gelu_tanh"` | FFN gate activation [`silu`: SwiGLU]; `gelu_tanh`: GeGLU with the tanh-approximated gelu (Gemma) |
 * | `embd_scale` | number | token embeddings are multiplied by this [1] (Gemma: sqrt(dim)) |
 * | `attn_scale` | number | q.k scale [1/sqrt(head_dim)] (Gemma 2/3: query_pre_attn_scalar^-1/2) |
 * | `attn_softcap` | number | attention scores become cap tanh(s / cap) before the softmax [none] (Gemma 2: 50) |
 * | `final_softcap` | number | logits become cap tanh(l / cap) [none] (Gemma 2: 30) |
 * | `qk_norm` | bool | RMSNorm of every q and k head before RoPE, weights `blk.N.attn_q_norm.weight` / `attn_k_norm.weight` [head_dim] [false] (Qwen3, Gemma 3) |
 * | `post_norms` | bool | RMSNorm of the attention output and of the FFN output before their residual adds, weights `blk.N.post_attention_norm.weight` / `post_ffw_norm.weight` [dim] [false] (Gemma 2/3) |
 * | `rope_scaling` | object | [none] `{type: "linear", factor}`: angles of full-attention layers / factor; `{type: "llama3", ...}`: angles divided per frequency by tensor `rope_freqs.weight` [rope_dim/2] (other fields informational); `{type: "longrope", original_context, attn_factor}`: tensors `rope_factors_long.weight` / `rope_factors_short.weight` [rope_dim/2], the long ones when the runtime context exceeds `original_context` (llama.cpp's rule), cos and sin times `attn_factor` |
 * | `sliding_window` | int | a query at position p of a sliding-window layer sees positions p - sliding_window + 1 .. p [none] |
 * | `swa_layers` | bool[n_layers] | which layers slide [none] (Gemma 2: even layers; Gemma 3: 5 of every 6; Phi-3: all, when the window is shorter than the context) |
 * | `rope_theta_swa` | number | RoPE base of the sliding-window layers, which then use no linear scaling [rope_theta, same scaling] (Gemma 3: 10000) |
 *
 * Norm weights are stored as the forward multiplies them: Gemma's `1 + w` (as llama.cpp's GGUF converter writes them;
 * the Hugging Face converter adds the 1).
 *
 * ### tokenizer
 * A `TokenizerData` object: `model` (`"llama"` SentencePiece-style, `"gpt2"` byte-level BPE), `tokens`,
 * `scores`, `token_type` (GGUF token types), `merges`, special ids, `add_bos_token`, `add_space_prefix`,
 * `chat_template`, ... Field names mirror GGUF's `tokenizer.ggml.*` keys.
 *
 * ### tensors
 *
 * | key | meaning |
 * |---|---|
 * | `name` | GGUF-style name (below) |
 * | `dtype` | `f32`, `f16`, `q8_0`, `q4_0`, `q4_K`, `q6_K` (ggml block formats, bit-identical to ggml) |
 * | `shape` | ggml order: `shape[0]` = row length (ne0), `shape[1]` = rows; 1 to 4 dims |
 * | `offset` | byte offset in the data section, a multiple of 64 |
 * | `bytes` | `prod(shape) / block_size * type_size`; `shape[0]` must be a multiple of the block size |
 * | `checksum` | `"crc32:"` + 8 lowercase hex digits: CRC-32 (IEEE, the zlib / gzip / PNG CRC) of the tensor's bytes |
 *
 * | dtype | ggml id | block | bytes / block | layout |
 * |---|---|---|---|---|
 * | f32 | 0 | 1 | 4 | |
 * | f16 | 1 | 1 | 2 | IEEE half |
 * | q4_0 | 2 | 32 | 18 | f16 d; 16 bytes: low nibbles = elements 0..15, high nibbles = 16..31; x = (q - 8) * d |
 * | q8_0 | 8 | 32 | 34 | f16 d; 32 x int8; x = q * d |
 * | q4_K | 12 | 256 | 144 | f16 d, f16 dmin, 12 bytes 6-bit scales/mins, 128 bytes nibbles |
 * | q6_K | 14 | 256 | 210 | 128 bytes ql, 64 bytes qh, 16 x int8 scales, f16 d |
 *
 * Tensor names: `token_embd.weight` [dim, vocab], `output_norm.weight` [dim], `output.weight` [dim, vocab]
 * (absent when `tie_embeddings`), and for each block N: `blk.N.attn_norm.weight` [dim],
 * `blk.N.attn_q.weight` [dim, n_heads*head_dim], `blk.N.attn_k.weight` / `attn_v.weight`
 * [dim, n_kv_heads*head_dim], with `qkv_bias`: `blk.N.attn_q.bias` / `attn_k.bias` / `attn_v.bias`; with
 * `fused_qkv` instead `blk.N.attn_qkv.weight` [dim, (n_heads + 2 n_kv_heads) * head_dim] (and
 * `attn_qkv.bias`); `blk.N.attn_output.weight` [n_heads*head_dim, dim], `blk.N.ffn_norm.weight` [dim],
 * `blk.N.ffn_gate.weight`, `blk.N.ffn_up.weight` [dim, hidden_dim], `blk.N.ffn_down.weight` [hidden_dim, dim].
 * Phi-3's fused gate_up is always stored split into `ffn_gate` (first hidden_dim rows) and `ffn_up` (next
 * hidden_dim rows). 1-D tensors (norms, biases) are always f32. Other tensor names are allowed and ignored by
 * readers that do not know them.
 *
 * ### kv_cache (optional)
 * The runtime's KV-cache policy: `dtype` (`f32` or `f16`), `n_ctx` (cache length), `overflow` (`"error"`:
 * `kv_cache_full` when the context is full). The converter writes `{ dtype: "f32", n_ctx: config.n_ctx,
 * overflow: "error" }`.
 *
 * ## Validation (what a reader checks, and the error codes)
 *
 * Header: magic, version (0: `format_error`; newer than the reader: `unsupported`), flags (`unsupported`),
 * `json_length` range, `data_size` multiple of 64, file size == `data_offset + data_size`
 * (`format_error` naming the file, field and byte offset). JSON: valid UTF-8 and parses (`format_error`).
 *
 * `validateRknotMetadata(meta, fileSize, fileName, header)` (js/src/formats/rknot.ts) checks, without reading
 * tensor data: format version and `required_features` (`unsupported`); config fields present with the right
 * types and ranges (`format_error`), `n_heads % n_kv_heads`, `rope_dim` (`config_error`); tokenizer model,
 * tokens, scores / token_type lengths, special ids in range; every tensor: unique name, known dtype, 1..4
 * positive dims whose product does not overflow 2^53, row length a multiple of the block size, `bytes`
 * consistent, offset 64-aligned, inside the data section, no two tensors overlapping, checksum syntax
 * (`format_error`); every tensor the config implies present with the expected shape, f32 norms / biases,
 * no `output.weight` when tied, no extra block (`config_error`, message names the tensor, expected and actual
 * shape). Optional sections get light type checks.
 *
 * Tensor data (checked by the streaming loader as bytes arrive, and by `readRknotTensor`): CRC-32 per tensor
 * (`checksum_error` naming the tensor) and, for block formats, that no block scale (f16 `d`, and `dmin` for
 * q4_K) is NaN or Inf (`format_error` naming the tensor, the block and its byte offset). The scale check
 * costs one byte read per block, so it is done while streaming rather than by a separate pass; `validate`
 * cannot do it because it sees only metadata.
 *
 * The checksum is CRC-32 because it is standard (zlib, Python `zlib.crc32`, C implementations everywhere),
 * incremental (a chunk boundary can fall anywhere) and fast in JS: Node's native `zlib.crc32` runs at
 * 3-5.5 GB/s on the build machine; the portable slice-by-16 JS fallback used in browsers at 1.1-1.8 GB/s.
 *
 * ## Writing
 *
 * `writeRknot(path, meta, tensors)` lays out the table, writes the header and JSON with placeholder
 * checksums (`crc32:00000000`, fixed width), streams each tensor's bytes (never the whole model in memory),
 * then rewrites the JSON with the real checksums (same length), validates, and renames `path.tmp` to `path`.
 *
 * ## Loading
 *
 * `loadRknotStream(src, { plan, onProgress, signal, verify })` (js/src/loader/stream.ts) reads the header and
 * JSON from a stream (chunks may split anywhere), validates, calls `plan(meta, header)` which returns
 * `{ dest }`: a 64-byte-aligned view of wasm memory of at least `data_size` bytes, then copies each chunk
 * into `dest` at its data offset. Node file paths are read positionally straight into `dest`.
 *
 * ## Measured load performance (bench/load.mjs)
 *
 * Node 20, the 2-core build VM (Firecracker), warm page cache, medians of 7; other jobs were running, so
 * timings vary by 2x between runs. "Fresh memory" = a new WebAssembly.Memory, as a real load does.
 *
 * | model | file | load, fresh memory (direct + CRC + scale checks) | readFile (fresh buffer + read) | first touch of fresh memory alone | load, pre-touched memory | peak RSS over baseline |
 * |---|---|---|---|---|---|---|
 * | tiny-llama-a q8_0 | 8.2 MB | 36-70 ms | 26 ms | 24-28 ms | 6-12 ms | 13.8 MB (1.68x file) |
 * | tiny-llama-a f32 | 30.8 MB | 110-170 ms | 109-131 ms | 84-101 ms | 13-15 ms | 32.4 MB (1.05x) |
 * | synthetic q8_0 | 202.8 MB | 676-740 ms (quiet machine) | 647-798 ms | 632-738 ms | 72-128 ms | 210 MB (1.035x) |
 *
 * On this VM the first write to every fresh 4 KiB page costs ~12 us (~3 ms per MB), so loading into new memory
 * is bounded by page faults, not by the loader: a load costs about what `fs.readFile` (which also fills fresh
 * memory) costs, 1.0-1.1x on a quiet machine for files of 30 MB and more. Into already-touched memory the
 * 200 MB load runs at 1.6-2.8 GB/s, where the single-threaded CRC-32 (3-5.5 GB/s native) is the main cost; a
 * plain read of the same file into one reused 4 MiB buffer takes 17-19 ms, so the "load <= 1.2x read" target is
 * not met when the read baseline does not have to fault in its destination. Peak RSS of the direct path is the
 * model plus ~7 MB; the generic stream path (Node ReadStream, fetch) holds up to ~50 MB more in chunk buffers
 * waiting for GC.
 */
import { openForRead } from './fileio.js';
import { AetherError } from '../errors.js';
import type { TokenizerData } from '../tokenizer/types.js';
import { crc32, formatChecksum, parseChecksum } from './checksum.js';
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
export const RKNOT_FEATURES = ['rope_scaling', 'sliding_window', 'softcap', 'qk_norm', 'post_norms', 'gelu_ffn', 'embd_scale', 'attn_scale'] as const;
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
  dtype: 'f32' | 'f16';
  n_ctx: number;
  overflow: 'error' | string;
}

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

function fmtErr(file: string, field: string, offset: number | undefined, msg: string, code: 'format_error' | 'unsupported' | 'config_error' = 'format_error'): AetherError {
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

/** Encode the fixed header. */
export function encodeRknotHeader(jsonLength: number, dataSize: number): Uint8Array {
  const b = new Uint8Array(RKNOT_HEADER_SIZE);
  b.set(RKNOT_MAGIC, 0);
  const dv = new DataView(b.buffer);
  dv.setUint32(8, RKNOT_VERSION, true);
  dv.setUint32(12, 0, true);
  dv.setBigUint64(16, BigInt(jsonLength), true);
  dv.setBigUint64(24, BigInt(dataSize), true);
  return b;
}

type FdLike = number | { read(buf: Uint8Array, off: number, len: number, pos: number): Promise<{ bytesRead: number }>; stat(): Promise<{ size: number }> };

/**
 * Read the header and the JSON metadata (parsed, not validated) from bytes (the start of a file, or the
 * whole file) or from a Node file descriptor / FileHandle.
 */
export async function readRknotHeader(src: Uint8Array | FdLike, fileName = '<buffer>'): Promise<{ header: RknotHeader; meta: unknown; fileSize?: number }> {
  if (src instanceof Uint8Array) {
    const header = parseRknotHeader(src, fileName);
    const end = RKNOT_HEADER_SIZE + header.jsonLength;
    if (src.length < end) throw fmtErr(fileName, 'metadata', src.length, `truncated: JSON metadata needs bytes ${RKNOT_HEADER_SIZE}..${end}, got ${src.length} bytes`);
    return { header, meta: parseRknotJson(src.subarray(RKNOT_HEADER_SIZE, end), fileName) };
  }
  let fh: Exclude<FdLike, number>;
  if (typeof src === 'number') {
    const fs = await import('node:fs');
    const fd = src;
    fh = {
      read: (buf, off, len, pos) => new Promise((res, rej) => fs.read(fd, buf, off, len, pos, (e, n) => (e ? rej(e) : res({ bytesRead: n })))),
      stat: () => new Promise((res, rej) => fs.fstat(fd, (e, s) => (e ? rej(e) : res(s)))),
    };
  } else fh = src;
  const size = (await fh.stat()).size;
  const readAt = async (pos: number, len: number, field: string): Promise<Uint8Array> => {
    const b = new Uint8Array(len);
    let done = 0;
    while (done < len) {
      const { bytesRead } = await fh.read(b, done, len - done, pos + done);
      if (bytesRead === 0) throw fmtErr(fileName, field, pos + done, `truncated: expected ${len} bytes from byte ${pos}, the file has ${size}`);
      done += bytesRead;
    }
    return b;
  };
  if (size < RKNOT_HEADER_SIZE) throw fmtErr(fileName, 'header', size, `truncated: the header needs ${RKNOT_HEADER_SIZE} bytes, the file has ${size}`);
  const header = parseRknotHeader(await readAt(0, RKNOT_HEADER_SIZE, 'header'), fileName);
  if (size < RKNOT_HEADER_SIZE + header.jsonLength) {
    throw fmtErr(fileName, 'metadata', size, `truncated: JSON metadata needs bytes ${RKNOT_HEADER_SIZE}..${RKNOT_HEADER_SIZE + header.jsonLength}, the file has ${size}`);
  }
  const meta = parseRknotJson(await readAt(RKNOT_HEADER_SIZE, header.jsonLength, 'metadata'), fileName);
  parseRknotHeaderSizeCheck(header, size, fileName);
  return { header, meta, fileSize: size };
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
    want(p + 'ffn_gate.weight', [dim, hidden]);
    want(p + 'ffn_up.weight', [dim, hidden]);
    want(p + 'ffn_down.weight', [hidden, dim]);
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
    if (k.dtype !== undefined && k.dtype !== 'f32' && k.dtype !== 'f16') throw F('kv_cache.dtype', `expected 'f32' or 'f16', got ${JSON.stringify(k.dtype)}`);
    if (k.n_ctx !== undefined && (!Number.isSafeInteger(k.n_ctx) || (k.n_ctx as number) <= 0)) throw F('kv_cache.n_ctx', `expected a positive integer, got ${JSON.stringify(k.n_ctx)}`);
    if (k.overflow !== undefined && typeof k.overflow !== 'string') throw F('kv_cache.overflow', 'expected a string');
  }
  for (const k of ['saturation', 'compression', 'source']) if (meta[k] !== undefined && !isObj(meta[k])) throw F(k, 'expected an object');
  if (meta.quality !== undefined && (!Array.isArray(meta.quality) || !meta.quality.every(isObj))) throw F('quality', 'expected an array of objects');
  if (header && fileSize !== undefined) parseRknotHeaderSizeCheck(header, fileSize, fileName);
  return meta as RknotMetadata;
}

function parseRknotHeaderSizeCheck(h: RknotHeader, fileSize: number, fileName: string): void {
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

// ---------------------------------------------------------------------------------------------
// writer

export interface RknotTensorSpec {
  name: string;
  dtype: DTypeName;
  shape: number[];
}

/** Metadata to write: the tensor table without offsets, sizes and checksums (the writer fills them in). */
export type RknotWriteMetadata = Omit<RknotMetadata, 'tensors' | 'format'> & { format?: Partial<RknotFormatInfo>; tensors: RknotTensorSpec[] };

export type TensorData = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
export type TensorSource =
  | AsyncIterable<{ info: { name: string }; data: TensorData }>
  | Iterable<{ info: { name: string }; data: TensorData }>
  | ((spec: RknotTensorSpec, index: number) => TensorData | Promise<TensorData>);

export interface WriteRknotOptions {
  signal?: AbortSignal;
  /** called after each chunk is written */
  onProgress?: (e: { written: number; total: number; tensor: string }) => void;
  /** validate the final metadata before committing the file (default true) */
  validate?: boolean;
}

const PLACEHOLDER = formatChecksum(0);

/** Compute offsets (64-aligned, in table order) and sizes; returns the tensor table and the data section size. */
export function layoutTensors(specs: RknotTensorSpec[]): { tensors: RknotTensor[]; dataSize: number } {
  let off = 0;
  const tensors = specs.map((s) => {
    if (!isDTypeName(s.dtype)) throw new AetherError('invalid_argument', `tensor '${s.name}': unknown dtype ${JSON.stringify(s.dtype)}`);
    const bytes = tensorBytes(s.dtype, s.shape);
    if (typeof bytes === 'string') throw new AetherError('invalid_argument', `tensor '${s.name}': ${bytes}`);
    const t: RknotTensor = { name: s.name, dtype: s.dtype, shape: [...s.shape], offset: off, bytes, checksum: PLACEHOLDER };
    off = align64(off + bytes);
    return t;
  });
  return { tensors, dataSize: off };
}

function serialise(meta: RknotMetadata): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(meta));
}

async function* chunksOf(d: TensorData): AsyncIterable<Uint8Array> {
  if (d instanceof Uint8Array) { yield d; return; }
  if (Symbol.asyncIterator in (d as object)) { yield* d as AsyncIterable<Uint8Array>; return; }
  yield* d as Iterable<Uint8Array>;
}

/**
 * Streaming writer: lays out the tensors (table order), writes the header with placeholder checksums,
 * streams each tensor's data (one tensor, or one chunk of a tensor, in memory at a time) computing
 * CRC-32s, then rewrites the header with the real checksums (same length: fixed-width hex). Writes
 * `${path}.tmp` and renames it to `path` on success; on failure or abort the temporary file is removed.
 */
export async function writeRknot(path: string, meta: RknotWriteMetadata, tensors: TensorSource, opts: WriteRknotOptions = {}): Promise<{ meta: RknotMetadata; header: RknotHeader; fileSize: number }> {
  const fsp = await import('node:fs/promises');
  const { tensors: table, dataSize } = layoutTensors(meta.tensors);
  const full: RknotMetadata = {
    ...(meta as unknown as RknotMetadata),
    format: {
      version: RKNOT_VERSION,
      required_features: [...new Set([...(meta.format?.required_features ?? []), ...configFeatures(meta.config as Partial<RknotConfig>)])],
      optional_features: meta.format?.optional_features ?? [],
    },
    tensors: table,
  };
  // key order: format first
  const ordered: RknotMetadata = { format: full.format, config: full.config, tokenizer: full.tokenizer, tensors: table } as RknotMetadata;
  for (const [k, v] of Object.entries(full)) if (!(k in ordered)) (ordered as Record<string, unknown>)[k] = v;
  let json = serialise(ordered);
  const jsonLength = json.length;
  const dataOffset = align64(RKNOT_HEADER_SIZE + jsonLength);
  const header: RknotHeader = { version: RKNOT_VERSION, flags: 0, jsonLength, dataSize, dataOffset };
  const fileSize = dataOffset + dataSize;
  const tmp = `${path}.tmp`;
  let fh;
  try {
    fh = await fsp.open(tmp, 'w');
  } catch (e) {
    throw new AetherError('invalid_argument', `${path}: cannot write ${tmp}: ${(e as Error).message}`, { file: path });
  }
  let ok = false;
  try {
    await fh.write(encodeRknotHeader(jsonLength, dataSize), 0, RKNOT_HEADER_SIZE, 0);
    await fh.write(json, 0, json.length, RKNOT_HEADER_SIZE);
    const byName = new Map(table.map((t, i) => [t.name, i]));
    const done = new Set<string>();
    let written = 0;
    const writeOne = async (name: string, data: TensorData) => {
      const i = byName.get(name);
      if (i === undefined) throw new AetherError('invalid_argument', `${path}: tensor '${name}' is not in the tensor table`);
      if (done.has(name)) throw new AetherError('invalid_argument', `${path}: tensor '${name}' written twice`);
      const t = table[i];
      let pos = 0, crc = 0;
      for await (const chunk of chunksOf(data)) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        if (pos + chunk.length > t.bytes) throw new AetherError('invalid_argument', `${path}: tensor '${name}' got more than its ${t.bytes} bytes`);
        let w = 0;
        while (w < chunk.length) {
          const { bytesWritten } = await fh.write(chunk, w, chunk.length - w, dataOffset + t.offset + pos + w);
          w += bytesWritten;
        }
        crc = crc32(chunk, crc);
        pos += chunk.length;
        written += chunk.length;
        opts.onProgress?.({ written, total: dataSize, tensor: name });
      }
      if (pos !== t.bytes) throw new AetherError('invalid_argument', `${path}: tensor '${name}' got ${pos} bytes, expected ${t.bytes}`);
      t.checksum = formatChecksum(crc);
      done.add(name);
    };
    if (typeof tensors === 'function') {
      for (let i = 0; i < table.length; i++) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        await writeOne(table[i].name, await tensors(meta.tensors[i], i));
      }
    } else {
      for await (const item of tensors as AsyncIterable<{ info: { name: string }; data: TensorData }>) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        await writeOne(item.info.name, item.data);
      }
    }
    const missing = table.filter((t) => !done.has(t.name)).map((t) => t.name);
    if (missing.length) throw new AetherError('invalid_argument', `${path}: no data for tensor(s) ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}`);
    json = serialise(ordered);
    if (json.length !== jsonLength) throw new Error(`internal: metadata length changed from ${jsonLength} to ${json.length}`);
    if (opts.validate !== false) validateRknotMetadata(JSON.parse(new TextDecoder().decode(json)), fileSize, path, header);
    await fh.write(json, 0, json.length, RKNOT_HEADER_SIZE);
    await fh.truncate(fileSize); // zero padding up to the end of the data section
    await fh.sync();
    ok = true;
  } finally {
    await fh.close();
    if (!ok) await fsp.unlink(tmp).catch(() => {});
  }
  await fsp.rename(tmp, path);
  return { meta: ordered, header, fileSize };
}

// ---------------------------------------------------------------------------------------------
// file readers (Node)

/** Open a .rknot file: read and validate header + metadata. */
export async function openRknot(path: string): Promise<{ header: RknotHeader; meta: RknotMetadata; fileSize: number }> {
  const fh = await openForRead(path);
  try {
    const { header, meta, fileSize } = await readRknotHeader(fh, path);
    return { header, meta: validateRknotMetadata(meta, fileSize, path, header), fileSize: fileSize! };
  } finally {
    await fh.close();
  }
}

/** Read one tensor's bytes (checksum and block scales verified unless verify is false). */
export async function readRknotTensor(path: string, name: string, opts: { verify?: boolean } = {}): Promise<{ info: RknotTensor; data: Uint8Array }> {
  const { header, meta } = await openRknot(path);
  const info = meta.tensors.find((t) => t.name === name);
  if (!info) throw new AetherError('invalid_argument', `${path}: no tensor named '${name}'`, { file: path, tensor: name });
  const fsp = await import('node:fs/promises');
  const fh = await fsp.open(path, 'r');
  try {
    const data = new Uint8Array(info.bytes);
    let done = 0;
    while (done < info.bytes) {
      const { bytesRead } = await fh.read(data, done, info.bytes - done, header.dataOffset + info.offset + done);
      if (bytesRead === 0) throw fmtErr(path, name, header.dataOffset + info.offset + done, 'unexpected end of file');
      done += bytesRead;
    }
    if (opts.verify !== false) {
      checkTensorChecksum(info, crc32(data), path);
      checkBlockScales(info, data, path, header.dataOffset);
    }
    return { info, data };
  } finally {
    await fh.close();
  }
}

/**
 * Verify a whole .rknot file (Node): header, metadata, and every tensor's checksum and block scales,
 * reading tensors in file order through one reused buffer. Returns the number of tensors checked.
 */
export async function verifyRknotFile(path: string, opts: { onProgress?: (done: number, total: number) => void } = {}): Promise<{ tensors: number; bytes: number }> {
  const { header, meta } = await openRknot(path);
  const fsp = await import('node:fs/promises');
  const fh = await fsp.open(path, 'r');
  try {
    let buf = new Uint8Array(0);
    let done = 0;
    const sorted = [...meta.tensors].sort((a, b) => a.offset - b.offset);
    for (const t of sorted) {
      if (buf.length < t.bytes) buf = new Uint8Array(t.bytes);
      const data = buf.subarray(0, t.bytes);
      let got = 0;
      while (got < t.bytes) {
        const { bytesRead } = await fh.read(data, got, t.bytes - got, header.dataOffset + t.offset + got);
        if (bytesRead === 0) throw fmtErr(path, t.name, header.dataOffset + t.offset + got, 'unexpected end of file');
        got += bytesRead;
      }
      checkTensorChecksum(t, crc32(data), path);
      checkBlockScales(t, data, path, header.dataOffset);
      done += t.bytes;
      opts.onProgress?.(done, header.dataSize);
    }
    return { tensors: sorted.length, bytes: done };
  } finally {
    await fh.close();
  }
}
