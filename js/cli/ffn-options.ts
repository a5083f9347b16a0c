/** FFN mode options shared by `aether run`, `bench` and `eval` (see js/src/runtime/ffn.ts). */
import { AetherError } from '../src/errors.js';
import type { FfnOptions } from '../src/runtime/ffn.js';
import type { FfnModeName } from '../src/aether.js';

export const FFN_OPTION_SPEC = {
  ffn: 'string', sparsity: 'number', 'ffn-down': 'string', 'down-dtype': 'string', 'no-comp': 'boolean', tile: 'number', threshold: 'number',
} as const;

export const FFN_USAGE = `  --ffn MODE            dense | fused | static | dynamic (default dense); static/dynamic need saturation
                        metadata (aether profile)
  --sparsity S          static/dynamic: the saturation level nearest to S (default: the file's first)
  --ffn-down L          static/dynamic: auto (default: neuron when few enough neurons are computed, else
                        rows) | neuron (neuron-major copy: skipped neurons cost nothing, computed ones 2-3x
                        a row-major weight) | rows (the model's down; exact dense when nothing is skipped)
  --down-dtype T        dtype of the neuron-major down copy: f32 | f16 | q8_0 | q4_0 (default f32 for f32
                        models, else f16)
  --no-comp             static: no compensation for the mean of frozen neurons
  --tile R              fused: interleave gate/up in tiles of R rows at load (default 0: in place, no copy)
  --threshold T         dynamic: one |silu(g)| threshold for every layer instead of the file's`;

const MODES = ['dense', 'fused', 'static', 'dynamic'];

export function ffnFromArgs(v: Record<string, unknown>, modeKey = 'ffn'): { mode?: FfnModeName; opts: FfnOptions; modules: string[] } {
  const mode = v[modeKey] as FfnModeName | undefined;
  if (mode !== undefined && !MODES.includes(mode)) throw new AetherError('invalid_argument', `--${modeKey} must be one of ${MODES.join(', ')}`);
  const opts: FfnOptions = {};
  if (v.sparsity !== undefined) opts.sparsity = v.sparsity as number;
  if (v['ffn-down'] !== undefined) {
    if (!['auto', 'neuron', 'rows'].includes(v['ffn-down'] as string)) throw new AetherError('invalid_argument', '--ffn-down must be auto, neuron or rows');
    opts.down = v['ffn-down'] as 'auto' | 'neuron' | 'rows';
  }
  if (v['down-dtype'] !== undefined) {
    if (!['f32', 'f16', 'q8_0', 'q4_0'].includes(v['down-dtype'] as string)) throw new AetherError('invalid_argument', '--down-dtype must be f32, f16, q8_0 or q4_0');
    opts.downDtype = v['down-dtype'] as FfnOptions['downDtype'];
  }
  if (v['no-comp']) opts.compensation = false;
  if (v.tile !== undefined) opts.tile = v.tile as number;
  if (v.threshold !== undefined) opts.threshold = v.threshold as number;
  const modules = mode === 'fused' ? ['ffn-fused'] : mode === 'static' || mode === 'dynamic' ? ['ffn-saturated'] : [];
  return { mode, opts, modules };
}
