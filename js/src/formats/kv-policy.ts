/**
 * KV-cache policies: which dtype holds the K/V rows of each position, and a recent window kept at higher
 * precision. Compact syntax (CLI `--kv-policy`, load option `kvPolicy`), structured form (the `kv_policy`
 * metadata section, docs/rknot.md), parser, printer and checks. Browser-safe.
 *
 *   sinks=4:f16,window=64:f16,rest=q8_0       attention sinks and a recent window at f16, the rest q8_0
 *   0-20:f16,21-100:q8_0,101-:q4_0            position ranges (inclusive, the last open-ended)
 *   window=32:f16,0-99:q8_0,100-:q4_0         both: ranges, and the window read from its own f16 copy
 *   full | none                               no policy (the plain cache)
 *
 * Semantics: every position is stored at write time in the range that contains it (quantised from f32 once);
 * with a window W, a query at position p reads positions p-W+1..p from the window's copy instead (a ring of
 * W + max_batch positions), so a token is used at the range's precision from the moment it leaves the window.
 */
import { AetherError } from '../errors.js';

/** Dtypes a policy may use for K/V rows (the KV-cache kernels: f32 / f16 / q8_0 / q4_0). */
export const KV_POLICY_DTYPES = ['f32', 'f16', 'q8_0', 'q4_0'] as const;
export type KvDtype = typeof KV_POLICY_DTYPES[number];

export interface KvRange { start: number; /** exclusive; null = to the end of the context */ end: number | null; dtype: KvDtype }

export interface KvPolicy {
  version: 1;
  /** Ranges in position order, contiguous from 0, the last open-ended. */
  ranges: KvRange[];
  /** Recent window kept in its own copy, or null. */
  window: { size: number; dtype: KvDtype } | null;
  /** Leading positions heads classed 'local' keep besides the window (default: the first range when it is a
   * sinks=N range, else 4). */
  sinks: number;
}

export const KV_POLICY_VERSION = 1;
export const MAX_KV_RANGES = 4;

const err = (msg: string, field = 'kvPolicy') => new AetherError('invalid_argument', `${field}: ${msg}`, { field });

function dtypeOf(s: string, where: string, field: string): KvDtype {
  if (!(KV_POLICY_DTYPES as readonly string[]).includes(s)) throw err(`'${where}': dtype '${s}' is not one of ${KV_POLICY_DTYPES.join(', ')}`, field);
  return s as KvDtype;
}
function intOf(s: string, where: string, field: string, min = 0): number {
  if (!/^\d+$/.test(s) || Number(s) < min) throw err(`'${where}': expected an integer >= ${min}, got '${s}'`, field);
  return Number(s);
}

/** Parse the compact syntax; null for 'full' / 'none' / ''. */
export function parseKvPolicy(spec: string, field = 'kvPolicy'): KvPolicy | null {
  const s = spec.trim();
  if (s === '' || s === 'full' || s === 'none') return null;
  let sinks: { n: number; dtype: KvDtype } | null = null, rest: KvDtype | null = null;
  let window: KvPolicy['window'] = null;
  const ranges: KvRange[] = [];
  for (const part of s.split(',').map((x) => x.trim())) {
    let m: RegExpExecArray | null;
    if ((m = /^sinks=(\w+):(\w+)$/.exec(part))) {
      if (sinks) throw err(`'${part}': sinks given twice`, field);
      sinks = { n: intOf(m[1], part, field, 1), dtype: dtypeOf(m[2], part, field) };
    } else if ((m = /^window=(\w+)(?::(\w+))?$/.exec(part))) {
      if (window) throw err(`'${part}': window given twice`, field);
      window = { size: intOf(m[1], part, field, 1), dtype: dtypeOf(m[2] ?? 'f16', part, field) };
    } else if ((m = /^rest=(\w+)$/.exec(part))) {
      if (rest) throw err(`'${part}': rest given twice`, field);
      rest = dtypeOf(m[1], part, field);
    } else if ((m = /^(\d+)-(\d*):(\w+)$/.exec(part))) {
      const a = intOf(m[1], part, field), b = m[2] === '' ? null : intOf(m[2], part, field) + 1;
      if (b !== null && b <= a) throw err(`'${part}': empty range`, field);
      ranges.push({ start: a, end: b, dtype: dtypeOf(m[3], part, field) });
    } else {
      throw err(`cannot read '${part}' (expected sinks=N:DTYPE, window=N[:DTYPE], rest=DTYPE or A-B:DTYPE / A-:DTYPE)`, field);
    }
  }
  if (sinks && ranges.length) throw err('give either sinks=/rest= or position ranges, not both', field);
  if (rest && ranges.length) throw err('give either rest= or position ranges, not both', field);
  let out: KvRange[];
  if (ranges.length) {
    ranges.sort((x, y) => x.start - y.start);
    out = ranges;
  } else {
    const restType = rest ?? (sinks || window ? null : null);
    if (!restType) throw err(`'${s}': the dtype of the other positions is missing (rest=DTYPE or ranges)`, field);
    out = sinks ? [{ start: 0, end: sinks.n, dtype: sinks.dtype }, { start: sinks.n, end: null, dtype: restType }] : [{ start: 0, end: null, dtype: restType }];
  }
  const policy: KvPolicy = { version: KV_POLICY_VERSION, ranges: out, window, sinks: sinks?.n ?? 4 };
  return checkKvPolicy(policy, field);
}

/** The compact form of a policy (parseKvPolicy(formatKvPolicy(p)) equals p up to sinks). */
export function formatKvPolicy(p: KvPolicy | null): string {
  if (!p) return 'full';
  const parts: string[] = [];
  if (p.window) parts.push(`window=${p.window.size}:${p.window.dtype}`);
  for (const r of p.ranges) parts.push(`${r.start}-${r.end === null ? '' : r.end - 1}:${r.dtype}`);
  return parts.join(',');
}

/** Check a structured policy (from metadata or the API); returns it. Throws naming `field`. */
export function checkKvPolicy(x: unknown, field = 'kv_policy', code: 'invalid_argument' | 'format_error' = 'invalid_argument'): KvPolicy {
  const fail = (msg: string) => new AetherError(code, `${field}: ${msg}`, { field });
  if (!x || typeof x !== 'object' || Array.isArray(x)) throw fail('expected an object');
  const p = x as KvPolicy;
  if (p.version !== KV_POLICY_VERSION) throw fail(`version: expected ${KV_POLICY_VERSION}, got ${JSON.stringify(p.version)}`);
  if (!Array.isArray(p.ranges) || p.ranges.length < 1 || p.ranges.length > MAX_KV_RANGES) throw fail(`ranges: expected 1..${MAX_KV_RANGES} ranges`);
  let at = 0;
  p.ranges.forEach((r, i) => {
    if (!r || r.start !== at) throw fail(`ranges[${i}].start: expected ${at} (ranges must be contiguous from position 0), got ${JSON.stringify(r?.start)}`);
    const last = i === p.ranges.length - 1;
    if (last ? r.end !== null : !(Number.isInteger(r.end) && (r.end as number) > r.start)) {
      throw fail(`ranges[${i}].end: ${last ? 'the last range must be open-ended (null)' : `expected an integer > ${r.start}`}, got ${JSON.stringify(r.end)}`);
    }
    if (!(KV_POLICY_DTYPES as readonly string[]).includes(r.dtype)) throw fail(`ranges[${i}].dtype: '${r.dtype}' is not one of ${KV_POLICY_DTYPES.join(', ')}`);
    at = r.end ?? at;
  });
  if (p.window !== null) {
    if (!p.window || !Number.isInteger(p.window.size) || p.window.size < 1) throw fail('window.size: expected an integer >= 1');
    if (!(KV_POLICY_DTYPES as readonly string[]).includes(p.window.dtype)) throw fail(`window.dtype: '${p.window.dtype}' is not one of ${KV_POLICY_DTYPES.join(', ')}`);
  }
  if (!Number.isInteger(p.sinks) || p.sinks < 0) throw fail('sinks: expected an integer >= 0');
  return p;
}

/** Bytes of one head's row of head_dim values in `dtype`. */
export function kvRowBytes(dtype: KvDtype, headDim: number): number {
  switch (dtype) {
    case 'f32': return headDim * 4;
    case 'f16': return headDim * 2;
    case 'q8_0': return (headDim / 32) * 34;
    case 'q4_0': return (headDim / 32) * 18;
  }
}
