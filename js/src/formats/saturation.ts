/**
 * The `saturation` metadata section of a .rknot file (schema: docs/rknot.md "saturation"): its types,
 * the base64 codec of its masks and float arrays, and its validation. `aether profile` writes it
 * (js/src/profile/profile.ts builds it with these encoders), the FFN runtime (js/src/runtime/ffn.ts)
 * reads it through `checkSaturation`. Browser-safe.
 */
import { AetherError } from '../errors.js';

export interface SaturationLevelLayer {
  /** base64 bitmask of hidden_dim bits, LSB first: bit i set = neuron i frozen */
  frozen: string;
  n_frozen: number;
  /** dynamic mode: skip up/down where |silu(g)| <= threshold */
  threshold: number;
  /** base64 f32[dim]: sum over frozen i of mean(h_i) * w_down[:, i] */
  compensation?: string;
  compensation_gain?: number;
}
export interface SaturationLevel { sparsity: number; layers: SaturationLevelLayer[] }
export interface SaturationLayerStats {
  rms?: number; small_eps?: number; n_always_zero?: number; zero_activations?: number; n_small_99?: number; n_small_90?: number;
  /** base64 f32[hidden_dim] per neuron (mean, variance, max_abs, small_frac, contribution, mean_abs_silu) */
  mean?: string; variance?: string; max_abs?: string; small_frac?: string; contribution?: string; mean_abs_silu?: string;
  [k: string]: unknown;
}
export interface SaturationMeta {
  version: number; method: string; hidden_dim: number; n_layers: number;
  calibration?: Record<string, unknown>;
  small_rel?: number;
  levels: SaturationLevel[];
  layers?: SaturationLayerStats[];
  [k: string]: unknown;
}

// ---- codec: base64 of little-endian bytes --------------------------------------------------------

export function b64encode(u8: Uint8Array): string {
  if (typeof Buffer !== 'undefined') return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('base64');
  let s = '';
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode(...u8.subarray(i, i + 0x8000));
  return btoa(s);
}
export function b64decode(s: string): Uint8Array {
  if (typeof Buffer !== 'undefined') { const b = Buffer.from(s, 'base64'); return new Uint8Array(b.buffer, b.byteOffset, b.byteLength).slice(); }
  const bin = atob(s);
  const u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  return u;
}
export function f32ToB64(a: Float32Array): string { return b64encode(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)); }
export function b64ToF32(s: string): Float32Array { const u = b64decode(s); return new Float32Array(u.buffer, u.byteOffset, u.byteLength / 4); }

/** Bitmask of n bits (LSB first) with the given indices set. */
export function maskFromIndices(n: number, indices: Iterable<number>): Uint8Array {
  const mask = new Uint8Array(Math.ceil(n / 8));
  for (const i of indices) mask[i >> 3] |= 1 << (i & 7);
  return mask;
}
export function maskBit(mask: Uint8Array, i: number): boolean { return ((mask[i >> 3] >> (i & 7)) & 1) === 1; }

// ---- validation ------------------------------------------------------------------------------------

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The saturation section, checked against the model's shape: version 1, hidden_dim / n_layers of the
 * config, levels with a sparsity in [0, 1] and one entry per layer whose mask decodes to hidden_dim bits,
 * a finite threshold and (if present) a compensation of dim floats; per-layer means of hidden_dim floats.
 * Throws format_error naming the field. `undefined` when the file has no section.
 */
export function checkSaturation(s: unknown, cfg: { dim: number; hidden_dim: number; n_layers: number }, file = 'model'): SaturationMeta | undefined {
  if (s === undefined) return undefined;
  const F = (field: string, msg: string) => new AetherError('format_error', `${file}: saturation.${field}: ${msg}`, { file, field: `saturation.${field}` });
  if (!isObj(s)) throw F('', 'expected an object');
  if (s.version !== 1) throw F('version', `expected 1, got ${JSON.stringify(s.version)}`);
  if (s.hidden_dim !== cfg.hidden_dim) throw F('hidden_dim', `${JSON.stringify(s.hidden_dim)} does not match the model's hidden_dim ${cfg.hidden_dim}`);
  if (s.n_layers !== cfg.n_layers) throw F('n_layers', `${JSON.stringify(s.n_layers)} does not match the model's n_layers ${cfg.n_layers}`);
  if (!Array.isArray(s.levels)) throw F('levels', 'expected an array');
  const maskBytes = Math.ceil(cfg.hidden_dim / 8);
  const b64 = (v: unknown, bytes: number, field: string): void => {
    if (typeof v !== 'string') throw F(field, 'expected a base64 string');
    const n = b64decode(v).length;
    if (n !== bytes) throw F(field, `decodes to ${n} bytes, expected ${bytes}`);
  };
  s.levels.forEach((lv: unknown, i: number) => {
    if (!isObj(lv)) throw F(`levels[${i}]`, 'expected an object');
    if (typeof lv.sparsity !== 'number' || !(lv.sparsity >= 0 && lv.sparsity <= 1)) throw F(`levels[${i}].sparsity`, `expected a number in [0, 1], got ${JSON.stringify(lv.sparsity)}`);
    if (!Array.isArray(lv.layers) || lv.layers.length !== cfg.n_layers) throw F(`levels[${i}].layers`, `expected an array of ${cfg.n_layers} entries`);
    lv.layers.forEach((ll: unknown, l: number) => {
      const at = `levels[${i}].layers[${l}]`;
      if (!isObj(ll)) throw F(at, 'expected an object');
      b64(ll.frozen, maskBytes, `${at}.frozen`);
      if (typeof ll.threshold !== 'number' || !Number.isFinite(ll.threshold)) throw F(`${at}.threshold`, `expected a finite number, got ${JSON.stringify(ll.threshold)}`);
      if (ll.compensation !== undefined) b64(ll.compensation, 4 * cfg.dim, `${at}.compensation`);
    });
  });
  if (s.layers !== undefined) {
    if (!Array.isArray(s.layers)) throw F('layers', 'expected an array');
    s.layers.forEach((ll: unknown, l: number) => {
      if (!isObj(ll)) throw F(`layers[${l}]`, 'expected an object');
      if (ll.mean !== undefined) b64(ll.mean, 4 * cfg.hidden_dim, `layers[${l}].mean`);
    });
  }
  return s as unknown as SaturationMeta;
}
