/** aether convert IN -o OUT.rknot [--quant keep|f32|f16|q8_0|q4_0] [--json] [--progress] */
import { parseArgs } from '../args.js';
import { AetherError } from '../../src/errors.js';
import { convertModel, QUANT_MODES, type QuantMode } from '../../src/formats/convert.js';
import { createProgress } from '../progress.js';

export const usage = `usage: aether convert IN -o OUT.rknot [options]
  IN                 a GGUF file (llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3) or a Hugging Face folder (config.json + safetensors)
  -o, --output OUT   the .rknot file to write (written to OUT.tmp, then renamed; never the input)
  -q, --quant MODE   keep (default: keep dtypes) | f32 | f16 | bf16 | q8_0 | q5_0 | q4_0
                     (q8_0 / q4_0 quantise 2-D weights with ggml's reference quantisers; norms and biases stay f32)
  --no-hash          do not record the input files' sha256 in the metadata
  --progress         show the progress bar even when stderr is not a terminal
  --json             print a JSON summary on stdout`;

export async function run(argv: string[]): Promise<number> {
  const { positionals, values: v } = parseArgs(argv, {
    options: { output: 'string', quant: 'string', json: 'boolean', progress: 'boolean', 'no-hash': 'boolean' },
    aliases: { o: 'output', q: 'quant' },
  });
  if (positionals.length !== 1) throw new AetherError('invalid_argument', `expected one input (GGUF file or HF folder)\n${usage}`);
  const out = v.output as string | undefined;
  if (!out) throw new AetherError('invalid_argument', `missing -o OUT.rknot\n${usage}`);
  const quant = (v.quant as string | undefined) ?? 'keep';
  if (!(QUANT_MODES as readonly string[]).includes(quant)) throw new AetherError('invalid_argument', `--quant ${quant}: expected one of ${QUANT_MODES.join(', ')}`);
  let phase = '';
  let bar = createProgress({ title: 'hash', force: !!v.progress });
  const ac = new AbortController();
  const onSig = () => ac.abort(new Error('interrupted'));
  process.once('SIGINT', onSig);
  let summary;
  try {
    summary = await convertModel(positionals[0], out, {
      quant: quant as QuantMode,
      signal: ac.signal,
      hashInput: !v['no-hash'],
      onProgress: (e) => {
        if (e.phase !== phase) {
          if (phase) bar.done();
          phase = e.phase;
          bar = createProgress({ title: e.phase === 'hash' ? 'hash input' : 'convert', force: !!v.progress });
        }
        bar.update(e.done, e.total, e.tensor);
      },
    });
  } finally {
    process.removeListener('SIGINT', onSig);
    bar.done();
  }
  if (v.json) {
    process.stdout.write(JSON.stringify(summary) + '\n');
  } else {
    const c = summary.config;
    const counts = new Map<string, number>();
    for (const t of summary.tensors) counts.set(t.dtype, (counts.get(t.dtype) ?? 0) + 1);
    process.stdout.write(
      `${summary.output}: ${summary.arch} dim ${c.dim}, ${c.n_layers} layers, ${c.n_heads}/${c.n_kv_heads} heads, vocab ${c.vocab_size}, rope ${c.rope_type}\n` +
      `  ${summary.n_tensors} tensors (${[...counts].map(([k, n]) => `${n} ${k}`).join(', ')}), ${summary.n_params.toLocaleString('en-US')} params\n` +
      `  ${(summary.input_bytes / 1e6).toFixed(1)} MB ${summary.input_format} -> ${(summary.output_bytes / 1e6).toFixed(1)} MB rknot (quant ${summary.quant}) in ${summary.seconds.toFixed(2)} s\n`);
    for (const n of summary.notes) process.stdout.write(`  note: ${n}\n`);
    const fallbacks = summary.tensors.filter((t) => t.note && /stored f16/.test(t.note));
    if (fallbacks.length) process.stdout.write(`  note: ${fallbacks.length} tensor(s) stored f16 (row length not a multiple of 32)\n`);
  }
  return 0;
}
