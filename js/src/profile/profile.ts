/**
 * Saturation profiler: runs calibration text through the model with every layer in the ffn-saturated
 * module's profile mode (the dense computation, bit-exact, plus per-neuron accumulators in C: no JS in
 * the hot loop), then derives per layer:
 *   - per-neuron statistics of h = silu(g) * u: mean, variance, max |h|, fraction of small activations
 *     (|h| < small_rel * RMS of the layer's h), exact zeros, mean |silu(g)|, contribution score
 *     (mean |h| times the L2 norm of the neuron's down column);
 *   - for each target sparsity S: a mask freezing the S * hidden lowest-scoring neurons (per layer),
 *     the compensation bias sum over frozen i of mean(h_i) * down[:, i], and the dynamic threshold on
 *     |silu(g)| below which a fraction S of (token, neuron) pairs falls (quantile of a log histogram).
 *
 * Scores (lower = frozen first):
 *   variance:     var(h_i) * |down_i|^2  the expected squared error the neuron adds to the FFN output
 *                 when replaced by its mean (what the compensation bias does)
 *   activity:     fraction of tokens where |h_i| >= small   (rarely active first)
 *   contribution: mean|h_i| * |down_i|   (no compensation assumed)
 * With the exact calibration mean, compensation never raises the calibration error:
 *   E|sum_f h_i d_i|^2 = |sum_f mu_i d_i|^2 + E|sum_f (h_i - mu_i) d_i|^2,
 * so it is recorded for every layer; `compensation_gain` is the first term relative to the error
 * without compensation (diagonal estimate: cross-neuron covariances are not accumulated).
 */
import { AetherError, throwIfAborted } from '../errors.js';
import type { AetherModel } from '../aether.js';
import { ST, HIST, histEdge } from '../runtime/ffn.js';
import { b64encode, f32ToB64, maskFromIndices, type SaturationMeta, type SaturationLevel } from '../formats/saturation.js';
import { tokenWindows } from './text.js';

export type ProfileMethod = 'variance' | 'activity' | 'contribution';
export const PROFILE_METHODS: readonly ProfileMethod[] = ['variance', 'activity', 'contribution'];

export interface ProfileOptions {
  /** Tokens per window (default min(256, n_ctx, maxBatch)); every window starts at position 0. */
  window?: number;
  /** Stop after this many calibration tokens. */
  maxTokens?: number;
  /** |h| below small_rel * RMS(h of the layer) counts as small (default 0.01). */
  smallRel?: number;
  /** Target sparsities, one level each (default [0.5]). */
  levels?: number[];
  method?: ProfileMethod;
  /** Description of the calibration text stored in the metadata. */
  calibration?: Record<string, unknown>;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

export interface LayerProfile {
  rms: number;
  smallEps: number;
  mean: Float32Array;
  variance: Float32Array;
  maxAbs: Float32Array;
  meanAbs: Float32Array;
  smallFrac: Float32Array;
  zeroFrac: Float32Array;
  meanAbsSilu: Float32Array;
  downNorm: Float32Array;
  contribution: Float32Array;
  score: Float32Array;
  hist: Float64Array;
  /** neurons whose h was exactly 0 on every calibration token */
  nAlwaysZero: number;
  /** fraction of all (token, neuron) activations exactly 0 */
  zeroActivations: number;
  /** neurons small on >= 99% / >= 90% of tokens */
  nSmall99: number;
  nSmall90: number;
}

export interface ProfileResult {
  saturation: SaturationMeta;
  layers: LayerProfile[];
  tokens: number;
  windows: number;
  seconds: number;
}

/** Threshold t with a fraction `q` of the histogram's mass at or below it (linear inside a bin). */
export function histQuantile(hist: Float64Array, q: number): number {
  let total = 0;
  for (const c of hist) total += c;
  if (total === 0 || q <= 0) return 0;
  const want = q * total;
  let cum = 0;
  for (let k = 0; k < hist.length; k++) {
    if (hist[k] > 0 && cum + hist[k] >= want) {
      const lo = histEdge(k), hi = k + 1 < hist.length ? histEdge(k + 1) : lo * 2;
      return lo + (hi - lo) * ((want - cum) / hist[k]);
    }
    cum += hist[k];
  }
  return histEdge(hist.length - 1) * 2;
}

/** Indices of the k lowest scores (ties: lower index first). */
function lowest(score: Float32Array, k: number): Int32Array {
  const idx = Int32Array.from(score.keys());
  idx.sort((a, b) => (score[a] - score[b]) || (a - b));
  return idx.slice(0, k).sort();
}

async function pass(model: AetherModel, wins: number[][], opts: ProfileOptions, from: number, total: number): Promise<void> {
  for (let i = 0; i < wins.length; i++) {
    throwIfAborted(opts.signal);
    model.reset();
    model.engine.forward(wins[i], 0);
    opts.onProgress?.(from + i + 1, total);
    if (i % 4 === 3) await new Promise((r) => setTimeout(r, 0));
  }
}

export async function profileModel(model: AetherModel, text: string, opts: ProfileOptions = {}): Promise<ProfileResult> {
  const t0 = Date.now();
  const eng = model.engine, cfg = model.config, H = cfg.hidden_dim, D = cfg.dim, NL = cfg.n_layers;
  const window = Math.min(opts.window ?? 256, model.nCtx, eng.maxBatch);
  const method = opts.method ?? 'variance';
  if (!PROFILE_METHODS.includes(method)) throw new AetherError('invalid_argument', `unknown method '${method}' (${PROFILE_METHODS.join(', ')})`);
  const levels = [...new Set(opts.levels ?? [0.5])].sort((a, b) => a - b);
  for (const s of levels) if (!(s >= 0 && s < 1)) throw new AetherError('invalid_argument', `target sparsity ${s} must be in [0, 1)`);
  const smallRel = opts.smallRel ?? 0.01;
  const wins = tokenWindows(model.tokenizer, text, window, opts.maxTokens);
  if (wins.length === 0) throw new AetherError('invalid_argument', 'the calibration text has no tokens');
  const ffn = model.ffn;
  const before = [...ffn.modes];
  const pre = wins.slice(0, Math.max(1, Math.min(wins.length, 8)));
  let tokens = 0;
  try {
    // pass 1 (a few windows): RMS of h per layer, which sets the "small" threshold
    ffn.startProfile(Array(NL).fill(0));
    await pass(model, pre, opts, 0, pre.length + wins.length);
    const preTokens = pre.reduce((a, w) => a + w.length, 0);
    const eps: number[] = [];
    for (let l = 0; l < NL; l++) {
      const { stats } = ffn.readProfile(l);
      let s2 = 0;
      for (let i = 0; i < H; i++) s2 += stats[i * ST.N + ST.SUM2];
      eps.push(smallRel * Math.sqrt(s2 / (preTokens * H)));
    }
    // pass 2: all windows
    ffn.startProfile(eps);
    await pass(model, wins, opts, pre.length, pre.length + wins.length);
    tokens = wins.reduce((a, w) => a + w.length, 0);
    const layers: LayerProfile[] = [];
    for (let l = 0; l < NL; l++) {
      const { stats, hist } = ffn.readProfile(l);
      const w = ffn.downWeights(l);
      const P: LayerProfile = {
        rms: 0, smallEps: eps[l], mean: new Float32Array(H), variance: new Float32Array(H), maxAbs: new Float32Array(H),
        meanAbs: new Float32Array(H), smallFrac: new Float32Array(H), zeroFrac: new Float32Array(H), meanAbsSilu: new Float32Array(H),
        downNorm: new Float32Array(H), contribution: new Float32Array(H), score: new Float32Array(H), hist,
        nAlwaysZero: 0, zeroActivations: 0, nSmall99: 0, nSmall90: 0,
      };
      let s2all = 0, zeros = 0;
      for (let i = 0; i < H; i++) {
        const o = i * ST.N, mean = stats[o + ST.SUM] / tokens;
        P.mean[i] = mean;
        P.variance[i] = Math.max(0, stats[o + ST.SUM2] / tokens - mean * mean);
        P.maxAbs[i] = stats[o + ST.MAXABS];
        P.meanAbs[i] = stats[o + ST.SUMABS] / tokens;
        P.smallFrac[i] = stats[o + ST.SMALL] / tokens;
        P.zeroFrac[i] = stats[o + ST.ZERO] / tokens;
        P.meanAbsSilu[i] = stats[o + ST.SUMS] / tokens;
        let n2 = 0;
        for (let d = 0; d < D; d++) n2 += w[d * H + i] * w[d * H + i];
        P.downNorm[i] = Math.sqrt(n2);
        P.contribution[i] = P.meanAbs[i] * P.downNorm[i];
        P.score[i] = method === 'variance' ? P.variance[i] * n2 : method === 'activity' ? 1 - P.smallFrac[i] : P.contribution[i];
        s2all += stats[o + ST.SUM2];
        zeros += stats[o + ST.ZERO];
        if (stats[o + ST.ZERO] === tokens) P.nAlwaysZero++;
        if (P.smallFrac[i] >= 0.99) P.nSmall99++;
        if (P.smallFrac[i] >= 0.9) P.nSmall90++;
      }
      if (method === 'activity') {
        // ties (e.g. never small) broken by contribution
        let mc = 0;
        for (let i = 0; i < H; i++) mc = Math.max(mc, P.contribution[i]);
        for (let i = 0; i < H; i++) P.score[i] += 1e-6 * (mc > 0 ? P.contribution[i] / mc : 0);
      }
      P.rms = Math.sqrt(s2all / (tokens * H));
      P.zeroActivations = zeros / (tokens * H);
      layers.push(P);
    }
    const lv: SaturationLevel[] = levels.map((s) => ({
      sparsity: s,
      layers: layers.map((P, l) => {
        const k = Math.round(s * H);
        const frozen = lowest(P.score, k);
        const mask = maskFromIndices(H, frozen);
        const w = ffn.downWeights(l);
        const comp = new Float64Array(D);
        let errNo = 0, errComp = 0;
        for (const i of frozen) {
          const mu = P.mean[i];
          const e2 = P.variance[i] + mu * mu, n2 = P.downNorm[i] ** 2;
          errNo += e2 * n2; errComp += P.variance[i] * n2;
          if (mu !== 0) for (let d = 0; d < D; d++) comp[d] += mu * w[d * H + i];
        }
        return {
          frozen: b64encode(mask), n_frozen: k, threshold: histQuantile(P.hist, s),
          compensation: f32ToB64(Float32Array.from(comp)),
          compensation_gain: errNo > 0 ? 1 - errComp / errNo : 0,
        };
      }),
    }));
    const saturation: SaturationMeta = {
      version: 1, method, hidden_dim: H, n_layers: NL,
      calibration: { ...(opts.calibration ?? {}), tokens, windows: wins.length, window },
      small_rel: smallRel,
      levels: lv,
      layers: layers.map((P) => ({
        rms: P.rms, small_eps: P.smallEps, n_always_zero: P.nAlwaysZero, zero_activations: P.zeroActivations,
        n_small_99: P.nSmall99, n_small_90: P.nSmall90,
        mean: f32ToB64(P.mean), variance: f32ToB64(P.variance), max_abs: f32ToB64(P.maxAbs),
        small_frac: f32ToB64(P.smallFrac), contribution: f32ToB64(P.contribution), mean_abs_silu: f32ToB64(P.meanAbsSilu),
      })),
    };
    return { saturation, layers, tokens, windows: wins.length, seconds: (Date.now() - t0) / 1000 };
  } finally {
    // back to the modes the layers had (profile accumulators stay allocated for a later run)
    for (let l = 0; l < NL; l++) {
      const m = before[l] === 'profile' ? 'dense' : before[l];
      ffn.setMode(m as any, [l]);
    }
    model.reset();
  }
}
