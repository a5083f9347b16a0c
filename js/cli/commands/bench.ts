/** aether bench MODEL [--prompt-tokens P] [--gen-tokens G] [--threads T] [--reps R] [--json] */
import { parseArgs, fusedDotArg, repackArg, threadsArg } from '../args.js';
import { load } from '../../src/aether.js';
import { AetherError } from '../../src/errors.js';
import type { SimdMode } from '../../src/runtime/env.js';
import { FFN_OPTION_SPEC, FFN_USAGE, ffnFromArgs } from '../ffn-options.js';
import { MEM_OPTION_SPEC, MEM_USAGE, memFromArgs } from '../memory-options.js';
import { KV_OPTION_SPEC, KV_USAGE, applyHeadsArg, kvPolicyFromArgs } from '../kv-options.js';

export const usage = `usage: aether bench MODEL [options]
  --prompt-tokens P   prompt length for the prefill measurement (default 64)
  --gen-tokens G      tokens decoded for the decode measurement (default 64)
  -t, --threads T     compute threads (default auto: the physical cores, at most 4)
  --reps R            repetitions; the median is reported (default 3)
${MEM_USAGE}
  --simd MODE         wasm build: auto (default: relaxed SIMD where available and faster), relaxed, plain
  --fused-dot MODE    relaxed build's kernels on the i32 relaxed dot (q4_0 / q8_0 prefill, q8_0 and q5_1 decode): auto (default: timed at load), on, off
  --repack MODE       weights in their kernels' layouts at load (q4_0, q5_0, q5_1; relaxed build: q8_0, q4_K, q5_K, q6_K too): auto (default: on), on, off
${KV_USAGE}
${FFN_USAGE}
  --spin N            spin iterations before a waiting thread sleeps (default 20000)
  --single-below B    decode on one thread below B bytes of weights per token (default: EngineOptions.singleThreadBelow;
                      0: always on every thread)
  --json              print one JSON object`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { 'prompt-tokens': 'number', 'gen-tokens': 'number', threads: 'string', reps: 'number', json: 'boolean', 'max-batch': 'number', spin: 'number', 'single-below': 'number', simd: 'string', 'fused-dot': 'string', repack: 'string', ...FFN_OPTION_SPEC, ...MEM_OPTION_SPEC, ...KV_OPTION_SPEC },
    aliases: { t: 'threads', p: 'prompt-tokens', n: 'gen-tokens' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one MODEL argument\n${usage}`);
  const P = (v['prompt-tokens'] as number) ?? 64, G = (v['gen-tokens'] as number) ?? 64, reps = Math.max(1, (v.reps as number) ?? 3);
  const ffn = ffnFromArgs(v);
  const model = await load(positionals[0], { threads: threadsArg(v.threads), ...memFromArgs(v), ...kvPolicyFromArgs(v), maxBatch: v['max-batch'] as number | undefined, spin: v.spin as number | undefined, singleThreadBelow: v['single-below'] as number | undefined, modules: ffn.modules, simd: v.simd as SimdMode | undefined, fusedDot: fusedDotArg(v['fused-dot']), repack: repackArg(v.repack) });
  try {
    if (ffn.mode) model.setFfnMode(ffn.mode, undefined, ffn.opts);
    applyHeadsArg(model, v);
    if (P + G > model.nCtx) throw new AetherError('invalid_argument', `prompt-tokens + gen-tokens = ${P + G} exceeds the context ${model.nCtx}`);
    // A fixed pseudo-random prompt of P tokens (ids >= 3 to avoid control tokens), BOS first.
    const vocab = model.config.vocab_size;
    let s = 12345;
    const prompt = [model.tokenizer.bosId ?? 1];
    while (prompt.length < P) { s = (s * 1103515245 + 12345) >>> 0; prompt.push(3 + (s % (vocab - 3))); }
    const eng = model.engine;
    const pre: number[] = [], dec: number[] = [];
    for (let r = 0; r < reps + 1; r++) {
      const t0 = performance.now();
      eng.forward(prompt, 0);
      const t1 = performance.now();
      let tok = 3;
      for (let i = 0; i < G; i++) { eng.forward([tok], P + i); tok = 3 + ((tok * 31 + 7) % (vocab - 3)); }
      const t2 = performance.now();
      if (r === 0) continue; // warm-up
      pre.push((P / (t1 - t0)) * 1000);
      dec.push((G / (t2 - t1)) * 1000);
    }
    model.reset();
    const out = {
      model: positionals[0], arch: model.config.arch, threads: model.threads, simd: model.simd, fused_dot: eng.fusedDot, fused_dot_probe: eng.fusedDotProbe, repacked: eng.repacked.size, n_ctx: model.nCtx, kv_dtype: eng.plan.kvDtype, memory: eng.plan, prompt_tokens: P, gen_tokens: G, reps,
      ffn: (v.ffn as string) ?? 'dense', ffn_options: ffn.opts, ffn_aux_bytes: model.ffn.auxBytes,
      ffn_sparsity_last_token: 1 - [...Array(model.config.n_layers).keys()].reduce((a, l) => a + eng.ffnActive(l), 0) / (model.config.n_layers * model.config.hidden_dim),
      prefill_tps: median(pre), decode_tps: median(dec), prefill_tps_all: pre, decode_tps_all: dec,
      kv_policy: model.kvPolicy(0), kv_cache_by_dtype: eng.kvCacheBytes(eng.nCtx).map(({ dtype, bytes }) => ({ dtype, bytes })),
      local_kv_heads: model.approximations().reduce((a, x) => a + x.localKvHeads.length, 0),
    };
    if (v.json) process.stdout.write(JSON.stringify(out) + '\n');
    else process.stdout.write(`${out.model}: threads ${out.threads}, ${out.simd} SIMD${out.fused_dot ? ' (fused dot)' : ''}, prefill ${P} tok: ${out.prefill_tps.toFixed(1)} tok/s, decode ${G} tok: ${out.decode_tps.toFixed(1)} tok/s (median of ${reps})\n`);
    return 0;
  } finally {
    model.dispose();
  }
}
