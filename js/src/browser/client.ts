/**
 * The page side of the browser host: `Aether.load()` starts a dedicated engine Worker
 * (engine-worker.ts) and returns a BrowserModel with the Node API, carried over protocol.ts.
 *
 * Differences from Node, all forced by the thread boundary: tokenize / detokenize / setFfnMode /
 * ffnActive / dispose return Promises (`await` works in both hosts); `stats` is a copy that is
 * refreshed when a generation ends (getStats() asks the worker).
 */
import type { CompressionModeName, CompressionSpec, FfnModeName, GeneratedPiece, GenerateOptions, GenerationStats } from '../aether.js';
import { AetherError, throwIfAborted } from '../errors.js';
import type { ModelConfig, WarmupStats, FusedDotProbe } from '../runtime/engine.js';
import type { FfnOptions } from '../runtime/ffn.js';
import type { ModelMetrics } from '../runtime/metrics.js';
import type { KvPolicy } from '../formats/kv-policy.js';
import { requireSimd } from '../runtime/env.js';
import type { ChatMessage } from '../tokenizer/chat.js';
import { DEFAULT_CACHE_NAME } from './cache.js';
import * as openai from '../openai.js';
import {
  PROTOCOL_VERSION, type Approximation, type FromWorker, type LoadEvent, type ModelInfo, type ToWorker, type Verb, type Verbs, type WireError,
  type WireLoadOptions, type WireSource,
} from './protocol.js';

export type BrowserModelSource = string | URL | Blob | ReadableStream<Uint8Array>;

export interface BrowserLoadOptions extends Omit<WireLoadOptions, 'cache' | 'wasmBaseUrl'> {
  /** Cache URL downloads (Cache API): true (default) / false / a cache name. */
  cache?: boolean | string;
  /** Progress: bytes read, and cache hits / misses / evictions. */
  onProgress?: (e: LoadEvent) => void;
  signal?: AbortSignal;
  /** URL of engine-worker.js (default: next to this module). */
  workerUrl?: string | URL;
  /** Base URL of the wasm modules (default: wasm/ at the package root, resolved by the worker). */
  wasmBaseUrl?: string | URL;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
  onPiece?: (p: GeneratedPiece) => void;
  onEvent?: (e: LoadEvent) => void;
}

function fromWire(w: WireError): Error {
  if (w.code) return new AetherError(w.code, w.message, w.details);
  const e = new Error(w.message);
  e.name = w.name;
  return e;
}

/** Request/reply bookkeeping over one Worker. */
class Channel {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private dead: Error | null = null;

  constructor(readonly worker: Worker, scriptUrl: string) {
    worker.onmessage = (ev: MessageEvent) => this.receive(ev.data as FromWorker);
    worker.onerror = (ev: ErrorEvent) => {
      ev.preventDefault?.();
      this.fail(new AetherError('load_error', `the engine worker ${scriptUrl} failed: ${ev.message || 'its module script did not load ' +
        '(is it served, with a JavaScript MIME type, and do its imports resolve?)'}`));
    };
    worker.onmessageerror = () => this.fail(new AetherError('invalid_argument', 'a message from the engine worker could not be deserialised'));
  }

  private receive(m: FromWorker): void {
    const p = this.pending.get(m.id);
    if (!p) return; // a reply to a request nobody waits for (e.g. after a cancel)
    if ('piece' in m) p.onPiece?.(m.piece);
    else if ('event' in m) p.onEvent?.(m.event);
    else {
      this.pending.delete(m.id);
      if ('error' in m) p.reject(fromWire(m.error));
      else p.resolve(m.result);
    }
  }

  /** Reject everything in flight and refuse new requests. */
  fail(e: Error): void {
    if (!this.dead) this.dead = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  start<V extends Verb>(verb: V, args: Verbs[V]['args'], o: {
    signal?: AbortSignal; onPiece?: (p: GeneratedPiece) => void; onEvent?: (e: LoadEvent) => void; transfer?: Transferable[];
  } = {}): { id: number; promise: Promise<Verbs[V]['result']> } {
    const id = this.nextId++;
    const promise = new Promise<Verbs[V]['result']>((resolve, reject) => {
      if (this.dead) { reject(this.dead); return; }
      if (o.signal?.aborted) { reject(new AetherError('aborted', `${verb} aborted`, { reason: String(o.signal.reason ?? '') })); return; }
      const onAbort = () => this.cancel(id);
      o.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => o.signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (v) => { done(); resolve(v as Verbs[V]['result']); },
        reject: (e) => { done(); reject(e); },
        onPiece: o.onPiece, onEvent: o.onEvent,
      });
      const req: ToWorker = { v: PROTOCOL_VERSION, id, verb, args } as ToWorker;
      this.worker.postMessage(req, o.transfer ?? []);
    });
    return { id, promise };
  }

  call<V extends Verb>(verb: V, args: Verbs[V]['args'], signal?: AbortSignal): Promise<Verbs[V]['result']> {
    return this.start(verb, args, { signal }).promise;
  }

  cancel(id: number): void {
    if (this.pending.has(id) && !this.dead) this.worker.postMessage({ v: PROTOCOL_VERSION, id, verb: 'cancel' } satisfies ToWorker);
  }
}

function emptyStats(): GenerationStats {
  return { promptTokens: 0, prefillTokens: 0, generatedTokens: 0, prefillMs: 0, decodeMs: 0, prefillTps: 0, decodeTps: 0, finishReason: null };
}

/** A model running in an engine Worker. */
export class BrowserModel extends openai.OpenAIMethods {
  readonly name: string;
  readonly config: ModelConfig;
  /** .rknot metadata without the tokenizer and tensor tables */
  readonly metadata: Record<string, unknown>;
  readonly threads: number;
  /** The wasm build in use ('relaxed' SIMD or 'plain'). */
  readonly simd: 'relaxed' | 'plain';
  /** Whether any kernel runs its relaxed fused-dot form, and what the probes measured (EngineOptions.fusedDot). */
  readonly fusedDot: boolean;
  readonly fusedDotProbe: FusedDotProbe | null;
  /** The load's warm-up (rounds, ms), or null. */
  readonly warmup: WarmupStats | null;
  readonly nCtx: number;
  /** The engine's memory plan: bytes of weights, KV cache, scratch and FFN module data, n_ctx, KV dtypes
   *  (EngineOptions); refreshed by setFfnMode. */
  memory: ModelInfo['memory'];
  readonly warnings: readonly string[];
  /** Whether the engine worker is cross-origin isolated (threads possible). */
  readonly crossOriginIsolated: boolean;
  /** Stats of the last generate/chat call (a copy, refreshed when it ends). */
  stats: GenerationStats = emptyStats();
  /** Name in OpenAI-shaped responses (`model`): the file name of the source without extension. */
  modelId: string;
  private readonly chatInfo: ModelInfo['chatTemplate'];
  private disposed = false;

  /** @internal use Aether.load */
  constructor(private readonly ch: Channel, info: ModelInfo) {
    super();
    this.name = info.name; this.config = info.config; this.metadata = info.metadata; this.threads = info.threads;
    this.simd = info.simd;
    this.fusedDot = info.fusedDot; this.fusedDotProbe = info.fusedDotProbe;
    this.warmup = info.warmup;
    this.memory = info.memory;
    this.nCtx = info.nCtx; this.warnings = info.warnings; this.crossOriginIsolated = info.crossOriginIsolated;
    this.chatInfo = info.chatTemplate;
    this.modelId = info.name.replace(/[?#].*$/, '').replace(/^.*\//, '').replace(/\.(rknot|gguf)$/i, '') || 'aether';
  }

  /** The engine Worker (for diagnostics; terminate it only through dispose()). */
  get worker(): Worker { return this.ch.worker; }

  /** Stream the continuation of `prompt` (text or token ids). Breaking out of the loop cancels the generation. */
  async *generate(prompt: string | number[], opts: GenerateOptions = {}): AsyncGenerator<GeneratedPiece, GenerationStats> {
    const { signal, ...options } = opts;
    throwIfAborted(signal);
    const queue: GeneratedPiece[] = [];
    let wake: (() => void) | null = null;
    let settled = false;
    let failure: unknown = null;
    let stats: GenerationStats | null = null;
    const { id, promise } = this.ch.start('generate', { prompt, options }, {
      signal, onPiece: (p) => { queue.push(p); wake?.(); },
    });
    promise.then(
      (s) => { stats = s; settled = true; wake?.(); },
      (e) => { failure = e; settled = true; wake?.(); },
    );
    try {
      for (;;) {
        throwIfAborted(signal); // pieces the worker sent before it saw the cancel are dropped, as Node would not make them
        if (queue.length) { yield queue.shift()!; continue; }
        if (settled) break;
        await new Promise<void>((r) => { wake = r; });
        wake = null;
      }
      if (failure) throw failure;
      this.stats = stats!;
      return stats!;
    } finally {
      if (!settled) {
        // The caller stopped early (break / return / throw in the loop body): stop the worker too, and wait
        // for it, so that the model is free again when the loop has ended (as in Node).
        this.ch.cancel(id);
        await promise.then(() => undefined, () => undefined);
        await this.refreshStats();
      } else if (failure) await this.refreshStats();
    }
  }

  /**
   * Render `messages` with the model's chat template (on the page: the template engine is an npm
   * dependency the worker cannot import without a bundler) and stream the reply.
   */
  async *chat(messages: ChatMessage[], opts: GenerateOptions = {}): AsyncGenerator<GeneratedPiece, GenerationStats> {
    const { renderChat } = await import('../tokenizer/chat.js');
    const { prompt, options } = renderChat(this.chatInfo, messages, opts, this.chatInfo.generateDefaults);
    return yield* this.generate(prompt, options);
  }

  /** Embeddings, as AetherModel.embed: mean-pooled, final-normed last hidden state, L2-normalised. */
  async embed(input: string, opts?: { signal?: AbortSignal }): Promise<Float32Array>;
  async embed(input: string[], opts?: { signal?: AbortSignal }): Promise<Float32Array[]>;
  async embed(input: string | string[], opts: { signal?: AbortSignal } = {}): Promise<Float32Array | Float32Array[]> {
    const r = await this.embedDetailed(typeof input === 'string' ? [input] : input, opts);
    return typeof input === 'string' ? r.embeddings[0] : r.embeddings;
  }

  /** embed() of several texts, with the number of tokens they took. */
  embedDetailed(texts: string[], opts: { signal?: AbortSignal } = {}): Promise<{ embeddings: Float32Array[]; promptTokens: number }> {
    return this.ch.call('embed', { texts }, opts.signal);
  }

  /** Generate and return the whole text. */
  async complete(prompt: string | number[], opts: GenerateOptions = {}): Promise<{ text: string; tokens: number[]; stats: GenerationStats }> {
    let text = '';
    const tokens: number[] = [];
    const it = this.generate(prompt, opts);
    for (;;) {
      const r = await it.next();
      if (r.done) return { text, tokens, stats: r.value };
      text += r.value.text;
      if (r.value.token >= 0) tokens.push(r.value.token);
    }
  }

  tokenize(text: string, opts?: { addBos?: boolean; parseSpecial?: boolean }): Promise<number[]> {
    return this.ch.call('tokenize', { text, options: opts });
  }

  detokenize(ids: ArrayLike<number>, opts?: { skipSpecial?: boolean }): Promise<string> {
    return this.ch.call('detokenize', { ids: Array.from(ids), options: opts });
  }

  /** Ask the worker for the stats of the last generation (also updates `stats`). */
  async getStats(): Promise<GenerationStats> {
    this.stats = await this.ch.call('stats', {});
    return this.stats;
  }

  private async refreshStats(): Promise<void> {
    try { await this.getStats(); } catch { /* disposed */ }
  }

  /** Forget the KV cache (the next call recomputes its whole prompt). */
  async reset(): Promise<void> { await this.ch.call('reset', {}); }

  /**
   * Switch the FFN execution mode of every layer (or of `layers`), as AetherModel.setFfnMode; rejects when
   * the mode is unavailable (its module was not loaded, the model has no saturation metadata, ...).
   */
  async setFfnMode(mode: FfnModeName, layers?: number[], options?: FfnOptions): Promise<void> {
    this.memory = await this.ch.call('setFfnMode', { mode, layers, options });
  }

  /** FFN neurons computed at the last forward, per layer (all layers, or `layers`). */
  ffnActive(layers?: number[]): Promise<number[]> { return this.ch.call('ffnActive', { layers }); }

  /** Runtime metrics, as AetherModel.metrics(); `formatPrometheus` (exported here too) renders them. */
  metrics(): Promise<ModelMetrics> { return this.ch.call('metrics', {}); }

  /** Switch the KV policy of every layer (or `layers`), as AetherModel.setKvPolicy (the cache is emptied). */
  async setKvPolicy(policy: string | KvPolicy | null, layers?: number[]): Promise<void> { await this.ch.call('setKvPolicy', { policy, layers }); }

  /** Per-head attention compression (store: local storage), as AetherModel.setHeadMode; resolves to the tokens recomputed. */
  async setHeadMode(mode: 'local' | 'full', opts: { layers?: number[]; heads?: number[]; store?: boolean } = {}): Promise<number> {
    return this.ch.call('setHeadMode', { mode, layers: opts.layers, heads: opts.heads, store: opts.store });
  }

  /** Every approximation in effect, per layer (AetherModel.approximations). */
  approximations(): Promise<Approximation[]> { return this.ch.call('approximations', {}); }

  /** Roll back approximations (AetherModel.rollback). */
  async rollback(opts: { kinds?: ('ffn' | 'kv' | 'heads' | 'compression')[]; layers?: number[]; heads?: number[] } = {}): Promise<void> { await this.ch.call('rollback', opts); }

  /** Per-layer time counters on or off, as AetherModel.setTiming. */
  async setTiming(on: boolean): Promise<void> { await this.ch.call('setTiming', { on }); }

  /** Zero the cumulative counters of metrics(). */
  async resetMetrics(): Promise<void> { await this.ch.call('resetMetrics', {}); }

  /** Per-layer FFN compression, as AetherModel.setCompression (resolves to the modes now in force). */
  setCompression(spec: CompressionSpec): Promise<CompressionModeName[]> { return this.ch.call('setCompression', { spec }); }
  /** The compression mode of every layer. */
  compression(): Promise<CompressionModeName[]> { return this.ch.call('compression', {}); }

  /** Free the model and stop its workers. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    try {
      await Promise.race([this.ch.call('dispose', {}), new Promise((r) => setTimeout(r, 1000))]);
    } catch { /* the worker is gone already */ }
    this.ch.fail(new AetherError('disposed', 'the model has been disposed'));
    this.ch.worker.terminate();
  }
}

function baseHref(): string | undefined {
  return typeof document !== 'undefined' ? document.baseURI : typeof location !== 'undefined' ? location.href : undefined;
}

function toWireSource(source: BrowserModelSource): { wire: WireSource; transfer: Transferable[] } {
  if (typeof source === 'string' || source instanceof URL) {
    return { wire: { kind: 'url', url: new URL(String(source), baseHref()).href }, transfer: [] };
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { wire: { kind: 'blob', blob: source }, transfer: [] };
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
    return { wire: { kind: 'stream', stream: source }, transfer: [source as unknown as Transferable] };
  }
  throw new AetherError('invalid_argument', `Aether.load: unsupported source ${Object.prototype.toString.call(source)} (expected a URL, a Blob / File or a ReadableStream)`);
}

/** Load a .rknot model into a new engine Worker. */
export async function load(source: BrowserModelSource, opts: BrowserLoadOptions = {}): Promise<BrowserModel> {
  throwIfAborted(opts.signal);
  requireSimd();
  if (typeof Worker === 'undefined') throw new AetherError('unsupported', 'Web Workers are not available here; the browser host runs the engine in a Worker');
  const { wire, transfer } = toWireSource(source);
  const scriptUrl = new URL(String(opts.workerUrl ?? new URL('./engine-worker.js', import.meta.url)), baseHref()).href;
  const worker = new Worker(scriptUrl, { type: 'module', name: 'aether-engine' });
  const ch = new Channel(worker, scriptUrl);
  const cache = opts.cache === false ? false : typeof opts.cache === 'string' ? opts.cache : DEFAULT_CACHE_NAME;
  try {
    const info = await ch.start('load', {
      source: wire,
      options: {
        threads: opts.threads, nCtx: opts.nCtx, kvDtype: opts.kvDtype, kvPolicy: opts.kvPolicy, localHeads: opts.localHeads, maxMemory: opts.maxMemory, addressOffset: opts.addressOffset, maxBatch: opts.maxBatch, spin: opts.spin, singleThreadBelow: opts.singleThreadBelow, modules: opts.modules,
        verify: opts.verify, simd: opts.simd, fusedDot: opts.fusedDot, warmup: opts.warmup, cache, wasmBaseUrl: opts.wasmBaseUrl ? new URL(String(opts.wasmBaseUrl), baseHref()).href : undefined,
      },
    }, { signal: opts.signal, onEvent: opts.onProgress, transfer }).promise;
    for (const w of info.warnings) console.warn(`aether: ${w}`);
    return new BrowserModel(ch, info);
  } catch (e) {
    ch.fail(e as Error);
    worker.terminate();
    throw e;
  }
}
