// Streaming generation with the model the repo ships.
//   npm run build && node examples/node/generate.mjs ["prompt"] [max tokens]
// 'aether-wasm' resolves to this repository's own package (Node's package self-reference through
// package.json "exports"), exactly as it would in a project that installed it from npm.
import { fileURLToPath } from 'node:url';
import { Aether } from 'aether-wasm';

const MODEL = fileURLToPath(new URL('../../models/tiny-llama-a-q8_0.rknot', import.meta.url));
const prompt = process.argv[2] ?? 'The Debian project is';
const maxTokens = Number(process.argv[3] ?? 48);

const model = await Aether.load(MODEL, {
  threads: 2, // compute threads (worker_threads over one shared wasm memory)
  onProgress: (e) => process.stderr.write(`\rloading ${((100 * e.loaded) / (e.total || 1)).toFixed(0)}%`),
});
process.stderr.write('\n');
try {
  process.stdout.write(prompt);
  for await (const piece of model.generate(prompt, { maxTokens, temperature: 0.7, topK: 40, seed: 42 })) {
    process.stdout.write(piece.text); // piece.token is the token id
  }
  const s = model.stats;
  process.stdout.write('\n');
  console.error(`[${s.promptTokens} prompt tokens at ${s.prefillTps.toFixed(0)} tok/s, ${s.generatedTokens} generated at ` +
    `${s.decodeTps.toFixed(0)} tok/s, ${model.threads} threads, ${s.finishReason}]`);
} finally {
  model.dispose();
}
