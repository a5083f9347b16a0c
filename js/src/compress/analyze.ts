/**
 * Spectral atlas (aether analyze): per 2-D weight of every layer
 *   sigma1, sigma2, cliff = sigma1 / sigma2, stable rank = ||W||_F^2 / sigma1^2,
 *   alpha: power-law exponent of the eigenvalues of W^T W (linalg.powerLawAlpha: Hill MLE, xmin by KS),
 *   energy75 / energy50: fraction of ||W||_F^2 kept by the best rank-r approximation, r = 75% / 50% of full rank,
 *   aa_energy75 / aa_energy50: the same for W S, S the whitening of the matrix's calibration inputs (S S^T =
 *     E[x x^T]): the fraction of E||W x||^2 that the best rank-r approximation keeps (activation-aware: what the
 *     model computes is W x, not W). Without calibration text these are absent.
 * and per layer a compression mode for the FFN ('preserve' | '75' | '50', see atlasMode), stored in the .rknot
 * metadata as `compression.atlas` (docs/rknot.md).
 */
import type { AetherModel } from '../aether.js';
import { decodeToF32 } from '../formats/quantize.js';
import type { SourceDType } from '../formats/quantize.js';
import { AetherError } from '../errors.js';
import { blockMoments, type Calibration, type CapBlock } from './calib.js';
import { energyKept, mat, matmul, powerLawAlpha, RIDGE_EPS, ridgeFromDiag, singularValues, symmetricFromUpper, whitening, type Mat } from './linalg.js';
import { linalg, measureStats, slq, WeightOps, type LinAlg } from './fast.js';

/**
 * Which implementation handles a matrix: 'exact' (ml-matrix, float64: every singular value), 'fast' (wasm SIMD
 * products, stochastic Lanczos quadrature for the spectra: see matrixScoresFast), 'auto' (default): fast when the
 * smaller side exceeds `exactMax` (1024: an exact spectrum of a 3072 x 8192 matrix takes minutes in JS).
 */
export type LinalgMode = 'auto' | 'exact' | 'fast';
export function useFast(mode: LinalgMode | undefined, rows: number, cols: number, exactMax = 1024): boolean {
  return mode === 'fast' || ((mode ?? 'auto') === 'auto' && Math.min(rows, cols) > exactMax);
}

/** A layer tensor decoded to a row-major (rows = ne1, cols = ne0) float32 array (through the engine's tensor reader). */
export function weightF32(model: AetherModel, name: string): { w: Float32Array; rows: number; cols: number } {
  const info = model.engine.tensorInfo(name);
  if (!info) throw new AetherError('invalid_argument', `no tensor named '${name}'`);
  const cols = info.shape[0], rows = info.shape[1] ?? 1;
  return { w: decodeToF32(info.dtype as SourceDType, model.engine.tensorBytes(name), rows * cols), rows, cols };
}

/** SLQ settings of the fast path: probe vectors and Lanczos steps per spectrum. */
export interface SlqOptions { probes?: number; steps?: number }

/**
 * The calibration ridge of a block (linalg.ts ridgeFromDiag: RIDGE_EPS x the mean variance of its inputs), from the
 * per-feature sums of squares that both paths keep: the exact path whitens C + ridge I with it (blockWhitening),
 * the fast path adds it to its operator W C' W^T (fast.ts WeightOps); the same value, bit for bit.
 */
export function calibRidge(sq: Float64Array, tokens: number, eps = RIDGE_EPS): number {
  let t = 0;
  for (const v of sq) t += v;
  return ridgeFromDiag(t / (tokens * sq.length), eps);
}

/**
 * The scores of matrixScores for a large matrix, approximately: sigma1, sigma2 from the two largest Ritz values,
 * the energies at 75% / 50% rank and the power-law alpha from the stochastic-Lanczos-quadrature measure of the
 * spectrum of W^T W (or W W^T, the smaller side) and, with calibration rows X, of W C' W^T (C' = X^T X / N + ridge:
 * the squared singular values of W S); alpha is fitted on quantiles of the measure. The stable rank uses the exact
 * ||W||_F^2. Error against the exact path: docs/QUALITY.md ("Fast path").
 */
export async function matrixScoresFast(la: LinAlg, w: Float32Array, rows: number, cols: number, layer: number, name: string,
  calib?: { X: Float32Array; ridge: number }, opt: SlqOptions = {}): Promise<MatrixScores> {
  const probes = opt.probes ?? 8, steps = opt.steps ?? 48;
  const m0 = la.mark();
  try {
    const ops = new WeightOps(la, w, rows, cols, calib?.X, calib?.ridge ?? 0);
    const full = Math.min(rows, cols);
    const r75 = Math.max(1, Math.round(0.75 * full)), r50 = Math.max(1, Math.round(0.5 * full));
    const plainOp = cols <= rows ? (V: any) => ops.wT(ops.w(V)) : (V: any) => ops.w(ops.wT(V));
    const sp = await slq(la, full, plainOp, probes, steps, 1000 * layer + name.length);
    const fro = ops.frob2();
    const st = measureStats(sp.nodes, sp.mass, [r75, r50], full);
    const pl = powerLawAlpha(st.pseudo);
    const s1 = Math.sqrt(sp.top[0]), s2 = Math.sqrt(sp.top[1]);
    const out: MatrixScores = {
      layer, name, rows, cols,
      sigma1: s1, sigma2: s2, cliff: s2 > 0 ? s1 / s2 : Infinity, stable_rank: s1 > 0 ? fro / (s1 * s1) : 0,
      alpha: pl.alpha, alpha_xmin: pl.xmin, alpha_tail: pl.n, alpha_ks: pl.ks,
      energy75: st.energy[0], energy50: st.energy[1],
    };
    if (calib) {
      const aa = await slq(la, rows, (V: any) => ops.w(ops.applyC(ops.wT(V))), probes, steps, 7000 + 1000 * layer + name.length);
      const e = measureStats(aa.nodes, aa.mass, [r75, r50], 0).energy;
      out.aa_energy75 = e[0]; out.aa_energy50 = e[1];
    }
    return out;
  } finally { la.release(m0); }
}

/** Per-layer weight matrices (name after blk.N.) and the capture block that holds their input. */
export const MATRIX_INPUT: Record<string, CapBlock> = {
  'attn_q': 'attn', 'attn_k': 'attn', 'attn_v': 'attn', 'attn_qkv': 'attn', 'attn_output': 'wo',
  'ffn_gate': 'ffn', 'ffn_up': 'ffn', 'ffn_down': 'down',
};
export const FFN_MATRICES = ['ffn_gate', 'ffn_up', 'ffn_down'] as const;

export interface MatrixScores {
  layer: number; name: string; rows: number; cols: number;
  sigma1: number; sigma2: number; cliff: number; stable_rank: number;
  alpha: number; alpha_xmin: number; alpha_tail: number; alpha_ks: number;
  energy75: number; energy50: number;
  aa_energy75?: number; aa_energy50?: number;
}

export type CompressionMode = 'preserve' | '75' | '50';

export interface AtlasLayer {
  layer: number;
  /** FFN compression mode from the activation-aware energies (atlasMode) */
  mode: CompressionMode;
  /** the design's claimed rule: every FFN matrix with sigma1/sigma2 >= 8 -> '50' (compressible), else 'preserve' (fragile) */
  mode_cliff: CompressionMode;
  matrices: Record<string, Omit<MatrixScores, 'layer' | 'name'>>;
}

export interface Atlas {
  version: 1;
  rule: { keep: number; cliff: number };
  calibration?: Record<string, unknown>;
  layers: AtlasLayer[];
}

/** A layer tensor decoded to a row-major (rows = ne1, cols = ne0) float64 matrix. */
export function weightMatrix(model: AetherModel, name: string): Mat {
  const info = model.engine.tensorInfo(name);
  if (!info) throw new AetherError('invalid_argument', `no tensor named '${name}'`);
  const cols = info.shape[0], rows = info.shape[1] ?? 1;
  const f = decodeToF32(info.dtype as SourceDType, model.engine.tensorBytes(name), rows * cols);
  return mat(rows, cols, f);
}

/** Whitening S of the second moment E[x x^T] of a capture block (cached per layer and block by the caller). */
export function blockWhitening(cal: Calibration, layer: number, block: CapBlock): Mat {
  const b = cal.layer(layer).blocks[block];
  return whitening(symmetricFromUpper(blockMoments(b), b.d, 1 / cal.tokens), calibRidge(b.sq, cal.tokens)).S;
}

export function matrixScores(W: Mat, layer: number, name: string, S?: Mat): MatrixScores {
  const sigma = singularValues(W);
  const full = sigma.length;
  const r75 = Math.max(1, Math.round(0.75 * full)), r50 = Math.max(1, Math.round(0.5 * full));
  let fro = 0;
  for (const s of sigma) fro += s * s;
  const pl = powerLawAlpha(sigma.map((s) => s * s));
  const out: MatrixScores = {
    layer, name, rows: W.rows, cols: W.cols,
    sigma1: sigma[0], sigma2: sigma[1] ?? 0, cliff: sigma[1] > 0 ? sigma[0] / sigma[1] : Infinity,
    stable_rank: sigma[0] > 0 ? fro / (sigma[0] * sigma[0]) : 0,
    alpha: pl.alpha, alpha_xmin: pl.xmin, alpha_tail: pl.n, alpha_ks: pl.ks,
    energy75: energyKept(sigma, r75), energy50: energyKept(sigma, r50),
  };
  if (S) {
    const ws = singularValues(matmul(W, S));
    out.aa_energy75 = energyKept(ws, r75);
    out.aa_energy50 = energyKept(ws, r50);
  }
  return out;
}

/**
 * The FFN mode of a layer from its scores: '50' when every FFN matrix keeps >= `keep` of its activation-aware
 * energy at 50% rank, else '75' when it does at 75% rank, else 'preserve'. Without calibration the plain
 * energies are used.
 */
export function atlasMode(ms: Record<string, Omit<MatrixScores, 'layer' | 'name'>>, keep: number): CompressionMode {
  const ffn = FFN_MATRICES.map((n) => ms[n]).filter(Boolean);
  if (ffn.length === 0) return 'preserve';
  const e = (m: typeof ffn[number], r: 50 | 75) => (r === 50 ? m.aa_energy50 ?? m.energy50 : m.aa_energy75 ?? m.energy75);
  if (ffn.every((m) => e(m, 50) >= keep)) return '50';
  if (ffn.every((m) => e(m, 75) >= keep)) return '75';
  return 'preserve';
}

export function cliffMode(ms: Record<string, Omit<MatrixScores, 'layer' | 'name'>>, cliff: number): CompressionMode {
  const ffn = FFN_MATRICES.map((n) => ms[n]).filter(Boolean);
  return ffn.length > 0 && ffn.every((m) => m.cliff >= cliff) ? '50' : 'preserve';
}

export interface AnalyzeOptions {
  calibration?: Calibration;
  calibrationInfo?: Record<string, unknown>;
  /** energy threshold of atlasMode (default 0.9) */
  keep?: number;
  /** layers to analyse (default all) */
  layers?: number[];
  /** implementation per matrix (see LinalgMode) */
  linalg?: LinalgMode;
  slq?: SlqOptions;
  onProgress?: (done: number, total: number, label: string) => void;
}

/** Scores of every 2-D weight of the layers, and the atlas. */
export async function analyzeModel(model: AetherModel, opts: AnalyzeOptions = {}): Promise<{ matrices: MatrixScores[]; atlas: Atlas }> {
  const NL = model.config.n_layers;
  const layers = opts.layers ?? Array.from({ length: NL }, (_, l) => l);
  const keep = opts.keep ?? 0.9, cliff = 8;
  const jobs: { l: number; name: string }[] = [];
  for (const l of layers) for (const name of Object.keys(MATRIX_INPUT)) if (model.engine.tensorInfo(`blk.${l}.${name}.weight`)) jobs.push({ l, name });
  const matrices: MatrixScores[] = [];
  const cache = new Map<string, Mat>();
  let la: LinAlg | undefined;
  let layerStats: { l: number; stats: ReturnType<Calibration['layer']> } | undefined;
  for (let i = 0; i < jobs.length; i++) {
    const { l, name } = jobs[i];
    opts.onProgress?.(i, jobs.length, `blk.${l}.${name}`);
    const info = model.engine.tensorInfo(`blk.${l}.${name}.weight`)!;
    if (useFast(opts.linalg, info.shape[1] ?? 1, info.shape[0])) {
      la ??= await linalg();
      const { w, rows, cols } = weightF32(model, `blk.${l}.${name}.weight`);
      let calib: { X: Float32Array; ridge: number } | undefined;
      if (opts.calibration) {
        if (layerStats?.l !== l) { layerStats = undefined; layerStats = { l, stats: opts.calibration.layer(l) }; }
        const blk = layerStats.stats.blocks[MATRIX_INPUT[name]];
        if (!blk.X) throw new AetherError('invalid_argument', `the fast path needs the captured rows of block ${MATRIX_INPUT[name]} (calibrate with mode 'streamed')`);
        calib = { X: blk.X, ridge: calibRidge(blk.sq, opts.calibration.tokens) };
      }
      matrices.push(await matrixScoresFast(la, w, rows, cols, l, name, calib, opts.slq));
      await new Promise((r) => setTimeout(r, 0));
      continue;
    }
    let S: Mat | undefined;
    if (opts.calibration) {
      const key = `${l}.${MATRIX_INPUT[name]}`;
      if (!cache.has(key)) { for (const k of cache.keys()) if (!k.startsWith(`${l}.`)) cache.delete(k); cache.set(key, blockWhitening(opts.calibration, l, MATRIX_INPUT[name])); }
      S = cache.get(key);
    }
    matrices.push(matrixScores(weightMatrix(model, `blk.${l}.${name}.weight`), l, name, S));
    await new Promise((r) => setTimeout(r, 0));
  }
  opts.onProgress?.(jobs.length, jobs.length, 'done');
  const atlasLayers: AtlasLayer[] = layers.map((l) => {
    const ms: AtlasLayer['matrices'] = {};
    for (const m of matrices.filter((x) => x.layer === l)) { const { layer: _l, name, ...rest } = m; ms[name] = rest; }
    return { layer: l, mode: atlasMode(ms, keep), mode_cliff: cliffMode(ms, cliff), matrices: ms };
  });
  return { matrices, atlas: { version: 1, rule: { keep, cliff }, calibration: opts.calibrationInfo, layers: atlasLayers } };
}
