/**
 * The engine worker: a dedicated module Worker that owns one model (its wasm memory, its compute workers,
 * its tokenizer) and answers the page's requests (protocol.ts). The page never runs the engine, so it
 * never blocks. Requests are handled concurrently: a generation yields to the event loop after every
 * token, so 'cancel', 'ffnActive' or 'tokenize' messages are answered while it runs.
 *
 * Compute threads: when the worker is cross-origin isolated, Engine starts threads-1 nested module
 * Workers over the shared memory (runtime/threads.ts); otherwise Engine.prepare falls back to one thread
 * and says why in model.warnings, which the page prints with console.warn.
 *
 * Must not import anything with a bare specifier or a Node module (no import map in Workers).
 */
import { CHAT_GENERATE_DEFAULTS, load, type AetherModel } from '../aether.js';
import { AetherError } from '../errors.js';
import { webStreamIterable, type Source } from '../loader/source.js';
import { setWasmBaseUrl } from '../runtime/env.js';
import { cacheAvailable, downloadToCache, evictCached, lookupCached } from './cache.js';
import {
  PROTOCOL_VERSION, type FromWorker, type LoadEvent, type ModelInfo, type Request, type ToWorker, type Verb, type Verbs,
  type WireError, type WireLoadOptions, type WireSource,
} from './protocol.js';

interface WorkerScope {
  postMessage(m: FromWorker): void;
  onmessage: ((ev: MessageEvent) => void) | null;
  crossOriginIsolated?: boolean;
}
const scope = globalThis as unknown as WorkerScope;
const post = (m: FromWorker): void => scope.postMessage(m);

let model: AetherModel | null = null;
let loading = false;
const running = new Map<number, AbortController>();

type Handler<V extends Verb> = (args: Verbs[V]['args'], ctx: { id: number; signal: AbortSignal }) => Promise<Verbs[V]['result']>;

function requireModel(): AetherModel {
  if (!model) throw new AetherError(loading ? 'invalid_argument' : 'disposed', loading ? 'the model is still loading' : 'no model is loaded (disposed or never loaded)');
  return model;
}

const handlers: { [V in Verb]: Handler<V> } = {
  async load({ source, options }, { id, signal }) {
    if (model || loading) throw new AetherError('invalid_argument', 'this engine worker already has a model (one model per worker)');
    loading = true;
    try {
      if (options.wasmBaseUrl) setWasmBaseUrl(options.wasmBaseUrl);
      const emit = (event: LoadEvent) => post({ id, event });
      const m = await loadSource(source, options, emit, signal);
      model = m;
      return info(m, source);
    } finally {
      loading = false;
    }
  },

  async generate({ prompt, options }, { id, signal }) {
    const m = requireModel();
    for await (const piece of m.generate(prompt, { ...options, signal })) post({ id, piece });
    return m.stats;
  },

  async embed({ texts }, { signal }) { return requireModel().embedDetailed(texts, { signal }); },
  async tokenize({ text, options }) { return requireModel().tokenize(text, options); },
  async detokenize({ ids, options }) { return requireModel().detokenize(ids, options); },
  async stats() { return requireModel().stats; },
  async reset() { requireModel().reset(); return null; },

  async setFfnMode({ mode, layers, options }) {
    const m = requireModel();
    m.setFfnMode(mode, layers, options);
    return { ...m.engine.plan };
  },

  async setCompression({ spec }) {
    return requireModel().setCompression(spec);
  },
  async compression() {
    return requireModel().compression();
  },
  async ffnActive({ layers }) {
    const m = requireModel();
    const ls = layers ?? [...Array(m.config.n_layers).keys()];
    return ls.map((l) => m.engine.ffnActive(l));
  },

  async metrics() { return requireModel().metrics(); },

  async setKvPolicy({ policy, layers }) { requireModel().setKvPolicy(policy, layers); return null; },

  async setHeadMode({ mode, layers, heads, store }) { return requireModel().setHeadMode(mode, { layers, heads, store }); },

  async approximations() { return requireModel().approximations(); },

  async rollback(args) { requireModel().rollback(args); return null; },

  async setTiming({ on }) { requireModel().setTiming(on); return null; },

  async resetMetrics() { requireModel().resetMetrics(); return null; },

  async dispose() {
    model?.dispose();
    model = null;
    return null;
  },
};

function info(m: AetherModel, source: WireSource): ModelInfo {
  const { tokenizer: _t, tensors: _x, ...metadata } = m.metadata;
  return {
    name: source.kind === 'url' ? source.url : source.kind === 'blob' ? ((source.blob as File).name || 'blob') : 'stream',
    config: m.config,
    metadata,
    threads: m.threads,
    simd: m.simd,
    fusedDot: m.engine.fusedDot,
    fusedDotProbe: m.engine.fusedDotProbe,
    warmup: m.warmupStats,
    nCtx: m.nCtx,
    memory: m.engine.plan,
    warnings: [...m.warnings],
    crossOriginIsolated: !!scope.crossOriginIsolated,
    chatTemplate: { ...m.chatTemplate, generateDefaults: { ...CHAT_GENERATE_DEFAULTS } },
  };
}

/** A checksum or format failure of a cached copy means the copy is bad: evict and download again. */
const isCorruption = (e: unknown): boolean => e instanceof AetherError && (e.code === 'checksum_error' || e.code === 'format_error');

async function loadSource(source: WireSource, o: WireLoadOptions, emit: (e: LoadEvent) => void, signal: AbortSignal): Promise<AetherModel> {
  const opts = {
    threads: o.threads, nCtx: o.nCtx, kvDtype: o.kvDtype, maxMemory: o.maxMemory, addressOffset: o.addressOffset, maxBatch: o.maxBatch, spin: o.spin, singleThreadBelow: o.singleThreadBelow, modules: o.modules, verify: o.verify, simd: o.simd, fusedDot: o.fusedDot, warmup: o.warmup, signal,
    ...(o.kvPolicy !== undefined ? { kvPolicy: o.kvPolicy } : {}),
    ...(o.localHeads !== undefined ? { localHeads: o.localHeads } : {}),
    onProgress: (e: { loaded: number; total: number }) => emit({ type: 'progress', loaded: e.loaded, total: e.total }),
  };
  if (source.kind === 'blob') return load(source.blob, opts);
  if (source.kind === 'stream') return load(source.stream, opts);
  const url = source.url;
  if (!o.cache || !/^https?:/i.test(url) || !cacheAvailable()) return load(url, opts);
  const name = o.cache;

  let found: Awaited<ReturnType<typeof lookupCached>> | null = null;
  try {
    found = await lookupCached(name, url, signal);
  } catch (e) {
    if ((e as Error)?.name === 'AbortError') throw e;
    emit({ type: 'cache', state: 'error', url, reason: String((e as Error)?.message ?? e) });
  }
  if (found?.state === 'evicted') emit({ type: 'cache', state: 'evicted', url, reason: found.reason });
  if (found?.state === 'hit') {
    emit({ type: 'cache', state: 'hit', url });
    try {
      return await load(found.blob, { ...opts, verify: true });
    } catch (e) {
      if (!isCorruption(e)) throw e;
      await evictCached(name, url).catch(() => undefined);
      emit({ type: 'cache', state: 'evicted', url, reason: (e as Error).message });
    }
  }

  emit({ type: 'cache', state: 'miss', url });
  let dl: Awaited<ReturnType<typeof downloadToCache>>;
  try {
    dl = await downloadToCache(name, url, signal);
  } catch (e) {
    if (e instanceof AetherError) throw e;
    // the Cache API itself failed (quota, storage disabled): load without it
    emit({ type: 'cache', state: 'error', url, reason: String((e as Error)?.message ?? e) });
    return load(url, opts);
  }
  const { iterable, cancel } = webStreamIterable(dl.stream);
  const src: Source = { name: url, size: dl.size, stream: iterable, close: cancel };
  let m: AetherModel;
  try {
    m = await load(src as unknown as Blob, opts); // load() accepts an opened Source (loader/stream.ts isSource)
  } catch (e) {
    await dl.discard();
    throw e;
  }
  const problem = await dl.commit();
  emit(problem === null ? { type: 'cache', state: 'stored', url } : { type: 'cache', state: 'error', url, reason: problem });
  return m;
}

function toWire(e: unknown): WireError {
  const err = e as { name?: string; message?: string; code?: string; details?: Record<string, unknown> } | null;
  if (e instanceof AetherError) return { name: e.name, code: e.code, message: e.message, details: cloneable(e.details) };
  if (err?.name === 'AbortError') return { name: 'AbortError', code: 'aborted', message: String(err.message ?? 'aborted') };
  return { name: String(err?.name ?? 'Error'), message: String(err?.message ?? e) };
}

function cloneable(d: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (d === undefined) return undefined;
  try { return structuredClone(d); } catch { return JSON.parse(JSON.stringify(d, (_k, v) => (typeof v === 'bigint' ? String(v) : v))); }
}

async function handle(req: Request): Promise<void> {
  const { id } = req;
  if (req.v !== PROTOCOL_VERSION) {
    post({ id, error: toWire(new AetherError('invalid_argument', `protocol version ${req.v} from the page; this engine worker speaks version ${PROTOCOL_VERSION} (the page and the worker script come from different builds)`)) });
    return;
  }
  const handler = handlers[req.verb] as Handler<Verb> | undefined;
  if (!handler) {
    post({ id, error: toWire(new AetherError('invalid_argument', `unknown verb '${String(req.verb)}'`)) });
    return;
  }
  const ctl = new AbortController();
  running.set(id, ctl);
  try {
    const result = await handler(req.args as never, { id, signal: ctl.signal });
    post({ id, result });
  } catch (e) {
    post({ id, error: toWire(e) });
  } finally {
    running.delete(id);
  }
}

scope.onmessage = (ev: MessageEvent) => {
  const m = ev.data as ToWorker;
  if (m?.verb === 'cancel') {
    running.get(m.id)?.abort(new AetherError('aborted', 'cancelled by the page'));
    return;
  }
  void handle(m as Request);
};
