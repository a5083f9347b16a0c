/** aether profile-heads MODEL --calib TEXT [--docs A:B] [-o OUT.rknot] [--sinks 4] [--window W] [--threshold 0.9] [--json] */
import { parseArgs, threadsArg } from '../args.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { profileHeads } from '../../src/profile/heads.js';
import { readTextArg } from '../text-options.js';
import { writeWithSections } from '../../src/profile/write.js';

export const usage = `usage: aether profile-heads MODEL --calib TEXT [options]
  MODEL                  .rknot file (or GGUF / HF folder, converted on the fly)
  --calib TEXT           calibration text (documents separated by lines holding only 0x1E), tiled into
                         windows of the model's context over the concatenated documents
  --docs A:B             use documents A..B-1 of the calibration text only (e.g. 0:67)
  -o, --out OUT.rknot    write the model with an 'attention_heads' metadata section (tensors unchanged)
  --sinks N              sink positions (default 4)
  --window W             recent window in positions (default min(64, n_ctx / 4))
  --threshold T          a head is 'local' when its mean sink + window attention mass >= T (default 0.9)
  --max-tokens N         calibration tokens at most (default: all)
  --ctx N                window length / context (default: the model's n_ctx)
  -t, --threads T        compute threads (default auto: the physical cores, at most 4)
  --json                 print the section as JSON`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: {
      calib: 'string', docs: 'string', out: 'string', sinks: 'number', window: 'number', threshold: 'number',
      'max-tokens': 'number', ctx: 'number', threads: 'string', json: 'boolean',
    },
    aliases: { o: 'out', t: 'threads' },
  });
  if (positionals.length !== 1 || !v.calib) throw new AetherError('invalid_argument', `expected MODEL and --calib TEXT\n${usage}`);
  const sinks = (v.sinks as number) ?? 4, window = v.window as number | undefined, threshold = (v.threshold as number) ?? 0.9;
  if (!Number.isInteger(sinks) || sinks < 0) throw new AetherError('invalid_argument', '--sinks must be an integer >= 0');
  if (window !== undefined && (!Number.isInteger(window) || window < 1)) throw new AetherError('invalid_argument', '--window must be an integer >= 1');
  if (!(threshold > 0 && threshold <= 1)) throw new AetherError('invalid_argument', '--threshold must be in (0, 1]');
  const arg = readTextArg(v, 'calib');
  const text = arg.text;
  const calibration: Record<string, unknown> = arg.info;
  const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
  const src = await resolveNodeSource(positionals[0]);
  const probe = v.ctx as number | undefined;
  const model = await load(src, { threads: threadsArg(v.threads), nCtx: probe });
  try {
    const tty = !v.json && process.stderr.isTTY;
    const r = await profileHeads(model, text, {
      sinks, window, threshold, maxTokens: v['max-tokens'] as number | undefined, calibration,
      onProgress: tty ? (d, t) => process.stderr.write(`\r${d}/${t} windows`) : undefined,
    });
    if (tty) process.stderr.write('\n');
    let written: number | undefined;
    if (v.out) written = await writeWithSections(src, v.out as string, { attention_heads: r.heads });
    const h = r.heads;
    if (v.json) {
      process.stdout.write(JSON.stringify({ model: positionals[0], out: v.out ?? null, file_bytes: written ?? null, seconds: r.seconds, attention_heads: h }) + '\n');
      return 0;
    }
    process.stdout.write(`profiled ${h.calibration.tokens} positions (${h.calibration.windows} windows of ${h.calibration.window_tokens}) in ${r.seconds.toFixed(1)} s; ` +
      `sinks ${h.sinks}, window ${h.window}, local when sink+window mass >= ${h.threshold}\n`);
    process.stdout.write(`local heads: ${(h.local_fraction * 100).toFixed(1)}% of query heads, ${(h.local_kv_fraction * 100).toFixed(1)}% of KV heads\n`);
    process.stdout.write('layer head  entropy  rel   sink   window  class      | KV head  K rank90  V rank90  class\n');
    h.layers.forEach((ly, l) => {
      const group = h.n_heads / h.n_kv_heads;
      ly.heads.forEach((x, i) => {
        const g = Math.floor(i / group);
        const kv = i % group === 0 ? `| ${String(g).padStart(7)}  ${String(ly.k_rank90[g]).padStart(8)}  ${String(ly.v_rank90[g]).padStart(8)}  ${ly.kv_heads[g]}` : '|';
        process.stdout.write(`${String(l).padStart(5)} ${String(i).padStart(4)}  ${x.entropy.toFixed(3).padStart(7)}  ${x.entropy_rel.toFixed(2)}  ${x.sink_mass.toFixed(3)}  ${x.window_mass.toFixed(3)}   ${x.class.padEnd(9)}  ${kv}\n`);
      });
    });
    if (v.out) process.stdout.write(`wrote ${v.out} (${written} bytes)\n`);
    return 0;
  } finally {
    model.dispose();
  }
}
