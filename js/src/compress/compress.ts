/**
 * FFN compression (aether compress): for every layer (or the layers the atlas marks), a compressed FFN
 * variant of width ratio rho (0.75, 0.5), written as the tensors of docs/rknot.md "compression":
 *
 *   aa-svd  activation-aware low-rank factors of gate, up and down (SVD-LLM's truncation-aware whitening:
 *           W ~ B A minimising ||(W - B A) S||, S S^T = E[x x^T] of the matrix's calibration inputs), rank
 *           k = rho * dim * hidden / (dim + hidden) rounded to the dtype's block (the parameter count of a
 *           width-rho FFN); forward y = B (A x), two matmuls (src/model/forward.c fmat_apply).
 *   prune   structured width pruning (FLAP-style): keep the rho * hidden neurons of highest fluctuation score
 *           var(h_i) * ||down[:, i]||^2 (the expected squared change of the FFN output when h_i is replaced by
 *           its calibration mean), and add the bias sum over removed i of mean(h_i) * down[:, i] to the output
 *           (bias compensation). Gate / up rows of kept neurons are copied byte for byte; down is re-encoded.
 *
 * Factors and pruned matrices are encoded in the source dtype when the converter can write it (f32, f16, q8_0,
 * q4_0) and the row length is a whole number of its blocks; q4_K -> q4_0 and q6_K -> q8_0 (see dtypeFor).
 */
import type { AetherModel } from '../aether.js';
import { AetherError } from '../errors.js';
import { DTYPES, rowBytes, type DTypeName } from '../formats/dtypes.js';
import { encodeFromF32 } from '../formats/quantize.js';
import type { Calibration } from './calib.js';
import { blockWhitening, calibRidge, useFast, weightF32, weightMatrix, type Atlas, type LinalgMode } from './analyze.js';
import { linalg, lowRankFast, WeightOps } from './fast.js';
import { lowRank, type Mat } from './linalg.js';
import type { NewTensor } from './write.js';

export type CompressMethod = 'aa-svd' | 'svd' | 'prune';
export const COMPRESS_METHODS: readonly CompressMethod[] = ['aa-svd', 'svd', 'prune'];

export interface LayerCompression {
  layer: number; method: CompressMethod; width_ratio: number;
  /** intermediate width of the variant (hidden_dim for low-rank, kept neurons for pruning) */
  width: number;
  /** low-rank: rank of each of gate, up, down */
  rank?: number;
  dtype: DTypeName;
  /** FFN parameters of the variant / of the dense FFN */
  params: number; params_dense: number;
  /** prune: share of the calibration fluctuation (sum of scores) that the kept neurons hold */
  kept_score?: number;
}

/** Writable dtype of factors for a source dtype, given the row length they need. */
export function dtypeFor(src: string, rowLen: number): DTypeName {
  const map: Record<string, DTypeName> = { f32: 'f32', f16: 'f16', q8_0: 'q8_0', q4_0: 'q4_0', q4_K: 'q4_0', q6_K: 'q8_0', bf16: 'f16' };
  const d = map[src] ?? 'q8_0';
  return rowLen % DTYPES[d].blockSize === 0 ? d : rowLen % 32 === 0 ? 'q8_0' : 'f32';
}

/** Multiple of `q` nearest to x, at least q and at most `max`. */
function roundTo(x: number, q: number, max: number): number {
  return Math.max(q, Math.min(Math.floor(max / q) * q, Math.round(x / q) * q));
}

function encodeMat(A: Mat, dtype: DTypeName): Uint8Array {
  return encodeFromF32(dtype, Float32Array.from(A.data)).slice();
}

export interface CompressOptions {
  method: CompressMethod;
  /** width ratio of every compressed layer */
  ratio?: number;
  /** per-layer ratios (null: leave the layer dense), e.g. from the atlas */
  ratios?: (number | null)[];
  calibration?: Calibration;
  onProgress?: (done: number, total: number, label: string) => void;
  /** low-rank factors: exact (ml-matrix eigendecomposition) or fast (randomised range finder in wasm; LinalgMode) */
  linalg?: LinalgMode;
  /** fast path: power iterations of the range finder (default 1) */
  powerIters?: number;
}

/** Width ratio per layer from the atlas: '50' -> 0.5, '75' -> 0.75, 'preserve' -> null (dense). */
export function ratiosFromAtlas(atlas: Atlas, nLayers: number): (number | null)[] {
  return Array.from({ length: nLayers }, (_, l) => {
    const a = atlas.layers.find((x) => x.layer === l);
    return !a || a.mode === 'preserve' ? null : a.mode === '50' ? 0.5 : 0.75;
  });
}

export async function compressFfn(model: AetherModel, opts: CompressOptions): Promise<{ tensors: NewTensor[]; layers: LayerCompression[] }> {
  const cfg = model.config, D = cfg.dim, H = cfg.hidden_dim, NL = cfg.n_layers;
  if ((cfg.ffn_act ?? 'silu') !== 'silu' && opts.method === 'prune') {
    // the bias compensation is exact for any activation; kept general, but only SwiGLU models were measured
  }
  if (!COMPRESS_METHODS.includes(opts.method)) throw new AetherError('invalid_argument', `method '${opts.method}' is not one of ${COMPRESS_METHODS.join(', ')}`);
  const ratios = opts.ratios ?? Array(NL).fill(opts.ratio ?? 0.5);
  if (ratios.length !== NL) throw new AetherError('invalid_argument', `${ratios.length} ratios for ${NL} layers`);
  for (const r of ratios) if (r !== null && !(r > 0 && r < 1)) throw new AetherError('invalid_argument', `width ratio ${r} must be in (0, 1)`);
  if (opts.method !== 'svd' && !opts.calibration) throw new AetherError('invalid_argument', `method '${opts.method}' needs calibration text (--calib)`);
  const tensors: NewTensor[] = [];
  const layers: LayerCompression[] = [];
  const todo = ratios.map((r, l) => ({ r, l })).filter((x) => x.r !== null) as { r: number; l: number }[];
  for (let i = 0; i < todo.length; i++) {
    const { r, l } = todo[i];
    opts.onProgress?.(i, todo.length, `layer ${l}`);
    const p = `blk.${l}.`;
    const srcType = model.engine.tensorInfo(p + 'ffn_gate.weight')!.dtype;
    const dense = 3 * D * H;
    if (opts.method === 'prune') {
      const cal = opts.calibration!.layer(l).blocks.down, N = opts.calibration!.tokens;
      const down = weightMatrix(model, p + 'ffn_down.weight');  // D x H
      const score = new Float64Array(H), mean = new Float64Array(H);
      let total = 0;
      for (let j = 0; j < H; j++) {
        mean[j] = cal.sum[j] / N;
        const v = Math.max(0, cal.sq[j] / N - mean[j] * mean[j]);
        let n2 = 0;
        for (let d = 0; d < D; d++) n2 += down.data[d * H + j] ** 2;
        score[j] = v * n2; total += score[j];
      }
      const dt = dtypeFor(srcType, 32);
      const blk = Math.max(DTYPES[dt].blockSize, DTYPES[srcType as DTypeName]?.blockSize ?? 1, 32);
      const w = roundTo(r * H, blk, H - blk);
      const order = Array.from({ length: H }, (_, j) => j).sort((a, b) => score[b] - score[a] || a - b);
      const keep = order.slice(0, w).sort((a, b) => a - b), keepSet = new Set(keep);
      let kept = 0;
      for (const j of keep) kept += score[j];
      // gate / up: rows of the kept neurons, copied byte for byte in the source dtype
      for (const [name, role] of [['ffn_gate', 'ffn_gate_a'], ['ffn_up', 'ffn_up_a']] as const) {
        const info = model.engine.tensorInfo(p + name + '.weight')!;
        const rb = rowBytes(info.dtype as DTypeName, D);
        const src = model.engine.tensorBytes(p + name + '.weight');
        const out = new Uint8Array(rb * w);
        keep.forEach((j, k) => out.set(src.subarray(j * rb, (j + 1) * rb), k * rb));
        tensors.push({ name: p + role + '.weight', dtype: info.dtype as DTypeName, shape: [D, w], data: out });
      }
      const dp = new Float32Array(D * w), bias = new Float32Array(D);
      for (let d = 0; d < D; d++) {
        keep.forEach((j, k) => { dp[d * w + k] = down.data[d * H + j]; });
        let b = 0;
        for (let j = 0; j < H; j++) if (!keepSet.has(j)) b += mean[j] * down.data[d * H + j];
        bias[d] = b;
      }
      const ddt = dtypeFor(srcType, w);
      tensors.push({ name: p + 'ffn_down_a.weight', dtype: ddt, shape: [w, D], data: encodeFromF32(ddt, dp).slice() });
      tensors.push({ name: p + 'ffn_out.bias', dtype: 'f32', shape: [D], data: new Uint8Array(bias.buffer.slice(0)) });
      layers.push({ layer: l, method: 'prune', width_ratio: r, width: w, dtype: ddt, params: 3 * D * w, params_dense: dense, kept_score: total > 0 ? kept / total : 1 });
    } else {
      const dt = dtypeFor(srcType, 32);
      const q = Math.max(DTYPES[dt].blockSize, 32);
      const k = roundTo((r * D * H) / (D + H), q, Math.min(D, H));
      const kdt = dtypeFor(srcType, k);
      const fast = useFast(opts.linalg, H, D);
      if (fast) {
        // randomised range finder on W C' W^T (fast.ts lowRankFast), C' from the captured rows of the layer
        const la = await linalg();
        const stats = opts.method === 'aa-svd' ? opts.calibration!.layer(l) : undefined;
        for (const [name, block] of [['ffn_gate', 'ffn'], ['ffn_up', 'ffn'], ['ffn_down', 'down']] as const) {
          opts.onProgress?.(i + (name === 'ffn_gate' ? 0 : name === 'ffn_up' ? 1 / 3 : 2 / 3), todo.length, `layer ${l} ${name}`);
          const { w, rows, cols } = weightF32(model, p + name + '.weight');
          let X: Float32Array | undefined, ridge = 0;
          if (stats) {
            const blk = stats.blocks[block];
            if (!blk.X) throw new AetherError('invalid_argument', `the fast path needs the captured rows of block ${block} (calibrate with mode 'streamed')`);
            X = blk.X; ridge = calibRidge(blk.sq, opts.calibration!.tokens);
          }
          const m0 = la.mark();
          let A: Float32Array, B: Float32Array;
          try {
            ({ A, B } = lowRankFast(new WeightOps(la, w, rows, cols, X, ridge), k, opts.powerIters ?? 1, 1 + l));
          } finally { la.release(m0); }
          const adt = dtypeFor(srcType, cols);
          tensors.push({ name: p + name + '_a.weight', dtype: adt, shape: [cols, k], data: encodeFromF32(adt, A).slice() });
          tensors.push({ name: p + name + '_b.weight', dtype: kdt, shape: [k, rows], data: encodeFromF32(kdt, B).slice() });
          await new Promise((res) => setTimeout(res, 0));
        }
      } else {
      const S = (block: 'ffn' | 'down') => (opts.method === 'aa-svd' ? blockWhitening(opts.calibration!, l, block) : undefined);
      const Sffn = S('ffn');
      for (const [name, block] of [['ffn_gate', 'ffn'], ['ffn_up', 'ffn'], ['ffn_down', 'down']] as const) {
        const W = weightMatrix(model, p + name + '.weight');  // out x in
        const { A, B } = lowRank(W, k, block === 'ffn' ? Sffn : S('down'));
        // A: k x in -> tensor [in, k]; B: out x k -> tensor [k, out]
        tensors.push({ name: p + name + '_a.weight', dtype: dtypeFor(srcType, W.cols), shape: [W.cols, k], data: encodeMat(A, dtypeFor(srcType, W.cols)) });
        tensors.push({ name: p + name + '_b.weight', dtype: kdt, shape: [k, W.rows], data: encodeMat(B, kdt) });
        await new Promise((res) => setTimeout(res, 0));
      }
      }
      layers.push({ layer: l, method: opts.method, width_ratio: r, width: H, rank: k, dtype: kdt, params: 3 * k * (D + H), params_dense: dense });
    }
  }
  opts.onProgress?.(todo.length, todo.length, 'done');
  return { tensors, layers };
}
