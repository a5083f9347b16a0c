#!/usr/bin/env node
// Prefill and decode tokens per second at the shapes of issue 15 (random-weight llama models, see
// bench/lib/shape-model.mjs), through `aether bench`, for each dtype and thread count. Rounds are
// interleaved (every configuration once per round) and medians reported, so machine noise hits all alike.
//   node bench/prefill.mjs [--shapes s15m,phi3] [--dtypes f32,q8_0,q4_0] [--threads 1,2] [--rounds 3]
//                          [--prompt-tokens 64] [--gen-tokens 32] [--busy] [--spin 200000,20000] [--simd relaxed,plain] [--json]
//                          [--files a.rknot,b.gguf]   (model files instead of --shapes / --dtypes, e.g. Q4_K_M files
//                                                      from bench/gen-gguf.mjs; shape = the file name)
//                          [--ctx 512] [--single-below 0,16e6]   (aether bench --ctx; --single-below: one configuration per
//                                                      value for runs with more than one thread, EngineOptions.singleThreadBelow)
// --busy runs a competing busy loop (`node -e 'for(;;){}'`, nice 0) for the whole measurement: the
// "other core is busy" case of issue 15.
import { execFileSync, spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { args, machine, median, repoRoot } from './lib/common.mjs';
import { shapeModel } from './lib/shape-model.mjs';

const { has, opt } = args();
const list = (flag, def) => String(opt(flag, def)).split(',').filter(Boolean);
const shapes = list('--shapes', 's15m,phi3');
const dtypes = list('--dtypes', 'f32,q8_0,q4_0');
const threads = list('--threads', '1,2').map(Number);
const rounds = Number(opt('--rounds', 3));
const P = Number(opt('--prompt-tokens', 64)), G = Number(opt('--gen-tokens', 32));
const json = has('--json');
// --spin: spin iterations of a waiting thread before it sleeps (aether bench --spin), one configuration per value
const spins = opt('--spin') ? list('--spin').map(Number) : [undefined];
const singles = opt('--single-below') ? list('--single-below').map(Number) : [undefined];
const ctx = opt('--ctx');
// --cli: another build's dist/cli/aether.js (e.g. a copy of the previous commit's dist/ and wasm/), for before/after in one run
const clis = list('--cli', path.join(repoRoot, 'dist/cli/aether.js'));
// --simd: the module build(s) to compare (aether bench --simd; default: the CLI's own default, 'auto')
const simds = opt('--simd') ? list('--simd') : [undefined];

const configs = [];
const models = opt('--files') ? list('--files').map((f) => ({ shape: path.basename(f).replace(/\.(rknot|gguf)$/, ''), dtype: 'file', file: f }))
  : [];
if (!models.length) for (const shape of shapes) for (const dtype of dtypes) models.push({ shape, dtype, file: await shapeModel(shape, dtype) });
for (const { shape, dtype, file } of models) {
  for (const t of threads) for (const cli of clis) for (const simd of simds) for (const spin of (t > 1 ? spins : [undefined])) for (const single of (t > 1 ? singles : [undefined])) configs.push({ shape, dtype, threads: t, file, cli, simd, spin, single, pre: [], dec: [] });
}
const busy = has('--busy') ? spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }) : null;
const loads = [];
try {
  for (let r = 0; r < rounds; r++) {
    for (const c of configs) {
      loads.push(os.loadavg()[0]);
      const out = execFileSync(process.execPath, [c.cli, 'bench', c.file, '--threads', String(c.threads), '--prompt-tokens', String(P),
        '--gen-tokens', String(G), '--reps', '1', ...(c.spin !== undefined ? ['--spin', String(c.spin)] : []), ...(c.single !== undefined ? ['--single-below', String(c.single)] : []),
        ...(ctx !== undefined ? ['--ctx', String(ctx)] : []), ...(c.simd ? ['--simd', c.simd] : []), '--json'], { encoding: 'utf8' });
      const j = JSON.parse(out);
      c.pre.push(j.prefill_tps); c.dec.push(j.decode_tps);
    }
  }
} finally {
  busy?.kill();
}
const host = { ...machine(), loadavg_during: { min: Math.min(...loads), median: median(loads), max: Math.max(...loads) }, busy: !!busy };
const rows = configs.map(({ shape, dtype, threads: t, cli, simd, spin, single, pre, dec }) => ({ shape, dtype, threads: t, spin, single, simd, build: clis.length > 1 ? clis.indexOf(cli) : undefined, prefill_tps: median(pre), decode_tps: median(dec), prefill_all: pre, decode_all: dec }));
if (json) { process.stdout.write(JSON.stringify({ machine: host, prompt_tokens: P, gen_tokens: G, rounds, rows }, null, 1) + '\n'); process.exit(0); }
console.log(`machine: ${host.cpu}, ${host.nproc} cores, node ${host.node}, ${host.date}; 1-min load during the run ${host.loadavg_during.min.toFixed(1)}..${host.loadavg_during.max.toFixed(1)}${busy ? '; with a competing busy loop' : ''}`);
console.log(`medians of ${rounds} interleaved rounds; prefill ${P} tokens, decode ${G} tokens`);
if (clis.length > 1) console.log('builds: ' + clis.map((c, i) => `${i} = ${c}`).join(', '));
console.log('| shape | dtype | threads | prefill tok/s | decode tok/s | prefill xT/1T | decode xT/1T |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  const one = rows.find((o) => o.shape === r.shape && o.dtype === r.dtype && o.threads === 1 && o.build === r.build && o.simd === r.simd);
  const ratio = (a, b) => (one && r.threads !== 1 ? (a / b).toFixed(2) + 'x' : '');
  console.log(`| ${r.shape} | ${r.dtype}${r.build !== undefined ? ' (build ' + r.build + ')' : ''}${r.simd ? ' ' + r.simd : ''} | ${r.threads}${r.spin !== undefined ? ' (spin ' + r.spin + ')' : ''}${r.single !== undefined ? ' (single-below ' + r.single + ')' : ''} | ${r.prefill_tps.toFixed(1)} | ${r.decode_tps.toFixed(1)} | ${ratio(r.prefill_tps, one?.prefill_tps)} | ${ratio(r.decode_tps, one?.decode_tps)} |`);
}
