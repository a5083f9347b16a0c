// OpenAI-shaped library API (js/src/openai.ts): model.createChatCompletion / createCompletion.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const messages = [{ role: 'system', content: 'You answer questions about Debian.' }, { role: 'user', content: 'What is apt?' }];

async function collect(it) { const out = []; for await (const c of it) out.push(c); return out; }

test('chat completion: OpenAI shape, seeds reproducible, stream chunks add up to the same message', async () => {
  const m = await load(MODEL);
  try {
    const req = { messages, max_tokens: 20, seed: 42, temperature: 0.8 };
    const a = await m.createChatCompletion(req);
    assert.match(a.id, /^chatcmpl-/);
    assert.equal(a.object, 'chat.completion');
    assert.equal(a.model, 'tiny-llama-a-q8_0');
    assert.ok(Number.isInteger(a.created) && Math.abs(a.created - Date.now() / 1000) < 60);
    assert.equal(a.choices.length, 1);
    const c = a.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.equal(c.logprobs, null);
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
    assert.ok(a.usage.completion_tokens <= 20 && a.usage.completion_tokens > 0);
    assert.equal(a.usage.prompt_tokens, m.stats.promptTokens);
    const b = await m.createChatCompletion(req);
    assert.equal(b.choices[0].message.content, c.message.content, 'same seed, same reply');
    assert.notEqual(b.id, a.id);
    const others = new Set();
    for (const seed of [1, 2, 3]) others.add((await m.createChatCompletion({ ...req, seed })).choices[0].message.content);
    assert.ok(others.size > 1 || !others.has(c.message.content), 'other seeds give other replies');

    const chunks = await collect(await m.createChatCompletion({ ...req, stream: true, stream_options: { include_usage: true } }));
    assert.ok(chunks.every((k) => k.object === 'chat.completion.chunk' && k.id === chunks[0].id));
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    const text = chunks.flatMap((k) => k.choices.map((ch) => ch.delta.content ?? '')).join('');
    assert.equal(text, c.message.content);
    const fin = chunks.at(-2);
    assert.equal(fin.choices[0].finish_reason, c.finish_reason);
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.deepEqual(chunks.at(-1).usage, a.usage);
    assert.ok(chunks.slice(0, -2).every((k) => k.choices[0].finish_reason === null));
  } finally { m.dispose(); }
});

test('completion: shape, greedy (temperature 0) equals generate(), stop strings, logprobs', async () => {
  const m = await load(MODEL);
  try {
    const greedy = await m.complete('The Debian project is', { maxTokens: 16, greedy: true });
    const r = await m.createCompletion({ prompt: 'The Debian project is', max_tokens: 16, temperature: 0 });
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].text, greedy.text);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 16);
    // default max_tokens is OpenAI's 16
    assert.equal((await m.createCompletion({ prompt: 'The Debian project is', temperature: 0 })).usage.completion_tokens, 16);
    // presence / frequency penalties reach the sampler: the same greedy text as generate() with them
    const pen = await m.complete('The Debian project is', { maxTokens: 16, greedy: true, presencePenalty: 1.5, frequencyPenalty: 2 });
    const rp = await m.createCompletion({ prompt: 'The Debian project is', max_tokens: 16, temperature: 0, presence_penalty: 1.5, frequency_penalty: 2 });
    assert.equal(rp.choices[0].text, pen.text);
    assert.notEqual(pen.text, greedy.text, 'the penalties changed the greedy text');
    // a stop string cuts the text and finishes with 'stop'
    const word = greedy.text.trim().split(/\s+/)[2];
    const s = await m.createCompletion({ prompt: 'The Debian project is', max_tokens: 16, temperature: 0, stop: word });
    assert.equal(s.choices[0].text, greedy.text.slice(0, greedy.text.indexOf(word)));
    assert.equal(s.choices[0].finish_reason, 'stop');
    // logprobs: one entry per token, token strings concatenate to the text, top alternatives include greedy's pick
    const l = await m.createCompletion({ prompt: 'The Debian project is', max_tokens: 8, temperature: 0, logprobs: 3 });
    const lp = l.choices[0].logprobs;
    assert.equal(lp.tokens.length, 8);
    assert.equal(lp.tokens.join(''), l.choices[0].text);
    assert.deepEqual(lp.text_offset, lp.tokens.map((_, i) => lp.tokens.slice(0, i).join('').length));
    lp.top_logprobs.forEach((top, i) => {
      const best = Math.max(...Object.values(top));
      assert.ok(Math.abs(best - lp.token_logprobs[i]) < 1e-6, 'greedy picks the most probable token');
      assert.ok(Object.keys(top).length <= 3);
    });
    // streamed completion text equals the non-streamed one
    const chunks = await collect(await m.createCompletion({ prompt: 'The Debian project is', max_tokens: 16, temperature: 0, stream: true }));
    assert.equal(chunks.map((k) => k.choices[0]?.text ?? '').join(''), greedy.text);
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  } finally { m.dispose(); }
});

test('chat logprobs and logit_bias through the OpenAI API', async () => {
  const m = await load(MODEL);
  try {
    const r = await m.createChatCompletion({ messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 4 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const t of content) {
      assert.equal(t.top_logprobs.length, 4);
      assert.equal(t.top_logprobs[0].token, t.token);
      assert.equal(t.top_logprobs[0].logprob, t.logprob);
      assert.deepEqual(t.bytes, [...new TextEncoder().encode(t.token)]);
    }
    // ban the first greedy token: the reply changes and that token's alternatives never include it
    const first = m.tokenize(content[0].token, { addBos: false });
    const id = first.length === 1 ? first[0] : first.at(-1);
    const banned = await m.createChatCompletion({ messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 4, logit_bias: { [id]: -100 } });
    assert.notEqual(banned.choices[0].logprobs.content[0].token, content[0].token);
    // +100 forces a token
    const forced = await m.createCompletion({ prompt: 'Hello', max_tokens: 3, seed: 5, logit_bias: { 500: 100 }, logprobs: 0 });
    const piece500 = new TextDecoder().decode(m.tokenizer.tokenBytes(500));
    assert.deepEqual(forced.choices[0].logprobs.tokens, [piece500, piece500, piece500]);
    assert.equal(forced.choices[0].logprobs.top_logprobs, null);
  } finally { m.dispose(); }
});

test('bad requests: AetherError invalid_argument naming the field; the model stays usable', async () => {
  const m = await load(MODEL);
  try {
    const cases = [
      [{}, 'messages'], [{ messages: 'hi' }, 'messages'], [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
      [{ messages, max_tokens: 'ten' }, 'max_tokens'], [{ messages, max_tokens: -1 }, 'max_tokens'], [{ messages, temperature: 3 }, 'temperature'],
      [{ messages, top_p: '1' }, 'top_p'], [{ messages, stop: [1] }, 'stop'], [{ messages, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
      [{ messages, seed: 1.5 }, 'seed'], [{ messages, logit_bias: { abc: 1 } }, 'logit_bias'], [{ messages, logit_bias: { 5: 200 } }, 'logit_bias'],
      [{ messages, n: 2 }, 'n'], [{ messages, top_logprobs: 3 }, 'top_logprobs'], [{ messages, logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
      [{ messages, stream: 'yes' }, 'stream'], [{ messages, tools: [] }, 'tools'], [{ messages, presence_penalty: 2.5 }, 'presence_penalty'], [{ messages, frequency_penalty: '1' }, 'frequency_penalty'],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, 'messages[0].content[0]'],
    ];
    for (const [req, param] of cases) {
      await assert.rejects(m.createChatCompletion(req), (e) => e.code === 'invalid_argument' && e.details?.param === param, `${JSON.stringify(req)} -> ${param}`);
    }
    for (const [req, param] of [[{ prompt: 5 }, 'prompt'], [{ prompt: 'x', logprobs: 6 }, 'logprobs'], [{ prompt: 'x', echo: true }, 'echo']]) {
      await assert.rejects(m.createCompletion(req), (e) => e.code === 'invalid_argument' && e.details?.param === param, JSON.stringify(req));
    }
    // logit_bias with an id outside the vocabulary is refused by the engine
    await assert.rejects(m.createCompletion({ prompt: 'x', logit_bias: { 999999: 1 } }), (e) => e.code === 'invalid_argument');
    const ok = await m.createCompletion({ prompt: 'The', max_tokens: 2, temperature: 0 });
    assert.equal(ok.usage.completion_tokens, 2);
  } finally { m.dispose(); }
});

test('a stream left early ends the generation; an aborted signal rejects', async () => {
  const m = await load(MODEL);
  try {
    let n = 0;
    for await (const _ of await m.createChatCompletion({ messages, max_tokens: 100, seed: 1, stream: true })) if (++n === 4) break;
    assert.equal(m.stats.finishReason, 'aborted');
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(m.createCompletion({ prompt: 'x', max_tokens: 5 }, { signal: ac.signal }), (e) => e.name === 'AbortError');
    const ok = await m.createCompletion({ prompt: 'The', max_tokens: 2, temperature: 0 });
    assert.equal(ok.usage.completion_tokens, 2);
  } finally { m.dispose(); }
});
