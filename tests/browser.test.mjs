// End-to-end: the browser demo in Debian's chromium (driven by playwright-core, no downloaded browser),
// served by examples/browser/server.mjs. The page's greedy tokens must equal the Node CLI's, with 2 threads
// when the page is cross-origin isolated and with the one-thread fallback when it is not.
// Fails (does not skip) when chromium is missing: set AETHER_CHROMIUM to use another binary.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer } from '../examples/browser/server.mjs';
import { launchChromium, requireChromium } from '../scripts/chromium.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = 'models/tiny-llama-a-q8_0.rknot';
const PROMPT = 'The Debian project is';
const N = 32;
const WAIT = { timeout: 30_000 };
const REF2 = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests/fixtures/tiny-llama-a/reference.json'), 'utf8')).prompts[2];

const cleanups = [];

async function cli(...args) {
  const { stdout } = await promisify(execFile)(process.execPath, ['dist/cli/aether.js', 'run', MODEL, ...args, '--json'], { cwd: ROOT });
  return JSON.parse(stdout);
}

/** A fresh browser profile (temp --user-data-dir) and a page that records console messages. */
async function openBrowser() {
  const { page, close } = await launchChromium({ viewport: { width: 1280, height: 900 } });
  cleanups.push(close);
  const consoleLines = [];
  const pageErrors = [];
  page.on('console', (m) => consoleLines.push({ type: m.type(), text: m.text() }));
  page.on('pageerror', (e) => pageErrors.push(e.message));
  return { page, consoleLines, pageErrors, close };
}

async function serve(isolate) {
  const s = await startServer({ port: 0, isolate });
  cleanups.push(() => s.close());
  return s;
}

/** Load the shipped model through the demo UI with `threads`, then generate N greedy tokens for PROMPT. */
async function runDemo(page, threads) {
  await page.fill('#threads', String(threads));
  await page.uncheck('#ffn-modules', { force: true }).catch(() => {}); // dense only, like the CLI default
  await page.click('#load');
  await page.waitForSelector('#status:is([data-state=ready], [data-state=error])', WAIT);
  assert.equal(await page.getAttribute('#status', 'data-state'), 'ready', `load failed: ${await page.textContent('#status')}`);
  await page.fill('#prompt', PROMPT);
  await page.fill('#max-tokens', String(N));
  await page.check('#greedy');
  await page.click('#generate');
  await page.waitForSelector('#status:is([data-state=done], [data-state=error])', WAIT);
  const err = await page.textContent('#gen-error');
  assert.equal(await page.getAttribute('#status', 'data-state'), 'done', `generation failed: ${err}`);
  return page.evaluate(() => window.aetherDemo.lastRun);
}

let expected;

before(async () => {
  requireChromium();
  expected = await cli('-p', PROMPT, '-n', String(N), '--greedy');
  assert.equal(expected.tokens.length, N);
});

after(async () => {
  for (const c of cleanups.reverse()) await c();
});

test('cross-origin isolated page: 2 threads, the same 32 greedy tokens as the CLI; cache, abort, chat, FFN probes', { timeout: 90_000 }, async () => {
  const server = await serve(true);
  const { page, consoleLines, pageErrors } = await openBrowser();
  await page.goto(`${server.url}examples/browser/`);
  await page.waitForSelector('body[data-ready="1"]', WAIT);
  const features = await page.evaluate(() => ({ coi: crossOriginIsolated, f: window.aetherDemo.features }));
  assert.equal(features.coi, true);
  assert.equal(features.f.simd, true);
  assert.equal(features.f.threads, true);

  const run = await runDemo(page, 2);
  assert.equal(run.threads, 2);
  assert.equal(run.crossOriginIsolated, true);
  assert.deepEqual(run.tokens, expected.tokens);
  assert.equal(run.text, expected.text);
  assert.equal(run.stats.finishReason, 'length');
  assert.deepEqual(run.warnings, []);
  // first load downloaded the model and cached it
  const events = await page.evaluate(() => window.aetherDemo.loadEvents.map((e) => e.state));
  assert.deepEqual(events, ['miss', 'stored']);
  assert.match(await page.textContent('#gen-stats'), /tok\/s/);

  // FFN mode control: without the FFN modules, 'fused' is unavailable and the page says so
  await page.selectOption('#ffn-mode', 'fused');
  await page.click('#apply-ffn');
  await page.waitForFunction(() => document.getElementById('ffn-error').textContent !== '', null, WAIT);
  assert.match(await page.textContent('#ffn-error'), /^FFN mode 'fused' is unavailable: invalid_argument: /);
  await page.selectOption('#ffn-mode', 'dense');

  // The shipped model carries saturation metadata: with the FFN modules loaded, dynamic mode works out of
  // the box, and the neuron chart shows a part of the neurons active in every layer.
  await page.check('#ffn-modules');
  await page.click('#load');
  await page.waitForSelector('#status:is([data-state=ready], [data-state=error])', WAIT);
  assert.equal(await page.getAttribute('#status', 'data-state'), 'ready');
  await page.selectOption('#ffn-mode', 'dynamic');
  await page.click('#apply-ffn');
  await page.waitForFunction(() => /FFN mode: dynamic|FFN mode dynamic failed/.test(document.body.textContent), null, WAIT);
  assert.equal(await page.textContent('#ffn-error'), '', 'dynamic mode applies on the shipped model');
  await page.click('#generate');
  await page.waitForSelector('#status:is([data-state=done], [data-state=error])', WAIT);
  assert.equal(await page.getAttribute('#status', 'data-state'), 'done');
  const chart = await page.evaluate(() => ({ active: window.aetherDemo.ffnActive, hidden: window.aetherDemo.model.config.hidden_dim }));
  assert.equal(chart.active.length, 6);
  assert.ok(chart.active.every((v) => v > 0 && v < chart.hidden), `dynamic: a part of the neurons per layer (${chart.active} of ${chart.hidden})`);
  await page.selectOption('#ffn-mode', 'dense');
  await page.click('#apply-ffn');

  const shot = path.join(os.tmpdir(), 'aether-browser-demo.png');
  await page.screenshot({ path: shot });
  console.log(`# screenshot: ${shot}`);

  // Through the API: cache hit, then corrupted / truncated cache entries are evicted and re-downloaded;
  // abort mid-generation, then reuse; chat (template rendered on the page: the import map resolves jinja).
  const api = await page.evaluate(async ({ prompt, n, ggufPrompt }) => {
    const { Aether } = window.aetherDemo;
    const url = new URL('/models/tiny-llama-a-q8_0.rknot', location.href).href;
    const loadWith = async () => {
      const events = [];
      const m = await Aether.load(url, { threads: 2, onProgress: (e) => { if (e.type === 'cache') events.push(e); } });
      return { m, events };
    };
    const out = {};
    const cache = await caches.open('aether-models-v1');
    const original = new Uint8Array(await (await cache.match(url)).arrayBuffer());

    let { m, events } = await loadWith();
    out.hit = events.map((e) => e.state);
    out.hitTokens = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;

    // abort after 3 pieces, then the model is reused
    const ac = new AbortController();
    let pieces = 0;
    try {
      for await (const _p of m.generate(prompt, { maxTokens: 200, seed: 3, signal: ac.signal })) { if (++pieces === 3) ac.abort(); }
      out.abort = 'not aborted';
    } catch (e) {
      out.abort = { name: e.name, code: e.code, pieces };
    }
    out.afterAbort = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
    // breaking out of the loop cancels the generation in the worker too
    for await (const _p of m.generate(prompt, { maxTokens: 200 })) break;
    out.afterBreak = (await m.complete(prompt, { maxTokens: 4, greedy: true })).tokens;

    out.chat = [];
    for await (const piece of m.chat([{ role: 'user', content: 'What is Debian?' }], { maxTokens: 8, greedy: true })) out.chat.push(piece.token);
    // the OpenAI-shaped API on the page (seeded sampling, logprobs, logit_bias, a stream)
    // (embeddings first: ffnActive below reads the last forward, a decode step)
    out.embed = Array.from(await m.embed('apt-get install hello'));
    out.oaiEmbedding = await m.createEmbedding({ input: ['apt-get install hello'] });
    const oaiMessages = [{ role: 'user', content: 'What is Debian?' }];
    out.oaiChat = await m.createChatCompletion({ messages: oaiMessages, max_tokens: 8, seed: 5, temperature: 0.9, logprobs: true, top_logprobs: 2 });
    out.oaiChunks = [];
    for await (const c of await m.createChatCompletion({ messages: oaiMessages, max_tokens: 8, seed: 5, temperature: 0.9, stream: true })) out.oaiChunks.push(c);
    out.oaiCompletion = await m.createCompletion({ prompt, max_tokens: 6, seed: 2, logit_bias: { 500: 5 }, logprobs: 1 });
    out.tokenize = await m.tokenize(prompt);
    out.detokenize = await m.detokenize(out.hitTokens);
    out.ffnActive = await m.ffnActive();
    // metrics: time counters on, one generation, the structured form and its Prometheus text (the page renders it)
    await m.setTiming(true); await m.resetMetrics();
    // 24 tokens (within the 32 greedy ones without an end of text): a decode step's attention on the tiny model takes a
    // few microseconds a layer at most, near the page clock's grain, and with 4 tokens all layers read 0 in a CI run
    await m.complete(prompt, { maxTokens: 24, greedy: true });
    out.metrics = await m.metrics();
    out.prometheus = (await import('/dist/src/browser/index.js')).formatPrometheus(out.metrics, { labels: { model: 'tiny' } });
    await m.setTiming(false);
    // KV policy and local heads at run time, then the rollback: greedy tokens as before it
    await m.setKvPolicy('sinks=4:f16,window=16:f16,rest=q4_0');
    out.recomputed = await m.setHeadMode('local', { heads: [1], store: true });   // stored locally: memory saved
    out.approx = await m.approximations();
    out.kvTokens = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
    out.kvMetrics = (await m.metrics()).kvCache;
    await m.rollback();
    out.approxAfter = await m.approximations();
    out.rolledBack = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
    out.memLoad = m.memory;
    try { await m.setFfnMode('dense'); out.dense = 'ok'; } catch (e) { out.dense = e.message; }
    out.memAfter = m.memory;   // refreshed by setFfnMode: the timing buffer and KV-policy specs above are in plan.other
    try { await m.setFfnMode('no-such-mode'); out.badMode = 'accepted'; } catch (e) { out.badMode = { name: e.name, code: e.code }; }
    out.config = m.config;
    await m.dispose();
    try { await m.tokenize('x'); out.afterDispose = 'worked'; } catch (e) { out.afterDispose = e.code; }

    // corrupted body, right size: the loader's CRC check fails, the entry is evicted, the model re-downloaded
    const bad = original.slice();
    bad[bad.length >> 1] ^= 0x5a;
    await cache.put(url, new Response(bad));
    ({ m, events } = await loadWith());
    out.corrupt = events.map((e) => e.state + (e.reason ? `: ${e.reason}` : ''));
    out.corruptTokens = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
    await m.dispose();

    // truncated body: the size check fails before loading
    await cache.put(url, new Response(original.slice(0, 1000)));
    ({ m, events } = await loadWith());
    out.truncated = events.map((e) => e.state + (e.reason ? `: ${e.reason}` : ''));
    await m.dispose();

    // the other source kinds: a File (cloned handle) and a ReadableStream (transferred)
    const file = new File([await (await fetch(url)).blob()], 'tiny.rknot');
    for (const [kind, src] of [['file', file], ['stream', (await fetch(url)).body]]) {
      // the File with threads: 'auto' (half of hardwareConcurrency from 4 up, at most 4: validate.ts autoThreads)
      const sm = await Aether.load(src, { threads: kind === 'file' ? 'auto' : 1 });
      out[kind] = { name: sm.name, tokens: (await sm.complete(prompt, { maxTokens: 4, greedy: true })).tokens };
      if (kind === 'file') out.autoThreads = { threads: sm.threads, hc: navigator.hardwareConcurrency };
      await sm.dispose();
    }

    // a GGUF straight from its URL (loader/gguf.ts): the PyTorch reference's greedy ids for its prompt
    const gm = await Aether.load('/tests/fixtures/tiny-llama-a/tiny-llama-a-f32.gguf', { threads: 2, cache: false });
    out.gguf = { format: gm.metadata?.source?.input_format, tokens: (await gm.complete(ggufPrompt, { maxTokens: 12, greedy: true })).tokens };
    await gm.dispose();

    // a worker script that does not exist; a request in another protocol version
    try { await Aether.load(url, { workerUrl: '/no/such/worker.js' }); out.badWorker = 'loaded'; } catch (e) { out.badWorker = { code: e.code, message: e.message }; }
    out.version = await new Promise((resolve) => {
      const w = new Worker('/dist/src/browser/engine-worker.js', { type: 'module' });
      w.onmessage = (ev) => { w.terminate(); resolve(ev.data); };
      w.postMessage({ v: 999, id: 7, verb: 'stats', args: {} });
    });

    // abort a load: a stream that sends the first 64 KiB, then stalls (the load cannot finish by itself)
    const head = original.slice(0, 65536);
    const stalled = new ReadableStream({ start(c) { c.enqueue(head); } });
    const lc = new AbortController();
    const p = Aether.load(stalled, { signal: lc.signal });
    setTimeout(() => lc.abort(), 500);
    try { await p; out.loadAbort = 'not aborted'; } catch (e) { out.loadAbort = { name: e.name, code: e.code }; }
    return out;
  }, { prompt: PROMPT, n: N, ggufPrompt: REF2.prompt_ids });

  assert.deepEqual(api.hit, ['hit']);
  assert.deepEqual(api.hitTokens, expected.tokens);
  assert.deepEqual(api.abort, { name: 'AbortError', code: 'aborted', pieces: 3 });
  assert.deepEqual(api.afterAbort, expected.tokens);
  assert.deepEqual(api.afterBreak, expected.tokens.slice(0, 4));
  const chatCli = await cli('-p', 'What is Debian?', '--chat', '-n', '8', '--greedy');
  assert.deepEqual(api.chat, chatCli.tokens, 'chat rendered on the page = chat in Node');
  {
    const { load } = await import('../dist/src/index.js');
    const nm = await load(path.join(ROOT, MODEL));
    try {
      const oaiMessages = [{ role: 'user', content: 'What is Debian?' }];
      const chat = await nm.createChatCompletion({ messages: oaiMessages, max_tokens: 8, seed: 5, temperature: 0.9, logprobs: true, top_logprobs: 2 });
      assert.equal(api.oaiChat.object, 'chat.completion');
      assert.equal(api.oaiChat.model, 'tiny-llama-a-q8_0');
      assert.deepEqual(api.oaiChat.choices, chat.choices, 'the page and Node give the same chat completion and logprobs');
      assert.deepEqual(api.oaiChat.usage, chat.usage);
      assert.equal(api.oaiChunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), chat.choices[0].message.content);
      assert.ok(api.oaiChunks.every((c) => c.object === 'chat.completion.chunk'));
      const comp = await nm.createCompletion({ prompt: PROMPT, max_tokens: 6, seed: 2, logit_bias: { 500: 5 }, logprobs: 1 });
      assert.deepEqual(api.oaiCompletion.choices, comp.choices);
      const emb = Array.from(await nm.embed('apt-get install hello'));
      assert.deepEqual(api.embed, emb, 'embeddings on the page = in Node');
      assert.deepEqual(api.oaiEmbedding.data[0].embedding, emb);
    } finally { nm.dispose(); }
  }
  assert.equal(api.tokenize.length, expected.prompt_tokens);
  assert.equal(api.detokenize.trim(), expected.text.trim());
  assert.equal(api.ffnActive.length, api.config.n_layers);
  assert.ok(api.ffnActive.every((v) => v === api.config.hidden_dim), `dense decode step: every neuron active (${api.ffnActive})`);
  assert.equal(api.dense, 'ok');
  assert.equal(api.memLoad.ffn, 0);
  assert.equal(api.memLoad.other, 0);
  assert.equal(api.memAfter.ffn, 0);
  assert.ok(api.memAfter.other > 0, `plan.other ${api.memAfter.other}`);
  assert.ok(api.memAfter.total >= api.memLoad.total + api.memAfter.other, `${api.memAfter.total} vs ${api.memLoad.total} + ${api.memAfter.other}`);
  const { load: loadNode } = await import('../dist/src/index.js');
  const nm = await loadNode(path.join(ROOT, MODEL), { kvPolicy: 'sinks=4:f16,window=16:f16,rest=q4_0' });
  nm.setHeadMode('local', { heads: [1] });
  const kvNode = (await nm.complete(PROMPT, { maxTokens: N, greedy: true })).tokens;
  nm.dispose();
  assert.ok(api.approx.every((a) => a.kvPolicy === 'window=16:f16,0-3:f16,4-:q4_0' && a.localKvHeads.join() === '1'));
  assert.ok(api.approx.every((a) => a.storedLocalKvHeads.join() === '1' && a.localStorageSavedBytes > 0), 'KV head 1 stored locally');
  assert.equal(api.recomputed, 0, 'the policy emptied the cache: no history to recompute');
  assert.equal(api.kvMetrics.localHeadsSavedBytes, api.approx.reduce((a, x) => a + x.localStorageSavedBytes, 0));
  assert.deepEqual(api.kvMetrics.byDtype.map((d) => d.dtype), ['f16', 'q4_0']);
  assert.ok(api.kvMetrics.savedBytes > 0);
  assert.ok(api.approxAfter.every((a) => a.kvPolicy === 'full' && a.localKvHeads.length === 0 && a.ffn === 'dense'));
  assert.deepEqual(api.rolledBack, expected.tokens, 'rolled back: the exact tokens');
  assert.deepEqual(api.kvTokens, kvNode, 'KV policy + local heads (stored locally on the page, local attention in Node: the same bits): the page = Node');
  assert.equal(api.metrics.layers.length, api.config.n_layers);
  assert.equal(api.metrics.tokens.decode, 24);
  // Per-layer attention on the tiny model is a few microseconds at most: at the page clock's resolution one layer may
  // read 0, so every layer must report a non-negative time and the layers together (24 tokens) a positive one.
  assert.ok(api.metrics.timing && api.metrics.layers.every((l) => l.ffnActiveFraction === 1 && l.opSeconds.attention >= 0), 'metrics per layer');
  assert.ok(api.metrics.layers.reduce((a, l) => a + l.opSeconds.attention, 0) > 0, 'attention time measured');
  assert.ok(api.metrics.kvCache.byDtype.length >= 1 && api.metrics.kvCache.positions > 0);
  assert.match(api.prometheus, /^# TYPE aether_decode_tokens_total counter\naether_decode_tokens_total\{model="tiny"\} 24$/m);
  assert.match(api.prometheus, /^aether_op_seconds_total\{model="tiny",layer="0",op="attention"\} [0-9.e-]+$/m);
  assert.equal(api.badMode.name, 'AetherError');
  assert.equal(api.afterDispose, 'disposed');
  assert.equal(api.corrupt[0], 'hit');
  assert.match(api.corrupt[1], /^evicted: .*(checksum|CRC)/i);
  assert.deepEqual(api.corrupt.slice(2), ['miss', 'stored']);
  assert.deepEqual(api.corruptTokens, expected.tokens);
  assert.match(api.truncated[0], /^evicted: cached size 1000 bytes/);
  assert.deepEqual(api.truncated.slice(1), ['miss', 'stored']);
  assert.deepEqual(api.loadAbort, { name: 'AbortError', code: 'aborted' });
  assert.deepEqual(api.file, { name: 'tiny.rknot', tokens: expected.tokens.slice(0, 4) });
  assert.deepEqual(api.stream, { name: 'stream', tokens: expected.tokens.slice(0, 4) });
  assert.deepEqual(api.gguf, { format: 'gguf', tokens: REF2.generated_ids.slice(0, 12) });
  const hc = api.autoThreads.hc;
  assert.equal(api.autoThreads.threads, Math.max(1, Math.min(4, hc >= 4 ? Math.floor(hc / 2) : hc)), JSON.stringify(api.autoThreads));
  assert.equal(api.badWorker.code, 'load_error');
  assert.match(api.badWorker.message, /engine worker .*no\/such\/worker\.js failed/);
  assert.equal(api.version.id, 7);
  assert.equal(api.version.error.code, 'invalid_argument');
  assert.match(api.version.error.message, /protocol version 999/);

  assert.deepEqual(pageErrors, []);
  assert.ok(!consoleLines.some((l) => l.type === 'warning' && l.text.startsWith('aether:')), 'no threading warning when isolated');
});

test('large-memory path: every address above 2 GiB (2 threads and 1), the same tokens; a plan over maxMemory is out_of_memory', { timeout: 90_000 }, async () => {
  const server = await serve(true);
  const { page, pageErrors } = await openBrowser();
  await page.goto(`${server.url}examples/browser/`);
  await page.waitForSelector('body[data-ready="1"]', WAIT);
  const r = await page.evaluate(async ({ prompt, n }) => {
    const { Aether } = window.aetherDemo;
    const url = new URL('/models/tiny-llama-a-q8_0.rknot', location.href).href;
    const out = {};
    for (const threads of [2, 1]) {
      // 2.1 GiB left unused below the engine: stacks, weights, KV cache and logits all sit above 2^31
      const m = await Aether.load(url, { threads, cache: false, addressOffset: Math.floor(2.1 * 2 ** 30) });
      out[threads] = { memory: m.memory, threads: m.threads, tokens: (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens };
      await m.dispose();
    }
    try { await Aether.load(url, { cache: false, maxMemory: 4 << 20 }); out.oom = 'loaded'; } catch (e) { out.oom = { code: e.code, message: e.message }; }
    try { await Aether.load(url, { cache: false, kvDtype: 'q3_K' }); out.badKv = 'loaded'; } catch (e) { out.badKv = { code: e.code, message: e.message }; }
    const q8 = await Aether.load(url, { cache: false, kvDtype: 'q8_0', nCtx: 64 });
    out.q8 = { memory: q8.memory, nCtx: q8.nCtx };
    await q8.dispose();
    return out;
  }, { prompt: PROMPT, n: N });
  for (const threads of [2, 1]) {
    assert.equal(r[threads].threads, threads);
    assert.ok(r[threads].memory.runtime > 2 ** 31, `runtime ${r[threads].memory.runtime}`);
    assert.ok(r[threads].memory.total > 2 ** 31 + r[threads].memory.weights);
    assert.deepEqual(r[threads].memory.kvDtype, { k: 'f16', v: 'f16' });
    assert.deepEqual(r[threads].tokens, expected.tokens, `${threads} thread(s) above 2 GiB`);
  }
  assert.equal(r.oom.code, 'out_of_memory');
  assert.match(r.oom.message, /maxMemory cap of 4\.0 MiB/);
  assert.equal(r.badKv.code, 'invalid_argument');
  assert.deepEqual(r.q8.memory.kvDtype, { k: 'q8_0', v: 'q8_0' });
  assert.equal(r.q8.nCtx, 64);
  assert.deepEqual(pageErrors, []);
});

test('page without COOP/COEP: crossOriginIsolated false, one thread, a warning, the same tokens', { timeout: 60_000 }, async () => {
  const server = await serve(false);
  const { page, consoleLines, pageErrors } = await openBrowser();
  await page.goto(`${server.url}examples/browser/`);
  await page.waitForSelector('body[data-ready="1"]', WAIT);
  assert.equal(await page.evaluate(() => crossOriginIsolated), false);
  const run = await runDemo(page, 2);
  assert.equal(run.crossOriginIsolated, false);
  assert.equal(run.threads, 1);
  assert.deepEqual(run.tokens, expected.tokens);
  assert.match(run.warnings.join('\n'), /not cross-origin isolated/);
  assert.match(await page.textContent('#warnings'), /using one thread/);
  assert.ok(consoleLines.some((l) => l.type === 'warning' && /aether: threads=2 requested .* using one thread/.test(l.text)),
    `console warning expected, got ${JSON.stringify(consoleLines)}`);

  // the README's minimal page, as written
  await page.goto(`${server.url}examples/browser/minimal.html`);
  await page.waitForFunction(() => /tok\/s, 1 thread\(s\)\]$/.test(document.getElementById('out').textContent), null, WAIT);
  assert.match(await page.textContent('#out'), /^The Debian project is\S*\s/);
  assert.deepEqual(pageErrors, []);
});

test('relaxed SIMD in Chromium: auto picks it; relaxed (1 and 2 threads) and plain give the CLI\'s greedy tokens; warm-up ran', { timeout: 120_000 }, async () => {
  const server = await serve(true);
  const { page } = await openBrowser();
  await page.goto(`${server.url}examples/browser/minimal.html`);
  const runs = await page.evaluate(async ({ model, prompt, n }) => {
    const { Aether } = await import('/dist/src/browser/index.js');
    const out = [];
    for (const [simd, threads] of [['auto', 1], ['relaxed', 2], ['plain', 1]]) {
      const m = await Aether.load(model, { simd, threads, cache: false });
      const tokens = [];
      for await (const p of m.generate(prompt, { maxTokens: n, greedy: true })) tokens.push(p.token);
      out.push({ asked: simd, simd: m.simd, threads: m.threads, warmup: m.warmup, tokens });
      await m.dispose();
    }
    return out;
  }, { model: `${server.url}${MODEL}`, prompt: PROMPT, n: N });
  assert.deepEqual(runs.map((r) => [r.asked, r.simd, r.threads]), [['auto', 'relaxed', 1], ['relaxed', 'relaxed', 2], ['plain', 'plain', 1]]);
  for (const r of runs) {
    assert.deepEqual(r.tokens, expected.tokens, `${r.asked} x${r.threads}: tokens differ from the CLI's`);
    assert.ok(r.warmup && r.warmup.rounds >= 3 && r.warmup.ms > 0, `${r.asked}: warm-up did not run: ${JSON.stringify(r.warmup)}`);
  }
});

test('browser entry and engine worker import no Node module and no bare specifier', () => {
  // Walk the static import graph from both entry points (dist/, as served).
  const seen = new Set();
  const bad = [];
  const walk = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = fs.readFileSync(file, 'utf8');
    for (const m of src.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm)) {
      const spec = m[1] ?? m[2];
      if (spec.startsWith('.')) walk(path.resolve(path.dirname(file), spec));
      else bad.push(`${path.relative(ROOT, file)}: ${spec}`);
    }
  };
  walk(path.join(ROOT, 'dist/src/browser/index.js'));
  walk(path.join(ROOT, 'dist/src/browser/engine-worker.js'));
  walk(path.join(ROOT, 'dist/src/runtime/worker.js'));
  assert.ok(seen.size > 10, `walked ${seen.size} modules`);
  assert.deepEqual(bad, [], 'static imports that a browser Worker cannot resolve');
});
