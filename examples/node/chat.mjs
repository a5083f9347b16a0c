// A two-turn chat.
//   npm run build && node examples/node/chat.mjs
// model.chat() renders the messages with the model's Jinja chat template (tokenizer.chat_template).
// The tiny model shipped here is a base model with NO chat template, so the fallback applies: a plain
// transcript ("System: ...\n\nUser: ...\n\nAssistant:", see js/src/tokenizer/chat.ts). Its answers are
// locally fluent but not sensible: it is a 7.7M-parameter test model. chat() ends the reply at the end of
// the turn: an end-of-generation token, or the format's turn stop strings (model.chatTemplate.stop; for the
// fallback transcript "\nUser:" and "\nSystem:", as the model starts the next turn itself).
import { fileURLToPath } from 'node:url';
import { Aether } from 'aether-wasm';

const MODEL = fileURLToPath(new URL('../../models/tiny-llama-a-q8_0.rknot', import.meta.url));
const maxTokens = Number(process.argv[2] ?? 40);

const model = await Aether.load(MODEL, { threads: 1 });
try {
  const messages = [
    { role: 'system', content: 'You answer questions about Debian.' },
    { role: 'user', content: 'How do I install a package?' },
  ];
  for (const followUp of ['And how do I remove it again?', null]) {
    console.log(`User: ${messages.at(-1).content}`);
    process.stdout.write('Assistant:');
    let reply = '';
    for await (const piece of model.chat(messages, { maxTokens, temperature: 0.7, seed: 7 })) {
      reply += piece.text;
      process.stdout.write(piece.text);
    }
    const s = model.stats;
    // the second turn reuses the KV cache of the first: only the new tokens are computed
    console.log(`\n[${s.generatedTokens} tokens, ${s.decodeTps.toFixed(0)} tok/s; prompt ${s.promptTokens} tokens, ${s.prefillTokens} computed]\n`);
    if (!followUp) break;
    messages.push({ role: 'assistant', content: reply.trim() }, { role: 'user', content: followUp });
  }
} finally {
  model.dispose();
}
