/**
 * Calibration statistics of the inputs of every weight matrix (aether analyze / compress): the forward runs
 * with the C capture hook on (src/model/model.h AE_CAP_*), which copies each layer's matrix inputs into host
 * memory; JS accumulates their second moments sum x x^T (float64) and sums. No JS runs inside the forward.
 *
 * Windows: documents of the calibration text tokenised with BOS/EOS, cut into windows of `window` tokens,
 * each run from position 0 (the protocol of aether profile / eval).
 */
import { AetherError, throwIfAborted } from '../errors.js';
import type { AetherModel } from '../aether.js';
import { tokenWindows } from '../profile/text.js';
import { accumulateGram } from './linalg.js';

/** Capture blocks (AE_CAP_*): inputs of q/k/v, of attn_output, of gate/up, of down. */
export const CAP_BLOCKS = ['attn', 'wo', 'ffn', 'down'] as const;
export type CapBlock = typeof CAP_BLOCKS[number];

export interface LayerMoments {
  /** per block: width d, upper triangle of sum x x^T (d x d), sum x (d) */
  blocks: Record<CapBlock, { d: number; xx: Float64Array; sum: Float64Array }>;
}

export interface Calibration { layers: LayerMoments[]; tokens: number; windows: number }

/** Calibration windows of a model's tokenizer over `text` (see tokenWindows). */
export function calibrationWindows(model: AetherModel, text: string, window: number, maxTokens?: number): number[][] {
  return tokenWindows(model.tokenizer, text, window, maxTokens);
}

export interface CalibOptions {
  /** which blocks to accumulate (default all) */
  blocks?: readonly CapBlock[];
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

/** Second moments of the matrix inputs of every layer over the windows. */
export async function calibrate(model: AetherModel, wins: number[][], opts: CalibOptions = {}): Promise<Calibration> {
  if (wins.length === 0) throw new AetherError('invalid_argument', 'the calibration text has no tokens');
  const eng = model.engine, cfg = model.config, NL = cfg.n_layers, B = eng.maxBatch;
  const widths: Record<CapBlock, number> = { attn: cfg.dim, wo: cfg.n_heads * cfg.head_dim, ffn: cfg.dim, down: cfg.hidden_dim };
  const want = new Set(opts.blocks ?? CAP_BLOCKS);
  let gramBytes = 0;
  for (const b of want) gramBytes += 8 * widths[b] * widths[b] * NL;
  if (gramBytes > 2 ** 31) {
    throw new AetherError('unsupported', `calibration moments of ${NL} layers need ${(gramBytes / 2 ** 30).toFixed(1)} GiB of host memory (dim ${cfg.dim}, hidden ${cfg.hidden_dim}); the JS analysis path is for models up to ~1 B parameters`);
  }
  const layers: LayerMoments[] = [];
  for (let l = 0; l < NL; l++) {
    const blocks = {} as LayerMoments['blocks'];
    for (const b of CAP_BLOCKS) {
      const d = widths[b];
      blocks[b] = { d, xx: want.has(b) ? new Float64Array(d * d) : new Float64Array(0), sum: new Float64Array(d) };
    }
    layers.push({ blocks });
  }
  const floats = eng.captureOffset(4);
  const offs = CAP_BLOCKS.map((_, i) => eng.captureOffset(i));
  const area = eng.allocAfterLoad(floats * 4 * NL, 64, 'other', 'the calibration capture area');
  const prevModes = [...model.ffn.modes];
  let tokens = 0;
  try {
    // h is captured by the dense FFN path only
    model.ffn.setMode('dense' as any, Array.from({ length: NL }, (_, l) => l));
    for (let l = 0; l < NL; l++) eng.setCapture(l, area + l * floats * 4);
    for (let w = 0; w < wins.length; w++) {
      throwIfAborted(opts.signal);
      model.reset();
      const ids = wins[w];
      for (let s = 0; s < ids.length; s += B) {
        const chunk = ids.slice(s, s + B);
        eng.forward(chunk, s);
        const n = chunk.length;
        for (let l = 0; l < NL; l++) {
          const all = eng.heap.f32(area + l * floats * 4, floats);
          CAP_BLOCKS.forEach((b, i) => {
            const blk = layers[l].blocks[b];
            const x = all.subarray(offs[i], offs[i] + n * blk.d);
            for (let r = 0; r < n; r++) for (let j = 0; j < blk.d; j++) blk.sum[j] += x[r * blk.d + j];
            if (want.has(b)) accumulateGram(blk.xx, blk.d, x, n);
          });
        }
        tokens += n;
      }
      opts.onProgress?.(w + 1, wins.length);
      if (w % 2 === 1) await new Promise((r) => setTimeout(r, 0));
    }
  } finally {
    for (let l = 0; l < NL; l++) eng.setCapture(l, 0);
    for (let l = 0; l < NL; l++) if (prevModes[l] !== 'dense' && prevModes[l] !== 'profile') model.ffn.setMode(prevModes[l] as any, [l]);
    model.reset();
  }
  return { layers, tokens, windows: wins.length };
}
