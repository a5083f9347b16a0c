/** aether analyze MODEL [--calib TEXT --docs A:B] [--json] [-o OUT.rknot] [--chart OUT.svg] */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, threadsArg } from '../args.js';
import { createProgress } from '../progress.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { analyzeModel, useFast, type LinalgMode } from '../../src/compress/analyze.js';
import { calibrate, calibrationWindows, type Calibration } from '../../src/compress/calib.js';
import { atlasSvg } from '../../src/compress/chart.js';
import { readTextArg } from '../text-options.js';
import { copyRknot } from '../../src/compress/write.js';

export const usage = `usage: aether analyze MODEL [options]
  MODEL                  .rknot file (or GGUF / HF folder, converted on the fly)
  --calib TEXT           calibration text (documents separated by 0x1E lines): adds the activation-aware
                         energies (W whitened by the covariance of its inputs on this text)
  --docs A:B             use documents A..B-1 of the calibration text only (e.g. 0:67)
  --max-tokens N         calibration tokens at most (default 8192)
  --window W             tokens per calibration window (default 256)
  --keep E               atlas rule: a layer's FFN mode is '50' / '75' when every FFN matrix keeps >= E of
                         its (activation-aware) energy at 50% / 75% rank, else 'preserve' (default 0.9)
  --layers L             comma list of layers (default all)
  -o, --out OUT.rknot    write the model with the atlas in its metadata (compression.atlas; tensors copied)
  --chart OUT.svg        draw the scores by layer
  --linalg M             auto (default) | exact | fast: exact spectra (ml-matrix, float64) or the wasm fast path
                         (stochastic Lanczos quadrature; auto: fast for matrices whose smaller side > 1024);
                         the fast path streams the calibration rows to one temporary file per layer
  --probes P, --steps S  fast path: SLQ probe vectors (default 8) and Lanczos steps (default 48) per spectrum
  --json                 print { matrices, atlas } as JSON instead of the table
  -t, --threads T        compute threads for the calibration forward (default auto: the physical cores, at most 4)`;

function f(v: number | undefined, d = 3): string {
  if (v === undefined || !Number.isFinite(v)) return '-';
  return Math.abs(v) >= 1e4 ? v.toExponential(2) : v.toFixed(d);
}

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { calib: 'string', docs: 'string', 'max-tokens': 'number', window: 'number', keep: 'number', layers: 'string', out: 'string', chart: 'string', json: 'boolean', threads: 'string', progress: 'boolean', linalg: 'string', probes: 'number', steps: 'number' },
    aliases: { o: 'out', t: 'threads' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one MODEL\n${usage}`);
  if (v.docs && !v.calib) throw new AetherError('invalid_argument', '--docs needs --calib');
  const keep = (v.keep as number) ?? 0.9;
  const linalgMode = ((v.linalg as string) ?? 'auto') as LinalgMode;
  if (!['auto', 'exact', 'fast'].includes(linalgMode)) throw new AetherError('invalid_argument', '--linalg must be auto, exact or fast');
  if (!(keep > 0 && keep <= 1)) throw new AetherError('invalid_argument', '--keep must be in (0, 1]');
  const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
  const src = await resolveNodeSource(positionals[0]);
  const window = (v.window as number) ?? 256;
  const model = await load(src, { threads: threadsArg(v.threads), maxBatch: Math.min(window, 64) });
  let calibration: Calibration | undefined;
  try {
    const NL = model.config.n_layers;
    let layers: number[] | undefined;
    if (v.layers) {
      layers = String(v.layers).split(',').map((x) => Number(x.trim()));
      if (layers.some((l) => !Number.isInteger(l) || l < 0 || l >= NL)) throw new AetherError('invalid_argument', `--layers: layers are 0..${NL - 1}`);
    }
    let calibrationInfo: Record<string, unknown> | undefined;
    if (v.calib) {
      const arg = readTextArg(v, 'calib');
      const text = arg.text;
      calibrationInfo = arg.info as Record<string, unknown>;
      const wins = calibrationWindows(model, text, Math.min(window, model.nCtx), (v['max-tokens'] as number) ?? 8192);
      const bar = createProgress({ title: 'calibration', force: !!v.progress, unit: 'items' });
      const cfg = model.config;
      const fast = useFast(linalgMode, cfg.dim, cfg.hidden_dim) || useFast(linalgMode, cfg.dim, cfg.dim);
      calibration = await calibrate(model, wins, { mode: fast ? 'streamed' : 'auto', onProgress: (d, t) => bar.update(d, t, 'windows') });
      bar.done();
      Object.assign(calibrationInfo, { tokens: calibration.tokens, windows: calibration.windows });
    }
    const bar = createProgress({ title: 'analyze', force: !!v.progress, unit: 'items' });
    const t0 = Date.now();
    const { matrices, atlas } = await analyzeModel(model, { calibration, calibrationInfo, keep, layers, linalg: linalgMode, slq: { probes: v.probes as number | undefined, steps: v.steps as number | undefined }, onProgress: (d, t, label) => bar.update(d, t, label) });
    bar.done();
    const seconds = (Date.now() - t0) / 1000;
    let written: number | undefined;
    if (v.out) written = await copyRknot(src, v.out as string, { sections: { compression: { ...((model.metadata as any).compression ?? {}), atlas } } });
    if (v.chart) fs.writeFileSync(v.chart as string, atlasSvg(matrices, { title: `spectral atlas: ${path.basename(positionals[0])}` }));
    if (v.json) {
      process.stdout.write(JSON.stringify({ model: positionals[0], seconds, out: v.out, file_bytes: written, matrices, atlas }) + '\n');
      return 0;
    }
    const aa = !!calibration;
    process.stdout.write(`layer  matrix        shape        sigma1    sigma2   s1/s2  stable-rank  alpha   energy75 energy50${aa ? '  aa-energy75 aa-energy50' : ''}\n`);
    for (const m of matrices) {
      process.stdout.write(`${String(m.layer).padStart(5)}  ${m.name.padEnd(12)}  ${`${m.rows}x${m.cols}`.padEnd(11)}  ${f(m.sigma1).padStart(8)}  ${f(m.sigma2).padStart(8)}  ${f(m.cliff, 2).padStart(6)}  ${f(m.stable_rank, 2).padStart(11)}  ${f(m.alpha, 2).padStart(5)}   ${f(m.energy75).padStart(8)} ${f(m.energy50).padStart(8)}` +
        (aa ? `  ${f(m.aa_energy75).padStart(11)} ${f(m.aa_energy50).padStart(11)}` : '') + '\n');
    }
    process.stdout.write(`\natlas (keep ${keep}${aa ? ', activation-aware' : ', plain energies: pass --calib for activation-aware ones'}): ` +
      atlas.layers.map((L) => `L${L.layer}=${L.mode}`).join(' ') + `\nclaimed rule (s1/s2 >= 8 on every FFN matrix): ` + atlas.layers.map((L) => `L${L.layer}=${L.mode_cliff}`).join(' ') + '\n');
    if (v.out) process.stdout.write(`wrote ${v.out} (${written} bytes) with the atlas in compression.atlas\n`);
    if (v.chart) process.stdout.write(`wrote ${v.chart}\n`);
    return 0;
  } finally {
    calibration?.dispose();
    model.dispose();
  }
}
