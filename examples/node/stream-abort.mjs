// Stop a generation with an AbortController after N pieces, then keep using the model.
//   npm run build && node examples/node/stream-abort.mjs [N]
// An abort throws an error whose name is 'AbortError' (an AetherError with code 'aborted'); the model
// stays usable, and its KV cache keeps the prompt for the next call.
import { fileURLToPath } from 'node:url';
import { Aether } from 'aether-wasm';

const MODEL = fileURLToPath(new URL('../../models/tiny-llama-a-q8_0.rknot', import.meta.url));
const N = Number(process.argv[2] ?? 10);
const prompt = 'The Debian project is';

const model = await Aether.load(MODEL);
try {
  const ac = new AbortController();
  let pieces = 0;
  process.stdout.write(prompt);
  try {
    for await (const piece of model.generate(prompt, { maxTokens: 500, seed: 1, signal: ac.signal })) {
      process.stdout.write(piece.text);
      if (++pieces === N) ac.abort(); // e.g. a Stop button, a timeout: AbortSignal.timeout(ms) works too
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
    console.log(`\n[aborted after ${pieces} pieces: ${e.name}, code ${e.code}; finish reason ${model.stats.finishReason}]`);
  }

  // The same model, right away:
  const { text, stats } = await model.complete(prompt, { maxTokens: 16, greedy: true });
  console.log(`${prompt}${text}`);
  console.log(`[reused: ${stats.generatedTokens} greedy tokens, ${stats.prefillTokens} of ${stats.promptTokens} prompt tokens computed]`);
} finally {
  model.dispose();
}
