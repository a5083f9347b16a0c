/** KV-policy and head-compression options shared by `aether run` and `bench` (docs/rknot.md kv_policy, attention_heads). */
import { AetherError } from '../src/errors.js';
import type { AetherModel } from '../src/aether.js';
import { parseKvPolicy } from '../src/formats/kv-policy.js';

export const KV_OPTION_SPEC = { 'kv-policy': 'string', heads: 'string' } as const;

export const KV_USAGE = `  --kv-policy P         KV cache precision by position, e.g. sinks=4:f16,window=64:f16,rest=q8_0 or
                        0-20:f16,21-100:q8_0,101-:q4_0; 'full' none (default: the file's kv_policy)
  --heads MODE          local: KV heads classed local by aether profile-heads attend to sinks + window only`;

/** The load option (undefined: the file's policy), checked here so that a typo fails before loading. */
export function kvPolicyFromArgs(v: Record<string, unknown>): { kvPolicy?: string } {
  if (v['kv-policy'] === undefined) return {};
  parseKvPolicy(String(v['kv-policy']), '--kv-policy');
  return { kvPolicy: String(v['kv-policy']) };
}

/** Apply --heads after loading. */
export function applyHeadsArg(model: AetherModel, v: Record<string, unknown>): void {
  const h = v.heads;
  if (h === undefined) return;
  if (h !== 'local' && h !== 'full') throw new AetherError('invalid_argument', `--heads expects 'local' or 'full', got '${String(h)}'`);
  model.setHeadMode(h);
}
