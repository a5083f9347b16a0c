/** aether eval MODEL --text FILE [--vs-dense] [--ref MODEL] [--mode M] [--window W] [--max-tokens N] [--json] */
import { parseArgs, threadsArg } from '../args.js';
import { load, type FfnModeName } from '../../src/aether.js';
import { evaluate } from '../../src/eval.js';
import { AetherError } from '../../src/errors.js';
import type { SimdMode } from '../../src/runtime/env.js';
import { FFN_OPTION_SPEC, FFN_USAGE, ffnFromArgs } from '../ffn-options.js';
import { MEM_OPTION_SPEC, MEM_USAGE, memFromArgs } from '../memory-options.js';
import { readTextArg } from '../text-options.js';

export const usage = `usage: aether eval MODEL --text FILE [options]
  --text FILE         evaluation text (documents separated by lines holding only 0x1E)
  --vs-dense          also run the same model with a dense FFN: KL divergence and top-1 agreement vs dense
  --ref MODEL         compare against another model file instead (e.g. the f32 model for a q8_0 one)
  --ref-kv-dtype T    compare against the reference (--ref, else the same model) with KV-cache dtype T
                      (e.g. --kv-dtype q8_0 --ref-kv-dtype f32: the cost of a q8_0 KV cache)
  --mode M            FFN mode of the model under test: dense | fused | static | dynamic (default dense);
                      the FFN options below (but --ffn) apply to it
  --docs A:B          evaluate documents A..B-1 of the text only (e.g. 67: for the half not used to profile)
${FFN_USAGE.split('\n').slice(2).join('\n')}
  --window W          input tokens per window (default 256, at most the context)
  --concat            windows over the concatenated token stream of all documents (default: per document)
  --max-tokens N      stop after N predicted tokens
  -t, --threads T     compute threads (default auto: the physical cores, at most 4)
${MEM_USAGE.replace(/^  --ctx.*\n/, '')}
  --simd MODE         wasm build: auto (default: relaxed SIMD where available and faster), relaxed, plain
  --json              print one JSON object`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { concat: 'boolean', text: 'string', 'vs-dense': 'boolean', ref: 'string', mode: 'string', window: 'number', 'max-tokens': 'number', threads: 'string', simd: 'string', json: 'boolean', docs: 'string', 'ref-kv-dtype': 'string', ...FFN_OPTION_SPEC, ...MEM_OPTION_SPEC },
    aliases: { t: 'threads' },
  });
  if (positionals.length !== 1 || !v.text) throw new AetherError('invalid_argument', `expected MODEL and --text FILE\n${usage}`);
  const text = readTextArg(v, 'text').text;
  const ffn = ffnFromArgs(v, 'mode');
  const window = (v.window as number) ?? 256;
  const lo = { threads: threadsArg(v.threads), simd: v.simd as SimdMode | undefined, logitsAll: true, maxBatch: window, modules: ffn.modules };
  const mem = memFromArgs(v);
  const model = await load(positionals[0], { ...lo, ...mem });
  const refKv = v['ref-kv-dtype'] !== undefined ? memFromArgs({ 'kv-dtype': v['ref-kv-dtype'] }).kvDtype : undefined;
  const refPath = (v.ref as string | undefined) ?? (refKv ? positionals[0] : undefined);
  const reference = refPath ? await load(refPath, { ...lo, ...mem, ...(refKv ? { kvDtype: refKv } : {}) }) : undefined;
  try {
    const mode = v.mode as FfnModeName | undefined;
    if (mode) model.setFfnMode(mode, undefined, ffn.opts);
    const progress = !v.json && process.stderr.isTTY ? (d: number, t: number) => process.stderr.write(`\r${d}/${t} windows`) : undefined;
    const r = await evaluate(model, text, {
      window, concat: !!v.concat, maxTokens: v['max-tokens'] as number | undefined, vsMode: v['vs-dense'] ? 'dense' : undefined,
      mode, reference, onProgress: progress,
    });
    if (progress) process.stderr.write('\n');
    const out = { model: positionals[0], text: v.text, docs: v.docs ?? null, mode: mode ?? 'dense', ffn_options: ffn.opts, reference_model: refPath ?? (v['vs-dense'] ? 'dense' : null), kv_dtype: model.engine.plan.kvDtype, reference_kv_dtype: reference?.engine.plan.kvDtype ?? null, threads: model.threads, simd: model.simd, ...r };
    if (v.json) process.stdout.write(JSON.stringify(out) + '\n');
    else {
      process.stdout.write(`tokens ${r.tokens} in ${r.windows} windows, perplexity ${r.perplexity.toFixed(4)} (nll ${r.nll.toFixed(5)})\n`);
      if (r.reference) process.stdout.write(`vs ${out.reference_model}: reference perplexity ${r.reference.perplexity.toFixed(4)} (${r.reference.ppl_increase_pct >= 0 ? '+' : ''}${r.reference.ppl_increase_pct.toFixed(3)}%), mean KL ${r.reference.kl.toExponential(3)}, top-1 agreement ${(r.reference.top1 * 100).toFixed(2)}%\n`);
      if (r.ffn_sparsity !== undefined) process.stdout.write(`FFN sparsity achieved ${(r.ffn_sparsity * 100).toFixed(2)}%\n`);
    }
    return 0;
  } finally {
    model.dispose();
    reference?.dispose();
  }
}
