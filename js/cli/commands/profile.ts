/** aether profile MODEL --calib TEXT -o OUT.rknot [--target-sparsity S[,S..]] [--method M] [--docs A:B] ... */
import { parseArgs, threadsArg } from '../args.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { profileModel, PROFILE_METHODS, type ProfileMethod } from '../../src/profile/profile.js';
import { readTextArg } from '../text-options.js';
import { writeSaturated } from '../../src/profile/write.js';

export const usage = `usage: aether profile MODEL --calib TEXT -o OUT.rknot [options]
  MODEL                  .rknot file (or GGUF / HF folder, converted on the fly)
  --calib TEXT           calibration text (documents separated by lines holding only 0x1E); must not be
                         the evaluation text: use --docs to take a held-out part
  --docs A:B             use documents A..B-1 of the calibration text only (e.g. 0:67)
  -o, --out OUT.rknot    output: the model with a 'saturation' metadata section (tensors copied unchanged)
  --target-sparsity S    fraction of FFN neurons to skip per layer; a comma list gives several levels
                         (default 0.1,0.25,0.4,0.5)
  --method M             variance | activity | contribution (default variance; see docs/rknot.md)
  --small-rel R          |h| < R * RMS(h) of the layer counts as a small activation (default 0.01)
  --window W             tokens per window (default 256)
  --max-tokens N         calibration tokens at most (default: all)
  -t, --threads T        compute threads (default auto: the physical cores, at most 4)
  --json                 print the per-layer summary as JSON`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: {
      calib: 'string', docs: 'string', out: 'string', 'target-sparsity': 'string', method: 'string', 'small-rel': 'number',
      window: 'number', 'max-tokens': 'number', threads: 'string', json: 'boolean',
    },
    aliases: { o: 'out', t: 'threads' },
  });
  if (positionals.length !== 1 || !v.calib || !v.out) throw new AetherError('invalid_argument', `expected MODEL, --calib TEXT and -o OUT.rknot\n${usage}`);
  const method = ((v.method as string) ?? 'variance') as ProfileMethod;
  if (!PROFILE_METHODS.includes(method)) throw new AetherError('invalid_argument', `--method must be one of ${PROFILE_METHODS.join(', ')}`);
  const levels = String(v['target-sparsity'] ?? '0.1,0.25,0.4,0.5').split(',').map((x) => Number(x.trim()));
  if (levels.some((s) => !(s >= 0 && s < 1))) throw new AetherError('invalid_argument', `--target-sparsity values must be in [0, 1)`);
  const arg = readTextArg(v, 'calib');
  const text = arg.text;
  const calibration: Record<string, unknown> = arg.info;
  const window = (v.window as number) ?? 256;
  const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
  const src = await resolveNodeSource(positionals[0]);
  const model = await load(src, { threads: threadsArg(v.threads), maxBatch: window, modules: ['ffn-saturated'] });
  try {
    const tty = !v.json && process.stderr.isTTY;
    const r = await profileModel(model, text, {
      window, maxTokens: v['max-tokens'] as number | undefined, smallRel: v['small-rel'] as number | undefined, levels, method, calibration,
      onProgress: tty ? (d, t) => process.stderr.write(`\r${d}/${t} windows`) : undefined,
    });
    if (tty) process.stderr.write('\n');
    const written = await writeSaturated(src, v.out as string, r.saturation);
    const H = model.config.hidden_dim;
    const rows = r.layers.map((P, l) => ({
      layer: l, rms_h: P.rms, small_eps: P.smallEps, always_zero_neurons: P.nAlwaysZero, zero_activations: P.zeroActivations,
      small_on_99pct_neurons: P.nSmall99, small_on_90pct_neurons: P.nSmall90,
      frozen: Object.fromEntries(r.saturation.levels.map((lv) => [lv.sparsity, lv.layers[l].n_frozen])),
      threshold: Object.fromEntries(r.saturation.levels.map((lv) => [lv.sparsity, lv.layers[l].threshold])),
      compensation_gain: Object.fromEntries(r.saturation.levels.map((lv) => [lv.sparsity, lv.layers[l].compensation_gain])),
    }));
    if (v.json) {
      process.stdout.write(JSON.stringify({ model: positionals[0], out: v.out, method, tokens: r.tokens, windows: r.windows, seconds: r.seconds, hidden_dim: H, file_bytes: written, layers: rows }) + '\n');
    } else {
      process.stdout.write(`profiled ${r.tokens} tokens (${r.windows} windows) in ${r.seconds.toFixed(1)} s, method ${method}; wrote ${v.out}\n`);
      process.stdout.write(`layer  rms(h)     always-0  zero-acts  small>=99%  small>=90%  frozen per level (of ${H})        threshold |silu(g)| per level\n`);
      for (const x of rows) {
        const fr = Object.entries(x.frozen).map(([s, n]) => `${s}:${n}`).join(' ');
        const th = Object.entries(x.threshold).map(([s, t]) => `${s}:${(t as number).toExponential(2)}`).join(' ');
        process.stdout.write(`${String(x.layer).padStart(5)}  ${x.rms_h.toExponential(2)}  ${String(x.always_zero_neurons).padStart(8)}  ${(x.zero_activations * 100).toFixed(4).padStart(8)}%  ${String(x.small_on_99pct_neurons).padStart(10)}  ${String(x.small_on_90pct_neurons).padStart(10)}  ${fr.padEnd(32)}  ${th}\n`);
      }
    }
    return 0;
  } finally {
    model.dispose();
  }
}
