// The OpenAI-shaped API of the library (no server): chat completion, a streamed one, a completion with
// log-probabilities and a logit bias, and embeddings.
//   npm run build && node examples/node/openai-api.mjs
import { fileURLToPath } from 'node:url';
import { Aether } from 'aether-wasm';

const MODEL = fileURLToPath(new URL('../../models/tiny-llama-a-q8_0.rknot', import.meta.url));
const model = await Aether.load(MODEL);
try {
  const messages = [{ role: 'user', content: 'What is Debian?' }];
  const r = await model.createChatCompletion({ messages, max_tokens: 24, seed: 1 });
  console.log(`chat: ${JSON.stringify(r.choices[0].message.content)} (${r.choices[0].finish_reason}, ${r.usage.completion_tokens} tokens)`);

  process.stdout.write('stream:');
  for await (const chunk of await model.createChatCompletion({ messages, max_tokens: 24, seed: 1, stream: true })) {
    process.stdout.write(chunk.choices[0]?.delta.content ?? '');
  }
  console.log();

  // logprobs: 2 alternatives per token; logit_bias: token 500 made more likely (+100 would force it, -100 bans it)
  const c = await model.createCompletion({ prompt: 'The Debian project is', max_tokens: 4, temperature: 0, logprobs: 2, logit_bias: { 500: 2 } });
  const lp = c.choices[0].logprobs;
  lp.tokens.forEach((t, i) => console.log(`token ${JSON.stringify(t)} logprob ${lp.token_logprobs[i].toFixed(3)} top ${JSON.stringify(lp.top_logprobs[i])}`));

  const [a, b] = await model.embed(['How do I install a package?', 'apt-get install hello']);
  const cos = a.reduce((s, v, i) => s + v * b[i], 0); // unit vectors: the dot product is the cosine
  console.log(`embeddings: ${a.length} dimensions, cosine ${cos.toFixed(3)}`);
} finally {
  model.dispose();
}
