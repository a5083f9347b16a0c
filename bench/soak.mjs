// Soak: long generation and load/dispose cycles with RSS sampled, on 1 and 2 threads (issue 14).
//   node bench/soak.mjs [--tokens 10000] [--cycles 200] [--threads 1,2] [--model models/tiny-llama-a-q8_0.rknot] [--json]
// Generation: greedy-free sampling in 200-token generations (the tiny model's context is 256), the cache reset between
// them, until --tokens tokens; RSS after every generation. Cycles: load, generate 4 tokens, dispose; RSS after every
// cycle. "growth" = the median of the last 3 samples - the median of the 3 from the end of warm-up (the first quarter
// of the run: compiled code, allocator pools); medians, because one RSS sample moves by a few MB with the collector.
// The CI-sized form is tests/soak.test.mjs; results go into docs/FUZZING.md ("Soak") with this command.
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { args, machine, median, repoRoot } from './lib/common.mjs';

const a = args();
const TOKENS = Number(a.opt('--tokens', 10000));
const CYCLES = Number(a.opt('--cycles', 200));
const THREADS = String(a.opt('--threads', '1,2')).split(',').map(Number);
const MODEL = path.resolve(repoRoot, a.opt('--model', 'models/tiny-llama-a-q8_0.rknot'));
const mb = () => process.memoryUsage().rss / 2 ** 20;
const round = (x) => Math.round(x * 10) / 10;

export function summary(samples) {
  const n = samples.length;
  const w = Math.min(Math.max(1, Math.floor(n / 4)), Math.max(0, n - 3));
  const warm = median(samples.slice(w, w + 3));
  const last = median(samples.slice(Math.max(0, n - 3)));
  return { first_mb: round(samples[0]), after_warmup_mb: round(warm), last_mb: round(last), max_mb: round(Math.max(...samples)), growth_mb: round(last - warm), samples: n };
}

export async function soakGenerate(threads, tokens, model = MODEL) {
  const m = await load(model, { threads });
  const rss = [mb()];
  let n = 0, i = 0;
  const t0 = performance.now();
  while (n < tokens) {
    m.reset();
    const r = await m.complete('The Debian project is', { maxTokens: Math.min(200, tokens - n), seed: ++i, temperature: 0.9 });
    n += r.tokens.length || 1;
    rss.push(mb());
  }
  const secs = (performance.now() - t0) / 1000;
  m.dispose();
  return { threads, tokens: n, generations: i, seconds: round(secs), tokens_per_s: round(n / secs), rss: summary(rss) };
}

export async function soakCycles(threads, cycles, model = MODEL) {
  const rss = [mb()];
  const t0 = performance.now();
  for (let i = 0; i < cycles; i++) {
    const m = await load(model, { threads });
    await m.complete('Hello', { maxTokens: 4, greedy: true });
    m.dispose();
    rss.push(mb());
  }
  return { threads, cycles, seconds: round((performance.now() - t0) / 1000), rss: summary(rss) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const out = { machine: machine(), model: path.relative(repoRoot, MODEL), generate: [], cycles: [] };
  for (const t of THREADS) out.generate.push(await soakGenerate(t, TOKENS));
  for (const t of THREADS) out.cycles.push(await soakCycles(t, CYCLES));
  if (a.has('--json')) console.log(JSON.stringify(out));
  else {
    console.log(`soak on ${out.machine.cpu} (${out.machine.nproc} cores), ${out.model}`);
    for (const g of out.generate) console.log(`  generate ${g.tokens} tokens, ${g.threads} thread(s): ${g.tokens_per_s} tok/s, RSS ${g.rss.after_warmup_mb} -> ${g.rss.last_mb} MB (growth ${g.rss.growth_mb} MB, max ${g.rss.max_mb})`);
    for (const c of out.cycles) console.log(`  ${c.cycles} load/dispose cycles, ${c.threads} thread(s): ${c.seconds} s, RSS ${c.rss.after_warmup_mb} -> ${c.rss.last_mb} MB (growth ${c.rss.growth_mb} MB, max ${c.rss.max_mb})`);
  }
}
