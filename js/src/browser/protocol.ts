/**
 * The message protocol between the page (js/src/browser/client.ts) and the engine worker
 * (js/src/browser/engine-worker.ts). Version PROTOCOL_VERSION; both sides are built from one tree, the
 * version catches a page and a worker script from different builds (a stale cache, a mixed deployment).
 *
 *   page -> worker   Request  { v, id, verb, args }                 one reply per id, except 'cancel'
 *                    Cancel   { v, id, verb: 'cancel' }             aborts request `id` (its AbortSignal)
 *   worker -> page   Result   { id, result }                        the request succeeded
 *                    Failure  { id, error: WireError }              it failed (rethrown as AetherError)
 *                    Piece    { id, piece }                         streamed by 'generate', before the Result
 *                    Event    { id, event }                         progress of 'load', before the Result
 *
 * Every value crosses by structured clone: Blob / File handles are cloned (no bytes are copied), a
 * ReadableStream source is transferred. Chat templates are rendered on the page, not in the worker: the
 * template engine is an npm dependency (a bare import), and a Worker has no import map to resolve it.
 */
import type { CompressionModeName, CompressionSpec, FfnModeName, GeneratedPiece, GenerateOptions, GenerationStats, LoadOptions } from '../aether.js';
import type { AetherErrorCode } from '../errors.js';
import type { KvDtype, LocalHeadsSpec, MemoryPlan, ModelConfig, WarmupStats, FusedDotProbe } from '../runtime/engine.js';
import type { FfnOptions } from '../runtime/ffn.js';
import type { ChatTemplateInfo } from '../tokenizer/chat.js';
import type { ModelMetrics } from '../runtime/metrics.js';
import type { KvPolicy } from '../formats/kv-policy.js';

/** One layer's approximations (AetherModel.approximations). */
export interface Approximation {
  layer: number; ffn: string; kvPolicy: string; localKvHeads: number[]; storedLocalKvHeads: number[]; localStorageSavedBytes: number;
  compression: 'dense' | 'compressed';
}

export const PROTOCOL_VERSION = 1;

/** Load progress, as a typed union: bytes read, and what the model cache did. */
export type LoadEvent =
  | { type: 'progress'; loaded: number; total: number }
  | { type: 'cache'; state: CacheState; url: string; reason?: string };

/**
 * hit: loading from the cache; miss: downloading; stored: the download was verified and cached;
 * evicted: a cached copy failed verification (size or checksum) and was deleted (a download follows);
 * error: the cache could not be used (quota, unavailable), loading goes on without it.
 */
export type CacheState = 'hit' | 'miss' | 'stored' | 'evicted' | 'error';

/** A model source as it crosses to the worker: an absolute URL, a Blob/File, or a transferred stream. */
export type WireSource = { kind: 'url'; url: string } | { kind: 'blob'; blob: Blob } | { kind: 'stream'; stream: ReadableStream<Uint8Array> };

/** Load options as they cross to the worker: BrowserLoadOptions without the page-only members. */
export interface WireLoadOptions {
  /** Compute threads including the engine worker's own (default 1), or 'auto' (half of navigator.hardwareConcurrency
   * from 4 up, at most 4: EngineOptions.threads). One when the page is not cross-origin isolated. */
  threads?: number | 'auto';
  /** Context length (default: the model's, at most 4096 and what fits in memory; see EngineOptions.nCtx). */
  nCtx?: number;
  /** KV-cache dtype ('f32', 'f16' default, 'q8_0', 'q4_0'), or { k, v }. */
  kvDtype?: KvDtype | { k: KvDtype; v: KvDtype };
  /** KV policy (compact syntax or structured; null / 'full' none; default: the file's kv_policy). */
  kvPolicy?: string | KvPolicy | null;
  /** KV heads stored locally (sinks + window only: memory saved), as LoadOptions.localHeads ('file' or head lists). */
  localHeads?: LocalHeadsSpec | 'file' | { heads: 'file'; sinks?: number; window?: number };
  /** Cap on the wasm memory in bytes (default 4 GiB). */
  maxMemory?: number;
  /** Testing: start the engine's memory this many bytes up (addresses above 2 GiB with a small model). */
  addressOffset?: number;
  /** Tokens per prefill batch (EngineOptions.maxBatch). */
  maxBatch?: number;
  /** Spin iterations before a thread waits (EngineOptions.spin). */
  spin?: number;
  /** Decode on one thread below this many weight bytes per token (EngineOptions.singleThreadBelow). */
  singleThreadBelow?: number;
  /** Extra wasm modules ('ffn-fused', 'ffn-saturated'). */
  modules?: string[];
  /** Verify tensor checksums while loading (default true; always on for cached copies). */
  verify?: boolean;
  /** Wasm build: 'auto' (default: relaxed SIMD where the browser has it), 'relaxed' or 'plain'. */
  simd?: 'auto' | 'relaxed' | 'plain';
  /** The relaxed build's fused-dot kernel forms (prefill tiles, decode matvecs; the list: EngineOptions.fusedDot): true, false or 'auto' (default: timed). */
  fusedDot?: boolean | 'auto';
  /** Warm up the engine after loading so the first generation runs at full speed (default true; or a limit in ms). */
  warmup?: boolean | number;
  /** Cache name for URL sources, or false (no cache). */
  cache: string | false;
  /** Absolute base URL of the wasm modules (default: ../../../wasm/ from the worker script). */
  wasmBaseUrl?: string;
}

/** What the page knows about a loaded model without asking the worker again. */
export interface ModelInfo {
  name: string;
  config: ModelConfig;
  /** Metadata without the tokenizer and tensor tables (which can be megabytes). */
  metadata: Record<string, unknown>;
  threads: number;
  /** The wasm build in use. */
  simd: 'relaxed' | 'plain';
  /** Whether any kernel runs its fused-dot form, and what the probes measured (EngineOptions.fusedDot). */
  fusedDot: boolean;
  fusedDotProbe: FusedDotProbe | null;
  /** The load's warm-up (rounds, ms), or null. */
  warmup: WarmupStats | null;
  nCtx: number;
  /** What the engine put in wasm memory (weights, KV cache, scratch) and its context / KV dtypes. */
  memory: MemoryPlan;
  warnings: string[];
  crossOriginIsolated: boolean;
  /** What AetherModel.chat renders with, and the generate options it adds (CHAT_GENERATE_DEFAULTS). */
  chatTemplate: ChatTemplateInfo & { generateDefaults: WireGenerateOptions };
}

/** GenerateOptions without the AbortSignal (a signal becomes a Cancel message). */
export type WireGenerateOptions = Omit<GenerateOptions, 'signal'>;

export interface Verbs {
  load: { args: { source: WireSource; options: WireLoadOptions }; result: ModelInfo };
  generate: { args: { prompt: string | number[]; options: WireGenerateOptions }; result: GenerationStats };
  embed: { args: { texts: string[] }; result: { embeddings: Float32Array[]; promptTokens: number } };
  tokenize: { args: { text: string; options?: { addBos?: boolean; parseSpecial?: boolean } }; result: number[] };
  detokenize: { args: { ids: number[]; options?: { skipSpecial?: boolean } }; result: string };
  stats: { args: Record<string, never>; result: GenerationStats };
  reset: { args: Record<string, never>; result: null };
  setFfnMode: { args: { mode: FfnModeName; layers?: number[]; options?: FfnOptions }; result: MemoryPlan };
  ffnActive: { args: { layers?: number[] }; result: number[] };
  metrics: { args: Record<string, never>; result: ModelMetrics };
  setKvPolicy: { args: { policy: string | KvPolicy | null; layers?: number[] }; result: null };
  setHeadMode: { args: { mode: 'local' | 'full'; layers?: number[]; heads?: number[]; store?: boolean }; result: number };
  approximations: { args: Record<string, never>; result: Approximation[] };
  rollback: { args: { kinds?: ('ffn' | 'kv' | 'heads' | 'compression')[]; layers?: number[]; heads?: number[] }; result: null };
  setTiming: { args: { on: boolean }; result: null };
  resetMetrics: { args: Record<string, never>; result: null };
  setCompression: { args: { spec: CompressionSpec }; result: CompressionModeName[] };
  compression: { args: Record<string, never>; result: CompressionModeName[] };
  dispose: { args: Record<string, never>; result: null };
}
export type Verb = keyof Verbs;

export type Request<V extends Verb = Verb> = { v: number; id: number; verb: V; args: Verbs[V]['args'] };
export interface CancelRequest { v: number; id: number; verb: 'cancel' }
export type ToWorker = Request | CancelRequest;

export interface WireError {
  /** 'AbortError' for aborts, 'AetherError' for other engine errors, the original name otherwise */
  name: string;
  /** AetherErrorCode, absent for errors that are not AetherErrors */
  code?: AetherErrorCode;
  message: string;
  details?: Record<string, unknown>;
}

export type FromWorker =
  | { id: number; result: unknown }
  | { id: number; error: WireError }
  | { id: number; piece: GeneratedPiece }
  | { id: number; event: LoadEvent };
