/**
 * Public API (the same in Node and in a browser Worker):
 *
 *   const model = await Aether.load(source, { threads, onProgress, signal });
 *   for await (const piece of model.generate('Once upon a time', { maxTokens: 64 })) write(piece.text);
 *   for await (const piece of model.chat([{ role: 'user', content: 'Hi' }])) ...
 *   model.tokenize(text); model.detokenize(ids); model.stats; model.dispose();
 *
 * Every long call takes an AbortSignal; an abort throws an error whose name is 'AbortError' and
 * leaves the model usable.
 */
import { AetherError, throwIfAborted } from './errors.js';
import { CMP_MODES, DEFAULT_KV_DTYPE, Engine, type CompressionModeName, type EngineOptions, type ModelConfig, type SamplerParams, type TensorInfo, type WarmupStats } from './runtime/engine.js';
import { probeFeatures, isNode } from './runtime/env.js';
import { createTokenizer, type Tokenizer } from './tokenizer/index.js';
import type { TokenizerData } from './tokenizer/types.js';
// chat.js (and its @huggingface/jinja import) is loaded on first use: a browser Worker has no import map,
// so the engine worker's module graph must not contain bare specifiers (see js/src/browser/).
import type { ChatMessage, ChatTemplateInfo } from './tokenizer/chat.js';
import { chatFallbackFor, chatStopStrings } from './tokenizer/chat-stops.js';
import { loadRknotStream } from './loader/stream.js';
import type { RknotMetadata } from './formats/rknot-read.js';
import { FfnRuntime, type FfnOptions } from './runtime/ffn.js';
import { checkPrompt, checkStop, optBool, optInt, optionsObject, optNum, optSignal, optThreads } from './validate.js';
import * as openai from './openai.js';
import type { ModelMetrics } from './runtime/metrics.js';
import { checkKvPolicy, formatKvPolicy, type KvPolicy } from './formats/kv-policy.js';
import { checkAttentionHeads, type AttentionHeadsMeta } from './formats/heads.js';
export type { FfnOptions } from './runtime/ffn.js';
export type { ModelMetrics, LayerMetrics, KvDtypeMetrics } from './runtime/metrics.js';

export type ModelSource = string | URL | Blob | ReadableStream<Uint8Array>;

export interface ProgressEvent { type: 'progress'; loaded: number; total: number }

export interface LoadOptions extends EngineOptions {
  onProgress?: (e: ProgressEvent) => void;
  signal?: AbortSignal;
  /** Verify tensor checksums while loading (default true). */
  verify?: boolean;
  /**
   * Warm up after loading (Engine.warmup) so that the first generation runs at full speed: true, false, or the
   * time limit in ms (default 3000). Default: on in browsers, off in Node (where `node --no-liftoff`, which the
   * aether CLI sets, has the same effect without the warm-up's cost).
   */
  warmup?: boolean | number;
  /**
   * Node file paths: how the data section is read into wasm memory (docs/PERFORMANCE.md, "Load"). `chunk`: bytes per
   * read (default 4 MiB); `readAhead`: bytes of reads in flight ahead of the checks (default 64 MiB); `staged`: read into
   * small reused buffers and copy each into memory (default false: straight into memory).
   */
  read?: { chunk?: number; readAhead?: number; staged?: boolean };
}

export interface GenerateOptions extends Omit<SamplerParams, 'logitBias' | 'topLogprobs'> {
  /**
   * Bias added to the logits of token ids before sampling (after the repetition penalty): -100..100, and
   * -100 bans the token (OpenAI's logit_bias). A Map, or an object keyed by token id.
   */
  logitBias?: ReadonlyMap<number, number> | Readonly<Record<string, number>>;
  /** Report each token's log-probability (piece.logprob; see SamplerParams.topLogprobs for the definition). */
  logprobs?: boolean;
  /** Also report the n most probable tokens at each step (0..20; piece.topLogprobs); implies logprobs. */
  topLogprobs?: number;
  /** Tokens to generate at most (default 128). */
  maxTokens?: number;
  /** Greedy decoding (same as temperature 0). */
  greedy?: boolean;
  /** RNG seed (default: random). Same seed, same prompt, same options: same output. */
  seed?: number;
  /** Tokens the repetition, frequency and presence penalties look back at (default 64). */
  repeatLastN?: number;
  /** Extra strings that end generation (not included in the output); at run time one string is taken as one stop sequence. */
  stop?: string[];
  /** Keep generating past end-of-generation tokens (they are output like any token), as llama.cpp's --ignore-eos:
   *  benchmarks that need exactly maxTokens tokens (default false). */
  ignoreEos?: boolean;
  /** Prepend BOS to a text prompt (default: the tokenizer's add_bos_token). */
  addBos?: boolean;
  /** Match special tokens written in the prompt text (default false for generate, true for chat). */
  parseSpecial?: boolean;
  signal?: AbortSignal;
}

export interface GeneratedPiece {
  /** Text completed by this token (may be '' while a UTF-8 character is incomplete). */
  text: string;
  /** The sampled token id (-1 for held-back text released at the end). */
  token: number;
  /** With opts.logprobs / topLogprobs: the token's log-probability (natural log)... */
  logprob?: number;
  /** ...and its UTF-8 bytes (the token's own, which `text` may split or hold back). */
  bytes?: number[];
  /** With opts.topLogprobs: the most probable tokens at this step, most probable first. */
  topLogprobs?: TokenLogprob[];
}

/** One token's log-probability: its id, text, UTF-8 bytes (text may hold U+FFFD for part of a character). */
export interface TokenLogprob { token: number; text: string; bytes: number[]; logprob: number }

export interface GenerationStats {
  promptTokens: number;
  /** Prompt tokens actually computed (the rest were reused from the KV cache). */
  prefillTokens: number;
  generatedTokens: number;
  prefillMs: number;
  decodeMs: number;
  prefillTps: number;
  decodeTps: number;
  /** 'aborted': by the signal, or the caller left the loop early; 'error': the generation threw. */
  finishReason: 'stop' | 'length' | 'context_full' | 'aborted' | 'error' | null;
}

export type FfnModeName = 'dense' | 'fused' | 'static' | 'dynamic';

/** Argument of setCompression: all layers, the file's atlas, or some layers. */
export type CompressionSpec = 'dense' | 'compressed' | 'atlas' | { layers: Record<number, CompressionModeName> };
export type { CompressionModeName };

/**
 * Let other tasks run (abort signals, messages) between tokens. Browsers: a MessageChannel round trip, as
 * nested setTimeout(0) calls are clamped to 4 ms (measured in a Worker: 5 ms/token instead of 1).
 */
const yieldToEventLoop: () => Promise<void> = typeof setImmediate === 'function'
  ? () => new Promise((r) => setImmediate(r))
  : typeof MessageChannel === 'function'
    ? (() => {
      const ch = new MessageChannel();
      const waiting: (() => void)[] = [];
      ch.port1.onmessage = () => waiting.shift()?.();
      return () => new Promise<void>((r) => { waiting.push(r); ch.port2.postMessage(0); });
    })()
    : () => new Promise((r) => setTimeout(r, 0));

export class AetherModel extends openai.OpenAIMethods {
  readonly engine: Engine;
  readonly tokenizer: Tokenizer;
  readonly metadata: RknotMetadata;
  readonly config: ModelConfig;
  /** Stats of the last generate/chat call. */
  stats: GenerationStats = emptyStats();
  /** Name in OpenAI-shaped responses (`model`): the file name without extension, else the source model's name. */
  modelId: string;
  /** Token ids whose K/V are in the cache, in order. */
  private cached: number[] = [];
  /** The running generation's token (0: none); a dropped iterator releases it (finally, or the registry below). */
  private busy = 0;
  private static nextRun = 1;
  /** Fallback for an iterator dropped while suspended (never resumed, never return()ed): release its lock when collected. */
  private static readonly dropped = new FinalizationRegistry<{ model: WeakRef<AetherModel>; run: number }>((h) => {
    const m = h.model.deref();
    if (m && m.busy === h.run) m.busy = 0;
  });
  /** Cumulative counters of metrics() (since load or resetMetrics()). */
  private totals = { prefill: 0, decode: 0, prefillMs: 0, decodeMs: 0, generations: 0 };

  constructor(engine: Engine, tokenizer: Tokenizer, metadata: RknotMetadata) {
    super();
    this.engine = engine; this.tokenizer = tokenizer; this.metadata = metadata; this.config = engine.config;
    const src = (metadata as { source?: { name?: unknown } }).source;
    this.modelId = typeof src?.name === 'string' ? src.name : 'aether';
    // A tokenizer may have fewer tokens than vocab_size (padded embeddings): never sample an id it cannot decode.
    if (tokenizer.vocabSize < engine.config.vocab_size) engine.sampleLimit = tokenizer.vocabSize;
  }

  /** Whether a generation holds this model (generate/chat/complete not finished, and its iterator not dropped). */
  get running(): boolean { return this.busy !== 0; }

  get threads(): number { return this.engine.threads; }
  /** What the load's warm-up did (LoadOptions.warmup), or null when there was none. */
  warmupStats: WarmupStats | null = null;
  /** The wasm build in use: 'relaxed' (relaxed SIMD) or 'plain' (EngineOptions.simd). */
  get simd(): 'relaxed' | 'plain' { return this.engine.simd; }
  get nCtx(): number { return this.engine.nCtx; }
  get warnings(): readonly string[] { return this.engine.warnings; }

  tokenize(text: string, opts?: { addBos?: boolean; parseSpecial?: boolean }): number[] {
    return this.tokenizer.encode(text, opts);
  }

  detokenize(ids: ArrayLike<number>, opts?: { skipSpecial?: boolean }): string {
    return this.tokenizer.decode(ids, opts);
  }

  /** Forget the KV cache (the next call recomputes its whole prompt). Refused while a generation runs. */
  reset(): void {
    if (this.busy) throw new AetherError('invalid_argument', 'reset() while a generation is running on this model: finish it, abort it (signal) or call return() on its iterator first');
    this.cached = [];
  }

  /**
   * Run `ids` so that the cache holds exactly them; reuses the longest cached prefix. Returns the number
   * of tokens computed. Afterwards the logits are those of the last id.
   */
  private async prefill(ids: number[], signal?: AbortSignal): Promise<number> {
    if (ids.length === 0) throw new AetherError('invalid_argument', 'the prompt is empty (no tokens)');
    if (ids.length > this.engine.nCtx) {
      throw new AetherError('kv_cache_full', `the prompt has ${ids.length} tokens, more than the context length ${this.engine.nCtx}`);
    }
    let common = 0;
    while (common < this.cached.length && common < ids.length && this.cached[common] === ids[common]) common++;
    if (common === ids.length) common--; // recompute the last token to get its logits
    this.cached.length = common;
    // Chunks of about PREFILL_SLICE_MS each (at least PREFILL_MIN_CHUNK tokens, at most maxBatch), with the event loop
    // served and the signal checked between them. Results do not depend on the chunking (every row is computed alone).
    const B = this.engine.maxBatch;
    let n = Math.min(B, PREFILL_MIN_CHUNK);
    for (let s = common; s < ids.length;) {
      throwIfAborted(signal);
      const chunk = ids.slice(s, Math.min(ids.length, s + n));
      const t0 = now();
      // only the prompt's last token needs logits: the chunks before it run no output head
      this.engine.forward(chunk, s, false, 0, s + chunk.length < ids.length);
      this.cached.push(...chunk);
      s += chunk.length;
      const ms = now() - t0;
      n = Math.max(Math.min(B, PREFILL_MIN_CHUNK), Math.min(B, Math.floor(chunk.length * PREFILL_SLICE_MS / Math.max(ms, 0.1))));
      if (s < ids.length) await yieldToEventLoop();
    }
    throwIfAborted(signal);
    return ids.length - common;
  }

  /**
   * Stream the continuation of `prompt` (text or token ids). One generation at a time per model: the lock is released
   * when the iterator finishes, throws, is return()ed (`break` in for-await) or, as a fallback, is garbage collected.
   */
  generate(prompt: string | number[], opts: GenerateOptions = {}): AsyncGenerator<GeneratedPiece, GenerationStats> {
    const run = AetherModel.nextRun++;
    const it = this.generateRun(run, prompt, opts);
    AetherModel.dropped.register(it, { model: new WeakRef(this), run });
    return it;
  }

  private async *generateRun(run: number, prompt: unknown, optsIn: unknown): AsyncGenerator<GeneratedPiece, GenerationStats> {
    if (this.busy) throw new AetherError('invalid_argument', 'a generation is already running on this model (finish it, abort it, or call return() on its iterator)');
    const opts = checkGenerateOptions(optsIn);
    const checkedPrompt = checkPrompt(prompt);
    this.busy = run;
    const stats = emptyStats();
    this.stats = stats;
    let t1 = -1; // start of decoding (after the prefill)
    try {
      throwIfAborted(opts.signal);
      const ids = typeof checkedPrompt === 'string'
        ? this.tokenizer.encode(checkedPrompt, { addBos: opts.addBos, parseSpecial: opts.parseSpecial ?? false })
        : checkedPrompt;
      for (const t of ids) {
        if (!Number.isInteger(t) || t < 0 || t >= this.config.vocab_size) throw new AetherError('invalid_argument', `token id ${t} is outside the vocabulary (0..${this.config.vocab_size - 1})`);
      }
      stats.promptTokens = ids.length;
      const maxTokens = opts.maxTokens ?? 128;
      const greedy = opts.greedy || (opts.temperature !== undefined && opts.temperature <= 0);
      const penalties = { repeatPenalty: opts.repeatPenalty ?? 1, frequencyPenalty: opts.frequencyPenalty ?? 0, presencePenalty: opts.presencePenalty ?? 0 };
      const sp: SamplerParams = greedy ? { temperature: 0, ...penalties } : {
        temperature: opts.temperature ?? 0.8, topK: opts.topK ?? 40, topP: opts.topP ?? 0.95,
        minP: opts.minP ?? 0.05, ...penalties,
      };
      sp.logitBias = logitBiasMap(opts.logitBias, this.config.vocab_size);
      if (opts.topLogprobs !== undefined || opts.logprobs) sp.topLogprobs = opts.topLogprobs ?? 0;
      const lastN = opts.repeatLastN ?? 64;
      let rng = this.engine.seedRng(opts.seed ?? Math.floor(Math.random() * 2 ** 32));
      const t0 = now();
      stats.prefillTokens = await this.prefill(ids, opts.signal);
      stats.prefillMs = now() - t0;
      const decoder = this.tokenizer.createDecoder();
      // Continuing a prompt: the first generated piece keeps its leading space (SPM), so prime the
      // decoder with the last prompt token and drop its text.
      decoder.push(ids[ids.length - 1]);
      const stops = (checkStop(opts.stop) ?? []).filter((s) => s.length > 0);
      let held = '';
      t1 = now();
      for (let i = 0; i < maxTokens; i++) {
        const recent = lastN > 0 ? this.cached.slice(-lastN) : [];
        const r = this.engine.sample(sp, rng, recent);
        rng = r.rng;
        const tok = r.token;
        if (!opts.ignoreEos && this.tokenizer.isEog(tok)) { stats.finishReason = 'stop'; break; }
        const lp = r.logprob === undefined ? undefined : {
          logprob: r.logprob, bytes: Array.from(this.tokenizer.tokenBytes(tok)), topLogprobs: opts.topLogprobs ? r.top!.map((t) => this.tokenLogprob(t.token, t.logprob)) : undefined,
        };
        stats.generatedTokens++;
        let text = decoder.push(tok);
        if (stops.length) {
          held += text;
          const hit = firstStop(held, stops);
          if (hit >= 0) {
            const out = held.slice(0, hit);
            if (out) yield { text: out, token: tok, ...lp };
            stats.finishReason = 'stop';
            break;
          }
          const keep = partialStopSuffix(held, stops);
          text = held.slice(0, held.length - keep);
          held = held.slice(held.length - keep);
        }
        yield { text, token: tok, ...lp };
        if (i === maxTokens - 1) { stats.finishReason = 'length'; break; }
        if (this.cached.length >= this.engine.nCtx) { stats.finishReason = 'context_full'; break; }
        await yieldToEventLoop();
        throwIfAborted(opts.signal);
        this.engine.forward([tok], this.cached.length);
        this.cached.push(tok);
      }
      if (held && stats.finishReason !== 'stop') yield { text: held, token: -1 };
      if (stats.finishReason === null) stats.finishReason = 'length';
      return stats;
    } catch (e) {
      stats.finishReason = (e as Error)?.name === 'AbortError' ? 'aborted' : 'error';
      throw e;
    } finally {
      // also reached when the caller leaves the loop early (break / return: the generator's return()),
      // which ends the generation as an abort does
      if (t1 >= 0) stats.decodeMs = now() - t1;
      if (stats.finishReason === null) stats.finishReason = 'aborted';
      finish(stats);
      if (this.busy === run) this.busy = 0;
      const t = this.totals;
      t.prefill += stats.prefillTokens; t.decode += stats.generatedTokens;
      t.prefillMs += stats.prefillMs; t.decodeMs += stats.decodeMs; t.generations++;
    }
  }

  /** A token's id, text, bytes and the given log-probability. */
  tokenLogprob(token: number, logprob: number): TokenLogprob {
    const b = this.tokenizer.tokenBytes(token);
    return { token, text: utf8Decoder.decode(b), bytes: Array.from(b), logprob };
  }

  /**
   * What chat() renders with: the tokenizer's Jinja template (undefined: the fallback format for this
   * vocabulary), the BOS/EOS texts, and the format's end-of-turn stop strings.
   */
  get chatTemplate(): ChatTemplateInfo {
    const tk = this.tokenizer;
    const fallback = chatFallbackFor(tk.data);
    return {
      template: tk.data.chat_template,
      bosToken: tk.bosId !== undefined ? tk.tokenToPiece(tk.bosId) : '',
      eosToken: tk.eosId !== undefined ? tk.tokenToPiece(tk.eosId) : '',
      fallback,
      stop: chatStopStrings(tk.data.chat_template, { fallback }),
    };
  }

  /**
   * Render `messages` with the model's chat template and stream the reply; it ends at the end of the turn
   * (an end-of-generation token, or the format's turn stop strings, see chatTemplate.stop, plus `opts.stop`).
   */
  async *chat(messages: ChatMessage[], opts: GenerateOptions = {}): AsyncGenerator<GeneratedPiece, GenerationStats> {
    if (!Array.isArray(messages)) throw new AetherError('invalid_argument', `messages: expected an array of { role, content }, got ${messages === null ? 'null' : typeof messages}`);
    opts = optionsObject('options', opts) as GenerateOptions;
    if (opts.stop !== undefined) opts = { ...opts, stop: checkStop(opts.stop) };
    const { renderChat } = await import('./tokenizer/chat.js');
    const { prompt, options } = renderChat(this.chatTemplate, messages, opts, CHAT_GENERATE_DEFAULTS);
    return yield* this.generate(prompt, options);
  }

  /** Generate and return the whole text. */
  async complete(prompt: string | number[], opts: GenerateOptions = {}): Promise<{ text: string; tokens: number[]; stats: GenerationStats }> {
    let text = '';
    const tokens: number[] = [];
    for await (const p of this.generate(prompt, opts)) { text += p.text; if (p.token >= 0) tokens.push(p.token); }
    return { text, tokens, stats: this.stats };
  }

  /**
   * Embeddings: per text, the mean over its tokens (BOS included when the tokenizer adds one) of the last
   * hidden state after the final norm (the output head's input), L2-normalised; cosine similarity is then a
   * dot product. One vector for a string, one per string for an array. Texts longer than the context fail.
   */
  async embed(input: string, opts?: { signal?: AbortSignal }): Promise<Float32Array>;
  async embed(input: string[], opts?: { signal?: AbortSignal }): Promise<Float32Array[]>;
  async embed(input: string | string[], opts: { signal?: AbortSignal } = {}): Promise<Float32Array | Float32Array[]> {
    const r = await this.embedDetailed(typeof input === 'string' ? [input] : input, opts);
    return typeof input === 'string' ? r.embeddings[0] : r.embeddings;
  }

  /** embed() of several texts, with the number of tokens they took (OpenAI's usage.prompt_tokens). */
  async embedDetailed(texts: string[], opts: { signal?: AbortSignal } = {}): Promise<{ embeddings: Float32Array[]; promptTokens: number }> {
    if (!Array.isArray(texts) || texts.some((t) => typeof t !== 'string')) throw new AetherError('invalid_argument', 'embed: expected a string or an array of strings');
    if (this.busy) throw new AetherError('invalid_argument', 'a generation is already running on this model');
    const run = AetherModel.nextRun++;
    this.busy = run;
    try {
      const embeddings: Float32Array[] = [];
      let promptTokens = 0;
      for (const [i, text] of texts.entries()) {
        throwIfAborted(opts.signal);
        const ids = this.tokenizer.encode(text);
        if (ids.length === 0) throw new AetherError('invalid_argument', `embed: text ${i} has no tokens`, { param: 'input' });
        if (ids.length > this.engine.nCtx) {
          throw new AetherError('invalid_argument', `embed: text ${i} has ${ids.length} tokens, more than the context length ${this.engine.nCtx}`, { param: 'input' });
        }
        this.cached = [];
        const v = this.engine.meanHidden(ids);
        this.cached = ids; // the KV cache now holds this text
        let ss = 0;
        for (let k = 0; k < v.length; k++) ss += v[k] * v[k];
        const inv = ss > 0 ? 1 / Math.sqrt(ss) : 0;
        for (let k = 0; k < v.length; k++) v[k] *= inv;
        embeddings.push(v);
        promptTokens += ids.length;
        if (i < texts.length - 1) await yieldToEventLoop();
      }
      return { embeddings, promptTokens };
    } finally {
      if (this.busy === run) this.busy = 0;
    }
  }

  /**
   * Switch the FFN execution mode of every layer (or of `layers`): 'dense' (core), 'fused' (needs the
   * 'ffn-fused' module), 'static' / 'dynamic' (need 'ffn-saturated' and saturation metadata from
   * `aether profile`, or masks / thresholds in `opts`). Options are remembered per mode; the data each
   * mode needs is built once in wasm memory (see `ffn.auxBytes`), so switching back is free.
   */
  setFfnMode(mode: FfnModeName, layers?: number[], opts?: FfnOptions): void {
    if (mode !== 'dense') {
      for (const l of layers ?? Array.from({ length: this.config.n_layers }, (_, i) => i)) {
        if (Number.isInteger(l) && l >= 0 && l < this.config.n_layers && !this.engine.tensorInfo(`blk.${l}.ffn_gate.weight`)) throw new AetherError('unsupported', `FFN mode '${mode}' needs layer ${l}'s dense FFN weights, which this compressed file does not have (aether compress --keep-dense keeps them)`);
      }
    }
    this.ffn.setMode(mode, layers, opts);
  }

  /**
   * Per-layer FFN compression (files written by `aether compress`; docs/rknot.md "compression"): 'compressed'
   * runs every layer that has a compressed variant on it, 'dense' every layer on its dense weights (needs
   * `--keep-dense` files for compressed layers), 'atlas' follows the file's atlas (compressed where its mode is
   * not 'preserve'), `{ layers: { 3: 'dense', ... } }` sets the listed layers only. All or nothing: nothing
   * changes when a layer cannot take its mode (`unsupported`). One C lookup per layer per forward; the KV cache
   * is kept (tokens already cached keep what the previous mode computed). Returns the modes now in force.
   */
  setCompression(spec: CompressionSpec): CompressionModeName[] {
    const NL = this.config.n_layers, eng = this.engine;
    const want: (CompressionModeName | undefined)[] = Array(NL).fill(undefined);
    const atlas = (this.metadata as { compression?: { atlas?: { layers?: { layer: number; mode: string }[] } } }).compression?.atlas;
    if (spec === 'dense' || spec === 'compressed') {
      for (let l = 0; l < NL; l++) want[l] = spec === 'compressed' && !eng.compressedWidth(l) ? (eng.tensorInfo(`blk.${l}.ffn_gate.weight`) ? 'dense' : 'compressed') : spec;
    } else if (spec === 'atlas') {
      if (!atlas?.layers) throw new AetherError('invalid_argument', `setCompression('atlas'): the file has no compression.atlas (aether analyze -o writes one)`);
      for (let l = 0; l < NL; l++) {
        const a = atlas.layers.find((x) => x.layer === l);
        want[l] = a && a.mode !== 'preserve' && eng.compressedWidth(l) ? 'compressed' : eng.tensorInfo(`blk.${l}.ffn_gate.weight`) ? 'dense' : 'compressed';
      }
    } else if (spec && typeof spec === 'object' && spec.layers && typeof spec.layers === 'object') {
      for (const [k, v] of Object.entries(spec.layers)) {
        const l = Number(k);
        if (!Number.isInteger(l) || l < 0 || l >= NL) throw new AetherError('invalid_argument', `setCompression: layer ${k} is not in 0..${NL - 1}`);
        if (!(CMP_MODES as readonly string[]).includes(v)) throw new AetherError('invalid_argument', `setCompression: layer ${l}: mode '${v}' is not one of ${CMP_MODES.join(', ')}`);
        want[l] = v;
      }
    } else {
      throw new AetherError('invalid_argument', `setCompression expects 'dense', 'compressed', 'atlas' or { layers: { N: 'dense' | 'compressed' } }, got ${JSON.stringify(spec)}`);
    }
    // check everything first (all or nothing)
    for (let l = 0; l < NL; l++) {
      const m = want[l];
      if (m === 'compressed' && !eng.compressedWidth(l)) throw new AetherError('unsupported', `layer ${l} has no compressed FFN variant (write one with aether compress)`, { layer: l });
      if (m === 'dense' && !eng.tensorInfo(`blk.${l}.ffn_gate.weight`)) throw new AetherError('unsupported', `layer ${l} has no dense FFN weights in this file (aether compress --keep-dense keeps them)`, { layer: l });
    }
    for (let l = 0; l < NL; l++) if (want[l]) eng.setCompressionMode(l, want[l]!);
    return this.compression();
  }

  /** The compression mode of every layer ('dense' | 'compressed'). */
  compression(): CompressionModeName[] {
    return Array.from({ length: this.config.n_layers }, (_, l) => this.engine.compressionMode(l));
  }

  /** FFN mode runtime (aux data, profile accumulators). */
  get ffn(): FfnRuntime {
    if (!this.ffnRuntime) this.ffnRuntime = new FfnRuntime(this.engine, this.metadata.saturation);
    return this.ffnRuntime;
  }
  private ffnRuntime?: FfnRuntime;

  /**
   * Runtime metrics: per layer the FFN mode, active fraction and (with setTiming(true)) time per op class;
   * KV cache bytes by dtype; cumulative tokens and seconds; the last generation's rates; memory.
   * `formatPrometheus(model.metrics())` (runtime/metrics.ts) gives the Prometheus text form.
   */
  metrics(): ModelMetrics {
    const e = this.engine, c = this.config;
    const times = e.opTimes();
    const secs = (row: number[] | undefined) => row ? Object.fromEntries(times!.ops.map((op, i) => [op, row[i] / 1000])) : null;
    const layers = [];
    for (let l = 0; l < c.n_layers; l++) {
      const fc = e.ffnCounters(l);
      const opSeconds = secs(times?.layers[l]);
      if (opSeconds) { delete opSeconds.embed; delete opSeconds.output; }
      layers.push({
        layer: l, ffnMode: this.ffnRuntime?.modes[l] ?? 'dense',
        ffnActiveFraction: fc.tokens > 0 ? fc.active / (fc.tokens * c.hidden_dim) : null, opSeconds,
      });
    }
    const globalOps = secs(times?.global);
    if (globalOps) for (const k of Object.keys(globalOps)) if (k !== 'embed' && k !== 'output') delete globalOps[k];
    const positions = this.cached.length;
    const kv = e.kvCacheBytes(positions);
    const f16Bytes = 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2 * e.nCtx;  // K and V, 2 bytes per value
    const kvBytes = kv.reduce((a, d) => a + d.bytes, 0);
    const t = this.totals;
    return {
      model: { name: String((this.metadata.source as { name?: string } | undefined)?.name ?? c.arch), arch: c.arch, layers: c.n_layers, nCtx: e.nCtx, threads: e.threads },
      tokens: { prefill: t.prefill, decode: t.decode, prefillSeconds: t.prefillMs / 1000, decodeSeconds: t.decodeMs / 1000, generations: t.generations },
      last: { prefillTokensPerSecond: this.stats.prefillTps, decodeTokensPerSecond: this.stats.decodeTps },
      kvCache: {
        positions, capacity: e.nCtx,
        byDtype: kv,
        f16Bytes, savedBytes: f16Bytes - kvBytes, localHeadsSavedBytes: e.kvLocalSavedBytes(),
      },
      memory: (({ wasm, weights, runState }) => ({ wasmBytes: wasm, weightsBytes: weights, runStateBytes: runState }))(e.memoryBytes()),
      layers, globalOpSeconds: globalOps, timing: e.timing,
    };
  }

  /**
   * Switch the KV policy of every layer (or of `layers`) at run time: a compact spec ('sinks=4:f16,window=64:f16,
   * rest=q8_0'), a structured policy, or null / 'full' for the plain cache. The cache is emptied (the next call
   * recomputes its prompt).
   */
  setKvPolicy(policy: string | KvPolicy | null, layers?: number[]): void {
    if (this.busy) throw new AetherError('invalid_argument', 'cannot change the KV policy while a generation is running');
    this.engine.setKvPolicy(policy, layers);
    this.cached = [];
  }

  /** The KV policy of `layer` in the compact syntax ('full': none). */
  kvPolicy(layer = 0): string { return formatKvPolicy(this.engine.kvPolicies[layer] ?? null); }

  /** The file's attention_heads section (from `aether profile-heads`), checked; undefined when absent. */
  get attentionHeads(): AttentionHeadsMeta | undefined {
    if (this.metadata.attention_heads === undefined) return undefined;
    return (this.heads ??= checkAttentionHeads(this.metadata.attention_heads, this.config));
  }
  private heads?: AttentionHeadsMeta;

  /**
   * Per-head attention compression. 'local': the KV heads classed local (the file's attention_heads section, or
   * `opts.heads` = KV head indices) of every layer (or `opts.layers`) attend to the sinks and the recent window
   * only; 'full': they attend to everything again. Needs a KV policy with a window: when a layer has none, the
   * profile's sinks and window are applied at the cache's dtype (`sinks=S:DT,window=W:DT,rest=DT`), which empties
   * the cache. Switching heads between local and full attention is free and keeps the cache.
   * `opts.store` (with 'local'): the heads are also stored locally (only the sinks and the window kept: memory saved;
   * as the load option localHeads). Storage changes re-carve the cache and then re-run the cached tokens (the token
   * history) through the model, so the conversation continues: 'full' on heads stored locally allocates their full
   * storage again (out_of_memory, nothing changed, when it does not fit) and recomputes the history with every head
   * attending to every position; this costs a prefill of the cached tokens. Returns the tokens recomputed (0: none).
   */
  setHeadMode(mode: 'local' | 'full', opts: { layers?: number[]; heads?: number[]; store?: boolean } = {}): number {
    if (mode !== 'local' && mode !== 'full') throw new AetherError('invalid_argument', `head mode '${mode}' is not 'local' or 'full'`);
    if (this.busy) throw new AetherError('invalid_argument', 'cannot change the head mode while a generation is running');
    const c = this.config;
    const layers = opts.layers ?? [...Array(c.n_layers).keys()];
    for (const l of layers) if (!Number.isInteger(l) || l < 0 || l >= c.n_layers) throw new AetherError('invalid_argument', `layer ${l} is out of range (0..${c.n_layers - 1})`);
    for (const g of opts.heads ?? []) if (!Number.isInteger(g) || g < 0 || g >= c.n_kv_heads) throw new AetherError('invalid_argument', `KV head ${g} is out of range (0..${c.n_kv_heads - 1})`);
    if (opts.store !== undefined && typeof opts.store !== 'boolean') throw new AetherError('invalid_argument', 'store: expected a boolean');
    const meta = opts.heads ? undefined : this.attentionHeads;
    if (mode === 'local' && !opts.heads && !meta) {
      throw new AetherError('invalid_argument', "head mode 'local' needs the file's attention_heads section (aether profile-heads -o) or opts.heads");
    }
    const pick = (l: number) => opts.heads ?? meta!.layers[l].kv_heads.flatMap((k, g) => (k === 'local' ? [g] : []));
    const e = this.engine;
    if (mode === 'local') {
      const dt = e.plan.kvDtype.k;
      const need = layers.filter((l) => !e.kvPolicies[l]?.window && pick(l).length > 0);
      if (need.length) this.setKvPolicy(`sinks=${meta?.sinks ?? 4}:${dt},window=${meta?.window ?? 64}:${dt},rest=${dt}`, need);
      for (const l of layers) for (const g of pick(l)) e.setKvLocal(l, g, true);
      if (opts.store) return this.restore(layers.flatMap((l) => pick(l).map((g) => ({ layer: l, g, on: true }))));
      return 0;
    }
    const heads = (l: number) => opts.heads ?? [...e.localKv[l]];
    const stored = layers.flatMap((l) => heads(l).filter((g) => e.storedKv[l].has(g)).map((g) => ({ layer: l, g, on: false })));
    if (stored.length) e.setKvStored(stored);   // full storage again (the cache is emptied)
    for (const l of layers) for (const g of heads(l)) e.setKvLocal(l, g, false);
    return stored.length ? this.recompute() : 0;   // the history, every head attending to every position
  }

  /** Change KV heads' storage (re-carves and empties the cache), then recompute the token history; returns its length. */
  private restore(changes: { layer: number; g: number; on: boolean }[]): number {
    const e = this.engine;
    const todo = changes.filter(({ layer, g, on }) => e.storedKv[layer].has(g) !== on);
    if (!todo.length) return 0;
    e.setKvStored(todo);
    return this.recompute();
  }

  /** Run the cached tokens through the model again from position 0 (after the cache was re-carved). */
  private recompute(): number {
    const ids = this.cached;
    this.cached = [];
    if (ids.length) this.engine.forward(ids, 0);
    this.cached = ids;
    return ids.length;
  }

  /** Every approximation in effect, per layer: FFN mode, KV policy, KV heads attending locally, KV heads stored locally
   * and the bytes their local storage saves (K and V, net of their ring rows), compression mode. */
  approximations(): { layer: number; ffn: string; kvPolicy: string; localKvHeads: number[]; storedLocalKvHeads: number[]; localStorageSavedBytes: number; compression: CompressionModeName }[] {
    const sorted = (x: Set<number>) => [...x].sort((a, b) => a - b);
    return this.engine.kvPolicies.map((_, l) => ({
      layer: l, ffn: this.ffnRuntime?.modes[l] ?? 'dense', kvPolicy: this.kvPolicy(l), localKvHeads: sorted(this.engine.localKv[l]),
      storedLocalKvHeads: sorted(this.engine.storedKv[l]), localStorageSavedBytes: this.engine.kvLocalSavedBytes(l),
      compression: this.engine.compressionMode(l),
    }));
  }


  /**
   * Roll back approximations to the exact computation at run time: `kinds` (default all of 'ffn', 'kv', 'heads',
   * 'compression') on `layers` (default all); for 'heads', `heads` limits it to those KV heads. 'ffn' -> dense FFN;
   * 'kv' -> the plain cache (empties the cache); 'heads' -> local KV heads attend to everything again (heads stored
   * locally get their full storage back and the token history is recomputed: see setHeadMode);
   * 'compression' -> compressed (low-rank / pruned) FFN layers back to their dense weights (setCompression; refused
   * with `unsupported`, before anything changes, when the file does not keep them: aether compress --keep-dense).
   */
  rollback(opts: { kinds?: ('ffn' | 'kv' | 'heads' | 'compression')[]; layers?: number[]; heads?: number[] } = {}): void {
    const kinds = opts.kinds ?? ['ffn', 'kv', 'heads', 'compression'];
    for (const k of kinds) if (!['ffn', 'kv', 'heads', 'compression'].includes(k)) throw new AetherError('invalid_argument', `unknown approximation '${k}' (ffn, kv, heads, compression)`);
    const layers = opts.layers ?? [...Array(this.config.n_layers).keys()];
    if (kinds.includes('compression')) {
      const compressed = layers.filter((l) => this.engine.compressionMode(l) === 'compressed');
      if (compressed.length) this.setCompression({ layers: Object.fromEntries(compressed.map((l) => [l, 'dense' as const])) });
    }
    if (kinds.includes('heads') || kinds.includes('kv')) this.setHeadMode('full', { layers, heads: opts.heads });
    if (kinds.includes('kv')) {
      const withPolicy = layers.filter((l) => this.engine.kvPolicies[l]);
      if (withPolicy.length) this.setKvPolicy(null, withPolicy);
    }
    if (kinds.includes('ffn')) {
      const approx = layers.filter((l) => (this.ffnRuntime?.modes[l] ?? 'dense') !== 'dense');
      if (approx.length) this.setFfnMode('dense', approx);
    }
  }

  /** Turn the per-layer time counters of metrics() on or off (off by default; on zeroes them). */
  setTiming(on: boolean): void { this.engine.setTiming(on); }

  /** Zero the cumulative counters of metrics() (tokens, seconds, FFN active counts, time counters). */
  resetMetrics(): void {
    this.totals = { prefill: 0, decode: 0, prefillMs: 0, decodeMs: 0, generations: 0 };
    this.engine.resetCounters();
  }

  dispose(): void { this.engine.dispose(); this.cached = []; this.busy = 0; }
}

/**
 * Prefill chunking (see AetherModel.prefill): target time per chunk, and the smallest chunk (at most maxBatch). Each
 * chunk streams every weight once and the prefill GEMMs unpack each weight record once per call, so large models
 * (whose chunks take longer than the target anyway) lose to small chunks: a 64-token prompt on 2-layer Phi-3-shape
 * files ran 1.045x (Q4_0), 1.033x (Q4_K_M), 1.027x (Q8_0) faster as one chunk than as two of 32 (docs/PERFORMANCE.md
 * "Session 25"; 16-token chunks lost 1.09x to 32 in session 15). The price: an abort (and the event loop) waits for
 * the chunk in progress, up to maxBatch tokens; a smaller maxBatch shortens it. The warm-up's prefill rounds stay at
 * 16 tokens.
 */
const PREFILL_SLICE_MS = 50;
const PREFILL_MIN_CHUNK = 64;
const WARMUP_PREFILL_CHUNK = 16;

/** GenerateOptions with every field type- and range-checked (AetherError 'invalid_argument' naming the field). */
function checkGenerateOptions(v: unknown): GenerateOptions {
  const o = optionsObject('options', v) as GenerateOptions & Record<string, unknown>;
  optInt('maxTokens', o.maxTokens, 0);
  optBool('greedy', o.greedy);
  optBool('ignoreEos', o.ignoreEos);
  optNum('seed', o.seed, 0, Number.MAX_SAFE_INTEGER);
  optInt('repeatLastN', o.repeatLastN, 0);
  checkStop(o.stop);
  optBool('addBos', o.addBos);
  optBool('parseSpecial', o.parseSpecial);
  optSignal('signal', o.signal);
  optNum('temperature', o.temperature);
  optInt('topK', o.topK, 0);
  optNum('topP', o.topP, 0, 1);
  optNum('minP', o.minP, 0, 1);
  optNum('repeatPenalty', o.repeatPenalty, 0);
  optNum('frequencyPenalty', o.frequencyPenalty);
  optNum('presencePenalty', o.presencePenalty);
  return o;
}

/** LoadOptions type- and range-checked (nCtx above the model's is refused later, once the model's n_ctx is known). */
function checkLoadOptions(v: unknown): LoadOptions {
  const o = optionsObject('options', v) as LoadOptions;
  optThreads(o.threads);
  optInt('maxBatch', o.maxBatch, 1, 4096);
  optInt('nCtx', o.nCtx, 1);
  optInt('spin', o.spin, 0);
  optNum('singleThreadBelow', o.singleThreadBelow, 0);
  optBool('verify', o.verify);
  optBool('logitsAll', o.logitsAll);
  if (o.repack !== undefined && typeof o.repack !== 'boolean' && o.repack !== 'auto') throw new AetherError('invalid_argument', `repack: expected true, false or 'auto', got ${String(o.repack)}`);
  if (o.fusedDot !== undefined && typeof o.fusedDot !== 'boolean' && o.fusedDot !== 'auto') throw new AetherError('invalid_argument', `fusedDot: expected true, false or 'auto', got ${String(o.fusedDot)}`);
  if (o.read !== undefined) {
    const r = optionsObject('read', o.read) as NonNullable<LoadOptions['read']>;
    optInt('read.chunk', r.chunk, 65536, 1 << 30);
    optInt('read.readAhead', r.readAhead, 0, 1 << 30);
    optBool('read.staged', r.staged);
  }
  optSignal('signal', o.signal);
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') throw new AetherError('invalid_argument', 'onProgress: expected a function');
  if (o.modules !== undefined && (!Array.isArray(o.modules) || !o.modules.every((m) => typeof m === 'string'))) throw new AetherError('invalid_argument', 'modules: expected an array of module names');
  return o;
}

/** Options chat() adds under the caller's: the rendered prompt carries its own BOS and special tokens. */
export const CHAT_GENERATE_DEFAULTS: Readonly<GenerateOptions> = { parseSpecial: true, addBos: false };

const utf8Decoder = new TextDecoder();

/** opts.logitBias checked and as a Map (undefined when empty). */
function logitBiasMap(bias: GenerateOptions['logitBias'], vocab: number): Map<number, number> | undefined {
  if (bias === undefined || bias === null) return undefined;
  if (typeof bias !== 'object') throw new AetherError('invalid_argument', `logitBias must be an object or a Map of token id -> bias, got ${typeof bias}`);
  const entries = bias instanceof Map ? [...bias] : Object.entries(bias);
  const out = new Map<number, number>();
  for (const [k, v] of entries) {
    const id = typeof k === 'number' ? k : /^\d+$/.test(k) ? Number(k) : NaN;
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new AetherError('invalid_argument', `logitBias: key ${JSON.stringify(k)} is not a token id (0..${vocab - 1})`);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < -100 || v > 100) throw new AetherError('invalid_argument', `logitBias[${id}] = ${JSON.stringify(v)}: expected a number in -100..100`);
    out.set(id, v);
  }
  return out.size ? out : undefined;
}

function emptyStats(): GenerationStats {
  return { promptTokens: 0, prefillTokens: 0, generatedTokens: 0, prefillMs: 0, decodeMs: 0, prefillTps: 0, decodeTps: 0, finishReason: null };
}
function finish(s: GenerationStats): void {
  s.prefillTps = s.prefillMs > 0 ? (s.prefillTokens / s.prefillMs) * 1000 : 0;
  // decode steps = forwards after the first sampled token
  const steps = Math.max(0, s.generatedTokens - 1);
  s.decodeTps = s.decodeMs > 0 && steps > 0 ? (steps / s.decodeMs) * 1000 : 0;
}
function now(): number { return typeof performance !== 'undefined' ? performance.now() : Date.now(); }
function firstStop(s: string, stops: string[]): number {
  let best = -1;
  for (const st of stops) { const i = s.indexOf(st); if (i >= 0 && (best < 0 || i < best)) best = i; }
  return best;
}
/** Length of the longest suffix of s that is a proper prefix of some stop string. */
function partialStopSuffix(s: string, stops: string[]): number {
  let keep = 0;
  for (const st of stops) {
    for (let k = Math.min(st.length - 1, s.length); k > keep; k--) {
      if (s.endsWith(st.slice(0, k))) { keep = k; break; }
    }
  }
  return keep;
}

/** Load a .rknot model (or, in Node, a GGUF file / HF folder, converted on the fly). */
export async function load(source: ModelSource, optsIn: LoadOptions = {}): Promise<AetherModel> {
  const opts = checkLoadOptions(optsIn);
  if (typeof source !== 'string' && (typeof source !== 'object' || source === null)) {
    throw new AetherError('invalid_argument', `source: expected a path or URL string, a URL, a Blob or a ReadableStream, got ${source === null ? 'null' : typeof source}`);
  }
  throwIfAborted(opts.signal);
  const modules = new Set(opts.modules ?? []);
  // Overlap: the wasm modules compile (V8's background threads) while the source is opened, converted (GGUF) and its
  // header and metadata are read; the plan awaits them.
  const prepP = Engine.prepare({ ...opts, modules: [...modules] });
  prepP.catch(() => { /* observed by the plan, or below */ });
  let engine: Engine | null = null;
  let tokenizerP: Promise<Tokenizer> | undefined;
  try {
    if (isNode && typeof source === 'string') {
      const { resolveNodeSource } = await import('./node/convert-on-load.js');
      source = await resolveNodeSource(source, opts.signal, { gguf: 'direct' });   // a GGUF loads directly; an HF folder converts
    }
    const meta = await loadRknotStream(source as any, {
      signal: opts.signal,
      verify: opts.verify ?? true,
      onProgress: opts.onProgress,
      directChunk: opts.read?.chunk, readAhead: opts.read?.readAhead, directStaged: opts.read?.staged,
      plan: async (m: RknotMetadata, header: { dataSize: number }) => {
        const prep = await prepP;
        const { engine: e, dest } = Engine.create(prep, m.config as ModelConfig, m.tensors as TensorInfo[], header.dataSize,
          { ...opts, kvDtype: opts.kvDtype ?? fileKvDtype(m), kvPolicy: opts.kvPolicy !== undefined ? opts.kvPolicy : fileKvPolicy(m),
            localHeads: fileLocalHeads(opts.localHeads, m) });
        engine = e;
        // Overlap: the tokenizer is built on this thread while the data section streams in (the loader has its reads
        // in flight by the time this macrotask runs); its result or error is taken after the stream.
        if (m.tokenizer) {
          tokenizerP = new Promise<Tokenizer>((resolve, reject) => {
            setTimeout(() => { try { resolve(createTokenizer(m.tokenizer as TokenizerData)); } catch (err) { reject(err); } }, 0);
          });
          tokenizerP.catch(() => { /* observed after the stream */ });
        }
        return { dest };
      },
    });
    if (!engine) throw new AetherError('load_error', 'the model file has no tensors');
    const eng = engine as Engine;
    throwIfAborted(opts.signal);
    await eng.finishLoad();
    throwIfAborted(opts.signal); // an abort while the workers started (threads > 1) is honoured too
    if (!meta.tokenizer || !tokenizerP) throw new AetherError('format_error', 'the model file has no tokenizer metadata');
    const tokenizer = await tokenizerP;
    throwIfAborted(opts.signal);
    const model = new AetherModel(eng, tokenizer, meta);
    const warm = opts.warmup ?? !isNode;
    if (warm !== false) {
      model.warmupStats = eng.warmup(typeof warm === 'number' ? warm : undefined, WARMUP_PREFILL_CHUNK);
      // and the JS side of a generation once: the tokenizer on a text prompt, the sampler, the decoder
      for await (const _ of model.generate('Hello, world. The first text of the warm-up.', { maxTokens: 2, greedy: true })) { /* discard */ }
      model.reset();
      model.stats = emptyStats();
    }
    if (typeof source === 'string') model.modelId = source.replace(/^.*[\\/]/, '').replace(/\.(rknot|gguf)$/i, '') || model.modelId;
    return model;
  } catch (e) {
    (engine as Engine | null)?.dispose();
    // an option or module error is reported as before the overlap (it came first): it wins over the source's
    const prepError = await prepP.then(() => undefined, (x: unknown) => x);
    throw prepError ?? e;
  }
}

/** A file's kv_policy section, checked (format_error naming the field); undefined when absent. */
function fileKvPolicy(m: RknotMetadata): KvPolicy | undefined {
  return m.kv_policy === undefined ? undefined : checkKvPolicy(m.kv_policy, 'metadata kv_policy', 'format_error');
}

/** localHeads 'file' (alone or as { heads: 'file' }): the KV heads the file's attention_heads section classes local, with
 * its sinks and window unless given. */
function fileLocalHeads(o: LoadOptions['localHeads'], m: RknotMetadata): LoadOptions['localHeads'] {
  const spec = o !== null && typeof o === 'object' && !Array.isArray(o) ? o as { heads: unknown; sinks?: number; window?: number } : undefined;
  if (o !== 'file' && spec?.heads !== 'file') return o;
  if (m.attention_heads === undefined) throw new AetherError('invalid_argument', "localHeads 'file': the model file has no attention_heads section (write one with aether profile-heads MODEL --calib TEXT -o OUT.rknot)");
  const meta = checkAttentionHeads(m.attention_heads, m.config as ModelConfig);
  return {
    heads: meta.layers.map((ly) => ly.kv_heads.flatMap((k, g) => (k === 'local' ? [g] : []))),
    sinks: spec?.sinks ?? meta.sinks, window: spec?.window ?? meta.window,
  };
}

/** The KV-cache dtypes a file's kv_cache policy asks for (undefined: none, the runtime default). */
function fileKvDtype(m: RknotMetadata): LoadOptions['kvDtype'] {
  const k = m.kv_cache;
  if (!k || (k.dtype === undefined && k.dtype_k === undefined && k.dtype_v === undefined)) return undefined;
  const d = k.dtype ?? DEFAULT_KV_DTYPE;
  return { k: k.dtype_k ?? d, v: k.dtype_v ?? d };
}

export const Aether = { load, probeFeatures };
