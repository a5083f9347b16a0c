// Helpers of the FFN mode tests (tests/ffn-*.test.mjs): model files, logits of a prefill + decode run,
// bitwise comparison, and a float64 JS reference of one layer's (masked) SwiGLU FFN.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from '../../dist/src/index.js';
import { convertModel } from '../../dist/src/formats/convert.js';
import { decodeToF32 } from '../../dist/src/formats/quantize.js';
import { quantizeActQ8 } from './ref-forward.mjs';
import { tiny, repoRoot } from './paths.mjs';

export const PROMPT = [1, 335, 1096, 3345, 296, 17, 88, 1200, 45, 9, 301, 2000];
export const Q8 = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');

const cacheDir = path.join(os.tmpdir(), 'aether-ffn-tests');
/** tiny-llama-a converted from its f32 GGUF to `quant` (cached per process run). */
export async function tinyConverted(quant) {
  fs.mkdirSync(cacheDir, { recursive: true });
  const out = path.join(cacheDir, `tiny-llama-a-${quant}-${process.pid}.rknot`);
  if (!fs.existsSync(out)) await convertModel(tiny('tiny-llama-a-f32.gguf'), out, { quant });
  return out;
}

export function loadTiny(file, threads = 1, extra = {}) {
  return load(file, { threads, maxBatch: 32, modules: ['ffn-fused', 'ffn-saturated'], ...extra });
}

/** Logits after a prefill of PROMPT and after one decode step (copies). */
export function runLogits(model, prompt = PROMPT) {
  model.reset();
  model.engine.forward(prompt, 0);
  const a = model.engine.logits();
  model.engine.forward([42], prompt.length);
  const b = model.engine.logits();
  return [a, b];
}

/** Number of elements whose bits differ. */
export function bitDiff(x, y) {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length), v = new Uint32Array(y.buffer, y.byteOffset, y.length);
  let d = 0;
  for (let i = 0; i < u.length; i++) if (u[i] !== v[i]) d++;
  return d;
}
export function maxAbsDiff(x, y) { let m = 0; for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i] - y[i])); return m; }
export function maxAbs(x) { let m = 0; for (const v of x) m = Math.max(m, Math.abs(v)); return m; }

/** Deterministic pseudo-random floats in [-1, 1). */
export function randomRows(n, seed = 1) {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return ((s >>> 0) / 4294967296) * 2 - 1; });
}

/** x (n rows) -> x + FFN(rmsnorm(x)) of `layer` in its current mode, through the core's FFN-only job. */
export function ffnLayer(model, layer, x, n) {
  const D = model.config.dim, eng = model.engine;
  eng.modelBuf(0, n * D).set(x.subarray(0, n * D));
  eng.runFfnLayer(layer, n);
  return eng.modelBuf(0, n * D).slice();
}

/**
 * float64 reference of x + FFN(rmsnorm(x)) for one row: h_i = silu(g_i) u_i for neurons not frozen
 * (mask bit set = frozen) and, when `threshold` is given, only where |silu(g_i)| > threshold; frozen
 * neurons add comp (a dim vector) instead. Activations are quantised to q8_0 before gate/up when the
 * weights are q8_0/q4_0 (what the kernels do); h itself is not (the neuron-major down reads it as f32).
 */
export function refMaskedFfn(model, layer, xrow, { mask, threshold, comp } = {}) {
  const cfg = model.config, D = cfg.dim, H = cfg.hidden_dim, eng = model.engine;
  const w = (name) => { const t = eng.tensorInfo(`blk.${layer}.${name}.weight`); return { t, f: decodeToF32(t.dtype, eng.tensorBytes(t.name), t.shape.reduce((a, b) => a * b, 1)) }; };
  const norm = w('ffn_norm').f, G = w('ffn_gate'), U = w('ffn_up'), Dn = w('ffn_down').f;
  let ss = 0;
  for (let i = 0; i < D; i++) ss += xrow[i] * xrow[i];
  const inv = 1 / Math.sqrt(ss / D + cfg.norm_eps);
  let xn = Float64Array.from(xrow, (v, i) => Math.fround(Math.fround(v * Math.fround(inv)) * norm[i]));
  if (G.t.dtype === 'q8_0' || G.t.dtype === 'q4_0') xn = quantizeActQ8(xn);
  const out = Float64Array.from(xrow);
  const h = new Float64Array(H);
  for (let i = 0; i < H; i++) {
    if (mask && ((mask[i >> 3] >> (i & 7)) & 1)) continue;
    let g = 0, u = 0;
    for (let k = 0; k < D; k++) { g += G.f[i * D + k] * xn[k]; u += U.f[i * D + k] * xn[k]; }
    const s = g / (1 + Math.exp(-g));
    if (threshold !== undefined && !(Math.abs(s) > threshold)) continue;
    h[i] = s * u;
  }
  for (let d = 0; d < D; d++) {
    let acc = comp ? comp[d] : 0;
    for (let i = 0; i < H; i++) acc += h[i] * Dn[d * H + i];
    out[d] += acc;
  }
  return out;
}
