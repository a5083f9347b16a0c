/**
 * The `attention_heads` metadata section (written by `aether profile-heads`, spec in docs/rknot.md): per layer
 * and head the attention statistics and class, per KV head the K/V singular values. Types and the schema check
 * the runtime applies before using a file's section (format_error naming the field).
 */
import { AetherError } from '../errors.js';

export const ATTENTION_HEADS_VERSION = 1;
export type HeadClass = 'local' | 'retrieval';

export interface HeadStats {
  /** Queries the statistics were taken over. */
  queries: number;
  /** Mean attention entropy (nats), and relative to a uniform row over the same positions. */
  entropy: number;
  entropy_rel: number;
  /** Mean attention mass on the sink positions and on the recent window. */
  sink_mass: number;
  window_mass: number;
  class: HeadClass;
}

export interface AttentionHeadsLayer {
  heads: HeadStats[];
  /** Class per KV head: local when every query head of its group is local (GQA shares the cache). */
  kv_heads: HeadClass[];
  k_singular_values: number[][];
  v_singular_values: number[][];
  k_rank90: number[];
  v_rank90: number[];
}

export interface AttentionHeadsMeta {
  version: number;
  sinks: number;
  window: number;
  threshold: number;
  n_layers: number;
  n_heads: number;
  n_kv_heads: number;
  calibration: Record<string, unknown>;
  local_fraction: number;
  local_kv_fraction: number;
  layers: AttentionHeadsLayer[];
}

const bad = (field: string, msg: string) => new AetherError('format_error', `metadata attention_heads.${field}: ${msg}`, { field: `attention_heads.${field}` });
const isInt = (x: unknown, min = 0): x is number => Number.isInteger(x) && (x as number) >= min;

/** Check a file's section against the model's config; returns it typed. */
export function checkAttentionHeads(x: unknown, cfg: { n_layers: number; n_heads: number; n_kv_heads: number }): AttentionHeadsMeta {
  if (!x || typeof x !== 'object' || Array.isArray(x)) throw bad('', 'expected an object');
  const h = x as Record<string, unknown>;
  if (h.version !== ATTENTION_HEADS_VERSION) throw bad('version', `expected ${ATTENTION_HEADS_VERSION}, got ${JSON.stringify(h.version)}`);
  if (!isInt(h.sinks)) throw bad('sinks', 'expected an integer >= 0');
  if (!isInt(h.window, 1)) throw bad('window', 'expected an integer >= 1');
  for (const k of ['n_layers', 'n_heads', 'n_kv_heads'] as const) {
    if (h[k] !== cfg[k]) throw bad(k, `${JSON.stringify(h[k])} does not match the model's ${cfg[k]}`);
  }
  if (!Array.isArray(h.layers) || h.layers.length !== cfg.n_layers) throw bad('layers', `expected an array of ${cfg.n_layers} layers`);
  h.layers.forEach((ly: any, l: number) => {
    if (!ly || !Array.isArray(ly.heads) || ly.heads.length !== cfg.n_heads) throw bad(`layers[${l}].heads`, `expected ${cfg.n_heads} heads`);
    ly.heads.forEach((hh: any, i: number) => {
      if (hh?.class !== 'local' && hh?.class !== 'retrieval') throw bad(`layers[${l}].heads[${i}].class`, `expected 'local' or 'retrieval', got ${JSON.stringify(hh?.class)}`);
    });
    if (!Array.isArray(ly.kv_heads) || ly.kv_heads.length !== cfg.n_kv_heads || ly.kv_heads.some((c: unknown) => c !== 'local' && c !== 'retrieval')) {
      throw bad(`layers[${l}].kv_heads`, `expected ${cfg.n_kv_heads} of 'local' | 'retrieval'`);
    }
  });
  return x as AttentionHeadsMeta;
}
