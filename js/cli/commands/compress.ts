/** aether compress MODEL --ffn-width 0.75|0.5 [--method aa-svd|svd|prune] [--from-atlas] --calib TEXT --docs A:B -o OUT.rknot [--keep-dense] */
import fs from 'node:fs';
import { parseArgs, threadsArg } from '../args.js';
import { createProgress } from '../progress.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import { calibrate, calibrationWindows, type Calibration } from '../../src/compress/calib.js';
import { compressFfn, ratiosFromAtlas, COMPRESS_METHODS, type CompressMethod } from '../../src/compress/compress.js';
import { useFast, type Atlas, type LinalgMode } from '../../src/compress/analyze.js';
import { readTextArg } from '../text-options.js';
import { copyRknot } from '../../src/compress/write.js';

export const usage = `usage: aether compress MODEL --ffn-width R --calib TEXT -o OUT.rknot [options]
  MODEL                  .rknot file (or GGUF / HF folder, converted on the fly)
  --ffn-width R          width ratio of the compressed FFN of every layer (e.g. 0.75, 0.5)
  --from-atlas           per-layer ratios from the model's atlas (aether analyze -o): '50' -> 0.5, '75' -> 0.75,
                         'preserve' -> left dense (replaces --ffn-width)
  --method M             aa-svd (activation-aware low-rank factors, default) | prune (structured width pruning
                         with bias compensation) | svd (plain low-rank, no calibration: for comparison)
  --calib TEXT           calibration text (documents separated by 0x1E lines)
  --docs A:B             use documents A..B-1 of the calibration text only (e.g. 0:67)
  --max-tokens N         calibration tokens at most (default 8192)
  --keep-dense           keep the dense FFN weights too: per-layer rollback at run time (model.setCompression)
  -o, --out OUT.rknot    output file
  --linalg M             auto (default) | exact | fast: low-rank factors from an exact eigendecomposition
                         (ml-matrix) or a randomised range finder in wasm (auto: fast when min(dim, FFN) > 1024);
                         the fast path streams the calibration rows to one temporary file per layer
  --power-iters Q        fast path: power iterations of the range finder (default 1)
  --json                 print a JSON summary
  -t, --threads T        compute threads for the calibration forward (default auto: the physical cores, at most 4)`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { 'ffn-width': 'number', 'from-atlas': 'boolean', method: 'string', calib: 'string', docs: 'string', 'max-tokens': 'number', 'keep-dense': 'boolean', out: 'string', json: 'boolean', threads: 'string', progress: 'boolean', linalg: 'string', 'power-iters': 'number' },
    aliases: { o: 'out', t: 'threads' },
  });
  if (positionals.length !== 1 || !v.out) throw new AetherError('invalid_argument', `expected MODEL and -o OUT.rknot\n${usage}`);
  const method = ((v.method as string) ?? 'aa-svd') as CompressMethod;
  if (!COMPRESS_METHODS.includes(method)) throw new AetherError('invalid_argument', `--method must be one of ${COMPRESS_METHODS.join(', ')}`);
  const ratio = v['ffn-width'] as number | undefined;
  if (!v['from-atlas'] && ratio === undefined) throw new AetherError('invalid_argument', `--ffn-width R (or --from-atlas) is required\n${usage}`);
  if (ratio !== undefined && !(ratio > 0 && ratio < 1)) throw new AetherError('invalid_argument', '--ffn-width must be in (0, 1)');
  const linalgMode = ((v.linalg as string) ?? 'auto') as LinalgMode;
  if (!['auto', 'exact', 'fast'].includes(linalgMode)) throw new AetherError('invalid_argument', '--linalg must be auto, exact or fast');
  if (method !== 'svd' && !v.calib) throw new AetherError('invalid_argument', `--method ${method} needs --calib TEXT`);
  const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
  const src = await resolveNodeSource(positionals[0]);
  const model = await load(src, { threads: threadsArg(v.threads), maxBatch: 64 });
  let calibration: Calibration | undefined;
  try {
    const NL = model.config.n_layers;
    if (model.config.post_norms) throw new AetherError('unsupported', 'FFN compression of models with post-FFN norms (Gemma 2/3) is not supported');
    const meta = model.metadata as { compression?: { atlas?: Atlas } };
    if (Array.from({ length: NL }, (_, l) => model.engine.compressedWidth(l)).some((w) => w > 0)) throw new AetherError('invalid_argument', `${positionals[0]} is already compressed`);
    let ratios: (number | null)[];
    if (v['from-atlas']) {
      if (!meta.compression?.atlas) throw new AetherError('invalid_argument', `${positionals[0]} has no atlas: run aether analyze MODEL --calib TEXT -o OUT.rknot first`);
      ratios = ratiosFromAtlas(meta.compression.atlas, NL);
    } else ratios = Array(NL).fill(ratio);
    let calibrationInfo: Record<string, unknown> | undefined;
    if (v.calib) {
      const arg = readTextArg(v, 'calib');
      const text = arg.text;
      calibrationInfo = arg.info as Record<string, unknown>;
      const wins = calibrationWindows(model, text, Math.min(256, model.nCtx), (v['max-tokens'] as number) ?? 8192);
      const bar = createProgress({ title: 'calibration', force: !!v.progress, unit: 'items' });
      const fast = method !== 'prune' && useFast(linalgMode, model.config.dim, model.config.hidden_dim);
      calibration = await calibrate(model, wins, { blocks: method === 'prune' ? [] : ['ffn', 'down'], mode: fast ? 'streamed' : 'auto', onProgress: (d, t) => bar.update(d, t, 'windows') });
      bar.done();
      Object.assign(calibrationInfo, { tokens: calibration.tokens, windows: calibration.windows });
    }
    const bar = createProgress({ title: 'compress', force: !!v.progress, unit: 'items' });
    const t0 = Date.now();
    const { tensors, layers } = await compressFfn(model, { method, ratios, calibration, linalg: linalgMode, powerIters: v['power-iters'] as number | undefined, onProgress: (d, t, label) => bar.update(d, t, label) });
    bar.done();
    const drop = new Set<string>();
    if (!v['keep-dense']) for (const L of layers) for (const n of ['ffn_gate', 'ffn_up', 'ffn_down']) drop.add(`blk.${L.layer}.${n}.weight`);
    const inBytes = fs.statSync(src).size;
    const compression = { ...(meta.compression ?? {}), version: 1, method, keep_dense: !!v['keep-dense'], from_atlas: !!v['from-atlas'], calibration: calibrationInfo, layers };
    const written = await copyRknot(src, v.out as string, { sections: { compression }, drop, add: tensors, requiredFeatures: ['ffn_compressed'] });
    const seconds = (Date.now() - t0) / 1000;
    if (!v['keep-dense'] && layers.length > 0 && written >= inBytes) {
      throw new Error(`the compressed file (${written} bytes) is not smaller than the input (${inBytes} bytes)`);
    }
    const summary = { model: positionals[0], out: v.out, method, keep_dense: !!v['keep-dense'], input_bytes: inBytes, file_bytes: written, seconds, layers };
    if (v.json) process.stdout.write(JSON.stringify(summary) + '\n');
    else {
      process.stdout.write(`layer  method   width ratio  width  rank  dtype  FFN params (vs dense)\n`);
      for (const L of layers) process.stdout.write(`${String(L.layer).padStart(5)}  ${L.method.padEnd(7)}  ${L.width_ratio.toFixed(2).padStart(11)}  ${String(L.width).padStart(5)}  ${String(L.rank ?? '-').padStart(4)}  ${L.dtype.padEnd(5)}  ${L.params} (${(100 * L.params / L.params_dense).toFixed(1)}%)\n`);
      process.stdout.write(`wrote ${v.out}: ${written} bytes (input ${inBytes} bytes, ${(100 * written / inBytes).toFixed(1)}%)${v['keep-dense'] ? ', dense FFN weights kept' : ''}\n`);
    }
    return 0;
  } finally {
    calibration?.dispose();
    model.dispose();
  }
}
