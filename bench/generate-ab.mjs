#!/usr/bin/env node
// Generation (AetherModel.complete, what a user's call runs: forward passes and the sampler) of one or more
// checkouts' builds, loaded into ONE process and measured in interleaved rounds: ms per generated token, medians.
//   node bench/generate-ab.mjs MODEL CHECKOUT_A CHECKOUT_B ... [--threads 1] [--tokens 64] [--rounds 7]
//        [--temperature T --top-k K --top-p P --min-p M --seed S] [--top-logprobs N]   (default: greedy)
//        [--repeat-penalty R --repeat-last-n N --frequency-penalty F --presence-penalty P]   (a checkout without an option ignores it)
// A checkout is a directory with a built dist/ and wasm/ (e.g. a second git worktree). The prompt is 8 fixed ids;
// the end-of-sequence token is ignored so every round generates --tokens tokens.
import path from 'node:path';
import { args, machine, median, wasmFlags } from './lib/common.mjs';

wasmFlags();
const { argv, opt } = args();
const pos = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
const [file, ...roots] = pos;
if (!file || roots.length < 1) throw new Error('usage: node bench/generate-ab.mjs MODEL CHECKOUT_A [CHECKOUT_B ...] [--threads 1] [--tokens 64] [--rounds 7] [--temperature T --top-k K --top-p P --min-p M --seed S]');
const threads = Number(opt('--threads', 1)), N = Number(opt('--tokens', 64)), R = Number(opt('--rounds', 7));
const temp = Number(opt('--temperature', 0));
const sampling = temp > 0
  ? { temperature: temp, topK: Number(opt('--top-k', 0)), topP: Number(opt('--top-p', 1)), minP: Number(opt('--min-p', 0)), seed: Number(opt('--seed', 1)) }
  : { greedy: true };
if (opt('--top-logprobs', null) !== null) sampling.topLogprobs = Number(opt('--top-logprobs', 0));
for (const [flag, key] of [['--repeat-penalty', 'repeatPenalty'], ['--repeat-last-n', 'repeatLastN'], ['--frequency-penalty', 'frequencyPenalty'], ['--presence-penalty', 'presencePenalty']]) {
  if (opt(flag, null) !== null) sampling[key] = Number(opt(flag, 0));
}
const vs = [];
for (const root of roots) {
  const { Aether } = await import(path.resolve(root, 'dist/src/index.js'));
  vs.push({ root, m: await Aether.load(file, { threads, simd: 'relaxed', nCtx: 512 }), ms: [] });
}
const m0 = machine();
for (let r = 0; r < R; r++) for (const v of vs) {
  const t0 = performance.now();
  const res = await v.m.complete([1, 450, 3681, 1044, 338, 263, 1243, 9508], { ...sampling, maxTokens: N, ignoreEos: true });
  v.ms.push((performance.now() - t0) / res.tokens.length);
}
console.log(`${file}: ${m0.cpu}, Node ${m0.node}, ${threads} thread(s), ${N} tokens x ${R} interleaved rounds, ${JSON.stringify(sampling)}, load ${m0.loadavg[0].toFixed(1)}`);
console.log('\n| checkout | ms per token (median) | min |\n|---|---|---|');
for (const v of vs) console.log(`| ${v.root} | ${median(v.ms).toFixed(3)} | ${Math.min(...v.ms).toFixed(3)} |`);
for (const v of vs) v.m.dispose();
