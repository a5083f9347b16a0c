/**
 * Long-context quality harness: a model whose KV cache is approximated (a KV policy, local heads) against the
 * same model with the full-precision cache, on windows of the model's full context, and a passkey retrieval test.
 *
 * - evaluateLong: windows of `window` tokens tile the concatenated documents; each window is run from position
 *   0 in chunks of `chunk` tokens (as a prompt is prefilled, so that a policy's recent window slides as it
 *   would in use), logits kept for every position. Reported: perplexity of both, mean KL(P_ref || P), top-1
 *   agreement, over all positions and over the positions >= `fromPos` (where the approximation acts).
 * - passkey: a random 5-digit key planted at a relative depth of a filler text of the context's length; the
 *   prompt ends asking for the key. Reported per trial: greedy exact match of the key, and the mean NLL of the
 *   key's tokens given the prompt (teacher forced), for the model and the reference, plus the same NLL without
 *   the key in the prompt (a control: what the model guesses from nothing).
 */
import { AetherError, throwIfAborted } from './errors.js';
import type { AetherModel } from './aether.js';
import { splitDocuments } from './eval.js';

export interface LongEvalOptions {
  /** Window length (default n_ctx). */
  window?: number;
  /** Tokens per forward chunk (default 16; at most the models' maxBatch). */
  chunk?: number;
  /** Positions from which the second set of figures is taken (default window / 2). */
  fromPos?: number;
  maxTokens?: number;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

export interface LongStats { tokens: number; perplexity: number; ref_perplexity: number; ppl_increase_pct: number; kl: number; top1: number }
export interface LongEvalReport { windows: number; window: number; chunk: number; fromPos: number; all: LongStats; late: LongStats; seconds: number }

/** Logits at positions 0..n-1 of `ids` (n = ids.length), run in chunks from position 0. */
export function chunkedLogits(model: AetherModel, ids: number[], chunk: number): Float32Array {
  const eng = model.engine, V = model.config.vocab_size;
  if (!eng.logitsAll || eng.maxBatch < chunk) throw new AetherError('invalid_argument', `long-context evaluation needs models loaded with { logitsAll: true, maxBatch >= ${chunk} }`);
  model.reset();
  const out = new Float32Array(ids.length * V);
  for (let s = 0; s < ids.length; s += chunk) {
    const c = ids.slice(s, s + chunk);
    eng.forward(c, s, true);
    out.set(eng.heap.f32(eng.coreExports.ae_model_logits(eng.modelPtr), c.length * V), s * V);
  }
  model.reset();
  return out;
}

class Acc {
  nll = 0; nllRef = 0; kl = 0; agree = 0; n = 0;
  stats(): LongStats {
    const n = Math.max(1, this.n), p = Math.exp(this.nll / n), pr = Math.exp(this.nllRef / n);
    return { tokens: this.n, perplexity: p, ref_perplexity: pr, ppl_increase_pct: (p / pr - 1) * 100, kl: this.kl / n, top1: this.agree / n };
  }
}

function logSoftmax(x: Float32Array, off: number, n: number, out: Float64Array): number {
  let mx = -Infinity, arg = 0;
  for (let i = 0; i < n; i++) if (x[off + i] > mx) { mx = x[off + i]; arg = i; }
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.exp(x[off + i] - mx);
  const lse = mx + Math.log(s);
  for (let i = 0; i < n; i++) out[i] = x[off + i] - lse;
  return arg;
}

/** Windows of `window` + 1 tokens (the last only a target) over the concatenated documents (BOS/EOS each). */
export function longWindows(model: AetherModel, text: string, window: number, maxTokens?: number): number[][] {
  const stream = splitDocuments(text).flatMap((d) => model.tokenizer.encode(d, { addBos: true, addEos: true }));
  const wins: number[][] = [];
  let total = 0;
  for (let s = 0; s + window + 1 <= stream.length; s += window) {
    wins.push(stream.slice(s, s + window + 1));
    total += window;
    if (maxTokens && total >= maxTokens) break;
  }
  return wins;
}

export async function evaluateLong(model: AetherModel, reference: AetherModel, text: string, opts: LongEvalOptions = {}): Promise<LongEvalReport> {
  const t0 = Date.now();
  const window = Math.min(opts.window ?? model.nCtx, model.nCtx, reference.nCtx);
  const chunk = Math.min(opts.chunk ?? 16, model.engine.maxBatch, reference.engine.maxBatch);
  const fromPos = opts.fromPos ?? Math.floor(window / 2);
  const V = model.config.vocab_size;
  if (reference.config.vocab_size !== V) throw new AetherError('invalid_argument', 'the reference model has another vocabulary');
  const wins = longWindows(model, text, window, opts.maxTokens);
  if (!wins.length) throw new AetherError('invalid_argument', `the text has fewer than ${window + 1} tokens: no full-context window`);
  const all = new Acc(), late = new Acc();
  const lp = new Float64Array(V), lq = new Float64Array(V);
  for (let wi = 0; wi < wins.length; wi++) {
    throwIfAborted(opts.signal);
    const w = wins[wi], ids = w.slice(0, window);
    const ref = chunkedLogits(reference, ids, chunk);
    const got = chunkedLogits(model, ids, chunk);
    for (let t = 0; t < window; t++) {
      const next = w[t + 1];
      const aq = logSoftmax(got, t * V, V, lq), ap = logSoftmax(ref, t * V, V, lp);
      let k = 0;
      for (let i = 0; i < V; i++) { const p = Math.exp(lp[i]); if (p > 0) k += p * (lp[i] - lq[i]); }
      for (const a of t >= fromPos ? [all, late] : [all]) {
        a.nll -= lq[next]; a.nllRef -= lp[next]; a.kl += k; a.agree += aq === ap ? 1 : 0; a.n++;
      }
    }
    opts.onProgress?.(wi + 1, wins.length);
    await new Promise((r) => setTimeout(r, 0));
  }
  return { windows: wins.length, window, chunk, fromPos, all: all.stats(), late: late.stats(), seconds: (Date.now() - t0) / 1000 };
}

/** xorshift32: the passkeys and filler choices of a seed are the same everywhere. */
function rng(seed: number): () => number {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 2 ** 32; };
}

export interface PasskeyCase {
  /** Prompt token ids (BOS first) ending right before the key's tokens. */
  prompt: number[];
  /** The key's token ids as the model should produce them after the prompt. */
  key: number[];
  keyText: string;
  /** Position of the planted sentence's first token, and the same prompt with the key sentence left out. */
  depthPos: number;
  control: number[];
}

/**
 * Passkey prompts of at most `length` tokens: filler (sentences of `filler` text, or a fixed sentence), the key
 * sentence at relative `depth` (0 = right after BOS), more filler, then the question. Seeded.
 */
export function makePasskey(model: AetherModel, opts: { length: number; depth: number; seed: number; filler?: string }): PasskeyCase {
  const r = rng(opts.seed);
  const key = String(10000 + Math.floor(r() * 90000));
  const tk = model.tokenizer;
  const sentences = (opts.filler ?? '').split(/(?<=[.!?])\s+/).map((x) => x.trim()).filter((x) => x.length > 20 && x.length < 300 && !/\d{5}/.test(x));
  const pool = sentences.length >= 8 ? sentences : ['The grass is green.', 'The sky is blue.', 'The sun is yellow.', 'Here we go.', 'There and back again.'];
  const planted = `The pass key is ${key}. Remember it. ${key} is the pass key.`;
  const question = 'What is the pass key? The pass key is';
  const enc = (x: string) => tk.encode(x, { addBos: true });
  // whole sentences of filler, as many as fit; the planted sentence after round(depth * count) of them
  let start = Math.floor(r() * pool.length);
  const fill: string[] = [];
  const build = (withKey: boolean) => {
    const at = Math.round(Math.max(0, Math.min(1, opts.depth)) * fill.length);
    const parts = [...fill.slice(0, at), ...(withKey ? [planted] : []), ...fill.slice(at), question];
    return { text: parts.join(' '), before: fill.slice(0, at).join(' ') };
  };
  const keyLen = enc(`${question} ${key}`).length - enc(question).length;
  while (enc(build(true).text).length + keyLen < opts.length) fill.push(pool[start++ % pool.length]);
  while (fill.length && enc(build(true).text).length + keyLen > opts.length) fill.pop();
  const b = build(true);
  const prompt = enc(b.text);
  const full = enc(`${b.text} ${key}`);
  if (full.length <= prompt.length || full.slice(0, prompt.length).some((x, i) => x !== prompt[i])) {
    throw new AetherError('invalid_argument', 'passkey: the key does not tokenize as a continuation of the prompt');
  }
  return { prompt, key: full.slice(prompt.length), keyText: key, depthPos: b.before ? enc(b.before).length : 1, control: enc(build(false).text) };
}

/** Mean NLL (nats/token) of `target` after `prompt`, teacher forced, and whether greedy decoding reproduces it. */
export function scoreContinuation(model: AetherModel, prompt: number[], target: number[], chunk = 16): { nll: number; exact: boolean } {
  const ids = [...prompt, ...target];
  const V = model.config.vocab_size;
  const logits = chunkedLogits(model, ids.slice(0, -1), chunk);
  const lq = new Float64Array(V);
  let nll = 0, exact = true;
  for (let i = 0; i < target.length; i++) {
    const row = prompt.length - 1 + i;
    const arg = logSoftmax(logits, row * V, V, lq);
    nll -= lq[target[i]];
    if (arg !== target[i]) exact = false;
  }
  return { nll: nll / target.length, exact };
}

export interface PasskeyReport {
  trials: number; length: number;
  exact: number; ref_exact: number;
  key_nll: number; ref_key_nll: number; control_nll: number;
  by_depth: { depth: number; exact: number; ref_exact: number; key_nll: number; ref_key_nll: number }[];
}

/** Passkey trials at `depths` x `seeds`, the model against the reference (both see the same prompts). */
export function passkeyTest(model: AetherModel, reference: AetherModel, opts: { length?: number; depths?: number[]; seeds?: number; filler?: string; chunk?: number }): PasskeyReport {
  const length = Math.min(opts.length ?? model.nCtx, model.nCtx, reference.nCtx);
  const depths = opts.depths ?? [0.1, 0.3, 0.5, 0.7, 0.9];
  const seeds = opts.seeds ?? 4;
  const chunk = Math.min(opts.chunk ?? 16, model.engine.maxBatch, reference.engine.maxBatch);
  const by: PasskeyReport['by_depth'] = [];
  let ex = 0, rex = 0, nll = 0, rnll = 0, cnll = 0, n = 0;
  for (const depth of depths) {
    let dx = 0, drx = 0, dn = 0, drn = 0;
    for (let s = 0; s < seeds; s++) {
      const c = makePasskey(model, { length, depth, seed: 1000 * s + Math.round(depth * 100) + 1, filler: opts.filler });
      const a = scoreContinuation(model, c.prompt, c.key, chunk);
      const b = scoreContinuation(reference, c.prompt, c.key, chunk);
      const ctl = scoreContinuation(reference, c.control, c.key, chunk);
      dx += +a.exact; drx += +b.exact; dn += a.nll; drn += b.nll; cnll += ctl.nll; n++;
    }
    by.push({ depth, exact: dx / seeds, ref_exact: drx / seeds, key_nll: dn / seeds, ref_key_nll: drn / seeds });
    ex += dx; rex += drx; nll += dn; rnll += drn;
  }
  return { trials: n, length, exact: ex / n, ref_exact: rex / n, key_nll: nll / n, ref_key_nll: rnll / n, control_nll: cnll / n, by_depth: by };
}
