#!/usr/bin/env node
// What a prompt's chunking costs: one P-token prompt run as Engine.forward chunks of each size in --chunks (the chunks
// before the last without an output head, as AetherModel.prefill runs them; "N+logits": every chunk with the output
// head, as before the no-logits chunks), and model.generate()'s own prefill (its chunk policy), in
// interleaved rounds in ONE process; CPU time (1 thread: the compute itself), medians and minima; with the per-op
// time counters of each case (model.setTiming). The last chunk's logits are checked bit for bit across the cases.
//   node bench/prefill-chunks.mjs MODEL [--simd relaxed] [--prompt 64] [--chunks 16+logits,16,32,64] [--rounds 7]
//                                       [--roots DIR,DIR]   (built checkouts, each loaded in this process: their generate()
//                                       prefill is measured in the same interleaved rounds, a before / after; the chunk
//                                       cases run on the first; default: this checkout)
import { args, machine, median, repoRoot, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt } = args();
const file = argv[0];
if (!file || file.startsWith('--')) throw new Error('usage: node bench/prefill-chunks.mjs MODEL [--simd relaxed] [--prompt 64] [--chunks 16+logits,16,64] [--rounds 7]');
const P = Number(opt('--prompt', 64)), rounds = Number(opt('--rounds', 7)), simd = String(opt('--simd', 'relaxed'));
const chunks = String(opt('--chunks', '16+logits,16,32,64')).split(',');
const roots = String(opt('--roots', repoRoot)).split(',');
const models = [];
for (const root of roots) {
  const { load } = await import(`${root}/dist/src/index.js`);
  models.push(await load(file, { threads: 1, simd, nCtx: Math.max(512, P + 32), maxBatch: P, warmup: false }));
}
const model = models[0], e = model.engine;
// varied ids (every row of a real prompt's kind of work; the compute does not depend on the values)
const ids = Array.from({ length: P }, (_, i) => 100 + ((i * 7919) % Math.min(20000, model.config.vocab_size - 100)));
const cpuNow = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };
const cases = {};
for (const c of chunks) {
  const n = parseInt(c, 10), logitsEach = c.endsWith('+logits');
  cases[`${n}-token chunks${logitsEach ? ', logits each' : ''}`] = () => {
    for (let s = 0; s < P; s += n) {
      const last = s + n >= P;
      // a checkout without the noLogits argument ignores it (its forward computes the logits of every chunk)
      e.forward(ids.slice(s, s + n), s, false, 0, !logitsEach && !last);
    }
  };
}
models.forEach((m, i) => { cases[`generate() prefill${roots.length > 1 ? ` (${roots[i]})` : ''}`] = m; });
const res = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
let ref = null;
const m0 = machine();
for (let r = 0; r < rounds; r++) {
  for (const [k, f] of Object.entries(cases)) {
    const gm = typeof f === 'function' ? model : f, ge = gm.engine;
    gm.reset();
    ge.setTiming(true);
    const c0 = cpuNow();
    if (typeof f !== 'function') {
      for await (const _ of gm.generate(ids, { maxTokens: 1, greedy: true })) { /* the prompt's first token */ }
    } else f();
    const cpu = cpuNow() - c0;
    const ot = ge.opTimes();
    ge.setTiming(false);
    const ops = {};
    ot.ops.forEach((op, j) => { ops[op] = ot.layers.reduce((a, row) => a + row[j], 0) + ot.global[j]; });
    res[k].push({ cpu, ...ops });
    {
      const l = ge.logits();
      if (!ref) ref = l;
      else if (!l.every((x, i) => Object.is(x, ref[i]))) throw new Error(`${k}: the prompt's logits differ from the first case's`);
    }
  }
}
const m1 = machine();
const c = model.config;
console.log(`model ${file}: ${c.n_layers} layers, dim ${c.dim}, hidden ${c.hidden_dim}, vocab ${c.vocab_size}; ${simd} build, 1 thread, ${P}-token prompt, ${rounds} interleaved rounds`);
console.log(`${m0.cpu}, Node ${m0.node}, ${m0.date} .. ${m1.date}, load average ${m0.loadavg[0].toFixed(2)} -> ${m1.loadavg[0].toFixed(2)}, THP ${m0.thp ?? 'n/a'}; the prompt's logits bit-identical in every case`);
const opNames = Object.keys(res[Object.keys(res)[0]][0]).filter((k) => k !== 'cpu');
console.log(`\n| case | CPU ms median | min | tok/s (median) | ${opNames.map((o) => `${o} ms`).join(' | ')} |`);
console.log(`|---|---|---|---|${opNames.map(() => '---').join('|')}|`);
for (const [k, v] of Object.entries(res)) {
  const med = median(v.map((x) => x.cpu));
  console.log(`| ${k} | ${med.toFixed(1)} | ${Math.min(...v.map((x) => x.cpu)).toFixed(1)} | ${(P / med * 1000).toFixed(1)} | ${opNames.map((o) => median(v.map((x) => x[o])).toFixed(1)).join(' | ')} |`);
}
for (const m of models) m.dispose();
