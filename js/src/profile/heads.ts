/**
 * Attention-head profiling (`aether profile-heads`): per layer and query head the attention entropy, the mass
 * on the first `sinks` positions and on the `window` most recent ones (C accumulators, ae_model_set_head_stats),
 * and per KV head the singular values of K and V over the calibration positions (Gram matrices of the cached
 * rows, eigenvalues by Jacobi rotations). Heads whose sink + window mass reaches `threshold` are classed
 * 'local' (they can run on a sink + window cache), the others 'retrieval'. The result is the `attention_heads`
 * metadata section (docs/rknot.md; checked by js/src/formats/heads.ts).
 */
import { AetherError, throwIfAborted } from '../errors.js';
import type { AetherModel } from '../aether.js';
import { splitDocuments } from '../eval.js';
import { ATTENTION_HEADS_VERSION, type AttentionHeadsMeta, type HeadClass } from '../formats/heads.js';

export interface HeadProfileOptions {
  /** Sink positions (default 4). */
  sinks?: number;
  /** Recent window in positions, the query's own included (default min(64, n_ctx / 4)). */
  window?: number;
  /** A head is 'local' when its mean sink + window mass is at least this (default 0.9). */
  threshold?: number;
  /** Tokens per calibration window (default n_ctx); windows tile the concatenated documents. */
  windowTokens?: number;
  maxTokens?: number;
  /** Recorded in the section as given (text name, document range). */
  calibration?: Record<string, unknown>;
  signal?: AbortSignal;
  onProgress?: (done: number, total: number) => void;
}

/** Eigenvalues of a symmetric n x n matrix (row-major, float64; destroyed), by cyclic Jacobi rotations. */
export function symmetricEigenvalues(a: Float64Array, n: number): Float64Array {
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0, diag = 0;
    for (let i = 0; i < n; i++) { diag += a[i * n + i] ** 2; for (let j = i + 1; j < n; j++) off += a[i * n + j] ** 2; }
    if (off <= 1e-22 * Math.max(diag, 1e-300)) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p * n + q];
        if (apq === 0) continue;
        const theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1), s = t * c;
        for (let k = 0; k < n; k++) {        // columns p, q
          const akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {        // rows p, q
          const apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
      }
    }
  }
  const ev = new Float64Array(n);
  for (let i = 0; i < n; i++) ev[i] = a[i * n + i];
  return ev;
}

/** Singular values (descending) of the rows whose Gram matrix is `gram`. */
function singularValues(gram: Float64Array, n: number): number[] {
  return Array.from(symmetricEigenvalues(gram.slice(), n)).map((e) => Math.sqrt(Math.max(0, e))).sort((x, y) => y - x);
}

/** Smallest k whose k largest singular values hold `frac` of the energy (sum of squares). */
export function energyRank(sv: number[], frac: number): number {
  const total = sv.reduce((s, x) => s + x * x, 0);
  let acc = 0;
  for (let k = 0; k < sv.length; k++) { acc += sv[k] * sv[k]; if (acc >= frac * total) return k + 1; }
  return sv.length;
}

const round = (x: number, d = 5) => Number(x.toPrecision(d));

export async function profileHeads(model: AetherModel, text: string, opts: HeadProfileOptions = {}): Promise<{ heads: AttentionHeadsMeta; seconds: number }> {
  const t0 = Date.now();
  const eng = model.engine, c = model.config;
  const L = c.n_layers, H = c.n_heads, G = c.n_kv_heads, hd = c.head_dim;
  const sinks = opts.sinks ?? 4;
  const window = opts.window ?? Math.max(1, Math.min(64, Math.floor(eng.nCtx / 4)));
  const threshold = opts.threshold ?? 0.9;
  const wlen = Math.min(opts.windowTokens ?? eng.nCtx, eng.nCtx);
  // full windows of wlen tokens over the concatenated documents, until maxTokens positions
  const stream = splitDocuments(text).flatMap((d) => model.tokenizer.encode(d, { addBos: true, addEos: true }));
  const wins: number[][] = [];
  for (let s = 0; s + wlen <= stream.length && (!opts.maxTokens || wins.length * wlen < opts.maxTokens); s += wlen) wins.push(stream.slice(s, s + wlen));
  if (!wins.length) throw new AetherError('invalid_argument', `the calibration text has fewer than ${wlen} tokens (one window of the context)`);
  const gramK = Array.from({ length: L * G }, () => new Float64Array(hd * hd));
  const gramV = Array.from({ length: L * G }, () => new Float64Array(hd * hd));
  let positions = 0;
  eng.setHeadStats(true, sinks, window);
  try {
    for (let wi = 0; wi < wins.length; wi++) {
      throwIfAborted(opts.signal);
      const w = wins[wi];
      model.reset();
      eng.forward(w, 0);
      positions += w.length;
      for (let l = 0; l < L; l++) {
        for (let g = 0; g < G; g++) {
          for (const [which, grams] of [[0, gramK], [1, gramV]] as const) {
            const rows = eng.readKv(l, which, g, w.length);
            const gm = grams[l * G + g];
            for (let t = 0; t < w.length; t++) {
              const r = t * hd;
              for (let i = 0; i < hd; i++) {
                const x = rows[r + i];
                if (x === 0) continue;
                for (let j = i; j < hd; j++) gm[i * hd + j] += x * rows[r + j];
              }
            }
          }
        }
      }
      opts.onProgress?.(wi + 1, wins.length);
      if (wi % 4 === 3) await new Promise((r) => setTimeout(r, 0));
    }
    const st = eng.readHeadStats();
    const layers = [];
    let nLocal = 0;
    for (let l = 0; l < L; l++) {
      const heads = [];
      for (let h = 0; h < H; h++) {
        const s = st[l][h];
        const n = Math.max(1, s.count);
        const sink = s.sink_mass / n, win = s.window_mass / n;
        const cls: HeadClass = s.count > 0 && sink + win >= threshold ? 'local' : 'retrieval';
        if (cls === 'local') nLocal++;
        heads.push({ queries: s.count, entropy: round(s.entropy / n), entropy_rel: round(s.log_n > 0 ? s.entropy / s.log_n : 0), sink_mass: round(sink), window_mass: round(win), class: cls });
      }
      const group = H / G;
      const kvHeads: HeadClass[] = [];
      const kSv: number[][] = [], vSv: number[][] = [];
      for (let g = 0; g < G; g++) {
        kvHeads.push(heads.slice(g * group, (g + 1) * group).every((x) => x.class === 'local') ? 'local' : 'retrieval');
        for (const [grams, out] of [[gramK, kSv], [gramV, vSv]] as const) {
          const gm = grams[l * G + g];
          for (let i = 0; i < hd; i++) for (let j = 0; j < i; j++) gm[i * hd + j] = gm[j * hd + i];
          out.push(singularValues(gm, hd).map((x) => round(x, 4)));
        }
      }
      layers.push({
        heads, kv_heads: kvHeads, k_singular_values: kSv, v_singular_values: vSv,
        k_rank90: kSv.map((sv) => energyRank(sv, 0.9)), v_rank90: vSv.map((sv) => energyRank(sv, 0.9)),
      });
    }
    const heads: AttentionHeadsMeta = {
      version: ATTENTION_HEADS_VERSION, sinks, window, threshold, n_layers: L, n_heads: H, n_kv_heads: G,
      calibration: { ...opts.calibration, tokens: positions, windows: wins.length, window_tokens: wlen },
      local_fraction: round(nLocal / (L * H)),
      local_kv_fraction: round(layers.reduce((a, x) => a + x.kv_heads.filter((k) => k === 'local').length, 0) / (L * G)),
      layers,
    };
    return { heads, seconds: (Date.now() - t0) / 1000 };
  } finally {
    eng.setHeadStats(false, sinks, window);
    model.reset();
  }
}
