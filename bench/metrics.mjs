#!/usr/bin/env node
// Cost of the per-layer time counters (model.setTiming): decode and prefill tokens per second with the
// counters off and on, interleaved in one process (same model instance, alternating), median of the reps.
//   node --no-liftoff --no-wasm-lazy-compilation bench/metrics.mjs [--reps 7] [--threads 1] [--gen 96] [MODEL]
import path from 'node:path';
import { args, machine, median, repoRoot } from './lib/common.mjs';
import { load } from '../dist/src/aether.js';

const { argv, has, opt } = args();
const reps = Number(opt('--reps')) || 7;
const threads = Number(opt('--threads')) || 1;
const gen = Number(opt('--gen')) || 96;
const model = argv.find((a, i) => !a.startsWith('--') && !['--reps', '--threads', '--gen'].includes(argv[i - 1])) ??
  path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
const m = await load(model, { threads });
const prompt = Array.from({ length: 128 }, (_, i) => 1 + ((i * 37) % (m.config.vocab_size - 1)));
const res = { off: { prefill: [], decode: [] }, on: { prefill: [], decode: [] } };
await m.complete(prompt, { maxTokens: 8, greedy: true }); // warm-up
for (let r = 0; r < reps; r++) {
  for (const mode of r % 2 ? ['on', 'off'] : ['off', 'on']) {
    m.setTiming(mode === 'on');
    m.reset();
    const { stats } = await m.complete(prompt, { maxTokens: gen, greedy: true });
    res[mode].prefill.push(stats.prefillTps); res[mode].decode.push(stats.decodeTps);
  }
}
// the counters' own cost, bounded directly: clock reads per forward x the cost of one read
const N = 1_000_000;
let t0 = performance.now(), acc = 0;
for (let i = 0; i < N; i++) acc += performance.now();
const clockNs = ((performance.now() - t0) / N) * 1e6;
const readsPerForward = m.config.n_layers * 5 + 3;
const row = (k) => ({ prefill_tps: median(res[k].prefill), decode_tps: median(res[k].decode) });
const out = { model: path.basename(model), threads, reps, gen, off: row('off'), on: row('on'), machine: machine() };
out.clock_read_ns = clockNs; out.clock_reads_per_forward = readsPerForward;
out.decode_cost_bound = (clockNs * 1e-9 * readsPerForward) * out.off.decode_tps;  // fraction of a decode step
out.decode_ratio = out.on.decode_tps / out.off.decode_tps;
out.prefill_ratio = out.on.prefill_tps / out.off.prefill_tps;
if (has('--json')) console.log(JSON.stringify(out));
else {
  console.log(`${out.model}, ${threads} thread(s), ${reps} reps, ${machine().cpu}`);
  console.log(`timing off: prefill ${out.off.prefill_tps.toFixed(1)} tok/s, decode ${out.off.decode_tps.toFixed(1)} tok/s`);
  console.log(`timing on:  prefill ${out.on.prefill_tps.toFixed(1)} tok/s, decode ${out.on.decode_tps.toFixed(1)} tok/s`);
  console.log(`on/off: prefill ${out.prefill_ratio.toFixed(3)}, decode ${out.decode_ratio.toFixed(3)}`);
  console.log(`clock read ${clockNs.toFixed(0)} ns (JS loop; from wasm through the import add a call), ${readsPerForward} per forward: ` +
    `${(out.decode_cost_bound * 100).toFixed(2)}% of a decode step at the timing-off rate`);
}
m.dispose();
