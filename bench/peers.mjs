#!/usr/bin/env node
// Aether against its peers on the same GGUF: Aether in Node (relaxed-SIMD and plain builds), Aether in Debian's
// Chromium through the engine Worker (relaxed and plain), and llama.cpp's native CPU backend through node-llama-cpp
// 3.21.1 (its prebuilt linux-x64 binary; getLlama({ gpu: false, build: "never" }): it never builds or downloads).
// Same prompt ids for every runtime (seeded random ids after BOS), greedy, runs interleaved (rep by rep, runtime by
// runtime, every model loaded once), medians. Prints prefill / decode tok/s, ratios to native and greedy-token
// agreement with native (the generated ids equal up to the first difference / all ids).
//
//   node bench/peers.mjs [--shapes s15m,phi3] [--dtypes f32,q8_0,q4_0] [--layers N] [--runtimes LIST]
//        [--prompt-tokens 64] [--gen-tokens 32] [--reps 3] [--threads 1] [--ctx 512] [--out /work/gen/peers] [--json]
//
//   --runtimes  comma list of: aether-node, aether-node-plain, aether-chromium, aether-chromium-plain, llama-native
//               (default: all). wllama (@wllama/wllama) is not wired in yet.
//   --layers    layer count of the generated models (default: the shape's: s15m 6, phi3 32)
//   --ctx       context length given to every runtime (default 512)
//   --out       where the synthetic GGUFs (bench/lib/peer-models.mjs) are written once and reused
//
// Never run by npm test. Needs the dev dependencies (node-llama-cpp with @node-llama-cpp/linux-x64, playwright-core)
// and /usr/bin/chromium (AETHER_CHROMIUM to use another binary).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { args, machine, median, repoRoot } from './lib/common.mjs';

export const RUNTIMES = ['aether-node', 'aether-node-plain', 'aether-chromium', 'aether-chromium-plain', 'llama-native'];

/** Parse the command line (exported for tests/peers-args.test.mjs). */
export function parseOptions(argv) {
  const a = args(argv);
  const known = new Set(['--shapes', '--dtypes', '--layers', '--runtimes', '--prompt-tokens', '--gen-tokens', '--reps', '--threads',
    '--ctx', '--out', '--json', '--help', '-h']);
  for (const x of argv) if (x.startsWith('-') && !known.has(x)) throw new Error(`peers: unknown option ${x}`);
  const list = (flag, def) => a.opt(flag, def).split(',').filter(Boolean);
  const int = (flag, def, min = 1) => {
    const v = Number(a.opt(flag, def));
    if (!Number.isInteger(v) || v < min) throw new Error(`peers: ${flag} expects an integer >= ${min}`);
    return v;
  };
  const o = {
    help: a.has('--help') || a.has('-h'), json: a.has('--json'),
    shapes: list('--shapes', 's15m,phi3'), dtypes: list('--dtypes', 'f32,q8_0,q4_0'), runtimes: list('--runtimes', RUNTIMES.join(',')),
    layers: a.opt('--layers') === undefined ? undefined : int('--layers', 0), P: int('--prompt-tokens', 64), G: int('--gen-tokens', 32, 2),
    reps: int('--reps', 3), threads: int('--threads', 1), ctx: int('--ctx', 512), out: a.opt('--out', '/work/gen/peers'),
  };
  for (const s of o.shapes) if (!['s15m', 'phi3'].includes(s)) throw new Error(`peers: unknown shape ${s} (s15m, phi3)`);
  for (const d of o.dtypes) if (!['f32', 'q8_0', 'q4_0'].includes(d)) throw new Error(`peers: unknown dtype ${d} (f32, q8_0, q4_0)`);
  for (const r of o.runtimes) if (!RUNTIMES.includes(r)) throw new Error(`peers: unknown runtime ${r} (${RUNTIMES.join(', ')})`);
  if (o.P + o.G > o.ctx) throw new Error('peers: --prompt-tokens + --gen-tokens exceed --ctx');
  return o;
}

function promptIds(P, vocab, seed = 1) {
  let s = seed >>> 0;
  const ids = [1];
  while (ids.length < P) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; ids.push(259 + (s % (vocab - 259))); }
  return ids;
}

// ---- runtimes: open(file, rknot) -> { run(ids) -> { prefillTps, decodeTps, tokens }, close() } ----
async function openAetherNode(file, o, simd) {
  const { load } = await import('../dist/src/index.js');
  const model = await load(file, { threads: o.threads, simd, nCtx: o.ctx, maxBatch: o.P, warmup: false });
  if (model.simd !== simd) throw new Error(`aether-node: asked for ${simd}, got ${model.simd}`);
  return {
    async run(ids) {
      model.reset();
      const t0 = performance.now();
      let t1 = 0;
      const tokens = [];
      for await (const p of model.generate(ids, { maxTokens: o.G, greedy: true })) { if (!t1) t1 = performance.now(); tokens.push(p.token); }
      const t2 = performance.now();
      return { prefillTps: o.P / (t1 - t0) * 1000, decodeTps: (tokens.length - 1) / (t2 - t1) * 1000, tokens };
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
      const t0 = performance.now();
      let t1 = 0;
      const tokens = [];
      for await (const t of seq.evaluate(ids, { temperature: 0 })) {
        if (!t1) t1 = performance.now();
        tokens.push(t);
        if (tokens.length >= o.G) break;
      }
      const t2 = performance.now();
      return { prefillTps: o.P / (t1 - t0) * 1000, decodeTps: (tokens.length - 1) / (t2 - t1) * 1000, tokens };
    },
    async close() { await ctx.dispose(); await model.dispose(); },
  };
}

let browser = null;
async function chromiumContext() {
  if (browser) return browser;
  const { chromium } = await import('playwright-core');
  const { startServer } = await import('../examples/browser/server.mjs');
  const server = await startServer({ port: 0, isolate: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-peers-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.AETHER_CHROMIUM ?? '/usr/bin/chromium', headless: false,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  browser = { server, ctx, dir };
  return browser;
}

async function openAetherChromium(rknot, o, simd) {
  const b = await chromiumContext();
  // the server serves the repository: link the converted model into the git-ignored build/ folder
  const serveDir = path.join(repoRoot, 'build/peers-serve');
  fs.mkdirSync(serveDir, { recursive: true });
  const link = path.join(serveDir, path.basename(rknot));
  fs.rmSync(link, { force: true });
  fs.symlinkSync(rknot, link);
  const page = await b.ctx.newPage();
  await page.goto(`${b.server.url}examples/browser/minimal.html`);
  const info = await page.evaluate(async ({ url, threads, simd, ctx, P }) => {
    const { Aether } = await import('/dist/src/browser/index.js');
    window.peerModel = await Aether.load(url, { threads, simd, nCtx: ctx, maxBatch: P, cache: false });
    return { simd: window.peerModel.simd, threads: window.peerModel.threads, warmup: window.peerModel.warmup };
  }, { url: `${b.server.url}build/peers-serve/${path.basename(rknot)}`, threads: o.threads, simd, ctx: o.ctx, P: o.P });
  if (info.simd !== simd) throw new Error(`aether-chromium: asked for ${simd}, got ${info.simd}`);
  return {
    async run(ids) {
      return page.evaluate(async ({ ids, G }) => {
        const m = window.peerModel;
        await m.reset();
        const tokens = [];
        for await (const p of m.generate(ids, { maxTokens: G, greedy: true })) tokens.push(p.token);
        return { prefillTps: m.stats.prefillTps, decodeTps: m.stats.decodeTps, tokens };
      }, { ids, G: o.G });
    },
    async close() { await page.evaluate(() => window.peerModel.dispose()).catch(() => {}); await page.close(); },
  };
}

async function open(rt, file, rknot, o) {
  switch (rt) {
    case 'aether-node': return openAetherNode(file, o, 'relaxed');
    case 'aether-node-plain': return openAetherNode(file, o, 'plain');
    case 'aether-chromium': return openAetherChromium(rknot, o, 'relaxed');
    case 'aether-chromium-plain': return openAetherChromium(rknot, o, 'plain');
    case 'llama-native': return openLlamaNative(file, o);
  }
  throw new Error(rt);
}

function agreement(a, b) {
  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
  let same = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) same += a[i] === b[i] ? 1 : 0;
  return { prefix, same, n: b.length };
}

async function main() {
  const o = parseOptions(process.argv.slice(2));
  if (o.help) {
    process.stdout.write(fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n').slice(1).filter((l) => l.startsWith('//'))
      .map((l) => l.slice(3)).join('\n') + '\n');
    return;
  }
  // what the aether CLI sets for itself (js/cli/aether.ts): optimising tier from the start, relaxed SIMD
  setFlagsFromString('--no-liftoff');
  setFlagsFromString('--no-wasm-lazy-compilation');
  setFlagsFromString('--experimental-wasm-relaxed-simd');
  const { peerModel, SHAPES } = await import('./lib/peer-models.mjs');
  const { resolveNodeSource } = await import('../dist/src/node/convert-on-load.js');
  const rows = [];
  try {
    for (const shape of o.shapes) for (const dtype of o.dtypes) {
      const file = await peerModel(shape, dtype, { layers: o.layers, out: o.out });
      const needsRknot = o.runtimes.some((r) => r.startsWith('aether-chromium'));
      const rknot = needsRknot ? await resolveNodeSource(file) : null;
      const ids = promptIds(o.P, SHAPES[shape].vocab);
      const sessions = {};
      for (const rt of o.runtimes) sessions[rt] = await open(rt, file, rknot, o);
      const res = Object.fromEntries(o.runtimes.map((r) => [r, []]));
      try {
        for (let rep = 0; rep < o.reps; rep++) for (const rt of o.runtimes) res[rt].push(await sessions[rt].run(ids));
      } finally {
        for (const s of Object.values(sessions)) await s.close();
      }
      const native = res['llama-native'];
      const nat = native ? { p: median(native.map((r) => r.prefillTps)), d: median(native.map((r) => r.decodeTps)) } : null;
      for (const rt of o.runtimes) {
        const p = median(res[rt].map((r) => r.prefillTps)), d = median(res[rt].map((r) => r.decodeTps));
        const agree = native ? agreement(res[rt][0].tokens, native[0].tokens) : null;
        const stable = res[rt].every((r) => r.tokens.join() === res[rt][0].tokens.join());
        rows.push({
          model: `${shape} L${o.layers ?? SHAPES[shape].layers} ${dtype}`, file, runtime: rt, prefill_tps: +p.toFixed(1), decode_tps: +d.toFixed(1),
          prefill_vs_native: nat ? +(p / nat.p).toFixed(2) : null, decode_vs_native: nat ? +(d / nat.d).toFixed(2) : null,
          agree_prefix: agree?.prefix ?? null, agree_same: agree?.same ?? null, gen_tokens: o.G, same_tokens_every_rep: stable,
        });
        if (!o.json) {
          const r = rows[rows.length - 1];
          process.stdout.write(`${r.model.padEnd(14)} ${rt.padEnd(22)} prefill ${String(r.prefill_tps).padStart(8)} tok/s` +
            `${nat ? ` (${r.prefill_vs_native}x)` : ''}  decode ${String(r.decode_tps).padStart(7)} tok/s${nat ? ` (${r.decode_vs_native}x)` : ''}` +
            `${agree ? `  agree ${agree.prefix}/${o.G} prefix, ${agree.same}/${o.G} ids` : ''}\n`);
        }
      }
    }
  } finally {
    if (browser) { await browser.ctx.close().catch(() => {}); await browser.server.close(); fs.rmSync(browser.dir, { recursive: true, force: true }); }
    if (llamaInstance) await llamaInstance.dispose?.();
  }
  const report = { bench: 'peers', machine: machine(), threads: o.threads, prompt_tokens: o.P, gen_tokens: o.G, reps: o.reps, rows };
  if (o.json) process.stdout.write(JSON.stringify(report) + '\n');
  else process.stdout.write(`machine: ${JSON.stringify(report.machine)}; threads ${o.threads}, prompt ${o.P}, gen ${o.G}, medians of ${o.reps}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => { process.stderr.write(`peers: ${e?.stack ?? e}\n`); process.exitCode = 1; });
}
