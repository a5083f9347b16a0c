#!/usr/bin/env node
// A big model in the browser demo (Debian's chromium through playwright-core): load from a URL (no cache) and from
// a local File, generate, and report load time (vs a plain read of the file), peak memory of the browser's processes
// and tok/s, with the engine's memory plan. Not a test (minutes and gigabytes); figures go to docs/PERFORMANCE.md.
//
//   node bench/browser-large.mjs --model /work/gen/scale/phi3-mini-4k-q4_0.rknot [--threads 1] [--n 8] [--sources url,file]
//       [--ctx N] [--kv-dtype f16] [--json]
//
// The .rknot comes from a generated GGUF (bench/gen-gguf.mjs --model phi3-mini-4k --quant q4_0, then
// `aether convert`); the server mounts its folder at /gen/ (examples/browser/server.mjs --mount).
import fs from 'node:fs';
import path from 'node:path';
import { args, machine } from './lib/common.mjs';
import { startServer } from '../examples/browser/server.mjs';
import { CHROMIUM, launchChromium } from '../scripts/chromium.mjs';

const a = args();
const model = a.opt('--model');
if (!model || !fs.existsSync(model)) { console.error('usage: node bench/browser-large.mjs --model FILE.rknot [--threads T] [--n N] [--sources url,file]'); process.exit(2); }
const threads = Number(a.opt('--threads', '1')), n = Number(a.opt('--n', '8'));
const sources = a.opt('--sources', 'url,file').split(',');
const TIMEOUT = 30 * 60_000;

/** RSS of the chromium processes (sum), sampled every 250 ms; peak kept. */
function rssSampler() {
  let peak = 0, stop = false;
  const pids = () => fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('aether-chromium-large-'); } catch { return false; }
  });
  const sample = () => {
    let sum = 0;
    for (const p of pids()) {
      try { const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8')); if (m) sum += Number(m[1]) * 1024; } catch { /* gone */ }
    }
    peak = Math.max(peak, sum);
  };
  const loop = async () => { while (!stop) { sample(); await new Promise((r) => setTimeout(r, 250)); } };
  loop();
  return { get peak() { return peak; }, reset() { peak = 0; }, stop() { stop = true; } };
}

function plainRead(file) {
  const t0 = performance.now(), fd = fs.openSync(file, 'r'), buf = Buffer.allocUnsafe(8 << 20);
  let total = 0, got;
  while ((got = fs.readSync(fd, buf, 0, buf.length, null)) > 0) total += got;
  fs.closeSync(fd);
  return { bytes: total, ms: performance.now() - t0 };
}

const server = await startServer({ port: 0, isolate: true, mounts: { '/gen/': path.dirname(path.resolve(model)) } });
const { ctx, close } = await launchChromium({ prefix: 'aether-chromium-large-' });
const rss = rssSampler();
const results = [];
try {
  const read = plainRead(model);
  for (const src of sources) {
    const page = ctx.pages()[0] ?? await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}examples/browser/`);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60_000 });
    await page.fill('#threads', String(threads));
    if (a.opt('--ctx')) await page.fill('#n-ctx', a.opt('--ctx'));
    if (a.opt('--kv-dtype')) await page.selectOption('#kv-dtype', a.opt('--kv-dtype'));
    await page.uncheck('#use-cache');
    if (src === 'url') { await page.check('input[name=src][value=url]'); await page.fill('#model-url', `${server.url}gen/${path.basename(model)}`); }
    else { await page.setInputFiles('#model-file', model); await page.check('input[name=src][value=file]'); }
    rss.reset();
    const t0 = performance.now();
    await page.click('#load');
    await page.waitForSelector('#status:is([data-state=ready], [data-state=error])', { timeout: TIMEOUT });
    const loadMs = performance.now() - t0;
    const status = await page.textContent('#status');
    if (await page.getAttribute('#status', 'data-state') !== 'ready') throw new Error(`${src}: load failed: ${status} ${errors.join('; ')}`);
    const loadRss = rss.peak;
    const plan = await page.evaluate(() => window.aetherDemo.model.memory);
    await page.fill('#prompt', 'hello');
    await page.fill('#max-tokens', String(n));
    await page.check('#greedy');
    await page.click('#generate');
    await page.waitForSelector('#status:is([data-state=done], [data-state=error])', { timeout: TIMEOUT });
    if (await page.getAttribute('#status', 'data-state') !== 'done') throw new Error(`${src}: generation failed: ${await page.textContent('#gen-error')}`);
    const run = await page.evaluate(() => window.aetherDemo.lastRun);
    results.push({
      source: src, load_s: +(loadMs / 1000).toFixed(2), page_status: status, plain_read_s: +(read.ms / 1000).toFixed(2),
      load_vs_read: +(loadMs / read.ms).toFixed(2), peak_rss_load_mib: Math.round(loadRss / 2 ** 20), peak_rss_mib: Math.round(rss.peak / 2 ** 20),
      plan_mib: { weights: Math.round(plan.weights / 2 ** 20), kv: Math.round(plan.kvCache / 2 ** 20), scratch: Math.round(plan.scratch / 2 ** 20), total: Math.round(plan.total / 2 ** 20) },
      n_ctx: plan.nCtx, kv_dtype: plan.kvDtype, threads: run.threads, tokens: run.tokens,
      prefill_tps: +run.stats.prefillTps.toFixed(3), decode_tps: +run.stats.decodeTps.toFixed(3), errors,
    });
    await page.evaluate(() => window.aetherDemo.model?.dispose());
    await page.goto('about:blank');
  }
} finally {
  rss.stop();
  await close();
  await server.close();
}
const out = { bench: 'browser-large', model, bytes: fs.statSync(model).size, machine: machine(), chromium: CHROMIUM, results };
if (a.has('--json')) console.log(JSON.stringify(out));
else console.log(JSON.stringify(out, null, 2));
