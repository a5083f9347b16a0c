/**
 * OpenAI-shaped API over a model (Node's AetherModel or the browser's BrowserModel): chat completions,
 * text completions and embeddings, with the request fields and the response / stream-chunk objects of
 * OpenAI's REST API (the shapes WebLLM and wllama also offer). Browser-safe; `aether serve` puts it on HTTP.
 *
 *   const r = await model.createChatCompletion({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 32, seed: 1 });
 *   r.choices[0].message.content; r.usage.completion_tokens;
 *   for await (const chunk of await model.createChatCompletion({ messages, stream: true })) write(chunk.choices[0]?.delta.content ?? '');
 *
 * Semantics (where OpenAI's models and ours differ, ours are stated):
 * - Sampling is temperature (default 1; 0 = greedy) and top_p (default 1) only: the library's top-k / min-p
 *   defaults are off here. `seed`: same seed, same request, same model file: same output (default: random).
 * - max_tokens (or max_completion_tokens): default 16 for completions (OpenAI's), for chat the rest of the context.
 * - stop: a string or up to 4 strings, not included in the output. Chat also stops at the end of the turn
 *   (end-of-generation tokens, and the chat format's turn stop strings).
 * - logit_bias: { "token id": bias in -100..100 }, added to the logits before sampling; -100 bans the token.
 * - logprobs (chat: true + top_logprobs 0..20; completions: an integer 0..5 of alternatives): natural-log
 *   probabilities of the log-softmax at temperature 1 of the logits after logit_bias, before temperature and
 *   top_p (the distribution the model gives, as steered by logit_bias; OpenAI's documented values are the
 *   model's token log-probabilities, which temperature does not change). Tokens are their text and UTF-8 bytes.
 * - finish_reason: 'stop' (end of turn, EOS or a stop string) or 'length' (max_tokens or the context is full).
 * - presence_penalty / frequency_penalty (-2..2): logit -= count * frequency_penalty + presence_penalty for each token
 *   of the last 64 (prompt and completion; llama.cpp's window), as llama.cpp's server applies them.
 * - n must be 1; other fields OpenAI defines (tools, response_format, echo, suffix, best_of) are refused with a
 *   clear error when set to something other than their neutral value.
 * - Errors are AetherError('invalid_argument') whose details.param names the field (the server turns them
 *   into 400 responses with OpenAI's { error: { message, type, param, code } }).
 */
import type { GeneratedPiece, GenerateOptions, GenerationStats, TokenLogprob } from './aether.js';
import { AetherError } from './errors.js';
import type { ChatMessage } from './tokenizer/chat.js';

/** What the OpenAI layer needs from a model: both hosts' models have it. */
export interface OpenAIHost {
  generate(prompt: string | number[], opts?: GenerateOptions): AsyncGenerator<GeneratedPiece, GenerationStats>;
  chat(messages: ChatMessage[], opts?: GenerateOptions): AsyncGenerator<GeneratedPiece, GenerationStats>;
  /** Default `model` field of responses. */
  readonly modelId: string;
  /** Context length (for chat's default max_tokens). */
  readonly nCtx: number;
}

export interface EmbedHost {
  embed(input: string | string[], opts?: { signal?: AbortSignal }): Promise<{ embeddings: Float32Array[]; promptTokens: number }>;
  readonly modelId: string;
}

/** Per-call options that are not part of the OpenAI request. */
export interface CallOptions {
  /** Aborts the generation (a stream then ends with an AbortError). */
  signal?: AbortSignal;
}

interface SamplingRequest {
  model?: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stop?: string | string[] | null;
  seed?: number | null;
  logit_bias?: Record<string, number> | null;
  n?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  user?: string;
}

export interface ChatCompletionRequest extends SamplingRequest {
  messages: { role: string; content: string | { type: string; text?: string }[] | null; name?: string }[];
  logprobs?: boolean | null;
  top_logprobs?: number | null;
}

export interface CompletionRequest extends SamplingRequest {
  prompt: string | string[] | number[];
  /** Number of alternatives to report per token (0..5), null/undefined: no logprobs. */
  logprobs?: number | null;
  echo?: boolean;
}

export type FinishReason = 'stop' | 'length';
export interface Usage { prompt_tokens: number; completion_tokens: number; total_tokens: number }

export interface ChatTokenLogprob { token: string; logprob: number; bytes: number[] | null; top_logprobs: { token: string; logprob: number; bytes: number[] | null }[] }
export interface ChatLogprobs { content: ChatTokenLogprob[] | null; refusal: null }

export interface ChatCompletion {
  id: string; object: 'chat.completion'; created: number; model: string; system_fingerprint: string;
  choices: { index: number; message: { role: 'assistant'; content: string; refusal: null }; logprobs: ChatLogprobs | null; finish_reason: FinishReason }[];
  usage: Usage;
}
export interface ChatCompletionChunk {
  id: string; object: 'chat.completion.chunk'; created: number; model: string; system_fingerprint: string;
  choices: { index: number; delta: { role?: 'assistant'; content?: string }; logprobs: ChatLogprobs | null; finish_reason: FinishReason | null }[];
  usage?: Usage | null;
}
export interface CompletionLogprobs { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[] | null; text_offset: number[] }
export interface Completion {
  id: string; object: 'text_completion'; created: number; model: string; system_fingerprint: string;
  choices: { index: number; text: string; logprobs: CompletionLogprobs | null; finish_reason: FinishReason | null }[];
  usage?: Usage | null;
}
export interface EmbeddingRequest { input: string | string[]; model?: string; encoding_format?: 'float' | 'base64'; dimensions?: number; user?: string }
export interface EmbeddingResponse {
  object: 'list'; model: string;
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

export const SYSTEM_FINGERPRINT = 'aether-0.1.0';

/** An invalid request field: invalid_argument with details.param (the server: 400 invalid_request_error). */
function bad(param: string, message: string): AetherError {
  return new AetherError('invalid_argument', `${param}: ${message}`, { param });
}

type Kind = 'object' | 'string' | 'number' | 'integer' | 'boolean' | 'array';
function isKind(v: unknown, k: Kind): boolean {
  switch (k) {
    case 'object': return v !== null && typeof v === 'object' && !Array.isArray(v);
    case 'array': return Array.isArray(v);
    case 'integer': return typeof v === 'number' && Number.isSafeInteger(v);
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    default: return typeof v === k;
  }
}
/** The field's value when it has the kind (null / undefined: undefined), else a 400. */
function field<T>(o: Record<string, unknown>, name: string, kind: Kind, range?: [number, number]): T | undefined {
  const v = o[name];
  if (v === undefined || v === null) return undefined;
  if (!isKind(v, kind)) throw bad(name, `expected ${kind === 'integer' ? 'an integer' : kind === 'array' || kind === 'object' ? `an ${kind}` : `a ${kind}`}, got ${JSON.stringify(v)?.slice(0, 80) ?? typeof v}`);
  if (range && ((v as number) < range[0] || (v as number) > range[1])) throw bad(name, `${v} is outside ${range[0]}..${range[1]}`);
  return v as T;
}

/** The sampling fields common to both endpoints, as GenerateOptions. */
function samplingOptions(o: Record<string, unknown>, defaultMax: number): { options: GenerateOptions; stream: boolean; includeUsage: boolean } {
  const stream = field<boolean>(o, 'stream', 'boolean') ?? false;
  const so = field<Record<string, unknown>>(o, 'stream_options', 'object');
  const includeUsage = so ? field<boolean>(so, 'include_usage', 'boolean') ?? false : false;
  field<string>(o, 'model', 'string');
  field<string>(o, 'user', 'string');
  const n = field<number>(o, 'n', 'integer');
  if (n !== undefined && n !== 1) throw bad('n', 'only n = 1 is supported');
  const presencePenalty = field<number>(o, 'presence_penalty', 'number', [-2, 2]) ?? 0;
  const frequencyPenalty = field<number>(o, 'frequency_penalty', 'number', [-2, 2]) ?? 0;
  for (const p of ['tools', 'functions', 'response_format', 'suffix']) {
    if (o[p] !== undefined && o[p] !== null) throw bad(p, 'is not supported');
  }
  const maxTokens = field<number>(o, 'max_completion_tokens', 'integer', [1, 1 << 30]) ?? field<number>(o, 'max_tokens', 'integer', [1, 1 << 30]) ?? defaultMax;
  const temperature = field<number>(o, 'temperature', 'number', [0, 2]) ?? 1;
  const topP = field<number>(o, 'top_p', 'number', [0, 1]) ?? 1;
  const seed = field<number>(o, 'seed', 'integer', [-(2 ** 53), 2 ** 53]);
  let stop: string[] | undefined;
  const s = o.stop;
  if (typeof s === 'string') stop = [s];
  else if (Array.isArray(s)) {
    if (s.length > 4 || s.some((x) => typeof x !== 'string')) throw bad('stop', 'expected a string or an array of at most 4 strings');
    stop = s as string[];
  } else if (s !== undefined && s !== null) throw bad('stop', 'expected a string or an array of at most 4 strings');
  const lb = field<Record<string, unknown>>(o, 'logit_bias', 'object');
  if (lb) {
    for (const [k, v] of Object.entries(lb)) {
      if (!/^\d+$/.test(k)) throw bad('logit_bias', `key ${JSON.stringify(k)} is not a token id`);
      if (typeof v !== 'number' || !Number.isFinite(v) || v < -100 || v > 100) throw bad('logit_bias', `value of ${k} must be a number in -100..100`);
    }
  }
  const options: GenerateOptions = {
    maxTokens, temperature, topP, topK: 0, minP: 0, repeatPenalty: 1, presencePenalty, frequencyPenalty, stop,
    seed: seed === undefined ? undefined : ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32,
    logitBias: lb as Record<string, number> | undefined,
  };
  if (temperature === 0) options.greedy = true;
  return { options, stream, includeUsage };
}

function messageText(m: ChatCompletionRequest['messages'][number], i: number): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (c === null || c === undefined) return '';
  if (Array.isArray(c)) {
    return c.map((p, j) => {
      if (p === null || typeof p !== 'object' || p.type !== 'text' || typeof p.text !== 'string') {
        throw bad(`messages[${i}].content[${j}]`, 'only text parts ({ type: "text", text }) are supported');
      }
      return p.text;
    }).join('');
  }
  throw bad(`messages[${i}].content`, 'expected a string or an array of text parts');
}

/** Check a chat request; returns the messages and generate options. */
export function parseChatRequest(body: unknown, nCtx: number): { messages: ChatMessage[]; options: GenerateOptions; stream: boolean; includeUsage: boolean; topLogprobs?: number } {
  if (!isKind(body, 'object')) throw bad('body', 'expected a JSON object');
  const o = body as Record<string, unknown>;
  const msgs = o.messages;
  if (!Array.isArray(msgs) || msgs.length === 0) throw bad('messages', 'expected a non-empty array of { role, content }');
  const messages: ChatMessage[] = msgs.map((m, i) => {
    if (!isKind(m, 'object')) throw bad(`messages[${i}]`, 'expected an object { role, content }');
    const role = (m as Record<string, unknown>).role;
    if (typeof role !== 'string' || !['system', 'developer', 'user', 'assistant', 'tool'].includes(role)) {
      throw bad(`messages[${i}].role`, `expected 'system', 'developer', 'user', 'assistant' or 'tool', got ${JSON.stringify(role)}`);
    }
    return { role: role === 'developer' ? 'system' : role, content: messageText(m as ChatCompletionRequest['messages'][number], i) };
  });
  const { options, stream, includeUsage } = samplingOptions(o, nCtx);
  const lp = field<boolean>(o, 'logprobs', 'boolean') ?? false;
  const top = field<number>(o, 'top_logprobs', 'integer', [0, 20]);
  if (top !== undefined && !lp) throw bad('top_logprobs', 'needs logprobs: true');
  if (lp) { options.logprobs = true; options.topLogprobs = top ?? 0; }
  return { messages, options, stream, includeUsage, topLogprobs: lp ? top ?? 0 : undefined };
}

/** Check a completion request; returns the prompt and generate options. */
export function parseCompletionRequest(body: unknown): { prompt: string | number[]; options: GenerateOptions; stream: boolean; includeUsage: boolean; logprobs?: number } {
  if (!isKind(body, 'object')) throw bad('body', 'expected a JSON object');
  const o = body as Record<string, unknown>;
  let prompt: string | number[];
  const p = o.prompt;
  if (typeof p === 'string') prompt = p;
  else if (Array.isArray(p) && p.length === 1 && typeof p[0] === 'string') prompt = p[0];
  else if (Array.isArray(p) && p.length > 0 && p.every((t) => Number.isSafeInteger(t) && t >= 0)) prompt = p as number[];
  else throw bad('prompt', 'expected a string, an array of one string, or an array of token ids');
  if (o.echo !== undefined && o.echo !== null && o.echo !== false) throw bad('echo', 'is not supported');
  const bo = field<number>(o, 'best_of', 'integer');
  if (bo !== undefined && bo !== 1) throw bad('best_of', 'only 1 is supported');
  const { options, stream, includeUsage } = samplingOptions(o, 16);
  const lp = field<number>(o, 'logprobs', 'integer', [0, 5]);
  if (lp !== undefined) { options.logprobs = true; options.topLogprobs = lp; }
  return { prompt, options, stream, includeUsage, logprobs: lp };
}

let idCounter = 0;
function newId(prefix: string): string {
  const rnd = Math.floor(Math.random() * 2 ** 32).toString(36);
  return `${prefix}-${Date.now().toString(36)}${rnd}${(idCounter++).toString(36)}`;
}

function finishReason(s: GenerationStats): FinishReason {
  return s.finishReason === 'stop' ? 'stop' : 'length';
}

function usage(s: GenerationStats): Usage {
  return { prompt_tokens: s.promptTokens, completion_tokens: s.generatedTokens, total_tokens: s.promptTokens + s.generatedTokens };
}

/** OpenAI reports -9999 where a probability is 0 (-inf is not JSON). */
const lpValue = (x: number): number => (Number.isFinite(x) ? x : -9999);

const utf8 = new TextDecoder();
/** The sampled token's text (from its bytes: OpenAI's token strings may hold U+FFFD for part of a character). */
const tokenText = (p: GeneratedPiece): string => (p.bytes ? utf8.decode(Uint8Array.from(p.bytes)) : p.text);

function chatLogprob(p: GeneratedPiece): ChatTokenLogprob {
  return {
    token: tokenText(p), logprob: lpValue(p.logprob!), bytes: p.bytes ?? null,
    top_logprobs: (p.topLogprobs ?? []).map((t: TokenLogprob) => ({ token: t.text, logprob: lpValue(t.logprob), bytes: t.bytes })),
  };
}

/**
 * Run a generator to the end, calling `each` per piece; returns its stats. Leaving early (an exception in
 * `each`) returns the generator, which ends the generation.
 */
async function drive(gen: AsyncGenerator<GeneratedPiece, GenerationStats>, each: (p: GeneratedPiece) => void): Promise<GenerationStats> {
  for (;;) {
    const r = await gen.next();
    if (r.done) return r.value;
    each(r.value);
  }
}

/** OpenAI chat completion (stream: false) or an async iterable of chunks (stream: true). */
export async function createChatCompletion(host: OpenAIHost, req: ChatCompletionRequest & { stream: true }, call?: CallOptions): Promise<AsyncIterable<ChatCompletionChunk>>;
export async function createChatCompletion(host: OpenAIHost, req: ChatCompletionRequest & { stream?: false | null }, call?: CallOptions): Promise<ChatCompletion>;
export async function createChatCompletion(host: OpenAIHost, req: ChatCompletionRequest, call?: CallOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
export async function createChatCompletion(host: OpenAIHost, req: ChatCompletionRequest, call: CallOptions = {}): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>> {
  const { messages, options, stream, includeUsage, topLogprobs } = parseChatRequest(req, host.nCtx);
  const base = { id: newId('chatcmpl'), created: Math.floor(Date.now() / 1000), model: req.model ?? host.modelId, system_fingerprint: SYSTEM_FINGERPRINT };
  const opts: GenerateOptions = { ...options, signal: call.signal };
  const wantLp = topLogprobs !== undefined;
  if (!stream) {
    let content = '';
    const lps: ChatTokenLogprob[] = [];
    const stats = await drive(host.chat(messages, opts), (p) => {
      content += p.text;
      if (wantLp && p.logprob !== undefined) lps.push(chatLogprob(p));
    });
    return {
      ...base, object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: wantLp ? { content: lps, refusal: null } : null, finish_reason: finishReason(stats) }],
      usage: usage(stats),
    };
  }
  const gen = host.chat(messages, opts);
  return (async function* chunks(): AsyncGenerator<ChatCompletionChunk> {
    const chunk = (delta: ChatCompletionChunk['choices'][0]['delta'], lp: ChatLogprobs | null, fr: FinishReason | null): ChatCompletionChunk =>
      ({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: lp, finish_reason: fr }], ...(includeUsage ? { usage: null } : {}) });
    try {
      let r = await gen.next(); // the request's own errors (prompt too long, bad token ids) come before any chunk
      yield chunk({ role: 'assistant', content: '' }, null, null);
      while (!r.done) {
        const p = r.value;
        const lp = wantLp && p.logprob !== undefined ? { content: [chatLogprob(p)], refusal: null as null } : null;
        if (p.text || lp) yield chunk({ content: p.text }, lp, null);
        r = await gen.next();
      }
      yield chunk({}, null, finishReason(r.value));
      if (includeUsage) yield { ...base, object: 'chat.completion.chunk', choices: [], usage: usage(r.value) };
    } finally {
      await gen.return(undefined as unknown as GenerationStats); // ends the generation when the consumer stopped early
    }
  })();
}

function completionLogprobs(ps: GeneratedPiece[], startOffset: number, withTop: boolean): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: withTop ? [] : null, text_offset: [] };
  let off = startOffset;
  for (const p of ps) {
    if (p.logprob === undefined) continue;
    out.tokens.push(tokenText(p));
    out.token_logprobs.push(lpValue(p.logprob));
    if (withTop) {
      const m: Record<string, number> = {};
      for (const t of p.topLogprobs ?? []) if (!(t.text in m)) m[t.text] = lpValue(t.logprob);
      out.top_logprobs!.push(m);
    }
    out.text_offset.push(off);
    off += p.text.length;
  }
  return out;
}

/** OpenAI (legacy) text completion, or an async iterable of its stream chunks (stream: true). */
export async function createCompletion(host: OpenAIHost, req: CompletionRequest & { stream: true }, call?: CallOptions): Promise<AsyncIterable<Completion>>;
export async function createCompletion(host: OpenAIHost, req: CompletionRequest & { stream?: false | null }, call?: CallOptions): Promise<Completion>;
export async function createCompletion(host: OpenAIHost, req: CompletionRequest, call?: CallOptions): Promise<Completion | AsyncIterable<Completion>>;
export async function createCompletion(host: OpenAIHost, req: CompletionRequest, call: CallOptions = {}): Promise<Completion | AsyncIterable<Completion>> {
  const { prompt, options, stream, includeUsage, logprobs } = parseCompletionRequest(req);
  const base = { id: newId('cmpl'), created: Math.floor(Date.now() / 1000), model: req.model ?? host.modelId, system_fingerprint: SYSTEM_FINGERPRINT, object: 'text_completion' as const };
  const opts: GenerateOptions = { ...options, signal: call.signal };
  const withLp = logprobs !== undefined, withTop = !!logprobs;
  if (!stream) {
    let text = '';
    const pieces: GeneratedPiece[] = [];
    const stats = await drive(host.generate(prompt, opts), (p) => { text += p.text; if (withLp) pieces.push(p); });
    return {
      ...base,
      choices: [{ index: 0, text, logprobs: withLp ? completionLogprobs(pieces, 0, withTop) : null, finish_reason: finishReason(stats) }],
      usage: usage(stats),
    };
  }
  const gen = host.generate(prompt, opts);
  return (async function* chunks(): AsyncGenerator<Completion> {
    const extra = includeUsage ? { usage: null } : {};
    let off = 0;
    try {
      let r = await gen.next();
      while (!r.done) {
        const p = r.value;
        if (p.text || (withLp && p.logprob !== undefined)) {
          yield { ...base, choices: [{ index: 0, text: p.text, logprobs: withLp ? completionLogprobs([p], off, withTop) : null, finish_reason: null }], ...extra };
        }
        off += p.text.length;
        r = await gen.next();
      }
      yield { ...base, choices: [{ index: 0, text: '', logprobs: null, finish_reason: finishReason(r.value) }], ...extra };
      if (includeUsage) yield { ...base, choices: [], usage: usage(r.value) };
    } finally {
      await gen.return(undefined as unknown as GenerationStats);
    }
  })();
}

/** OpenAI embeddings: one L2-normalised, mean-pooled vector per input (see AetherModel.embed). */
export async function createEmbedding(host: EmbedHost, req: EmbeddingRequest, call: CallOptions = {}): Promise<EmbeddingResponse> {
  if (!isKind(req, 'object')) throw bad('body', 'expected a JSON object');
  const o = req as unknown as Record<string, unknown>;
  const input = o.input;
  const texts = typeof input === 'string' ? [input] : Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === 'string') ? input as string[] : null;
  if (!texts) throw bad('input', 'expected a string or a non-empty array of strings');
  if (texts.length > 256) throw bad('input', `at most 256 inputs per request, got ${texts.length}`);
  field<string>(o, 'model', 'string');
  field<string>(o, 'user', 'string');
  const fmt = field<string>(o, 'encoding_format', 'string') ?? 'float';
  if (fmt !== 'float' && fmt !== 'base64') throw bad('encoding_format', "expected 'float' or 'base64'");
  if (o.dimensions !== undefined && o.dimensions !== null) throw bad('dimensions', 'is not supported');
  const { embeddings, promptTokens } = await host.embed(texts, { signal: call.signal });
  return {
    object: 'list', model: req.model ?? host.modelId,
    data: embeddings.map((e, index) => ({ object: 'embedding', index, embedding: fmt === 'base64' ? base64(e) : Array.from(e) })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

function base64(v: Float32Array): string {
  const b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  let s = '';
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s);
}

/**
 * The OpenAI-shaped methods of a model, written once for both hosts' models (AetherModel in Node, BrowserModel
 * for a model in an engine Worker): a model class extends this and provides generate / chat / embedDetailed.
 */
export abstract class OpenAIMethods implements OpenAIHost {
  abstract generate(prompt: string | number[], opts?: GenerateOptions): AsyncGenerator<GeneratedPiece, GenerationStats>;
  abstract chat(messages: ChatMessage[], opts?: GenerateOptions): AsyncGenerator<GeneratedPiece, GenerationStats>;
  /** Mean-pooled, L2-normalised embeddings of several texts, with the number of tokens they took. */
  abstract embedDetailed(texts: string[], opts?: { signal?: AbortSignal }): Promise<{ embeddings: Float32Array[]; promptTokens: number }>;
  abstract readonly modelId: string;
  abstract readonly nCtx: number;

  /** OpenAI-shaped embeddings ({ object: 'list', data: [{ embedding }], usage }). */
  createEmbedding(req: EmbeddingRequest, call?: CallOptions): Promise<EmbeddingResponse> {
    return createEmbedding({ modelId: this.modelId, embed: (t, o) => this.embedDetailed(typeof t === 'string' ? [t] : t, o) }, req, call);
  }

  /** OpenAI-shaped chat completion, or (stream: true) an async iterable of chunks. */
  createChatCompletion(req: ChatCompletionRequest & { stream: true }, call?: CallOptions): Promise<AsyncIterable<ChatCompletionChunk>>;
  createChatCompletion(req: ChatCompletionRequest & { stream?: false | null }, call?: CallOptions): Promise<ChatCompletion>;
  createChatCompletion(req: ChatCompletionRequest, call?: CallOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
  createChatCompletion(req: ChatCompletionRequest, call?: CallOptions) { return createChatCompletion(this, req, call); }

  /** OpenAI-shaped text completion, or (stream: true) an async iterable of chunks. */
  createCompletion(req: CompletionRequest & { stream: true }, call?: CallOptions): Promise<AsyncIterable<Completion>>;
  createCompletion(req: CompletionRequest & { stream?: false | null }, call?: CallOptions): Promise<Completion>;
  createCompletion(req: CompletionRequest, call?: CallOptions): Promise<Completion | AsyncIterable<Completion>>;
  createCompletion(req: CompletionRequest, call?: CallOptions) { return createCompletion(this, req, call); }
}
