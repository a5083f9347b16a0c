// Fault injection: a source that errors or stalls at every stage of a load, memory growth that fails, a worker that
// dies, dispose during a generation, many models in one process. The engine finishes or fails with a named
// AetherError, and stays usable (or says it is not: 'disposed').
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { load } from '../dist/src/index.js';
import { openRknot } from '../dist/src/formats/rknot.js';
import { assertAetherError, repoRoot } from './helpers/formats.mjs';

const Q8 = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const bytes = fs.readFileSync(Q8);
const PROMPT = 'The Debian project is';
let reference;
async function referenceText() {
  if (!reference) {
    const m = await load(Q8);
    reference = (await m.complete(PROMPT, { maxTokens: 12, greedy: true })).text;
    m.dispose();
  }
  return reference;
}

/** The load stages of the file: offsets inside the header, the JSON metadata, the first tensor, the last tensor. */
async function stages() {
  const { header, meta } = await openRknot(Q8);
  const last = [...meta.tensors].sort((a, b) => b.offset - a.offset)[0];
  return { header: 10, json: 32 + Math.floor(header.jsonLength / 2), data: header.dataOffset + 1000, lastTensor: header.dataOffset + last.offset + 100, end: bytes.length - 1 };
}

test('a source that errors at any stage of a load: load_error naming the stage and the byte; the next load works', async () => {
  for (const [stage, at] of Object.entries(await stages())) {
    let p = 0;
    const s = new ReadableStream({ pull(c) { if (p >= at) { c.error(new Error('connection reset')); return; } const n = Math.min(65536, at - p); c.enqueue(bytes.subarray(p, p + n)); p += n; } });
    const e = await assertAetherError(() => load(s), 'load_error', ['connection reset', `byte ${at}`]);
    assert.ok(e.details.stage, stage);
  }
  const m = await load(Q8);
  assert.equal((await m.complete(PROMPT, { maxTokens: 12, greedy: true })).text, await referenceText());
  m.dispose();
});

test('a source that stalls at any stage: the signal aborts it (AbortError) without waiting for the stream', async () => {
  for (const [stage, at] of Object.entries(await stages())) {
    let p = 0;
    const s = new ReadableStream({ pull(c) { if (p >= at) return new Promise(() => {}); const n = Math.min(65536, at - p); c.enqueue(bytes.subarray(p, p + n)); p += n; } });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const t0 = performance.now();
    await assertAetherError(() => load(s, { signal: ac.signal }), 'aborted');
    assert.ok(performance.now() - t0 < 5000, `${stage}: aborted promptly`);
  }
});

test('memory growth that fails: out_of_memory naming the size; the process stays usable', async () => {
  const grow = WebAssembly.Memory.prototype.grow;
  WebAssembly.Memory.prototype.grow = function () { throw new RangeError('WebAssembly.Memory.grow(): Maximum memory size exceeded'); };
  try {
    // logits of every position of 4096-token batches (64 MiB) do not fit the initial memory: the load must grow it
    await assertAetherError(() => load(Q8, { logitsAll: true, maxBatch: 4096 }), 'out_of_memory', ['cannot grow wasm memory']);
  } finally {
    WebAssembly.Memory.prototype.grow = grow;
  }
  const m = await load(Q8);
  assert.equal((await m.complete(PROMPT, { maxTokens: 12, greedy: true })).text, await referenceText());
  m.dispose();
});

test('dispose during a generation (1 and 2 threads): the generation ends with a disposed error; other models are unaffected', async () => {
  for (const threads of [1, 2]) {
    const other = await load(Q8);
    const m = await load(Q8, { threads });
    const it = m.generate(PROMPT, { maxTokens: 50, greedy: true });
    await it.next();
    m.dispose();
    await assertAetherError(() => it.next(), 'disposed');
    await assertAetherError(() => m.complete('x', { maxTokens: 1 }), 'disposed');
    assert.equal((await other.complete(PROMPT, { maxTokens: 12, greedy: true })).text, await referenceText());
    other.dispose();
  }
});

test('a worker that dies while the model is idle: the next call says the model is unusable (worker_died), nothing hangs', async () => {
  const m = await load(Q8, { threads: 2 });
  await m.complete(PROMPT, { maxTokens: 2, greedy: true });
  // kill a compute worker (as an OOM killer or a crash would): the watchdog thread that owns it sees it exit
  m.engine.workers.kill(1);
  for (let i = 0; i < 400 && !m.engine.workers.dead; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(m.engine.workers.dead, 'the pool noticed the dead worker');
  await assertAetherError(() => m.complete(PROMPT, { maxTokens: 2 }), 'worker_died', ['worker 1', 'dispose']);
  m.dispose();
  const again = await load(Q8, { threads: 2 });
  assert.equal((await again.complete(PROMPT, { maxTokens: 12, greedy: true })).text, await referenceText());
  again.dispose();
});

test('a worker killed inside a forward pass: the caller does not block, it gets worker_died; the model stays unusable, a new one works', { timeout: 120000 }, async () => {
  const m = await load(Q8, { threads: 2 });
  await m.complete(PROMPT, { maxTokens: 2, greedy: true });
  const e = m.engine;
  const tokens = Array.from({ length: Math.min(e.nCtx, 4 * e.maxBatch) }, (_, i) => 3 + (i % 50));
  // the watchdog terminates worker 1 the moment the pool starts its next job; the main thread is then inside the
  // synchronous forward (waiting for worker 1 in a barrier) and cannot run any event handler until it returns
  e.workers.kill(1, true);
  await new Promise((r) => setTimeout(r, 50)); // the watchdog has the message and waits on the pool's job counter
  const t0 = performance.now();
  let err;
  // forward passes until the kill lands (bounded by time, not count: on a loaded machine the kill can take a while)
  try { while (performance.now() - t0 < 30000) e.forward(tokens, 0); } catch (x) { err = x; }
  const ms = performance.now() - t0;
  assert.ok(err, 'the forward passes failed');
  assert.equal(err.code, 'worker_died', String(err?.stack ?? err));
  assert.match(err.message, /compute worker 1 .*forward.*dispose it and load it again/s);
  assert.ok(ms < 60000, `noticed in ${ms.toFixed(0)} ms`);
  // marked unusable: every later call says so, and the lock is free (no "already running")
  await assertAetherError(() => m.complete(PROMPT, { maxTokens: 2 }), 'worker_died', ['worker 1', 'dispose']);
  await assertAetherError(() => m.complete(PROMPT, { maxTokens: 2 }), 'worker_died', ['worker 1']);
  m.dispose();
  const again = await load(Q8, { threads: 2 });
  assert.equal((await again.complete(PROMPT, { maxTokens: 12, greedy: true })).text, await referenceText());
  again.dispose();
});

test('many models in one process (1 and 2 threads, interleaved generations): every one gives the reference output', async () => {
  const want = await referenceText();
  const models = [];
  for (let i = 0; i < 6; i++) models.push(await load(Q8, { threads: 1 + (i % 2) }));
  const its = models.map((m) => m.generate(PROMPT, { maxTokens: 12, greedy: true }));
  const texts = models.map(() => '');
  for (let done = 0; done < its.length;) {
    done = 0;
    for (let i = 0; i < its.length; i++) {
      const r = await its[i].next();
      if (r.done) done++; else texts[i] += r.value.text;
    }
  }
  for (const t of texts) assert.equal(t, want);
  for (const m of models) m.dispose();
});
