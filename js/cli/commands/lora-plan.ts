/** aether lora-plan MODEL -o plan.json [--rule seed|measured] (js/src/compress/lora-plan.ts) */
import fs from 'node:fs';
import { parseArgs, threadsArg } from '../args.js';
import { createProgress } from '../progress.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { analyzeModel, type Atlas } from '../../src/compress/analyze.js';
import { calibrate, calibrationWindows } from '../../src/compress/calib.js';
import { loraPlan, type LoraRule } from '../../src/compress/lora-plan.js';
import { readTextArg } from '../text-options.js';

export const usage = `usage: aether lora-plan MODEL -o PLAN.json [options]
  MODEL                  .rknot file with an atlas (aether analyze -o), or any model (the atlas is computed:
                         plain energies, or activation-aware ones with --calib)
  -o, --out PLAN.json    write a PEFT LoraConfig (r, lora_alpha, target_modules, rank_pattern, alpha_pattern, ...)
  --rule R               seed: rank 32 where sigma1/sigma2 < 8 (fragile), 8 elsewhere, 16 in the last 15% of depth;
                         measured (default seed): the same zones, fragile = keeps < E of its activation-aware
                         energy at 50% rank (the atlas' criterion)
  --keep E               measured rule threshold (default the atlas' rule.keep, 0.9)
  --alpha-ratio A        lora_alpha = A x rank (default 2)
  --base NAME            base_model_name_or_path (default the file's source name, else null)
  --calib TEXT, --docs A:B, --max-tokens N   calibration when the atlas is computed here (see aether analyze)
  --json                 print the config and the per-module plan as JSON`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { out: 'string', rule: 'string', keep: 'number', 'alpha-ratio': 'number', base: 'string', calib: 'string', docs: 'string', 'max-tokens': 'number', json: 'boolean', threads: 'string', progress: 'boolean' },
    aliases: { o: 'out', t: 'threads' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one MODEL\n${usage}`);
  if (!v.out) throw new AetherError('invalid_argument', `-o PLAN.json is required\n${usage}`);
  if (v.docs && !v.calib) throw new AetherError('invalid_argument', '--docs needs --calib');
  const rule = ((v.rule as string) ?? 'seed') as LoraRule;
  if (rule !== 'seed' && rule !== 'measured') throw new AetherError('invalid_argument', `--rule: expected seed or measured, got '${v.rule}'`);
  let atlas: Atlas | undefined, arch: string, nLayers: number, sourceName: string | undefined, computed = false;
  const file = positionals[0];
  if (/\.rknot$/i.test(file) && fs.existsSync(file) && !v.calib) {
    const { openRknot } = await import('../../src/formats/rknot-node.js');
    const { meta } = await openRknot(file);   // metadata only: no weights read
    atlas = (meta.compression as { atlas?: Atlas } | undefined)?.atlas;
    arch = meta.config.arch; nLayers = meta.config.n_layers;
    sourceName = (meta.source as { name?: string } | undefined)?.name;
  }
  if (!atlas) {
    const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
    const src = await resolveNodeSource(file);
    const model = await load(src, { threads: threadsArg(v.threads), maxBatch: 64 });
    try {
      arch = model.config.arch; nLayers = model.config.n_layers;
      sourceName = ((model.metadata as any).source as { name?: string } | undefined)?.name;
      let calibration, calibrationInfo: Record<string, unknown> | undefined;
      if (v.calib) {
        const arg = readTextArg(v, 'calib');
        calibrationInfo = arg.info as Record<string, unknown>;
        const wins = calibrationWindows(model, arg.text, Math.min(256, model.nCtx), (v['max-tokens'] as number) ?? 8192);
        const bar = createProgress({ title: 'calibration', force: !!v.progress, unit: 'items' });
        calibration = await calibrate(model, wins, { onProgress: (d, t) => bar.update(d, t, 'windows') });
        bar.done();
      }
      const bar = createProgress({ title: 'analyze', force: !!v.progress, unit: 'items' });
      try {
        atlas = (await analyzeModel(model, { calibration, calibrationInfo, keep: v.keep as number | undefined, onProgress: (d, t, label) => bar.update(d, t, label) })).atlas;
      } finally { calibration?.dispose(); }
      bar.done();
      computed = true;
    } finally { model.dispose(); }
  }
  const { config, entries } = loraPlan(atlas, arch!, nLayers!, {
    rule, keep: v.keep as number | undefined, alphaRatio: v['alpha-ratio'] as number | undefined, baseModel: (v.base as string) ?? sourceName ?? null,
  });
  fs.writeFileSync(v.out as string, JSON.stringify(config, null, 2) + '\n');
  if (v.json) {
    process.stdout.write(JSON.stringify({ model: file, rule, atlas_computed: computed, out: v.out, config, entries }) + '\n');
    return 0;
  }
  const zones: Record<string, number> = {};
  for (const e of entries) zones[`${e.zone} (rank ${e.rank})`] = (zones[`${e.zone} (rank ${e.rank})`] ?? 0) + 1;
  process.stdout.write(`rule ${rule}${computed ? ' (atlas computed here' + (v.calib ? ', activation-aware)' : ', plain energies)') : ' (atlas from the file)'}: ` +
    `${entries.length} modules of ${arch!} x ${nLayers!} layers: ` + Object.entries(zones).map(([k, n]) => `${n} ${k}`).join(', ') + '\n' +
    `r ${config.r}, lora_alpha ${config.lora_alpha}, target_modules ${config.target_modules.join(',')}, ${Object.keys(config.rank_pattern).length} rank_pattern entries\n` +
    `wrote ${v.out}\n`);
  return 0;
}
