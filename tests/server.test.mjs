// `aether serve` (js/src/node/server.ts) as a child process on 127.0.0.1, driven by the official `openai`
// npm client and by raw HTTP: chat / completions (streamed and not), embeddings, models, health, metrics;
// bad input answered with OpenAI-style 400s and the server staying up; a disconnecting client aborting its
// generation; FIFO order; a bounded load test (every request answered with the right content, RSS bounded).
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const MODEL = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
let child, base, client, local;
let stderr = '';

before(async () => {
  child = spawn(process.execPath, ['dist/cli/aether.js', 'serve', MODEL, '--port', '0', '--quiet'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr.on('data', (d) => { stderr += d; });
  base = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; const m = /on (http:\/\/[\d.:]+)/.exec(out); if (m) resolve(m[1]); });
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
    setTimeout(() => reject(new Error(`server did not start: ${out} ${stderr}`)), 30_000);
  });
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  local = await load(MODEL);
});

after(async () => {
  local?.dispose();
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
});

/** Raw HTTP request; resolves { status, headers, body (text) }. */
function request(method, p, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${p}`, { method, headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
    req.end();
  });
}

async function metrics() {
  const r = await request('GET', '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  return r.body;
}
function metric(text, name, labels = '') {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name}{`) === false && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}
const messages = [{ role: 'user', content: 'What is Debian?' }];

test('openai client: chat completion, streamed and not, equal to the library with the same seed', async () => {
  const want = await local.createChatCompletion({ messages, max_tokens: 16, seed: 7, temperature: 0.9 });
  const r = await client.chat.completions.create({ model: 'tiny-llama-a-q8_0', messages, max_tokens: 16, seed: 7, temperature: 0.9 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'tiny-llama-a-q8_0');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, want.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, want.choices[0].finish_reason);
  assert.deepEqual(r.usage, want.usage);

  const stream = await client.chat.completions.create({ model: 'x', messages, max_tokens: 16, seed: 7, temperature: 0.9, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const ch of chunk.choices) { text += ch.delta.content ?? ''; finish = ch.finish_reason ?? finish; }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(n >= 3);
  assert.equal(text, want.choices[0].message.content);
  assert.equal(finish, want.choices[0].finish_reason);
  assert.deepEqual(usage, want.usage);

  // logprobs and logit_bias through the client
  const lp = await client.chat.completions.create({ model: 'x', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3, logit_bias: { 500: 100 } });
  assert.equal(lp.choices[0].logprobs.content.length, 4);
  const piece500 = new TextDecoder().decode(local.tokenizer.tokenBytes(500));
  assert.ok(lp.choices[0].logprobs.content.every((t) => t.token === piece500 && t.top_logprobs.length === 3));
});

test('openai client: completions (streamed and not), embeddings, models', async () => {
  const want = await local.complete('The Debian project is', { maxTokens: 12, greedy: true });
  const r = await client.completions.create({ model: 'x', prompt: 'The Debian project is', max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, want.text);
  assert.equal(r.usage.completion_tokens, 12);
  let text = '';
  for await (const c of await client.completions.create({ model: 'x', prompt: 'The Debian project is', max_tokens: 12, temperature: 0, stream: true })) text += c.choices[0]?.text ?? '';
  assert.equal(text, want.text);

  const e = await client.embeddings.create({ model: 'x', input: ['apt-get install', 'dpkg -i'], encoding_format: 'float' });
  assert.equal(e.data.length, 2);
  const ref = await local.embed(['apt-get install', 'dpkg -i']);
  assert.deepEqual(e.data[1].embedding, Array.from(ref[1]));
  // the client's default: base64, decoded by the client
  const e64 = await client.embeddings.create({ model: 'x', input: 'apt-get install' });
  assert.deepEqual(e64.data[0].embedding, Array.from(ref[0]));

  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['tiny-llama-a-q8_0']);
  assert.equal((await client.models.retrieve('tiny-llama-a-q8_0')).id, 'tiny-llama-a-q8_0');
  await assert.rejects(client.models.retrieve('nope'), (err) => err.status === 404);
  const h = await request('GET', '/health');
  assert.equal(h.status, 200);
  assert.equal(JSON.parse(h.body).status, 'ok');
});

test('bad input: OpenAI-style 400s (malformed JSON, wrong types, oversized body), 404, 405; the server stays up', async () => {
  const isError = (r, status, param) => {
    assert.equal(r.status, status, r.body);
    const b = JSON.parse(r.body);
    assert.deepEqual(Object.keys(b.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(typeof b.error.message, 'string');
    if (param !== undefined) assert.equal(b.error.param, param);
    return b.error;
  };
  assert.equal(isError(await request('POST', '/v1/chat/completions', '{"messages": ['), 400, null).code, 'invalid_json');
  isError(await request('POST', '/v1/chat/completions', ''), 400, null);
  isError(await request('POST', '/v1/chat/completions', '[1,2]'), 400);
  isError(await request('POST', '/v1/chat/completions', { messages, max_tokens: 'many' }), 400, 'max_tokens');
  isError(await request('POST', '/v1/chat/completions', { messages, temperature: '0.5' }), 400, 'temperature');
  isError(await request('POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }), 400, 'messages[0].content');
  isError(await request('POST', '/v1/chat/completions', { messages, stream: 1 }), 400, 'stream');
  isError(await request('POST', '/v1/completions', { prompt: { a: 1 } }), 400, 'prompt');
  isError(await request('POST', '/v1/completions', { prompt: 'x', logit_bias: { 999999: 1 } }), 400);
  isError(await request('POST', '/v1/completions', { prompt: 'x', stream: true, logit_bias: { 999999: 1 } }), 400);
  isError(await request('POST', '/v1/completions', { prompt: 'word '.repeat(400), max_tokens: 1 }), 400);
  isError(await request('POST', '/v1/embeddings', { input: [1, 2] }), 400, 'input');
  assert.equal(isError(await request('POST', '/v1/chat/completions', Buffer.alloc(2 << 20, 0x20)), 400).code, 'request_too_large');
  // a body over the limit without a Content-Length (chunked)
  const chunked = await new Promise((resolve, reject) => {
    const req = http.request(`${base}/v1/completions`, { method: 'POST', headers: { 'Transfer-Encoding': 'chunked' } }, (res) => {
      let d = ''; res.on('data', (c) => { d += c; }); res.on('end', () => resolve({ status: res.statusCode, body: d }));
    });
    req.on('error', reject);
    for (let i = 0; i < 20; i++) req.write(Buffer.alloc(100_000, 0x20));
    req.end();
  });
  assert.equal(isError(chunked, 400).code, 'request_too_large');
  isError(await request('GET', '/v1/nothing'), 404);
  isError(await request('GET', '/v1/chat/completions'), 405);
  isError(await request('DELETE', '/v1/models'), 405);
  // the openai client surfaces them as BadRequestError with the param
  await assert.rejects(client.chat.completions.create({ model: 'x', messages, top_p: 7 }), (e) => e.status === 400 && e.param === 'top_p');
  // garbage on the socket: a 400 and the connection closed, the server keeps serving
  const raw = await new Promise((resolve) => {
    const s = net.connect(new URL(base).port, '127.0.0.1', () => s.write('GARBAGE \x00\x01 nonsense\r\n\r\n'));
    let d = ''; s.on('data', (c) => { d += c; }); s.on('close', () => resolve(d)); s.on('error', () => resolve(d));
  });
  assert.match(raw, /^HTTP\/1\.1 400/);
  const ok = await client.completions.create({ model: 'x', prompt: 'The', max_tokens: 2, temperature: 0 });
  assert.equal(ok.usage.completion_tokens, 2);
  assert.equal(child.exitCode, null, 'server still running');
});

test('a client that disconnects aborts its generation; queued requests are served in arrival order', async () => {
  const m0 = await metrics();
  const aborted0 = metric(m0, 'aether_server_generations_total', '{model="tiny-llama-a-q8_0",finish_reason="aborted"}');
  const tokens0 = metric(m0, 'aether_server_completion_tokens_total', '{model="tiny-llama-a-q8_0"}');
  // a long stream (EOS banned: it runs to max_tokens), dropped after 3 chunks
  const ac = new AbortController();
  const stream = await client.completions.create({ model: 'x', prompt: 'The', max_tokens: 240, temperature: 1, seed: 1, stream: true, logit_bias: { 2: -100 } }, { signal: ac.signal });
  let n = 0;
  for await (const _ of stream) if (++n === 3) break; // the client's stream aborts its request: the connection closes
  assert.equal(n, 3);
  ac.abort();
  // the engine is free again soon, and the generation stopped far short of 240 tokens
  let m1;
  for (let i = 0; i < 100; i++) {
    m1 = await metrics();
    if (metric(m1, 'aether_server_generations_total', '{model="tiny-llama-a-q8_0",finish_reason="aborted"}') > aborted0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(metric(m1, 'aether_server_generations_total', '{model="tiny-llama-a-q8_0",finish_reason="aborted"}'), aborted0 + 1);
  const made = metric(m1, 'aether_server_completion_tokens_total', '{model="tiny-llama-a-q8_0"}') - tokens0;
  assert.ok(made >= 3 && made < 240, `the aborted generation made ${made} tokens`);
  assert.ok(metric(m1, 'aether_aborted_requests_total') >= 1);

  // FIFO: requests sent 40 ms apart finish in the order they were sent
  const order = [];
  const jobs = [];
  for (let i = 0; i < 5; i++) {
    jobs.push(client.completions.create({ model: 'x', prompt: 'The', max_tokens: 24, seed: i, temperature: 1 }).then(() => order.push(i)));
    await new Promise((r) => setTimeout(r, 40));
  }
  await Promise.all(jobs);
  assert.deepEqual(order, [0, 1, 2, 3, 4]);
});

test('load: 12 concurrent clients x 6 requests each, every one answered with its own content; RSS bounded', { timeout: 240_000 }, async () => {
  const CLIENTS = 12, PER = 6;
  // expected replies computed with the library (seeded, so each request has one right answer)
  const kinds = ['chat', 'chat-stream', 'completion', 'completion-stream', 'embedding', 'chat'];
  const expected = new Map();
  for (let c = 0; c < CLIENTS; c++) {
    for (let k = 0; k < PER; k++) {
      const seed = c * 100 + k;
      const kind = kinds[k];
      if (kind.startsWith('chat')) expected.set(seed, (await local.createChatCompletion({ messages: [{ role: 'user', content: `Question ${seed}?` }], max_tokens: 10, seed })).choices[0].message.content);
      else if (kind.startsWith('completion')) expected.set(seed, (await local.createCompletion({ prompt: `Item ${seed} is`, max_tokens: 10, seed })).choices[0].text);
      else expected.set(seed, Array.from(await local.embed(`Item ${seed}`)));
    }
  }
  const one = async (seed, kind) => {
    if (kind === 'chat') return (await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: `Question ${seed}?` }], max_tokens: 10, seed })).choices[0].message.content;
    if (kind === 'chat-stream') {
      let t = '';
      for await (const ch of await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: `Question ${seed}?` }], max_tokens: 10, seed, stream: true })) t += ch.choices[0]?.delta.content ?? '';
      return t;
    }
    if (kind === 'completion') return (await client.completions.create({ model: 'x', prompt: `Item ${seed} is`, max_tokens: 10, seed })).choices[0].text;
    if (kind === 'completion-stream') {
      let t = '';
      for await (const ch of await client.completions.create({ model: 'x', prompt: `Item ${seed} is`, max_tokens: 10, seed, stream: true })) t += ch.choices[0]?.text ?? '';
      return t;
    }
    return (await client.embeddings.create({ model: 'x', input: `Item ${seed}`, encoding_format: 'float' })).data[0].embedding;
  };
  const round = async () => {
    const results = await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
      const got = [];
      for (let k = 0; k < PER; k++) got.push([c * 100 + k, await one(c * 100 + k, kinds[k])]);
      return got;
    }));
    const flat = results.flat();
    assert.equal(flat.length, CLIENTS * PER);
    for (const [seed, value] of flat) assert.deepEqual(value, expected.get(seed), `request ${seed}`);
  };
  const rss = async () => metric(await metrics(), 'process_resident_memory_bytes');
  await round(); // warm-up
  const rss1 = await rss();
  const requests1 = metric(await metrics(), 'aether_http_requests_total', '{route="/v1/chat/completions",code="200"}');
  await round();
  await round();
  const rss3 = await rss();
  const requests3 = metric(await metrics(), 'aether_http_requests_total', '{route="/v1/chat/completions",code="200"}');
  assert.equal(requests3 - requests1, 2 * CLIENTS * 3, 'every chat request counted once');
  const growth = (rss3 - rss1) / 2 ** 20;
  console.log(`# RSS after warm-up ${(rss1 / 2 ** 20).toFixed(1)} MiB, after 2 more rounds of ${CLIENTS * PER} requests ${(rss3 / 2 ** 20).toFixed(1)} MiB (${growth.toFixed(1)} MiB)`);
  assert.ok(growth < 24, `RSS grew by ${growth.toFixed(1)} MiB over ${2 * CLIENTS * PER} requests (bound 24 MiB)`);
  const h = JSON.parse((await request('GET', '/health')).body);
  assert.equal(h.queue, 0);
  assert.equal(child.exitCode, null);
});

test('/metrics: valid Prometheus text (each family once, typed, samples belong to it), server and model metrics', async () => {
  const text = await metrics();
  const types = new Map();
  let current = null;
  for (const line of text.trimEnd().split('\n')) {
    let m;
    if ((m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line))) { current = m[1]; continue; }
    if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$/.exec(line))) {
      assert.equal(m[1], current);
      assert.ok(!types.has(m[1]), `family ${m[1]} declared twice`);
      types.set(m[1], m[2]);
      if (m[2] === 'counter') assert.match(m[1], /_total$/);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*(?:\\.[^"\\]*)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*(?:\\.[^"\\]*)*")*\})? (-?[\d.e+-]+|NaN|\+Inf|-Inf)$/.exec(line);
    assert.ok(m, `bad sample line: ${line}`);
    assert.equal(m[1], current, `sample ${m[1]} outside its family`);
  }
  for (const f of ['aether_http_requests_total', 'aether_queue_requests', 'aether_server_generations_total', 'process_resident_memory_bytes',
    'aether_decode_tokens_total', 'aether_kv_cache_bytes', 'aether_wasm_memory_bytes']) assert.ok(types.has(f), `missing ${f}`);
  assert.ok(metric(text, 'aether_http_requests_total', '{route="/v1/chat/completions",code="200"}') >= 1);
});
