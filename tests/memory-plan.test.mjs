// The memory plan (js/src/runtime/engine.ts Engine.planMemory): weights + KV cache + scratch against 4 GiB (wasm32)
// or the maxMemory cap, computed before anything big is allocated, in 64-bit arithmetic (C's arena size is a
// uint64 read as a BigInt). Metadata-only models at real shapes (nothing of their size is allocated), configurations
// whose sizes overflow 32 bits, and a real model run with every address above 2 GiB (addressOffset).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from '../dist/src/index.js';
import { Engine, DEFAULT_CTX_CEILING } from '../dist/src/runtime/engine.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const GiB = 2 ** 30;
const prep = await Engine.prepare({ threads: 1 });

// Phi-3-mini-4k-instruct's shapes
const PHI3 = {
  arch: 'phi3', dim: 3072, n_layers: 32, n_heads: 32, n_kv_heads: 32, head_dim: 96, hidden_dim: 8192, vocab_size: 32064,
  n_ctx: 4096, norm_eps: 1e-5, rope_theta: 10000, rope_type: 'neox', sliding_window: 2047,
};
// its Q4_0 GGUF as llama.cpp writes it (q4_0 matrices, q6_K output, f32 norms): 2.18 GB
const q40 = (n) => n / 32 * 18;
const PHI3_BYTES = 32 * (q40(3072 * 9216) + q40(3072 * 3072) + 3 * q40(3072 * 8192) + 2 * 3072 * 4) + q40(3072 * 32064) + 3072 * 32064 / 256 * 210 + 3072 * 4;
const kvBytes = (c, n, bytesPerValue) => c.n_layers * c.n_kv_heads * n * c.head_dim * bytesPerValue * 2;
const plan = (cfg, bytes, opts = {}) => Engine.planMemory(prep, cfg, bytes, opts);
const oom = (re) => (e) => { assert.equal(e.code, 'out_of_memory', e.message); if (re) assert.match(e.message, re); return true; };

test('Phi-3-mini shape, 2.18 GB of Q4_0: the default plan is n_ctx 4096 with the f16 KV cache, under 4 GiB', () => {
  assert.ok(PHI3_BYTES > 2.1e9 && PHI3_BYTES < 2.2e9, `${PHI3_BYTES}`);
  const { plan: p, warnings } = plan(PHI3, PHI3_BYTES);
  assert.equal(p.nCtx, 4096);
  assert.equal(p.ctxSource, 'model');
  assert.deepEqual(p.kvDtype, { k: 'f16', v: 'f16' });
  assert.equal(p.kvCache, kvBytes(PHI3, 4096, 2));   // 1.61 GB
  assert.equal(p.weights, PHI3_BYTES);
  assert.ok(p.scratch > 0 && p.scratch < 64 << 20, `scratch ${p.scratch}`);
  assert.equal(p.total, p.runtime + p.weights + p.kvCache + p.scratch);
  assert.ok(p.total <= 4 * GiB && p.total > 2 ** 31, `${p.total}`);
  assert.equal(p.limit, 4 * GiB);
  assert.deepEqual(warnings, []);
});

test('Phi-3-mini shape with an f32 KV cache: no context given -> the largest that fits; 4096 asked -> out_of_memory with the numbers', () => {
  const { plan: p, warnings } = plan(PHI3, PHI3_BYTES, { kvDtype: 'f32' });
  assert.equal(p.ctxSource, 'memory');
  assert.ok(p.nCtx > 2000 && p.nCtx < 4096, `${p.nCtx}`);
  assert.ok(p.total <= 4 * GiB);
  assert.match(warnings.join('\n'), new RegExp(`context clamped to ${p.nCtx} tokens`));
  // exactly the largest: one more does not fit
  assert.equal(plan(PHI3, PHI3_BYTES, { kvDtype: 'f32', nCtx: p.nCtx }).plan.nCtx, p.nCtx);
  assert.throws(() => plan(PHI3, PHI3_BYTES, { kvDtype: 'f32', nCtx: p.nCtx + 1 }), oom(new RegExp(`largest context that fits is ${p.nCtx}\\b`)));
  assert.throws(() => plan(PHI3, PHI3_BYTES, { kvDtype: 'f32', nCtx: 4096 }), (e) => {
    oom(/weights 2\.0\d GiB \+ KV cache 3\.00 GiB \(n_ctx 4096, f32\).*> the 4 GiB wasm32 limit/)(e);
    assert.equal(e.details.largestNCtx, p.nCtx);
    assert.equal(e.details.kvCache, kvBytes(PHI3, 4096, 4));
    assert.equal(e.details.weights, PHI3_BYTES);
    assert.ok(e.details.total > 4 * GiB);
    assert.match(e.message, /kvDtype f16 or q8_0/);
    return true;
  });
  // q8_0 K and V: 34 bytes per 32 values
  const q8 = plan(PHI3, PHI3_BYTES, { kvDtype: 'q8_0' }).plan;
  assert.equal(q8.nCtx, 4096);
  assert.equal(q8.kvCache, 32 * 32 * 4096 * (96 / 32 * 34) * 2);
  const mixed = plan(PHI3, PHI3_BYTES, { kvDtype: { k: 'q8_0', v: 'f16' } }).plan;
  assert.equal(mixed.kvCache, 32 * 32 * 4096 * (96 / 32 * 34 + 96 * 2));
});

test('maxMemory caps the plan: the context is clamped, or an explicit one refused naming the cap', () => {
  const cap = 3 * GiB;
  const { plan: p } = plan(PHI3, PHI3_BYTES, { maxMemory: cap });
  assert.equal(p.limit, cap);
  assert.ok(p.total <= cap && p.nCtx < 4096 && p.nCtx > 1000, `${p.nCtx}`);
  assert.throws(() => plan(PHI3, PHI3_BYTES, { maxMemory: cap, nCtx: 4096 }), oom(/maxMemory cap of 3\.00 GiB.*largest context that fits is \d+/));
  assert.throws(() => plan(PHI3, PHI3_BYTES, { maxMemory: 2 * GiB }), oom(/do not fit even with a context of 1 token/));
  assert.throws(() => plan(PHI3, PHI3_BYTES, { maxMemory: -1 }), (e) => e.code === 'invalid_argument');
  assert.throws(() => plan(PHI3, PHI3_BYTES, { nCtx: 0 }), (e) => e.code === 'invalid_argument');
});

test('sizes that overflow 32 bits are refused, never wrapped', () => {
  // K + V at 4097 positions: 32 layers x 32 heads x 128 x 4 bytes x 2 = 1 MiB per position -> 2^32 + 1 MiB, which
  // 32-bit arithmetic would see as 1 MiB
  const big = { ...PHI3, head_dim: 128, dim: 4096, n_ctx: 1 << 20 };
  assert.throws(() => plan(big, 1 << 20, { kvDtype: 'f32', nCtx: 4097 }), (e) => {
    oom()(e);
    assert.equal(e.details.kvCache, 2 ** 32 + 2 ** 20);
    assert.ok(e.details.largestNCtx > 3000 && e.details.largestNCtx < 4096);
    return true;
  });
  // a million positions in f32: 2^40 bytes of KV cache
  assert.throws(() => plan(big, 1 << 20, { kvDtype: 'f32', nCtx: 1 << 20 }), (e) => oom()(e) && e.details.kvCache === 2 ** 40);
  // no context given: the ceiling (4096) applies before the memory
  const d = plan(big, 1 << 20, { kvDtype: 'f16' }).plan;
  assert.equal(DEFAULT_CTX_CEILING, 4096);
  assert.equal(d.ctxSource, 'ceiling');
  assert.equal(d.nCtx, 4096);
  // weights alone beyond 4 GiB
  assert.throws(() => plan(PHI3, 5e9), oom(/do not fit even with a context of 1 token/));
  // a config whose dimensions overflow an int (n_heads * head_dim) is a config error
  assert.throws(() => plan({ ...PHI3, n_heads: 1 << 20, n_kv_heads: 1 << 20, head_dim: 1024 }, 1 << 20), (e) => e.code === 'config_error');
});

test('a model with every address above 2 GiB (addressOffset 2.1 GiB) generates the same tokens, 1 and 2 threads', async () => {
  const file = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
  const opts = { greedy: true, maxTokens: 16 };
  const base = await load(file, { threads: 1 });
  const want = (await base.complete('The Debian project is', opts)).tokens;
  base.dispose();
  for (const threads of [1, 2]) {
    const m = await load(file, { threads, addressOffset: Math.floor(2.1 * GiB) });
    try {
      assert.ok(m.engine.dataBase > 2 ** 31, `weights at ${m.engine.dataBase}`);
      assert.ok(m.engine.plan.runtime > 2.1 * GiB);
      const got = (await m.complete('The Debian project is', opts)).tokens;
      assert.deepEqual(got, want);
    } finally { m.dispose(); }
  }
});

// After load: the FFN modules' data and every other later buffer are part of the plan (Engine.allocAfterLoad), the
// plan's total is what the heap reserved, and the wasm memory is exactly that rounded up to pages.
const PAGE = 65536;
const pages = (bytes) => Math.max(16 << 20, Math.ceil(bytes / PAGE) * PAGE);

test('plan = allocated memory: FFN module copies are in the plan (plan.ffn), total = heap high-water mark = memory size', async () => {
  const file = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
  const m = await load(file, { threads: 1, nCtx: 256, modules: ['ffn-fused', 'ffn-saturated'] });
  try {
    const e = m.engine, p = e.plan, c = m.config;
    assert.equal(p.ffn, 0);
    assert.equal(p.other, 0);
    assert.equal(p.total, e.heap.used);
    assert.equal(e.heap.memory.buffer.byteLength, pages(p.total));
    const before = p.total;
    const tile = 16;
    m.setFfnMode('fused', undefined, { tile });
    // the interleaved gate/up copies: per layer ceil(H / tile) tiles of 2 * tile rows of the q8_0 row size
    const rs = (c.dim / 32) * 34;
    const copies = c.n_layers * Math.ceil(c.hidden_dim / tile) * 2 * tile * rs;
    assert.ok(p.ffn >= copies && p.ffn <= copies + c.n_layers * 1024, `plan.ffn ${p.ffn} vs copies ${copies}`);
    assert.equal(p.total, before + p.ffn);
    assert.equal(p.total, e.heap.used);
    assert.equal(e.heap.memory.buffer.byteLength, pages(p.total));
    assert.equal(m.ffn.auxBytes <= p.ffn, true);
    // cached: switching back and forth reserves nothing more
    m.setFfnMode('dense');
    m.setFfnMode('fused', undefined, { tile });
    assert.equal(p.total, before + p.ffn);
    assert.equal(e.heap.used, p.total);
    // instrumentation after load is counted too (plan.other)
    e.setTiming(true);
    assert.ok(p.other >= (c.n_layers + 1) * 8);
    assert.equal(p.total, e.heap.used);
    const parts = p.runtime + p.weights + p.kvCache + p.scratch + p.ffn + p.other;
    assert.ok(parts <= p.total && p.total - parts < 64, `parts ${parts} vs total ${p.total}: only the weights' alignment gap is outside them`);
  } finally { m.dispose(); }
});

test('maxMemory holds after load: FFN copies that would pass the cap are refused (out_of_memory naming the parts), the model keeps working', async () => {
  const file = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
  const opts = { greedy: true, maxTokens: 8 };
  const probe = await load(file, { threads: 1, nCtx: 256, modules: ['ffn-fused'] });
  const loaded = probe.engine.plan.total;
  const want = (await probe.complete('The Debian project is', opts)).tokens;
  probe.dispose();
  const cap = loaded + (1 << 20);
  const m = await load(file, { threads: 1, nCtx: 256, modules: ['ffn-fused'], maxMemory: cap });
  try {
    assert.equal(m.engine.plan.limit, cap);
    assert.throws(() => m.setFfnMode('fused', undefined, { tile: 16 }), (e) => {
      assert.equal(e.code, 'out_of_memory', e.message);
      assert.match(e.message, /FFN module data needs .* FFN data .* would pass the maxMemory cap/);
      assert.equal(e.details.limit, cap);
      return true;
    });
    assert.ok(m.engine.heap.used <= cap, `heap ${m.engine.heap.used} > cap ${cap}`);
    assert.ok(m.engine.heap.memory.buffer.byteLength <= pages(cap));
    assert.equal(m.engine.plan.total, m.engine.heap.used);
    assert.deepEqual(m.ffn.modes, Array(m.config.n_layers).fill('dense'));
    assert.deepEqual((await m.complete('The Debian project is', opts)).tokens, want);
  } finally { m.dispose(); }
});
