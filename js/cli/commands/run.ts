/** aether run MODEL -p TEXT [-n N] [--greedy] [--seed S] [--threads T] [--json] */
import { parseArgs, fusedDotArg, repackArg, threadsArg } from '../args.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import type { SimdMode } from '../../src/runtime/env.js';
import { FFN_OPTION_SPEC, FFN_USAGE, ffnFromArgs } from '../ffn-options.js';
import { formatPrometheus } from '../../src/runtime/metrics.js';
import { MEM_OPTION_SPEC, MEM_USAGE, memFromArgs } from '../memory-options.js';
import { KV_OPTION_SPEC, KV_USAGE, applyHeadsArg, kvPolicyFromArgs } from '../kv-options.js';

export const usage = `usage: aether run MODEL -p TEXT [options]
  MODEL                 .rknot file, GGUF file or HF folder (converted on the fly), or a URL
  -p, --prompt TEXT     prompt text
  -n, --n-predict N     tokens to generate (default 128)
  --greedy              greedy decoding (temperature 0)
  --temp T              temperature (default 0.8)
  --top-k K             top-k (default 40, 0 = off)
  --top-p P             top-p (default 0.95, 1 = off)
  --min-p P             min-p (default 0.05, 0 = off)
  --repeat-penalty R    repetition penalty (default 1.0 = off)
  --frequency-penalty F logit -= F x the token's count in the window (default 0 = off)
  --presence-penalty P  logit -= P for a token in the window (default 0 = off)
  --repeat-last-n N     tokens the penalties look at (default 64)
  --seed S              RNG seed (default random)
  --ignore-eos          keep generating past end-of-generation tokens (exactly -n tokens)
  -t, --threads T       compute threads (default auto: the physical cores, at most 4)
${MEM_USAGE}
  --simd MODE           wasm build: auto (default: relaxed SIMD where available and faster), relaxed, plain
  --fused-dot MODE      relaxed build's kernels on the i32 relaxed dot (q4_0 / q8_0 prefill, q8_0 and q5_1 decode): auto (default: timed at load), on, off
  --repack MODE         weights in their kernels' layouts at load (q4_0, q5_0, q5_1; relaxed build: q8_0, q4_K, q5_K, q6_K too): auto (default: on), on, off
${KV_USAGE}
${FFN_USAGE}
  --chat                treat the prompt as a user message and apply the chat template
  --json                print one JSON object: tokens, text, prefill_tps, decode_tps, ...
  --metrics FMT         after the run print model.metrics(): 'prometheus' (text exposition, on stdout after
                        the text; with --json as the 'metrics_prometheus' field) or 'json'
  --timing              per-layer time counters per op class (in the metrics)`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: {
      prompt: 'string', 'n-predict': 'number', greedy: 'boolean', 'ignore-eos': 'boolean', temp: 'number', 'top-k': 'number', 'top-p': 'number',
      'min-p': 'number', 'repeat-penalty': 'number', 'frequency-penalty': 'number', 'presence-penalty': 'number', 'repeat-last-n': 'number', seed: 'number', threads: 'string',
      simd: 'string', 'fused-dot': 'string', repack: 'string', chat: 'boolean', json: 'boolean', 'max-batch': 'number', metrics: 'string', timing: 'boolean', ...FFN_OPTION_SPEC, ...MEM_OPTION_SPEC, ...KV_OPTION_SPEC,
    },
    aliases: { p: 'prompt', n: 'n-predict', t: 'threads' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one MODEL argument\n${usage}`);
  const prompt = v.prompt as string | undefined;
  if (prompt === undefined) throw new AetherError('invalid_argument', `missing -p TEXT\n${usage}`);
  const json = !!v.json;
  const metricsFmt = v.metrics as string | undefined;
  if (metricsFmt !== undefined && metricsFmt !== 'prometheus' && metricsFmt !== 'json') {
    throw new AetherError('invalid_argument', `--metrics expects 'prometheus' or 'json', got '${metricsFmt}'`);
  }
  const ffn = ffnFromArgs(v);
  const model = await load(positionals[0], {
    threads: threadsArg(v.threads), ...memFromArgs(v), ...kvPolicyFromArgs(v), maxBatch: v['max-batch'] as number | undefined,
    modules: ffn.modules, simd: v.simd as SimdMode | undefined, fusedDot: fusedDotArg(v['fused-dot']), repack: repackArg(v.repack),
  });
  try {
    for (const w of model.warnings) process.stderr.write(`aether: warning: ${w}\n`);
    if (ffn.mode) model.setFfnMode(ffn.mode, undefined, ffn.opts);
    applyHeadsArg(model, v);
    if (v.timing) model.setTiming(true);
    const opts = {
      maxTokens: (v['n-predict'] as number) ?? 128, greedy: !!v.greedy, temperature: v.temp as number | undefined,
      topK: v['top-k'] as number | undefined, topP: v['top-p'] as number | undefined, minP: v['min-p'] as number | undefined,
      repeatPenalty: v['repeat-penalty'] as number | undefined, repeatLastN: v['repeat-last-n'] as number | undefined,
      frequencyPenalty: v['frequency-penalty'] as number | undefined, presencePenalty: v['presence-penalty'] as number | undefined,
      seed: v.seed as number | undefined, ignoreEos: !!v['ignore-eos'],
    };
    const gen = v.chat ? model.chat([{ role: 'user', content: prompt }], opts) : model.generate(prompt, opts);
    let text = '';
    const tokens: number[] = [];
    if (!json) process.stdout.write(prompt);
    for await (const piece of gen) {
      text += piece.text;
      if (piece.token >= 0) tokens.push(piece.token);
      if (!json) process.stdout.write(piece.text);
    }
    const s = model.stats;
    const metrics = metricsFmt ? model.metrics() : undefined;
    if (json) {
      process.stdout.write(JSON.stringify({
        model: positionals[0], prompt, prompt_tokens: s.promptTokens, tokens, text, n_generated: s.generatedTokens,
        finish_reason: s.finishReason, prefill_tps: s.prefillTps, decode_tps: s.decodeTps, prefill_ms: s.prefillMs,
        decode_ms: s.decodeMs, threads: model.threads, simd: model.simd, fused_dot: model.engine.fusedDot, repacked: model.engine.repacked.size, n_ctx: model.nCtx, kv_dtype: model.engine.plan.kvDtype, memory: model.engine.plan,
        ...(metricsFmt === 'json' ? { metrics } : metricsFmt === 'prometheus' ? { metrics_prometheus: formatPrometheus(metrics!) } : {}),
      }) + '\n');
    } else {
      if (metricsFmt === 'prometheus') process.stdout.write('\n' + formatPrometheus(metrics!));
      else if (metricsFmt === 'json') process.stdout.write('\n' + JSON.stringify(metrics, null, 1) + '\n');
      process.stdout.write('\n');
      process.stderr.write(`\n[prompt ${s.promptTokens} tok, ${s.prefillTps.toFixed(1)} tok/s | generated ${s.generatedTokens} tok, ` +
        `${s.decodeTps.toFixed(1)} tok/s | ${model.threads} thread(s) | ${model.simd} SIMD | ${s.finishReason}]\n`);
    }
    return 0;
  } finally {
    model.dispose();
  }
}
