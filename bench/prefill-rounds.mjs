#!/usr/bin/env node
// One model load, then one P-token prompt forward per round (model.reset() between), with the forward's time counters
// per (layer, op class): what the first prompt after a load pays (fresh KV-cache pages: system time) and whether
// the layers run alike.
//   node bench/prefill-rounds.mjs MODEL [--prefill 64] [--rounds 4] [--threads 1] [--simd relaxed] [--ctx 512]
// Prints per round: wall / user / system ms, a few layers' ms per op class, and the sums over layers.
import { args, machine, repoRoot, timedPromptForward, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt } = args();
const file = argv[0];
if (!file || file.startsWith('--')) throw new Error('usage: node bench/prefill-rounds.mjs MODEL [--prefill 64] [--rounds 4]');
const P = Number(opt('--prefill', 64)), rounds = Number(opt('--rounds', 4));
const { Aether } = await import(`${repoRoot}/dist/src/index.js`);
const model = await Aether.load(file, { threads: Number(opt('--threads', 1)), simd: String(opt('--simd', 'relaxed')), nCtx: Number(opt('--ctx', 512)) });
console.log(`${file}: ${JSON.stringify(machine())}`);
const ids = Array.from({ length: P }, (_, i) => 100 + ((i * 7919) % 20000));
for (let r = 0; r < rounds; r++) {
  const { wall, cpu: cu, ops: pt } = timedPromptForward(model, ids);
  const L = pt.layers.length;
  console.log(`round ${r}: wall ${wall.toFixed(0)} ms, user ${(cu.user / 1000).toFixed(0)} ms, system ${(cu.system / 1000).toFixed(0)} ms`);
  for (const l of [...new Set([0, 1, Math.floor(L / 2), L - 1])].filter((l) => l < L))
    console.log(`  layer ${l}: ${pt.ops.map((op, k) => `${op} ${pt.layers[l][k].toFixed(1)}`).join(', ')}`);
  console.log(`  all layers: ${pt.ops.map((op, k) => `${op} ${(pt.layers.reduce((a, x) => a + x[k], 0) + pt.global[k]).toFixed(0)}`).join(', ')}`);
}
