/** KV-policy and head-compression options shared by `aether run` and `bench` (docs/rknot.md kv_policy, attention_heads). */
import { AetherError } from '../src/errors.js';
import type { AetherModel, LoadOptions } from '../src/aether.js';
import { parseKvPolicy } from '../src/formats/kv-policy.js';

export const KV_OPTION_SPEC = { 'kv-policy': 'string', heads: 'string', 'local-heads': 'string' } as const;

export const KV_USAGE = `  --kv-policy P         KV cache precision by position, e.g. sinks=4:f16,window=64:f16,rest=q8_0 or
                        0-20:f16,21-100:q8_0,101-:q4_0; 'full' none (default: the file's kv_policy)
  --heads MODE          local: KV heads classed local by aether profile-heads attend to sinks + window only
  --local-heads H       KV heads STORED locally (only sinks + window kept: memory saved): 'file' (the classes of
                        aether profile-heads), 'G,G' (those KV heads of every layer) or 'L:G,G;L:G' (per layer); sinks
                        and window from --kv-policy when it has a window, else the file's section, else 4 and 64`;

/** The load options (kvPolicy undefined: the file's policy), checked here so that a typo fails before loading. */
export function kvPolicyFromArgs(v: Record<string, unknown>): { kvPolicy?: string; localHeads?: LoadOptions['localHeads'] } {
  const o: { kvPolicy?: string; localHeads?: LoadOptions['localHeads'] } = {};
  if (v['kv-policy'] !== undefined) {
    parseKvPolicy(String(v['kv-policy']), '--kv-policy');
    o.kvPolicy = String(v['kv-policy']);
  }
  if (v['local-heads'] !== undefined) o.localHeads = parseLocalHeadsArg(String(v['local-heads']));
  return o;
}

/** --local-heads: 'file', 'G,G' (every layer) or 'L:G,G;L:G' (per layer). */
export function parseLocalHeadsArg(s: string): LoadOptions['localHeads'] {
  if (s === 'file') return 'file';
  const bad = () => new AetherError('invalid_argument', `--local-heads expects 'file', 'G,G' (KV heads of every layer) or 'L:G,G;L:G' (per layer), got '${s}'`);
  const list = (x: string) => x.split(',').map((t) => { if (!/^\d+$/.test(t.trim())) throw bad(); return Number(t); });
  if (!s.includes(':')) return { heads: list(s) };
  const heads: number[][] = [];
  for (const part of s.split(';')) {
    const m = /^\s*(\d+)\s*:(.*)$/.exec(part);
    if (!m) throw bad();
    heads[Number(m[1])] = [...(heads[Number(m[1])] ?? []), ...list(m[2])];
  }
  return { heads: Array.from(heads, (h) => h ?? []) };
}

/** Apply --heads after loading. */
export function applyHeadsArg(model: AetherModel, v: Record<string, unknown>): void {
  const h = v.heads;
  if (h === undefined) return;
  if (h !== 'local' && h !== 'full') throw new AetherError('invalid_argument', `--heads expects 'local' or 'full', got '${String(h)}'`);
  model.setHeadMode(h);
}
