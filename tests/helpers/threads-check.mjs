// Child process of tests/compress.test.mjs: a fresh process whose FIRST engine is a 2-thread one (its code not
// tiered up yet) with blocking waits (spin 0), compared with 1 thread. Prints {"diff": N, "finite": bool}.
//   node tests/helpers/threads-check.mjs MODEL
import { loadTiny, runLogits, bitDiff } from './ffn.mjs';

const file = process.argv[2];
const runs = [];
for (const threads of [2, 1]) {
  const model = await loadTiny(file, threads, { spin: 0 });
  const r = [];
  for (let i = 0; i < 3; i++) r.push(runLogits(model, [1]), runLogits(model));
  runs.push(r);
  model.dispose();
}
let diff = 0;
for (let i = 0; i < runs[0].length; i++) diff += bitDiff(runs[0][i][0], runs[1][i][0]) + bitDiff(runs[0][i][1], runs[1][i][1]);
console.log(JSON.stringify({ diff, finite: runs[1][0][0].every(Number.isFinite) }));
process.exit(0);
