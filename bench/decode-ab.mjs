#!/usr/bin/env node
// CPU time per decode token of two (or more) checkouts' builds, loaded into ONE process and measured in interleaved
// rounds: the A/B for a kernel change end to end. CPU time (process.cpuUsage) is robust to other processes' wall
// time on a shared machine (not to a busy SMT sibling); wall time is printed too. 1 thread by default.
//   node bench/decode-ab.mjs MODEL CHECKOUT_A CHECKOUT_B ... [--simd relaxed,plain] [--tokens 16] [--rounds 7]
//                            [--threads 1]
// --threads N > 1: every build runs on N threads (its own worker pool; the pools of the builds not being measured
// sleep); then CPU time counts the waiting threads' spinning too, so compare the wall times (medians and minima).
// A checkout is a directory with a built dist/ and wasm/ (e.g. a second git worktree of the revision to compare).
// Per round and build: a prompt of 8 ids, 2 warm-up tokens, then --tokens Engine.forward calls; medians over rounds.
// --prefill P: also one P-token prompt forward per round and build (no logits but the last token's, as a prompt;
// CPU ms per prompt token and prompt tokens per CPU second), before the decode part.
// --context C: the decode tokens follow a prompt of C tokens instead of 8 (attention over a longer context).
import path from 'node:path';
import { args, crossCoreNs, hugePagesMB, machine, median, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt } = args();
const pos = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
const [file, ...roots] = pos;
if (!file || roots.length < 1) throw new Error('usage: node bench/decode-ab.mjs MODEL CHECKOUT_A [CHECKOUT_B ...] [--simd relaxed,plain] [--tokens 16] [--rounds 7]');
const simds = String(opt('--simd', 'relaxed,plain')).split(','), N = Number(opt('--tokens', 16)), rounds = Number(opt('--rounds', 7));
const threads = Number(opt('--threads', 1));
const P = Number(opt('--prefill', 0)), C = Number(opt('--context', 8));
const vs = [];
for (const root of roots) {
  const { Aether } = await import(path.resolve(root, 'dist/src/index.js'));
  for (const simd of simds) {
    const model = await Aether.load(file, { threads, simd, nCtx: Math.max(512, C + N + 16, P + 16), ...(P > 512 ? { maxBatch: Math.min(4096, P) } : {}) });
    vs.push({ name: `${root} ${model.simd}`, model, cpu: [], wall: [], pcpu: [], pwall: [] });
  }
}
const xc0 = threads > 1 ? await crossCoreNs() : null;   // the cross-core round trip before and after
const m0 = machine();
for (let r = 0; r < rounds; r++) for (const v of vs) {
  const e = v.model.engine;
  if (P > 0) {
    const ids = Array.from({ length: P }, (_, i) => 100 + ((i * 7919) % 20000));
    const c0 = process.cpuUsage(), t0 = performance.now();
    e.forward(ids, 0);
    const c = process.cpuUsage(c0);
    v.pcpu.push((c.user + c.system) / 1000 / P);
    v.pwall.push((performance.now() - t0) / P);
    v.model.reset();
  }
  e.forward(C === 8 ? [1, 450, 3681, 1044, 338, 263, 1243, 9508] : Array.from({ length: C }, (_, i) => 100 + ((i * 7919) % 20000)), 0);
  let p = C;
  for (let i = 0; i < 2; i++) e.forward([100 + i], p++);
  const c0 = process.cpuUsage(), t0 = performance.now();
  for (let i = 0; i < N; i++) e.forward([200 + i], p++);
  const c = process.cpuUsage(c0);
  v.cpu.push((c.user + c.system) / 1000 / N);
  v.wall.push((performance.now() - t0) / N);
  v.model.reset();
}
const m1 = machine();
const xc1 = threads > 1 ? await crossCoreNs() : null;
console.log(`${file}: ${m0.cpu}, Node ${m0.node}, ${threads} thread(s), ${N} tokens after ${C} x ${rounds} interleaved rounds, ${m0.date} .. ${m1.date}, load average ${m0.loadavg[0].toFixed(1)} -> ${m1.loadavg[0].toFixed(1)}, THP ${m0.thp ?? 'n/a'} (${hugePagesMB() ?? 'n/a'} MB in huge pages at the end)${threads > 1 ? `, cross-core round trip ${xc0 ?? "n/a"} -> ${xc1 ?? "n/a"} ns` : ''}`);
console.log(`\n| checkout, build | CPU ms per token (median) | min | wall ms per token (median) | min |\n|---|---|---|---|---|`);
for (const v of vs) console.log(`| ${v.name} | ${median(v.cpu).toFixed(3)} | ${Math.min(...v.cpu).toFixed(3)} | ${median(v.wall).toFixed(3)} | ${Math.min(...v.wall).toFixed(3)} |`);
if (P > 0) {
  console.log(`\n| checkout, build | prompt of ${P}: CPU ms per token (median) | min | prompt tok per CPU s (median) | wall ms per token (median) |\n|---|---|---|---|---|`);
  for (const v of vs) console.log(`| ${v.name} | ${median(v.pcpu).toFixed(3)} | ${Math.min(...v.pcpu).toFixed(3)} | ${(1000 / median(v.pcpu)).toFixed(1)} | ${median(v.pwall).toFixed(3)} |`);
}
for (const v of vs) v.model.dispose();
