/**
 * Calibration statistics of the inputs of every weight matrix (aether analyze / compress): the forward runs
 * with the C capture hook on (src/model/model.h AE_CAP_*), which copies each layer's matrix inputs into host
 * memory; JS accumulates their sums and sums of squares, and either the second moments sum x x^T (float64) of
 * every layer at once (mode 'moments', small models) or, when those would not fit (Phi-3-mini: ~24 GB for 32
 * layers), the captured rows themselves into one temporary file per layer (mode 'streamed'), read back one layer at
 * a time by the analysis (Calibration.layer). No JS runs inside the forward.
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

export interface BlockMoments {
  d: number;
  /** upper triangle of sum x x^T (d x d); empty when not accumulated (streamed calibration: see X) */
  xx: Float64Array;
  /** sum x (d) */
  sum: Float64Array;
  /** sum x^2 per feature (the diagonal of xx; always kept) */
  sq: Float64Array;
  /** streamed calibration: the captured rows themselves (tokens x d, f32), read back for one layer at a time */
  X?: Float32Array;
}

export interface LayerMoments {
  blocks: Record<CapBlock, BlockMoments>;
}

export interface Calibration {
  tokens: number; windows: number;
  /** 'moments': every layer's second moments in memory (small models); 'streamed': per-layer files of captured rows */
  mode: 'moments' | 'streamed';
  /** the statistics of layer l (streamed: read from its file; the caller drops them before the next layer) */
  layer(l: number): LayerMoments;
  /** remove the streamed files */
  dispose(): void;
}

/** Calibration windows of a model's tokenizer over `text` (see tokenWindows). */
export function calibrationWindows(model: AetherModel, text: string, window: number, maxTokens?: number): number[][] {
  return tokenWindows(model.tokenizer, text, window, maxTokens);
}

export interface CalibOptions {
  /** blocks whose full second moments (or, streamed, captured rows) are needed (default all) */
  blocks?: readonly CapBlock[];
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
  /** 'auto' (default): in-memory moments when all layers' fit in `momentBytes`, else streamed */
  mode?: 'auto' | 'moments' | 'streamed';
  /** budget of the in-memory moments (default 1 GiB) */
  momentBytes?: number;
  /** folder for the streamed files (default: the OS temp folder) */
  dir?: string;
}

/** Second moments of the matrix inputs of every layer over the windows (see Calibration.mode). */
export async function calibrate(model: AetherModel, wins: number[][], opts: CalibOptions = {}): Promise<Calibration> {
  if (wins.length === 0) throw new AetherError('invalid_argument', 'the calibration text has no tokens');
  const eng = model.engine, cfg = model.config, NL = cfg.n_layers, B = eng.maxBatch;
  const widths: Record<CapBlock, number> = { attn: cfg.dim, wo: cfg.n_heads * cfg.head_dim, ffn: cfg.dim, down: cfg.hidden_dim };
  const want = new Set(opts.blocks ?? CAP_BLOCKS);
  let gramBytes = 0;
  for (const b of want) gramBytes += 8 * widths[b] * widths[b] * NL;
  const mode = opts.mode === 'moments' || opts.mode === 'streamed' ? opts.mode : gramBytes <= (opts.momentBytes ?? 2 ** 30) ? 'moments' : 'streamed';
  if (mode === 'moments' && gramBytes > 2 ** 31) {
    throw new AetherError('unsupported', `calibration moments of ${NL} layers need ${(gramBytes / 2 ** 30).toFixed(1)} GiB of host memory (dim ${cfg.dim}, hidden ${cfg.hidden_dim}): use the streamed mode`);
  }
  const streamedBlocks = CAP_BLOCKS.filter((b) => want.has(b));
  const rowFloats = streamedBlocks.reduce((a, b) => a + widths[b], 0);
  const layers: LayerMoments[] = [];
  for (let l = 0; l < NL; l++) {
    const blocks = {} as LayerMoments['blocks'];
    for (const b of CAP_BLOCKS) {
      const d = widths[b];
      blocks[b] = { d, xx: mode === 'moments' && want.has(b) ? new Float64Array(d * d) : new Float64Array(0), sum: new Float64Array(d), sq: new Float64Array(d) };
    }
    layers.push({ blocks });
  }
  // streamed: one file per layer, rows of [block 1 | block 2 | ...] (the wanted blocks, f32) per token
  let fs: typeof import('node:fs') | undefined, dir: string | undefined;
  const fds: number[] = [];
  if (mode === 'streamed') {
    fs = await import('node:fs');
    const os = await import('node:os'), path = await import('node:path');
    dir = fs.mkdtempSync(path.join(opts.dir ?? os.tmpdir(), 'aether-calib-'));
    for (let l = 0; l < NL; l++) fds.push(fs.openSync(path.join(dir, `layer-${l}.f32`), 'w+'));
    // the open descriptors keep the files: remove their names now, so nothing is left behind even when the process
    // is killed (POSIX; where an open file cannot be removed, cleanup() removes it at the end)
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* removed by cleanup() */ }
  }
  const cleanup = () => {
    if (!fs || !dir) return;
    for (const fd of fds.splice(0)) { try { fs.closeSync(fd); } catch { /* closed */ } }
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* gone */ }
  };
  const floats = eng.captureOffset(4);
  const offs = CAP_BLOCKS.map((_, i) => eng.captureOffset(i));
  const area = eng.allocAfterLoad(floats * 4 * NL, 64, 'other', 'the calibration capture area');
  const rowBuf = mode === 'streamed' ? new Float32Array(B * rowFloats) : new Float32Array(0);
  const filePos = new Array(NL).fill(0);
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
          let col = 0;
          CAP_BLOCKS.forEach((b, i) => {
            const blk = layers[l].blocks[b], d = blk.d;
            const x = all.subarray(offs[i], offs[i] + n * d);
            const sum = blk.sum, sq = blk.sq;
            for (let r = 0; r < n; r++) for (let j = 0; j < d; j++) { const v = x[r * d + j]; sum[j] += v; sq[j] += v * v; }
            if (mode === 'moments' && want.has(b)) accumulateGram(blk.xx, d, x, n);
            if (mode === 'streamed' && want.has(b)) {
              for (let r = 0; r < n; r++) rowBuf.set(x.subarray(r * d, (r + 1) * d), r * rowFloats + col);
              col += d;
            }
          });
          if (mode === 'streamed') {
            const bytes = new Uint8Array(rowBuf.buffer, 0, n * rowFloats * 4);
            fs!.writeSync(fds[l], bytes, 0, bytes.length, filePos[l]);
            filePos[l] += bytes.length;
          }
        }
        tokens += n;
      }
      opts.onProgress?.(w + 1, wins.length);
      if (w % 2 === 1) await new Promise((r) => setTimeout(r, 0));
    }
  } catch (e) {
    cleanup();
    throw e;
  } finally {
    for (let l = 0; l < NL; l++) eng.setCapture(l, 0);
    for (let l = 0; l < NL; l++) if (prevModes[l] !== 'dense' && prevModes[l] !== 'profile') model.ffn.setMode(prevModes[l] as any, [l]);
    model.reset();
  }
  const N = tokens;
  return {
    tokens, windows: wins.length, mode,
    layer(l: number): LayerMoments {
      if (!(l >= 0 && l < NL)) throw new AetherError('invalid_argument', `layer ${l} outside 0..${NL - 1}`);
      if (mode === 'moments') return layers[l];
      if (fds.length === 0) throw new AetherError('invalid_argument', 'the streamed calibration was disposed');
      const raw = new Float32Array(N * rowFloats);
      fs!.readSync(fds[l], new Uint8Array(raw.buffer), 0, raw.byteLength, 0);
      const out = { blocks: {} as LayerMoments['blocks'] };
      let col = 0;
      for (const b of CAP_BLOCKS) {
        const src = layers[l].blocks[b];
        const blk: BlockMoments = { d: src.d, xx: new Float64Array(0), sum: src.sum, sq: src.sq };
        if (want.has(b)) {
          const d = src.d, X = new Float32Array(N * d);
          for (let r = 0; r < N; r++) X.set(raw.subarray(r * rowFloats + col, r * rowFloats + col + d), r * d);
          blk.X = X;
          col += d;
        }
        out.blocks[b] = blk;
      }
      return out;
    },
    dispose: cleanup,
  };
}

/** The full second moments of a block (from the captured rows when streamed; float64, upper triangle). */
export function blockMoments(blk: BlockMoments): Float64Array {
  if (blk.xx.length > 0) return blk.xx;
  if (!blk.X) throw new AetherError('invalid_argument', 'no second moments for this block (not calibrated)');
  const xx = new Float64Array(blk.d * blk.d);
  accumulateGram(xx, blk.d, blk.X, blk.X.length / blk.d);
  blk.xx = xx;
  return xx;
}
