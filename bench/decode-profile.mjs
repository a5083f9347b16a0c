#!/usr/bin/env node
// Where the milliseconds of one decode token go: per op class (the forward's time counters, model.setTiming),
// the sampler, and the JS of generate() around them, with the bytes each op class streams and its GB/s.
//   node bench/decode-profile.mjs MODEL [--simd relaxed,plain] [--tokens 48] [--rounds 3] [--threads 1] [--ctx 512]
//                                 [--repack on,off] [--spin 20000,200000] [--single-below 0,16e6]
//                                 (--threads, --spin and --single-below: comma lists too; --single-below: bytes, the
//                                 EngineOptions.singleThreadBelow of the runs with more than one thread)
//                                 [--prefill 64]   (also: CPU and wall time of one P-token prompt forward, per round,
//                                                   and its ms per op class with the matmuls' GMAC/s)
//                                 [--context 2000] (the decode tokens follow a prompt of that many tokens instead of
//                                                   8: attention over a long context; give --ctx above it)
// Builds (and repack settings) are loaded once each and measured in interleaved rounds; medians per cell.
// "forward" = Engine.forward of one token (C forward + the JS call), "sample" = Engine.sample (greedy, the C
// sampler over the vocabulary), "generate" = ms per token of model.generate() (everything a user sees), "CPU time" =
// process CPU time per forward + sample (with 1 thread the compute itself: other processes add wall time, not this).
import { args, crossCoreNs, hugePagesMB, machine, median, repoRoot, timedPromptForward, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt } = args();
const file = argv[0];
if (!file || file.startsWith('--')) throw new Error('usage: node bench/decode-profile.mjs MODEL [--simd relaxed,plain] [--tokens N] [--rounds R]');
const simds = String(opt('--simd', 'relaxed,plain')).split(',');
const repacks = String(opt('--repack', 'on')).split(',');
const N = Number(opt('--tokens', 48)), rounds = Number(opt('--rounds', 3)), P = Number(opt('--prefill', 0));
const C = Number(opt('--context', 8));
const threadsList = String(opt('--threads', 1)).split(',').map(Number), nCtx = Number(opt('--ctx', 512));
const spins = opt('--spin') ? String(opt('--spin')).split(',').map(Number) : [undefined];
const singles = opt('--single-below') ? String(opt('--single-below')).split(',').map(Number) : [undefined];
const threads = threadsList.join(',');
const { Aether } = await import(`${repoRoot}/dist/src/index.js`);

const variants = [];
for (const simd of simds) for (const rp of repacks) for (const th of threadsList) for (const spin of (th > 1 ? spins : [undefined])) for (const sb of (th > 1 ? singles : [undefined])) {
  const opts = { threads: th, simd, nCtx };
  if (spin !== undefined) opts.spin = spin;
  if (sb !== undefined) opts.singleThreadBelow = sb;
  if (repacks.length > 1 || rp === 'off') opts.repack = rp === 'on';
  const model = await Aether.load(file, opts);
  variants.push({ name: `${model.simd}${repacks.length > 1 ? ` repack ${rp}` : ''}${threadsList.length > 1 ? ` ${th}T` : ''}${spin !== undefined ? ` spin ${spin}` : ''}${sb !== undefined ? ` single<${sb}` : ''}`, model, res: [] });
}
const e0 = variants[0].model.engine, c = e0.config;
// bytes streamed per token by each op class (weights only)
const tb = (n) => e0.tensorInfo(n)?.bytes ?? 0;
const bytes = { qkv: 0, attn_out: 0, ffn: 0, output: tb('output.weight') || tb('token_embd.weight') };
for (let l = 0; l < c.n_layers; l++) {
  const p = `blk.${l}.`;
  bytes.qkv += tb(p + 'attn_qkv.weight') + tb(p + 'attn_q.weight') + tb(p + 'attn_k.weight') + tb(p + 'attn_v.weight');
  bytes.attn_out += tb(p + 'attn_output.weight');
  bytes.ffn += tb(p + 'ffn_gate.weight') + tb(p + 'ffn_up.weight') + tb(p + 'ffn_down.weight');
}
// weights (parameters) per op class, for the prefill's GMAC/s
const tn = (n) => { const i = e0.tensorInfo(n); return i ? i.shape.reduce((a, b) => a * b, 1) : 0; };
const params = { qkv: 0, attn_out: 0, ffn: 0 };
for (let l = 0; l < c.n_layers; l++) {
  const p = `blk.${l}.`;
  params.qkv += tn(p + 'attn_qkv.weight') + tn(p + 'attn_q.weight') + tn(p + 'attn_k.weight') + tn(p + 'attn_v.weight');
  params.attn_out += tn(p + 'attn_output.weight');
  params.ffn += tn(p + 'ffn_gate.weight') + tn(p + 'ffn_up.weight') + tn(p + 'ffn_down.weight');
}
const dtypes = [...new Set(['attn_qkv', 'attn_q', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'].map((n) => e0.tensorInfo(`blk.0.${n}.weight`)?.dtype).filter(Boolean))];
const outType = (e0.tensorInfo('output.weight') ?? e0.tensorInfo('token_embd.weight')).dtype;

function measure(model) {
  const e = model.engine;
  let pre;
  if (P > 0) {   // one P-token prompt forward from position 0 (the prefill GEMM path), CPU and wall time
    const ids = Array.from({ length: P }, (_, i) => 100 + ((i * 7919) % 20000));
    const { wall: w, cpu: cu, ops: pt } = timedPromptForward(model, ids);
    const ops = {};
    pt.ops.forEach((op, k) => { ops[op] = pt.layers.reduce((a, r) => a + r[k], 0) + pt.global[k]; });
    pre = { cpu: (cu.user + cu.system) / 1000, wall: w, ops };
    model.reset();
  }
  const prompt = C > 8 ? Array.from({ length: C }, (_, i) => 100 + ((i * 7919) % 20000)) : [1, 450, 3681, 1044, 338, 263, 1243, 9508];
  model.reset();
  e.forward(prompt, 0);
  let pos = prompt.length;
  for (let i = 0; i < 4; i++) e.forward([100 + i], pos++);
  e.setTiming(true);   // zeroes the counters
  const fwd = [], smp = [];
  const rng = e.seedRng(1);
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    e.forward([200 + (i % 1000)], pos++);
    const t1 = performance.now();
    e.sample({ temperature: 0 }, rng, []);
    fwd.push(t1 - t0); smp.push(performance.now() - t1);
  }
  const cu = process.cpuUsage(c0);
  const ot = e.opTimes();
  e.setTiming(false);
  const ops = {};
  ot.ops.forEach((op, k) => { ops[op] = (ot.layers.reduce((a, r) => a + r[k], 0) + ot.global[k]) / N; });
  const fsum = fwd.reduce((a, b) => a + b, 0) / N;
  model.reset();
  return { forward: median(fwd), forwardMean: fsum, sample: median(smp), ops, cpu: (cu.user + cu.system) / 1000 / N, pre };
}
async function genMs(model) {
  model.reset();
  for await (const _ of model.generate('The Debian project is', { maxTokens: N, temperature: 0, ignoreEos: true })) { /* drain */ }
  return 1000 / model.stats.decodeTps;
}

const multi = threadsList.some((t) => t > 1);
const xc0 = multi ? await crossCoreNs() : null;   // the cross-core round trip before and after (runs on 2+ threads)
const m0 = machine();
for (let r = 0; r < rounds; r++) {
  for (const v of variants) {
    const x = measure(v.model);
    x.generate = await genMs(v.model);
    v.res.push(x);
  }
}
const m1 = machine();
const xc1 = multi ? await crossCoreNs() : null;
const f = (x) => x.toFixed(3);
console.log(`model ${file}: ${c.n_layers} layers, dim ${c.dim}, hidden ${c.hidden_dim}, vocab ${c.vocab_size}; matrices ${dtypes.join('/')}, output ${outType}`);
if (C > 8) console.log(`decode after a prompt of ${C} tokens (positions ${C}..${C + 4 + N})`);
console.log(`${m0.cpu}, ${m0.nproc} CPUs, Node ${m0.node}, ${threads} thread(s), ${N} tokens x ${rounds} rounds, ${m0.date} .. ${m1.date}, load average ${m0.loadavg[0].toFixed(2)} -> ${m1.loadavg[0].toFixed(2)}, THP ${m0.thp ?? 'n/a'} (${hugePagesMB() ?? 'n/a'} MB in huge pages at the end)${multi ? `, cross-core round trip ${xc0 ?? "n/a"} -> ${xc1 ?? "n/a"} ns` : ''}`);
const opNames = Object.keys(variants[0].res[0].ops);
console.log(`\n| ms per token | ${variants.map((v) => v.name).join(' | ')} | MB per token |`);
console.log(`|---|${variants.map(() => '---').join('|')}|---|`);
const row = (label, get, mb = '') => console.log(`| ${label} | ${variants.map((v) => f(median(v.res.map(get)))).join(' | ')} | ${mb} |`);
for (const op of opNames) {
  const b = bytes[op];
  row(op, (x) => x.ops[op], b ? (b / 1e6).toFixed(1) : '');
}
row('sum of op counters', (x) => Object.values(x.ops).reduce((a, b) => a + b, 0));
row('Engine.forward (median)', (x) => x.forward);
row('Engine.sample (greedy)', (x) => x.sample);
row('CPU time per token (forward + sample; 1 thread: robust to other processes)', (x) => x.cpu);
row('generate() per token', (x) => x.generate);
if (P > 0) {
  row(`prefill: CPU ms of one ${P}-token prompt forward`, (x) => x.pre.cpu);
  row(`prefill: wall ms of one ${P}-token prompt forward`, (x) => x.pre.wall);
  console.log(`\n| prefill of ${P} tokens: ms per op class (timing counters on) | ${variants.map((v) => v.name).join(' | ')} | GMAC/s (weights x tokens / op time) |`);
  console.log(`|---|${variants.map(() => '---').join('|')}|---|`);
  for (const op of Object.keys(variants[0].res[0].pre.ops)) {
    const ms = median(variants[0].res.map((x) => x.pre.ops[op]));
    const n = params[op] ?? 0;   // the matmul op classes; the output head runs for the last token only
    row(op, (x) => x.pre.ops[op], n ? ((n * P) / (ms * 1e6)).toFixed(1) : '');
  }
}
console.log(`\n| GB/s (weights streamed / op time) | ${variants.map((v) => v.name).join(' | ')} |`);
console.log(`|---|${variants.map(() => '---').join('|')}|`);
for (const op of Object.keys(bytes)) console.log(`| ${op} | ${variants.map((v) => (bytes[op] / 1e6 / median(v.res.map((x) => x.ops[op]))).toFixed(1)).join(' | ')} |`);
for (const v of variants) v.model.dispose();
