#!/usr/bin/env node
// Aether against its peers on the same GGUF: Aether in Node (relaxed-SIMD and plain builds), Aether in Debian's
// Chromium through the engine Worker (relaxed and plain), llama.cpp's native CPU backend through node-llama-cpp
// 3.21.1 (its prebuilt linux-x64 binary; getLlama({ gpu: false, build: "never" }): it never builds or downloads),
// and wllama 3.13.0 (llama.cpp compiled to wasm) in the same Chromium: its default build (wasm64 + JSPI) and its
// compat build (wasm32 + Asyncify, npm @wllama/wllama-compat; forced by hiding WebAssembly.Suspending from the page,
// as on a browser without JSPI). Both wllama builds come from node_modules through the local server; the browser
// context aborts (and the bench reports) any request that is not to that server, so nothing comes from a CDN.
// Same prompt ids for every runtime (seeded random ids after BOS), greedy, exactly --gen-tokens tokens (Aether with
// ignoreEos, native by raw evaluation: end-of-generation tokens do not stop a run), runs interleaved (rep by rep, runtime by
// runtime, every model loaded once), medians. Prints prefill / decode tok/s, ratios to native and greedy-token
// agreement with native: the generated ids equal up to the first difference / all ids; for wllama (whose completion
// API returns text) the number of native tokens whose pieces form a prefix of wllama's generated text. Where an Aether
// Node run parts from native, the log-probabilities of both picks at that token from Aether's logits (after the prompt
// and native's tokens so far): random-weight logits are nearly flat, and a gap of a few hundredths of a nat is a near-tie.
// Timing: Aether Node and llama-native by the wall clock around the generation (first token = end of prefill);
// for these two the process's CPU time during prefill is reported too (cpu/wall: 1.0 = one busy thread; llama-native
// gets --threads for both n_threads and n_threads_batch, node-llama-cpp's context `threads`);
// Aether Chromium by the engine's own stats; wllama by llama-server's timings (prompt / predicted per second).
//
//   node bench/peers.mjs [--shapes s15m,phi3] [--dtypes f32,q8_0,q4_0] [--layers N] [--runtimes LIST]
//        [--prompt-tokens 64] [--prompt-seed 1] [--gen-tokens 32] [--reps 3] [--threads 1] [--ctx 512] [--out /work/gen/peers] [--json]
//
//   --runtimes  comma list of: aether-node, aether-node-plain, aether-chromium, aether-chromium-plain, llama-native,
//               wllama, wllama-compat (default: all of these), and aether-chromium-i16 (the relaxed build with the
//               fused-dot forms off whatever --fused-dot says: beside aether-chromium, an A/B of the fused dot in one run)
//   --shapes    s15m (stories15M-like llama, bench/lib/peer-models.mjs: f32, q8_0, q4_0), or a real shape of
//               bench/gen-gguf.mjs (q8_0, q4_0, q4_K_M as llama-quantize mixes them): phi3 (= phi3-mini-4k, the
//               phi3 architecture with fused qkv / gate_up, vocabulary 32064), llama-3.2-1b, qwen2.5-0.5b,
//               gemma-2-2b, smollm2-135m, smollm2-360m. Unsupported shape/dtype pairs are skipped (reported).
//   --layers    layer count of the generated models (default: the shape's: s15m 6, phi3 32, ...)
//   --ctx       context length given to every runtime (default 512)
//   --out       where the synthetic GGUFs (bench/lib/peer-models.mjs) are written once and reused
//
//   --md        also print the table as Markdown (the one in docs/PERFORMANCE.md)
//   --fused-dot the Aether runtimes' relaxed prefill tile for q4_0 (LoadOptions.fusedDot): auto (default), on, off
//   --file      run this GGUF (one, e.g. a bench/gen-gguf.mjs real-shape file) instead of --shapes / --dtypes
//
// Never run by npm test. Needs the dev dependencies (node-llama-cpp with @node-llama-cpp/linux-x64, playwright-core,
// @wllama/wllama, @wllama/wllama-compat) and /usr/bin/chromium (AETHER_CHROMIUM to use another binary).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { args, crossCoreNs, machine, median, repoRoot, wasmFlags } from './lib/common.mjs';

export const RUNTIMES = ['aether-node', 'aether-node-plain', 'aether-chromium', 'aether-chromium-plain', 'llama-native', 'wllama', 'wllama-compat'];
/** Runtimes run only when named (not in the default list) */
export const EXTRA_RUNTIMES = ['aether-chromium-i16'];

// s15m: bench/lib/peer-models.mjs; the others: bench/gen-gguf.mjs MODELS ('phi3' = 'phi3-mini-4k')
export const SHAPE_NAMES = ['s15m', 'phi3', 'phi3-mini-4k', 'llama-3.2-1b', 'qwen2.5-0.5b', 'gemma-2-2b', 'smollm2-135m', 'smollm2-360m'];
export const DTYPE_NAMES = ['f32', 'q8_0', 'q4_0', 'q4_K_M'];
const REAL_SHAPE_DTYPES = ['q8_0', 'q4_0', 'q4_K_M'];

/** The GGUF of a shape / dtype / layer count (written once under `out`), or null when the pair does not exist. */
async function shapeFile(shape, dtype, { layers, out }) {
  if (shape === 's15m') {
    if (dtype === 'q4_K_M') return null;
    const { peerModel } = await import('./lib/peer-models.mjs');
    return peerModel(shape, dtype, { layers, out });
  }
  if (!REAL_SHAPE_DTYPES.includes(dtype)) return null;
  const { generate } = await import('./gen-gguf.mjs');
  return (await generate(shape === 'phi3' ? 'phi3-mini-4k' : shape, dtype, out, { layers, log: (l) => process.stderr.write(`${l}\n`) })).file;
}

/** Parse the command line (exported for tests/peers-args.test.mjs). */
export function parseOptions(argv) {
  const a = args(argv);
  const known = new Set(['--shapes', '--dtypes', '--layers', '--runtimes', '--prompt-tokens', '--gen-tokens', '--reps', '--threads',
    '--ctx', '--out', '--file', '--fused-dot', '--prompt-seed', '--json', '--md', '--help', '-h']);
  for (const x of argv) if (x.startsWith('-') && !known.has(x)) throw new Error(`peers: unknown option ${x}`);
  const list = (flag, def) => a.opt(flag, def).split(',').filter(Boolean);
  const int = (flag, def, min = 1) => {
    const v = Number(a.opt(flag, def));
    if (!Number.isInteger(v) || v < min) throw new Error(`peers: ${flag} expects an integer >= ${min}`);
    return v;
  };
  const o = {
    help: a.has('--help') || a.has('-h'), json: a.has('--json'), md: a.has('--md'),
    shapes: list('--shapes', 's15m,phi3'), dtypes: list('--dtypes', 'f32,q8_0,q4_0'), runtimes: list('--runtimes', RUNTIMES.join(',')),
    layers: a.opt('--layers') === undefined ? undefined : int('--layers', 0), P: int('--prompt-tokens', 64), G: int('--gen-tokens', 32, 2),
    reps: int('--reps', 3), threads: int('--threads', 1), ctx: int('--ctx', 512), out: a.opt('--out', '/work/gen/peers'),
    file: a.opt('--file'), promptSeed: int('--prompt-seed', 1, 0), fusedDot: { auto: 'auto', on: true, off: false }[a.opt('--fused-dot', 'auto')],
  };
  if (o.fusedDot === undefined) throw new Error('peers: --fused-dot expects auto, on or off');
  for (const s of o.shapes) if (!SHAPE_NAMES.includes(s)) throw new Error(`peers: unknown shape ${s} (${SHAPE_NAMES.join(', ')})`);
  for (const d of o.dtypes) if (!DTYPE_NAMES.includes(d)) throw new Error(`peers: unknown dtype ${d} (${DTYPE_NAMES.join(', ')})`);
  for (const r of o.runtimes) if (!RUNTIMES.includes(r) && !EXTRA_RUNTIMES.includes(r)) throw new Error(`peers: unknown runtime ${r} (${[...RUNTIMES, ...EXTRA_RUNTIMES].join(', ')})`);
  if (o.P + o.G > o.ctx) throw new Error('peers: --prompt-tokens + --gen-tokens exceed --ctx');
  return o;
}

/**
 * The prompt: P token ids (BOS first when the model adds one) that are also a text whose tokenization by
 * llama.cpp gives exactly those ids (wllama's completion API takes text only). Seeded random normal tokens
 * (token_type 1), detokenized and re-tokenized by node-llama-cpp's vocabulary, cut to P, checked to round-trip.
 */
async function makePrompt(file, P, normalIds, seed = 1) {
  const { getLlama } = await import('node-llama-cpp');
  llamaInstance ??= await getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false });
  const m = await llamaInstance.loadModel({ modelPath: file, vocabOnly: true });
  try {
    let s = seed >>> 0;
    const rand = (k) => Array.from({ length: k }, () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return normalIds[s % normalIds.length]; });
    const addBos = m.tokens.shouldPrependBosToken, bos = m.tokens.bos;
    const n = P - (addBos ? 1 : 0);
    // a few tries: random ids -> text -> its canonical ids, cut to n -> text again; kept when that text gives the same n ids
    for (let attempt = 0; attempt < 64; attempt++) {
      const t = m.tokenize(m.detokenize(rand(2 * n), true), true);
      if (t.length < n) continue;
      const cut = t.slice(0, n), text = m.detokenize(cut, true), again = m.tokenize(text, true);
      if (again.length === n && again.every((x, i) => x === cut[i])) return { ids: addBos ? [bos, ...cut] : cut, text };
    }
    throw new Error(`peers: no ${P}-token prompt that survives detokenize + tokenize found for ${file}`);
  } finally { await m.dispose(); }
}

/** CPU milliseconds of a process.cpuUsage() difference (every thread of this process: native llama.cpp's ggml
 *  threads and Aether's worker threads alike). */
const cpuMs = (c) => (c.user + c.system) / 1000;

// ---- runtimes: open(file, rknot) -> { run(ids) -> { prefillTps, decodeTps, tokens }, close() } ----
async function openAetherNode(file, o, simd) {
  const { load } = await import('../dist/src/index.js');
  const model = await load(file, { threads: o.threads, simd, nCtx: o.ctx, maxBatch: o.P, warmup: false, fusedDot: o.fusedDot });
  process.stderr.write(`aether-node ${simd}: fused dot ${model.engine.fusedDot} ${JSON.stringify(model.engine.fusedDotProbe)}\n`);
  if (model.simd !== simd) throw new Error(`aether-node: asked for ${simd}, got ${model.simd}`);
  return {
    async run(ids) {
      model.reset();
      const t0 = performance.now(), c0 = process.cpuUsage();
      let t1 = 0, c1 = null;
      const tokens = [];
      for await (const p of model.generate(ids, { maxTokens: o.G, greedy: true, ignoreEos: true })) { if (!t1) { t1 = performance.now(); c1 = process.cpuUsage(c0); } tokens.push(p.token); }
      const t2 = performance.now();
      return { prefillTps: o.P / (t1 - t0) * 1000, decodeTps: (tokens.length - 1) / (t2 - t1) * 1000, tokens, prefillCpu: cpuMs(c1) / (t1 - t0) };
    },
    /** The logits after the prompt and native's first k tokens: where this runtime's greedy run parted from native's */
    async gap(ids, ours, nat, k) {
      model.reset();
      model.engine.forward([...ids, ...nat.slice(0, k)], 0);
      return logprobGap(model.engine.logits(), ours[k], nat[k]);
    },
    async close() { model.dispose(); },
  };
}

let llamaInstance = null;
async function openLlamaNative(file, o) {
  const { getLlama } = await import('node-llama-cpp');
  llamaInstance ??= await getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false });
  const model = await llamaInstance.loadModel({ modelPath: file, gpuLayers: 0 });
  const ctx = await model.createContext({ contextSize: o.ctx, threads: o.threads, batchSize: o.P });
  const seq = ctx.getSequence();
  return {
    async run(ids) {
      await seq.clearHistory();
      const t0 = performance.now(), c0 = process.cpuUsage();
      let t1 = 0, c1 = null;
      const tokens = [];
      for await (const t of seq.evaluate(ids, { temperature: 0 })) {
        if (!t1) { t1 = performance.now(); c1 = process.cpuUsage(c0); }
        tokens.push(t);
        if (tokens.length >= o.G) break;
      }
      const t2 = performance.now();
      // each token's piece in context (special tokens as text; a lone SentencePiece token would lose its leading
      // space), to compare with runtimes that return text (wllama)
      const pieces = [];
      let prev = model.detokenize(ids, true);
      for (let i = 0; i < tokens.length; i++) {
        const cur = model.detokenize([...ids, ...tokens.slice(0, i + 1)], true);
        pieces.push(cur.startsWith(prev) ? cur.slice(prev.length) : model.detokenize([tokens[i]], true));
        prev = cur;
      }
      return { prefillTps: o.P / (t1 - t0) * 1000, decodeTps: (tokens.length - 1) / (t2 - t1) * 1000, tokens, pieces, prefillCpu: cpuMs(c1) / (t1 - t0) };
    },
    async close() { await ctx.dispose(); await model.dispose(); },
  };
}

let browser = null;
async function chromiumContext(o) {
  if (browser) return browser;
  const { startServer } = await import('../examples/browser/server.mjs');
  // the repository (dist/, wasm/, node_modules/@wllama) plus the GGUFs' folder under /gen/
  const mounts = { '/gen/': o.ggufDir };   // read per request: openWllama points it at each GGUF's folder
  const server = await startServer({ port: 0, isolate: true, mounts });
  const { launchChromium } = await import('../scripts/chromium.mjs');
  const { ctx, dir } = await launchChromium({ prefix: 'aether-peers-' });
  // nothing but the local server: any other request (e.g. wllama's CDN defaults) is aborted and reported
  const origin = new URL(server.url).origin;
  const offsite = [];
  await ctx.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith(origin) || u.startsWith('blob:') || u.startsWith('data:')) return route.continue();
    offsite.push(u);
    return route.abort();
  });
  browser = { server, ctx, dir, offsite, mounts };
  return browser;
}

async function newPage(b) {
  const page = await b.ctx.newPage();
  page.on('console', (m) => { if (process.env.PEERS_DEBUG) process.stderr.write(`[page] ${m.text()}\n`); });
  await page.goto(`${b.server.url}bench/lib/peers.html`);
  return page;
}

async function openAetherChromium(rknot, o, simd, fusedDot = o.fusedDot) {
  const b = await chromiumContext(o);
  // the server serves the repository: link the converted model into the git-ignored build/ folder
  const serveDir = path.join(repoRoot, 'build/peers-serve');
  fs.mkdirSync(serveDir, { recursive: true });
  const link = path.join(serveDir, path.basename(rknot));
  fs.rmSync(link, { force: true });
  fs.symlinkSync(rknot, link);
  const page = await newPage(b);
  const info = await page.evaluate(async ({ url, threads, simd, ctx, P, fusedDot }) => {
    const { Aether } = await import('/dist/src/browser/index.js');
    window.peerModel = await Aether.load(url, { threads, simd, nCtx: ctx, maxBatch: P, cache: false, fusedDot });
    const m = window.peerModel;
    return { simd: m.simd, threads: m.threads, warmup: m.warmup, fusedDot: m.fusedDot, fusedDotProbe: m.fusedDotProbe };
  }, { url: `${b.server.url}build/peers-serve/${path.basename(rknot)}`, threads: o.threads, simd, ctx: o.ctx, P: o.P, fusedDot });
  if (info.simd !== simd) throw new Error(`aether-chromium: asked for ${simd}, got ${info.simd}`);
  if (fusedDot === false && info.fusedDot) throw new Error('aether-chromium: asked for the fused dot off, got it on');
  process.stderr.write(`aether-chromium ${simd}: fused dot ${info.fusedDot} ${JSON.stringify(info.fusedDotProbe)}\n`);
  return {
    async run(ids) {
      return page.evaluate(async ({ ids, G }) => {
        const m = window.peerModel;
        await m.reset();
        const tokens = [];
        for await (const p of m.generate(ids, { maxTokens: G, greedy: true, ignoreEos: true })) tokens.push(p.token);
        return { prefillTps: m.stats.prefillTps, decodeTps: m.stats.decodeTps, tokens };
      }, { ids, G: o.G });
    },
    async close() { await page.evaluate(() => window.peerModel.dispose()).catch(() => {}); await page.close(); },
  };
}

// wllama 3.x: an OAI-style completion API over llama-server compiled to wasm. Its glue takes a text prompt only (an
// id array fails in the worker), so it gets the prompt's text (makePrompt: the same ids once tokenized; its
// prompt_n is checked against P), cache_prompt false so every rep evaluates the whole prompt,
// temperature 0 + top_k 1 (greedy), ignore_eos so it generates exactly G tokens; speeds from the server's timings.
async function openWllama(file, o, compat) {
  const b = await chromiumContext(o);
  b.mounts['/gen/'] = path.dirname(file);
  const page = await newPage(b);
  const info = await page.evaluate(async ({ url, threads, ctx, P, compat }) => {
    if (compat) Object.defineProperty(WebAssembly, 'Suspending', { value: undefined, configurable: true });   // as without JSPI
    const { Wllama } = await import('/node_modules/@wllama/wllama/esm/index.js');
    const w = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: { debug() {}, log() {}, info() {}, warn: console.warn, error: console.error } });
    w.setCompat({ wasm: '/node_modules/@wllama/wllama-compat/wasm/wllama.wasm', worker: '/node_modules/@wllama/wllama-compat/wasm/wllama.js' });
    const res = w.getWorkerResources();
    const blob = await (await fetch(url)).blob();
    await w.loadModel([blob], { n_ctx: ctx, n_threads: threads, n_batch: P, n_ubatch: P, n_gpu_layers: 0, n_parallel: 1 });
    window.peerWllama = w;
    return { compat: res.compat, wasm: res.wasmPath, threads: w.getNumThreads(), multithread: w.isMultithread(), version: w.constructor.getLibllamaVersion?.() };
  }, { url: `${b.server.url}gen/${path.basename(file)}`, threads: o.threads, ctx: o.ctx, P: o.P, compat });
  if (info.compat !== compat) throw new Error(`wllama: asked for compat=${compat}, got ${JSON.stringify(info)}`);
  return {
    info,
    async run(ids, text) {
      return page.evaluate(async ({ P, text, G }) => {
        let r;
        try {
          r = await window.peerWllama.createCompletion({ prompt: text, max_tokens: G, temperature: 0, top_k: 1, ignore_eos: true, cache_prompt: false, stream: false });
        } catch (e) {
          // wllama's llama-server serialises the completion's text as JSON and throws on invalid UTF-8, which a random-weight
          // model's continuation can hold (a byte token's lead byte before an ASCII piece): another --prompt-seed avoids it
          throw new Error(`wllama's completion failed (${e.message}); with the page's log (PEERS_DEBUG=1) showing "invalid UTF-8", the greedy continuation of this prompt is not UTF-8: try another --prompt-seed`);
        }
        const t = r.timings;
        if (!t || t.prompt_n !== P || t.predicted_n !== G) throw new Error(`wllama timings: ${JSON.stringify(t)} (prompt ${P}, G ${G})`);
        return { prefillTps: t.prompt_per_second, decodeTps: ((t.predicted_n - 1) / t.predicted_ms) * 1000, text: r.choices[0].text, tokens: null };
      }, { P: ids.length, text, G: o.G });
    },
    async close() { await page.evaluate(() => window.peerWllama.exit()).catch(() => {}); await page.close(); },
  };
}

async function open(rt, file, rknot, o) {
  switch (rt) {
    case 'aether-node': return openAetherNode(file, o, 'relaxed');
    case 'aether-node-plain': return openAetherNode(file, o, 'plain');
    case 'aether-chromium': return openAetherChromium(rknot, o, 'relaxed');
    case 'aether-chromium-plain': return openAetherChromium(rknot, o, 'plain');
    case 'aether-chromium-i16': return openAetherChromium(rknot, o, 'relaxed', false);
    case 'llama-native': return openLlamaNative(file, o);
    case 'wllama': return openWllama(file, o, false);
    case 'wllama-compat': return openWllama(file, o, true);
  }
  throw new Error(rt);
}

const RUNTIME_LABEL = {
  'llama-native': 'llama.cpp native', 'aether-node': 'Aether Node relaxed', 'aether-node-plain': 'Aether Node plain',
  'aether-chromium': 'Aether Chromium relaxed', 'aether-chromium-plain': 'Aether Chromium plain', 'aether-chromium-i16': 'Aether Chromium relaxed, fused dot off',
  wllama: 'wllama default (wasm64, JSPI)', 'wllama-compat': 'wllama compat (wasm32, Asyncify)',
};

/** The report's rows as a Markdown table (native first in each model's group). */
export function markdownTable(report) {
  const out = ['| model | runtime | prefill tok/s | vs native | decode tok/s | vs native | greedy agreement with native |', '|---|---|---|---|---|---|---|'];
  const models = [...new Set(report.rows.map((r) => r.model))];
  for (const m of models) {
    const rows = report.rows.filter((r) => r.model === m).sort((x, y) => (y.runtime === 'llama-native') - (x.runtime === 'llama-native'));
    for (const r of rows) {
      const agree = r.runtime === 'llama-native' || r.agree_prefix === null ? '-'
        : r.agree_same === null ? `${r.agree_prefix}/${r.gen_tokens} (text)` : `${r.agree_prefix}/${r.gen_tokens} ids`;
      out.push(`| ${m} | ${RUNTIME_LABEL[r.runtime] ?? r.runtime} | ${r.prefill_tps} | ${r.prefill_vs_native ?? ''} | ${r.decode_tps} | ${r.decode_vs_native ?? ''} | ${agree}${r.same_tokens_every_rep ? '' : ' (reps differ)'} |`);
    }
  }
  return out.join('\n');
}

/** Where two greedy runs part: the log-probabilities (natural log, log-softmax of `logits`) of the token `ours` and of
 *  `theirs` at that position, and the gap between them (>= 0 when `ours` is the argmax). On random weights the logits
 *  are nearly flat, so a small gap says the runtimes part on a near-tie, not on a wrong computation. */
export function logprobGap(logits, ours, theirs) {
  let mx = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > mx) mx = logits[i];
  let s = 0;
  for (let i = 0; i < logits.length; i++) s += Math.exp(logits[i] - mx);
  const lse = mx + Math.log(s);
  const a = logits[ours] - lse, b = logits[theirs] - lse;
  return { ours, theirs, ours_logprob: +a.toFixed(4), theirs_logprob: +b.toFixed(4), gap_nats: +(a - b).toFixed(4) };
}

/** Greedy agreement of run `r` with the native run `nat`: ids (prefix and same positions) or, for text, the number
 *  of native tokens whose pieces are a prefix of r's text. */
export function agreement(r, nat) {
  if (r.tokens) {
    const a = r.tokens, b = nat.tokens;
    let prefix = 0;
    while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
    let same = 0;
    for (let i = 0; i < Math.min(a.length, b.length); i++) same += a[i] === b[i] ? 1 : 0;
    return { prefix, same, n: b.length };
  }
  let prefix = 0, text = '';
  while (prefix < nat.pieces.length && r.text.startsWith(text + nat.pieces[prefix])) text += nat.pieces[prefix++];
  return { prefix, same: null, n: nat.pieces.length };
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  if (o.help) {
    process.stdout.write(fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n').slice(1).filter((l) => l.startsWith('//'))
      .map((l) => l.slice(3)).join('\n') + '\n');
    return;
  }
  // what the aether CLI sets for itself (js/cli/aether.ts): optimising tier from the start, relaxed SIMD
  wasmFlags();
  const { SHAPES } = await import('./lib/peer-models.mjs');
  const { MODELS } = await import('./gen-gguf.mjs');
  const layersOf = (shape) => o.layers ?? (shape === 's15m' ? SHAPES.s15m.layers : MODELS[shape === 'phi3' ? 'phi3-mini-4k' : shape].layers);
  const { resolveNodeSource } = await import('../dist/src/node/convert-on-load.js');
  const { readGGUF, ggufGet } = await import('../dist/src/formats/gguf.js');
  const rows = [];
  const jobs = o.file ? [{ file: path.resolve(o.file), label: path.basename(o.file, '.gguf') }]
    : o.shapes.flatMap((shape) => o.dtypes.map((dtype) => ({ shape, dtype, label: `${shape} L${layersOf(shape)} ${dtype}` })));
  try {
    for (const job of jobs) {
      const file = job.file ?? await shapeFile(job.shape, job.dtype, { layers: o.layers, out: o.out });
      if (!file) { process.stderr.write(`peers: no ${job.dtype} file for shape ${job.shape}: skipped\n`); continue; }
      o.ggufDir = path.dirname(file);
      const needsRknot = o.runtimes.some((r) => r.startsWith('aether-chromium'));
      const rknot = needsRknot ? await resolveNodeSource(file) : null;
      const g = await readGGUF(file);
      const types = ggufGet(g, 'tokenizer.ggml.token_type', 'array', true);
      const normal = [];
      types.forEach((t, i) => { if (Number(t) === 1) normal.push(i); });
      const prompt = await makePrompt(file, o.P, normal, o.promptSeed);
      const ids = prompt.ids;
      const sessions = {};
      for (const rt of o.runtimes) sessions[rt] = await open(rt, file, rknot, o);
      const infos = Object.fromEntries(Object.entries(sessions).map(([k, v]) => [k, v.info ?? null]));
      const res = Object.fromEntries(o.runtimes.map((r) => [r, []]));
      const gaps = {};
      try {
        for (let rep = 0; rep < o.reps; rep++) for (const rt of o.runtimes) res[rt].push(await sessions[rt].run(ids, prompt.text));
        const nat0 = res['llama-native']?.[0];
        for (const rt of o.runtimes) {   /* where an Aether Node run parts from native: by how much (a near-tie?) */
          const r0 = res[rt][0];
          if (!nat0 || !sessions[rt].gap || !r0.tokens) continue;
          const k = agreement(r0, nat0).prefix;
          if (k < Math.min(r0.tokens.length, nat0.tokens.length)) gaps[rt] = { at: k, ...await sessions[rt].gap(ids, r0.tokens, nat0.tokens, k) };
        }
      } finally {
        for (const s of Object.values(sessions)) await s.close();
      }
      const native = res['llama-native'];
      const nat = native ? { p: median(native.map((r) => r.prefillTps)), d: median(native.map((r) => r.decodeTps)) } : null;
      for (const rt of o.runtimes) {
        const p = median(res[rt].map((r) => r.prefillTps)), d = median(res[rt].map((r) => r.decodeTps));
        const agree = native ? agreement(res[rt][0], native[0]) : null;
        if (process.env.PEERS_DEBUG) process.stderr.write(`${rt}: ${JSON.stringify(res[rt][0].tokens ?? res[rt][0].text)}; native ${JSON.stringify(native?.[0].pieces?.join(''))}; prompt ${JSON.stringify(ids)}\n`);
        const key = (r) => (r.tokens ? r.tokens.join() : r.text);
        const stable = res[rt].every((r) => key(r) === key(res[rt][0]));
        rows.push({
          model: job.label, file, runtime: rt, prefill_tps: +p.toFixed(1), decode_tps: +d.toFixed(1),
          prefill_vs_native: nat ? +(p / nat.p).toFixed(2) : null, decode_vs_native: nat ? +(d / nat.d).toFixed(2) : null,
          agree_prefix: agree?.prefix ?? null, agree_same: agree?.same ?? null, gen_tokens: o.G, same_tokens_every_rep: stable,
          first_difference: gaps[rt] ?? null,
          info: infos[rt],
          // process CPU time / wall time during prefill (Node runtimes): ~1 per busy thread, less when descheduled
          prefill_cpu_per_wall: res[rt][0].prefillCpu === undefined ? null : +median(res[rt].map((r) => r.prefillCpu)).toFixed(2),
        });
        if (!o.json) {
          const r = rows[rows.length - 1];
          process.stdout.write(`${r.model.padEnd(14)} ${rt.padEnd(22)} prefill ${String(r.prefill_tps).padStart(8)} tok/s` +
            `${nat ? ` (${r.prefill_vs_native}x)` : ''}  decode ${String(r.decode_tps).padStart(7)} tok/s${nat ? ` (${r.decode_vs_native}x)` : ''}` +
            `${agree ? `  agree ${agree.prefix}/${o.G} prefix${agree.same === null ? ' (text)' : `, ${agree.same}/${o.G} ids`}` : ''}` +
            `${r.first_difference ? ` (at token ${r.first_difference.at} native's pick is ${r.first_difference.gap_nats} nats below ours)` : ''}` +
            `${stable ? '' : '  (output differs between reps)'}` +
            `${res[rt].some((x) => x.tokens && x.tokens.length < o.G) ? `  (only ${Math.min(...res[rt].map((x) => x.tokens?.length ?? o.G))} tokens generated)` : ''}` +
            `${r.prefill_cpu_per_wall === null ? '' : `  prefill cpu/wall ${r.prefill_cpu_per_wall}`}\n`);
        }
      }
    }
  } finally {
    if (browser) { await browser.ctx.close().catch(() => {}); await browser.server.close(); fs.rmSync(browser.dir, { recursive: true, force: true }); }
    if (llamaInstance) await llamaInstance.dispose?.();
  }
  const report = { bench: 'peers', machine: machine(), threads: o.threads, prompt_tokens: o.P, gen_tokens: o.G, reps: o.reps, rows,
    offsite_requests: browser?.offsite ?? [] };
  if (o.threads > 1) report.cross_core_ns = await crossCoreNs();   // after the runs: what 2+ threads paid per hand-off
  if (report.offsite_requests.length) process.stderr.write(`peers: the browser tried to reach (aborted): ${report.offsite_requests.join(', ')}\n`);
  report.machine_end = machine();
  if (o.json) process.stdout.write(JSON.stringify(report) + '\n');
  else process.stdout.write(`machine: ${JSON.stringify(report.machine)} .. load average at the end ${report.machine_end.loadavg.map((x) => x.toFixed(1)).join(' / ')}; ` +
    `threads ${o.threads}${report.cross_core_ns ? ` (cross-core round trip ${report.cross_core_ns} ns after the runs)` : ''}, prompt ${o.P}, gen ${o.G}, medians of ${o.reps}\n`);
  if (o.md && !o.json) process.stdout.write(`\n${markdownTable(report)}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => { process.stderr.write(`peers: ${e?.stack ?? e}\n`); process.exitCode = 1; });
}
