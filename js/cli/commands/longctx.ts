/** aether longctx MODEL --text FILE [--kv-policy P] [--heads local] [--passkey] ... : a KV-cache approximation vs the full cache */
import { parseArgs, threadsArg } from '../args.js';
import { load, type LoadOptions } from '../../src/aether.js';
import { evaluateLong, passkeyTest } from '../../src/eval-long.js';
import { AetherError } from '../../src/errors.js';
import { readTextArg } from '../text-options.js';
import { parseLocalHeadsArg } from '../kv-options.js';

export const usage = `usage: aether longctx MODEL --text FILE [options]
  Long-context quality of a KV-cache approximation against the same model with the full-precision (f32) cache:
  perplexity, mean KL and top-1 agreement on windows of the whole context (all positions, and positions >=
  --from), and a passkey retrieval test.
  --text FILE         evaluation text (documents separated by lines holding only 0x1E); windows tile the
                      concatenated documents
  --docs A:B          documents A..B-1 only (held out from any calibration)
  --kv-policy P       the policy under test (e.g. sinks=4:f16,window=64:f16,rest=q8_0; see docs/rknot.md);
                      default: the file's kv_policy
  --kv-dtype D        plain cache dtype of the model under test when there is no policy (f32 f16 q8_0 q4_0)
  --heads MODE        local: KV heads classed local by profile-heads attend to sinks + window only
  --local-heads H     KV heads stored locally (sinks + window kept, memory saved): file | G,G | L:G,G;L:G
  --window W          tokens per window (default: the context length)
  --from P            second set of figures over positions >= P (default window / 2)
  --chunk C           tokens per forward (default 16): the policy's window slides as in a prefill of C-token batches
  --max-tokens N      stop after N predicted tokens
  --passkey           also run the passkey test (5 depths x --seeds prompts of the context's length)
  --seeds S           passkey prompts per depth (default 4)
  --retrieval K       passkey (default: 'The pass key is N' planted, asked at the end) or copy (a planted run of
                      random words, its first words repeated at the end: the model must continue it)
  -t, --threads T     compute threads (default auto: the physical cores, at most 4)
  --json              print one JSON object`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: {
      text: 'string', docs: 'string', 'kv-policy': 'string', 'kv-dtype': 'string', heads: 'string', 'local-heads': 'string', window: 'number', from: 'number',
      chunk: 'number', 'max-tokens': 'number', passkey: 'boolean', seeds: 'number', retrieval: 'string', threads: 'string', json: 'boolean',
    },
    aliases: { t: 'threads' },
  });
  if (positionals.length !== 1 || !v.text) throw new AetherError('invalid_argument', `expected MODEL and --text FILE\n${usage}`);
  const text = readTextArg(v, 'text').text;
  const chunk = (v.chunk as number) ?? 16;
  if (!Number.isInteger(chunk) || chunk < 1) throw new AetherError('invalid_argument', '--chunk must be a positive integer');
  const heads = v.heads as string | undefined;
  if (heads !== undefined && heads !== 'local' && heads !== 'full') throw new AetherError('invalid_argument', `--heads expects 'local' or 'full', got '${heads}'`);
  const { resolveNodeSource } = await import('../../src/node/convert-on-load.js');
  const src = await resolveNodeSource(positionals[0]);
  const base: LoadOptions = { threads: threadsArg(v.threads), logitsAll: true, maxBatch: chunk };
  const opt = (x: Record<string, unknown>) => ({ ...base, ...x }) as LoadOptions;
  const reference = await load(src, opt({ kvPolicy: 'full', kvDtype: 'f32' }));
  const localHeads = v['local-heads'] !== undefined ? parseLocalHeadsArg(String(v['local-heads'])) : undefined;
  const model = await load(src, opt({ kvPolicy: v['kv-policy'], kvDtype: v['kv-dtype'], localHeads }));
  try {
    if (heads === 'local') model.setHeadMode('local');
    const progress = !v.json && process.stderr.isTTY ? (d: number, t: number) => process.stderr.write(`\r${d}/${t} windows`) : undefined;
    const r = await evaluateLong(model, reference, text, {
      window: v.window as number | undefined, chunk, fromPos: v.from as number | undefined, maxTokens: v['max-tokens'] as number | undefined, onProgress: progress,
    });
    if (progress) process.stderr.write('\n');
    const kind = (v.retrieval as string | undefined) ?? 'passkey';
    if (kind !== 'passkey' && kind !== 'copy') throw new AetherError('invalid_argument', `--retrieval expects passkey or copy, got '${kind}'`);
    const pk = v.passkey ? { kind, ...passkeyTest(model, reference, { seeds: (v.seeds as number) ?? 4, filler: text, chunk, kind }) } : undefined;
    const mx = model.metrics(), rx = reference.metrics();
    const kvBytes = (x: typeof mx) => x.kvCache.byDtype.reduce((a, d) => a + d.bytes, 0);
    const out = {
      model: positionals[0], text: v.text, docs: v.docs ?? null, kv_policy: model.kvPolicy(0), heads: heads ?? 'full',
      local_heads: v['local-heads'] ?? null, stored_local_kv_heads: model.approximations().reduce((a, x) => a + x.storedLocalKvHeads.length, 0),
      local_heads_saved_bytes: mx.kvCache.localHeadsSavedBytes,
      kv_cache_bytes: kvBytes(mx), kv_cache_by_dtype: mx.kvCache.byDtype, reference_kv_cache_bytes: kvBytes(rx), f16_kv_cache_bytes: mx.kvCache.f16Bytes,
      kv_saved_vs_f16_pct: (1 - kvBytes(mx) / mx.kvCache.f16Bytes) * 100, threads: model.threads, ...r, passkey: pk ?? null,
    };
    if (v.json) process.stdout.write(JSON.stringify(out) + '\n');
    else {
      const f = (s: typeof r.all) => `ppl ${s.perplexity.toFixed(3)} vs ${s.ref_perplexity.toFixed(3)} (${s.ppl_increase_pct >= 0 ? '+' : ''}${s.ppl_increase_pct.toFixed(3)}%), KL ${s.kl.toExponential(3)}, top-1 ${(s.top1 * 100).toFixed(2)}% over ${s.tokens} tokens`;
      process.stdout.write(`KV policy ${out.kv_policy ?? 'file default'}, heads ${out.heads}, ${out.stored_local_kv_heads} KV heads stored locally (${out.local_heads_saved_bytes} bytes saved): KV cache ${out.kv_cache_bytes} bytes (f16 cache ${out.f16_kv_cache_bytes}: ${out.kv_saved_vs_f16_pct.toFixed(1)}% saved)\n`);
      process.stdout.write(`${r.windows} windows of ${r.window}, chunks of ${r.chunk}\nall positions:      ${f(r.all)}\npositions >= ${r.fromPos}: ${f(r.late)}\n`);
      if (pk) process.stdout.write(`passkey (${pk.trials} prompts of ${pk.length} tokens): exact ${(pk.exact * 100).toFixed(1)}% (full cache ${(pk.ref_exact * 100).toFixed(1)}%), key NLL ${pk.key_nll.toFixed(3)} (full ${pk.ref_key_nll.toFixed(3)}, no key in the prompt ${pk.control_nll.toFixed(3)})\n`);
    }
    return 0;
  } finally {
    model.dispose();
    reference.dispose();
  }
}
