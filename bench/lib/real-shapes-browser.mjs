// The Chromium half of bench/real-shapes.mjs: each .rknot is served by examples/browser/server.mjs (cross-origin
// isolated, so the engine Worker can run 2 threads) and loaded in /usr/bin/chromium (playwright-core, headless,
// a fresh profile per run, the model cache off) through the engine Worker (js/src/browser); load time measured
// on the page around Aether.load, then P prompt tokens and G greedy tokens generated (stats from the engine).
// Memory: the peak (sampled about every 500 ms in a worker thread) of the summed PSS of all the browser's processes
// (found by their profile directory in /proc/*/cmdline), from before the page opens to the end of the generation;
// the model's load time and warm-up (rounds, ms) as the page reports them.
// Large files are reached through symlinks under build/real-shapes/ (git-ignored) so the server's root stays
// the repository.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { repoRoot } from './common.mjs';

/**
 * Peak of the summed PSS (proportional set size: shared pages split between their users) of every process whose
 * command line names `marker` (the run's fresh profile directory: the browser and all its children), sampled in a
 * worker thread (about every 500 ms; the process list is rescanned every 2 s) so that the /proc reads never block
 * this process, which also serves the model to the page. stop() resolves to the peak in bytes.
 */
function pssSampler(marker) {
  const code = `
    const fs = require('node:fs');
    const { workerData, parentPort } = require('node:worker_threads');
    const marker = workerData, buf = new Int32Array(new SharedArrayBuffer(4));
    let pids = [], scanned = 0, peak = 0, stop = false;
    parentPort.on('message', () => { stop = true; });
    const scan = () => { pids = fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).filter((p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').includes(marker); } catch { return false; } }); scanned = Date.now(); };
    const tick = () => {
      if (Date.now() - scanned > 2000) scan();
      let sum = 0;
      for (const p of pids) { try { const m = /^Pss:\\s+(\\d+) kB/m.exec(fs.readFileSync('/proc/' + p + '/smaps_rollup', 'latin1')); if (m) sum += Number(m[1]) * 1024; } catch {} }
      peak = Math.max(peak, sum);
    };
    (async () => { while (!stop) { tick(); await new Promise((r) => setTimeout(r, 500)); } tick(); parentPort.postMessage(peak); })();
  `;
  const w = new Worker(code, { eval: true, workerData: marker });
  return {
    stop() {
      return new Promise((resolve) => { w.once('message', (peak) => { w.terminate(); resolve(peak); }); w.postMessage('stop'); });
    },
  };
}

export async function browserRuns(items, { threadsList = [1, 2], ctx = 1024, P = 64, G = 32, log = () => {} } = {}) {
  const { launchChromium } = await import(path.join(repoRoot, 'scripts/chromium.mjs'));
  const { startServer } = await import(path.join(repoRoot, 'examples/browser/server.mjs'));
  const linkDir = path.join(repoRoot, 'build/real-shapes');
  fs.mkdirSync(linkDir, { recursive: true });
  const server = await startServer({ port: 0, isolate: true });
  const out = [];
  try {
    for (const it of items) {
      const link = path.join(linkDir, path.basename(it.file));
      fs.rmSync(link, { force: true });
      fs.symlinkSync(it.file, link);
      for (const threads of threadsList) {
        const { page, dir, close } = await launchChromium();
        let r;
        const sampler = pssSampler(dir);
        const loadavgStart = os.loadavg();
        try {
          await page.goto(`${server.url}/bench/lib/real-shapes.html`);
          r = await page.evaluate(async ({ url, threads, ctx, P, G }) => {
            const { Aether } = await import('/dist/src/browser/index.js');
            const t0 = performance.now();
            const model = await Aether.load(url, { threads, nCtx: ctx, maxBatch: P, cache: false });
            const loadMs = performance.now() - t0;
            // a prompt of about P tokens: words of the synthetic vocabulary
            const words = [];
            for (let i = 0; i < P; i++) words.push(['the', 'a', 'of', 'on', 'in', 'at', 'is', 'it'][i % 8]);
            const res = { loadMs, threads: model.threads, isolated: crossOriginIsolated, warmup: model.warmup };
            try {
              for await (const piece of model.generate(words.join(' '), { maxTokens: G, greedy: true })) void piece;
              const s = model.stats;
              Object.assign(res, { promptTokens: s.promptTokens, generated: s.generatedTokens, prefillTps: s.prefillTps, decodeTps: s.decodeTps });
            } finally { await model.dispose(); }
            return res;
          }, { url: `/build/real-shapes/${path.basename(it.file)}`, threads, ctx, P, G });
          r.peakPss = await sampler.stop();
        } catch (e) {
          r = { error: String(e?.message ?? e).split('\n')[0] };
          await sampler.stop();
        } finally {
          await close();
        }
        const row = { model: it.model, quant: it.quant, threads, loadavg_start: loadavgStart, loadavg_end: os.loadavg(), ...r };
        out.push(row);
        log(`chromium ${it.model} ${it.quant} ${threads}T: ` + (r.error ? `ERROR ${r.error}` :
          `load ${r.loadMs.toFixed(0)} ms, prompt ${r.promptTokens} tok prefill ${r.prefillTps.toFixed(1)} tok/s, decode ${r.decodeTps.toFixed(2)} tok/s (threads ${r.threads}, isolated ${r.isolated}), ` +
          `peak PSS of the browser's processes ${(r.peakPss / 2 ** 20).toFixed(0)} MiB`));
      }
      fs.rmSync(link, { force: true });
    }
  } finally {
    await server.close();
  }
  return out;
}
