#!/usr/bin/env node
// First vs later generations in Debian's Chromium through the engine Worker (the browser demo's path): V8 starts
// wasm in its baseline tier and optimises hot functions later, so without a warm-up the first generation after a
// load is slower than the tenth. Loads MODEL once per configuration in a fresh page and runs --gens greedy
// generations of --gen-tokens tokens for the same prompt; prints decode / prefill tok/s of each, and
// first / median(rest).
//
//   node bench/browser-first-run.mjs [--model models/tiny-llama-a-q8_0.rknot] [--gens 10] [--gen-tokens 32]
//        [--threads 1] [--warmup on,off] [--simd auto] [--pages 1] [--pause 0] [--gap 0] [--load-options JSON] [--js-flags F] [--timing] [--json]
//
// --pages N: each configuration N times, each in a fresh page (a fresh load); prints the median over the pages of
// first / median(rest), since one page's first generation is one sample of a noisy quantity.
//
// --pause MS: wait MS ms between the load and the first generation (a user typing a prompt; V8 keeps compiling
// optimised code in the background after the warm-up). --load-options JSON: more options for Aether.load (e.g.
// '{"spin":0}'). --gap MS: wait MS ms before each later generation too (in the
// demo every generation follows a pause: --pause P --gap P compares like with like). --js-flags F: V8 flags for Chromium (e.g.
// --trace-wasm-compilation-times; its output goes to this process's stderr).
//
// --timing: the engine's time counters (setTiming / metrics()) on for every generation (zeroed before each): ms per
// op class of each generation (prefill and decode together) and the rest of the generation's time (outside the
// forward pass: tokenizer, sampler, the worker's messages), first generation vs the median of the others.
//
// The page is a blank one (bench/lib/blank.html): until session 12 this bench used examples/browser/minimal.html, whose
// own script loads the tiny model with 2 threads and generates while the bench's engine warms up and runs its first
// generations, which made those look 2-4x slower than later ones on a 2-core machine.
//
// MODEL is a path under the repository (it is served by examples/browser/server.mjs; a symlink in the git-ignored
// build/ folder serves a file from elsewhere) or a URL.
import fs from 'node:fs';
import path from 'node:path';
import { args, machine, median, repoRoot } from './lib/common.mjs';
import { startServer } from '../examples/browser/server.mjs';
import { CHROMIUM, launchChromium } from '../scripts/chromium.mjs';

const a = args();
if (a.has('--help') || a.has('-h')) {
  process.stdout.write(fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n').filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n') + '\n');
  process.exit(0);
}
const MODEL = a.opt('--model', 'models/tiny-llama-a-q8_0.rknot');
const GENS = Number(a.opt('--gens', 10));
const G = Number(a.opt('--gen-tokens', 32));
const THREADS = Number(a.opt('--threads', 1));
const SIMD = a.opt('--simd', 'auto');
const WARMUPS = a.opt('--warmup', 'on,off').split(',');
const TIMING = a.has('--timing');
const PAGES = Number(a.opt('--pages', 1));
const PAUSE = Number(a.opt('--pause', 0));
const JS_FLAGS = a.opt('--js-flags', '');
const GAP = Number(a.opt('--gap', 0));
const LOAD_OPTIONS = JSON.parse(a.opt('--load-options', '{}'));

const server = await startServer({ port: 0, isolate: true });
const results = [];
try {
  for (const warm of WARMUPS) for (let pg = 0; pg < PAGES; pg++) {
    const { page, close } = await launchChromium({ prefix: 'aether-first-run-', args: JS_FLAGS ? [`--js-flags=${JS_FLAGS}`, '--enable-logging=stderr', '--v=0'] : [] });
    try {
      await page.goto(`${server.url}bench/lib/blank.html`);   // not the minimal demo page: it loads and runs its own engine
      const modelUrl = /^https?:/.test(MODEL) ? MODEL : `${server.url}${path.relative(repoRoot, path.resolve(repoRoot, MODEL))}`;
      const r = await page.evaluate(async ({ modelUrl, GENS, G, THREADS, SIMD, warm, TIMING, PAUSE, GAP, LOAD_OPTIONS }) => {
        const { Aether } = await import('/dist/src/browser/index.js');
        const t0 = performance.now(), t0w = Date.now();
        const model = await Aether.load(modelUrl, { threads: THREADS, simd: SIMD, cache: false, warmup: warm === 'on', ...LOAD_OPTIONS });
        const loadMs = performance.now() - t0;
        if (PAUSE > 0) await new Promise((r) => setTimeout(r, PAUSE));
        const gens = [];
        for (let g = 0; g < GENS; g++) {
          const tokens = [];
          if (g > 0 && GAP > 0) await new Promise((r) => setTimeout(r, GAP));
          const wall0 = Date.now();
          if (TIMING) await model.setTiming(true);
          for await (const p of model.generate('The Debian project is a free operating system. '.repeat(6), { maxTokens: G, greedy: true })) tokens.push(p.token);
          let ops = null;
          if (TIMING) {   // ms per op class, summed over layers, of this generation
            const mt = await model.metrics();
            ops = {};
            for (const L of mt.layers) for (const [k, v] of Object.entries(L.opSeconds ?? {})) ops[k] = (ops[k] ?? 0) + v * 1000;
            for (const [k, v] of Object.entries(mt.globalOpSeconds ?? {})) ops[k] = (ops[k] ?? 0) + v * 1000;
          }
          await model.reset();
          gens.push({ decodeTps: model.stats.decodeTps, prefillTps: model.stats.prefillTps, prefillMs: model.stats.prefillMs, decodeMs: model.stats.decodeMs, ops, tokens: tokens.join(','), wall: [new Date(wall0).toISOString(), new Date().toISOString()] });
        }
        const out = { loadEnd: new Date(t0w + loadMs).toISOString(), loadMs, simd: model.simd, threads: model.threads, warmup: model.warmup, gens };
        await model.dispose();
        return out;
      }, { modelUrl, GENS, G, THREADS, SIMD, warm, TIMING, PAUSE, GAP, LOAD_OPTIONS });
      const dec = r.gens.map((g) => g.decodeTps), pre = r.gens.map((g) => g.prefillTps);
      const same = r.gens.every((g) => g.tokens === r.gens[0].tokens);
      const row = {
        warmup: warm, page: pg, warmup_stats: r.warmup, simd: r.simd, threads: r.threads, load_ms: Math.round(r.loadMs),
        decode_tps: dec.map((x) => +x.toFixed(1)), prefill_tps: pre.map((x) => +x.toFixed(1)),
        first_over_rest_decode: +(dec[0] / median(dec.slice(1))).toFixed(3),
        first_over_rest_prefill: +(pre[0] / median(pre.slice(1))).toFixed(3), same_tokens: same,
      };
      if (TIMING) {   // per op class: first generation, median of the others
        const cls = Object.keys(r.gens[0].ops);
        const rest = (f) => median(r.gens.slice(1).map(f));
        row.timing_ms = {};
        for (const k of cls) row.timing_ms[k] = [+r.gens[0].ops[k].toFixed(2), +rest((g) => g.ops[k]).toFixed(2)];
        const opsum = (g) => cls.reduce((s, k) => s + g.ops[k], 0);
        row.timing_ms.sum_of_ops = [+opsum(r.gens[0]).toFixed(2), +rest(opsum).toFixed(2)];
        row.timing_ms.prefill_ms = [+r.gens[0].prefillMs.toFixed(2), +rest((g) => g.prefillMs).toFixed(2)];
        row.timing_ms.decode_ms = [+r.gens[0].decodeMs.toFixed(2), +rest((g) => g.decodeMs).toFixed(2)];
        row.timing_ms.outside_forward = [+(r.gens[0].prefillMs + r.gens[0].decodeMs - opsum(r.gens[0])).toFixed(2),
          +rest((g) => g.prefillMs + g.decodeMs - opsum(g)).toFixed(2)];
      }
      results.push(row);
      if (JS_FLAGS && !a.has('--json')) {   // wall-clock times to line up with the trace's (DEBUG=pw:browser prints it with times)
        process.stdout.write(`  load ended ${r.loadEnd}; generations ${r.gens.map((x) => x.wall.join(' - ')).join(', ')}\n`);
      }
      if (!a.has('--json')) {
        process.stdout.write(`warmup ${warm} ${JSON.stringify(r.warmup)} (${r.simd} SIMD, ${r.threads} thread(s), load ${row.load_ms} ms)\n` +
          `  decode tok/s:  ${row.decode_tps.join(' ')}\n  prefill tok/s: ${row.prefill_tps.join(' ')}\n` +
          `  first / median(2..${GENS}): decode ${row.first_over_rest_decode}, prefill ${row.first_over_rest_prefill}; same tokens every run: ${same}\n` +
          (row.timing_ms ? `  ms, first generation / median of the others: ${Object.entries(row.timing_ms).map(([k, [f, m]]) => `${k} ${f} / ${m}`).join(', ')}\n` : ''));
      }
    } finally {
      await close();
    }
  }
} finally {
  await server.close();
}
if (PAGES > 1 && !a.has('--json')) {
  for (const warm of WARMUPS) {
    const rows = results.filter((r) => r.warmup === warm);
    const f = (k) => rows.map((r) => r[k]);
    process.stdout.write(`warmup ${warm}, ${rows.length} pages: first / median(rest) decode ${f('first_over_rest_decode').join(' ')} (median ${median(f('first_over_rest_decode')).toFixed(3)}), ` +
      `prefill ${f('first_over_rest_prefill').join(' ')} (median ${median(f('first_over_rest_prefill')).toFixed(3)}); ` +
      `tok/s, median over the pages: decode first ${median(rows.map((r) => r.decode_tps[0])).toFixed(0)}, later ${median(rows.map((r) => median(r.decode_tps.slice(1)))).toFixed(0)}, ` +
      `prefill first ${median(rows.map((r) => r.prefill_tps[0])).toFixed(0)}, later ${median(rows.map((r) => median(r.prefill_tps.slice(1)))).toFixed(0)}` +
      (TIMING ? `; engine op time first / median(rest) ${rows.map((r) => (r.timing_ms.sum_of_ops[0] / r.timing_ms.sum_of_ops[1]).toFixed(3)).join(' ')} ` +
        `(median ${median(rows.map((r) => r.timing_ms.sum_of_ops[0] / r.timing_ms.sum_of_ops[1])).toFixed(3)})` : '') + '\n');
  }
}
const report = { bench: 'browser-first-run', pages: PAGES, machine: machine(), chromium: CHROMIUM, model: MODEL, gen_tokens: G, results };
if (a.has('--json')) process.stdout.write(JSON.stringify(report) + '\n');
else process.stdout.write(`machine: ${JSON.stringify(report.machine)}\n`);
