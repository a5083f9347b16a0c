#!/usr/bin/env node
// KV policies on a generated long-context model (random weights: speed and memory only): KV cache bytes by dtype
// and decode tokens/s at a long position, every policy loaded side by side, decode rounds interleaved, medians.
//   node --no-liftoff --no-wasm-lazy-compilation bench/kv-policy.mjs [--ctx 4096] [--pos 3072] [--gen 32] [--reps 5] [--threads 1]
//        [--set all|heads] [--json]
// --set heads: only the per-head rows (plain f16, the f16 sinks + window policy, half / all of the KV heads local in
// attention only or stored locally: docs/PERFORMANCE.md "Per-head KV storage").
import { args, machine, median } from './lib/common.mjs';
import { longModel } from './lib/long-model.mjs';
import { load } from '../dist/src/aether.js';

const { has, opt } = args();
const ctx = Number(opt('--ctx')) || 4096, pos = Number(opt('--pos')) || 3072, gen = Number(opt('--gen')) || 32;
const reps = Number(opt('--reps')) || 5, threads = Number(opt('--threads')) || 1;
const { file, cfg } = await longModel({ n_layers: 4, dim: 256, n_heads: 4, n_kv_heads: 2, head_dim: 64, hidden_dim: 704, n_ctx: ctx });
const POLICIES = [
  ['plain f16', { kvPolicy: 'full' }],
  ['plain q8_0', { kvPolicy: 'full', kvDtype: 'q8_0' }],
  ['plain q4_0', { kvPolicy: 'full', kvDtype: 'q4_0' }],
  ['schedule 0-20:f16,21-100:q8_0,101-:q4_0', { kvPolicy: '0-20:f16,21-100:q8_0,101-:q4_0' }],
  ['sinks=4:f16,window=64:f16,rest=q8_0', { kvPolicy: 'sinks=4:f16,window=64:f16,rest=q8_0' }],
  ['sinks=4:f16,window=64:f16,rest=q4_0', { kvPolicy: 'sinks=4:f16,window=64:f16,rest=q4_0' }],
  ['sinks=4:f16,window=64:f16,rest=f16 + all KV heads local', { kvPolicy: 'sinks=4:f16,window=64:f16,rest=f16', local: true }],
];
const W64 = 'sinks=4:f16,window=64:f16,rest=f16';
const HEADS = [
  ['plain f16', { kvPolicy: 'full' }],
  [W64, { kvPolicy: W64 }],
  [`${W64} + KV head 0 local (attention only)`, { kvPolicy: W64, local: [0] }],
  [`${W64} + KV head 0 stored locally`, { kvPolicy: W64, localHeads: [0] }],
  [`${W64} + all KV heads local (attention only)`, { kvPolicy: W64, local: true }],
  [`${W64} + all KV heads stored locally`, { kvPolicy: W64, localHeads: [...Array(cfg.n_kv_heads).keys()] }],
];
const set = opt('--set') ?? 'all';
if (set !== 'all' && set !== 'heads') throw new Error(`--set expects all or heads, got ${set}`);
const prompt = Array.from({ length: pos }, (_, i) => 3 + ((i * 131) % (cfg.vocab_size - 3)));
const models = [];
for (const [name, { local, ...o }] of set === 'heads' ? HEADS : POLICIES) {
  const m = await load(file, { threads, maxBatch: 64, nCtx: ctx, ...o });
  if (local) m.setHeadMode('local', { heads: local === true ? [...Array(cfg.n_kv_heads).keys()] : local });
  const t0 = performance.now();
  m.engine.forward(prompt, 0);
  const prefillMs = performance.now() - t0;
  const kv = m.metrics().kvCache;
  models.push({ name, m, prefill_tps: (pos / prefillMs) * 1000, decode: [], kv_bytes: kv.byDtype.reduce((a, d) => a + d.bytes, 0), by_dtype: kv.byDtype.map(({ dtype, bytes }) => ({ dtype, bytes })), f16_bytes: kv.f16Bytes,
    local_saved: kv.localHeadsSavedBytes, arena: m.engine.plan.kvCache });
}
for (let r = 0; r < reps; r++) {
  for (const x of (r % 2 ? [...models].reverse() : models)) {
    const t0 = performance.now();
    let tok = 5;
    for (let i = 0; i < gen; i++) { x.m.engine.forward([tok], pos + i); tok = 3 + ((tok * 31 + 7) % (cfg.vocab_size - 3)); }
    x.decode.push((gen / (performance.now() - t0)) * 1000);
  }
}
const base = models[0];
const rows = models.map((x) => ({
  policy: x.name, kv_bytes: x.kv_bytes, kv_vs_f16: x.kv_bytes / x.f16_bytes, by_dtype: x.by_dtype, prefill_tps: x.prefill_tps,
  decode_tps: median(x.decode), decode_vs_f16: median(x.decode) / median(base.decode), local_heads_saved_bytes: x.local_saved, plan_kv_bytes: x.arena,
}));
for (const x of models) x.m.dispose();
const out = { model: `generated llama ${cfg.n_layers}x${cfg.dim}, ${cfg.n_heads} heads / ${cfg.n_kv_heads} KV heads of ${cfg.head_dim}, n_ctx ${ctx}`, threads, pos, gen, reps, machine: machine(), rows };
if (has('--json')) console.log(JSON.stringify(out));
else {
  console.log(`${out.model}; decode ${gen} tokens at position ${pos}, ${threads} thread(s), median of ${reps}; ${out.machine.cpu}`);
  console.log('| policy | KV cache MiB | vs f16 | decode tok/s | vs f16 | prefill tok/s |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.policy} | ${(r.kv_bytes / 2 ** 20).toFixed(2)} | ${r.kv_vs_f16.toFixed(3)} | ${r.decode_tps.toFixed(1)} | ${r.decode_vs_f16.toFixed(3)} | ${r.prefill_tps.toFixed(0)} |`);
}
