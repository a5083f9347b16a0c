/**
 * Quality harness: perplexity of a model on a text, and against a reference (the same model with a
 * dense FFN, or another model file) the mean KL divergence KL(P_ref || P) and top-1 agreement.
 *
 * The text is split into documents (lines holding only 0x1E, as tiny-llama-a's val.txt), each encoded
 * as BOS + pieces + EOS. Windows hold `window` input tokens plus the next token as the last target, and
 * step by `window`, so every token after the first is predicted exactly once; every window starts a
 * fresh context (position 0). Per document by default; with `concat`, over the concatenated token
 * stream of all documents (the protocol of tiny-llama-a's README: non-overlapping 256-token windows).
 */
import { AetherError, throwIfAborted } from './errors.js';
import type { AetherModel, FfnModeName } from './aether.js';

export interface EvalOptions {
  /** Window length in tokens (default: min(256, n_ctx)). */
  window?: number;
  /** Windows over the concatenation of all documents instead of per document. */
  concat?: boolean;
  /** Stop after this many predicted tokens (default: all). */
  maxTokens?: number;
  /** Compare with `model` itself run with this FFN mode on every layer (e.g. 'dense'). */
  vsMode?: FfnModeName;
  /** FFN mode of the model under test when vsMode is used (restored afterwards). */
  mode?: FfnModeName;
  /** Or compare with another loaded model (same tokenizer). */
  reference?: AetherModel;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

export interface EvalReport {
  tokens: number;
  windows: number;
  nll: number;          // mean negative log-likelihood, nats per token
  perplexity: number;
  reference?: { nll: number; perplexity: number; kl: number; top1: number; ppl_increase_pct: number };
  ffn_sparsity?: number; // fraction of FFN neurons skipped (from the layers' active counts)
  seconds: number;
}

export function splitDocuments(text: string): string[] {
  return text.split(/\n?\x1e\n?/).filter((d) => d.length > 0);
}

/** log-softmax of one row, in float64. */
function logSoftmax(x: Float32Array, off: number, n: number, out: Float64Array): void {
  let mx = -Infinity;
  for (let i = 0; i < n; i++) if (x[off + i] > mx) mx = x[off + i];
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.exp(x[off + i] - mx);
  const lse = mx + Math.log(s);
  for (let i = 0; i < n; i++) out[i] = x[off + i] - lse;
}

function argmaxRow(x: Float32Array, off: number, n: number): number {
  let b = 0;
  for (let i = 1; i < n; i++) if (x[off + i] > x[off + b]) b = i;
  return b;
}

export function makeWindows(model: AetherModel, text: string, window: number, maxTokens?: number, concat = false): number[][] {
  const wins: number[][] = [];
  let total = 0;
  const docs = splitDocuments(text).map((d) => model.tokenizer.encode(d, { addBos: true, addEos: true }));
  const streams = concat ? [docs.flat()] : docs;
  for (const ids of streams) {
    for (let s = 0; s + 1 < ids.length; s += window) {
      const w = ids.slice(s, s + window + 1);
      if (concat && w.length < window + 1) break; // the README protocol drops the partial tail
      wins.push(w);
      total += w.length - 1;
      if (maxTokens && total >= maxTokens) return wins;
    }
  }
  return wins;
}

/** Logits at every input position of one window (all tokens but the last, which is only a target). */
function windowLogits(model: AetherModel, w: number[]): Float32Array {
  const eng = model.engine;
  const n = w.length - 1;
  if (!eng.logitsAll || eng.maxBatch < n) {
    throw new AetherError('invalid_argument', `evaluation needs a model loaded with { logitsAll: true, maxBatch >= ${n} }`);
  }
  model.reset();
  eng.forward(w.slice(0, n), 0, true);
  const V = model.config.vocab_size;
  return eng.heap.f32(eng.coreExports.ae_model_logits(eng.modelPtr), n * V).slice();
}

export async function evaluate(model: AetherModel, text: string, opts: EvalOptions = {}): Promise<EvalReport> {
  const t0 = Date.now();
  const window = Math.min(opts.window ?? 256, model.nCtx, model.engine.maxBatch);
  const wins = makeWindows(model, text, window, opts.maxTokens, opts.concat);
  const V = model.config.vocab_size;
  if (opts.reference && opts.reference.config.vocab_size !== V) throw new AetherError('invalid_argument', 'the reference model has another vocabulary');
  const lp = new Float64Array(V), lq = new Float64Array(V);
  let nll = 0, nllRef = 0, kl = 0, agree = 0, count = 0;
  let active = 0, possible = 0;
  const withRef = !!(opts.vsMode || opts.reference);
  for (let wi = 0; wi < wins.length; wi++) {
    throwIfAborted(opts.signal);
    const w = wins[wi];
    let ref: Float32Array | null = null;
    if (opts.vsMode) { model.setFfnMode(opts.vsMode); ref = windowLogits(model, w); }
    else if (opts.reference) ref = windowLogits(opts.reference, w);
    if (opts.mode) model.setFfnMode(opts.mode);
    const got = windowLogits(model, w);
    for (let l = 0; l < model.config.n_layers; l++) active += Math.max(0, model.engine.ffnActive(l));
    possible += model.config.n_layers * (w.length - 1) * model.config.hidden_dim;
    for (let t = 0; t + 1 < w.length; t++) {
      const next = w[t + 1];
      logSoftmax(got, t * V, V, lq);
      nll -= lq[next];
      if (ref) {
        logSoftmax(ref, t * V, V, lp);
        nllRef -= lp[next];
        let k = 0;
        for (let i = 0; i < V; i++) { const p = Math.exp(lp[i]); if (p > 0) k += p * (lp[i] - lq[i]); }
        kl += k;
        if (argmaxRow(ref, t * V, V) === argmaxRow(got, t * V, V)) agree++;
      }
      count++;
    }
    opts.onProgress?.(wi + 1, wins.length);
    if (wi % 4 === 3) await new Promise((r) => setTimeout(r, 0));
  }
  if (opts.vsMode && opts.mode) model.setFfnMode(opts.mode);
  model.reset();
  if (count === 0) throw new AetherError('invalid_argument', 'the evaluation text has no tokens to predict');
  const report: EvalReport = {
    tokens: count, windows: wins.length, nll: nll / count, perplexity: Math.exp(nll / count), seconds: (Date.now() - t0) / 1000,
    ffn_sparsity: possible ? 1 - active / possible : undefined,
  };
  if (withRef) {
    const pr = Math.exp(nllRef / count);
    report.reference = { nll: nllRef / count, perplexity: pr, kl: kl / count, top1: agree / count, ppl_increase_pct: (report.perplexity / pr - 1) * 100 };
  }
  return report;
}
