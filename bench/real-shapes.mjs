#!/usr/bin/env node
// Real-shape benchmark: synthetic GGUFs at the exact shapes of Phi-3-mini-4k, Llama-3.2-1B, Qwen2.5-0.5B,
// Gemma-2-2B, SmolLM2-135M / 360M (bench/gen-gguf.mjs) in Q4_0, Q4_K_M and Q8_0, converted once to .rknot
// (kept dtypes), then per model / quant, each measurement in a fresh child process (node --no-liftoff
// --no-wasm-lazy-compilation, as the aether CLI runs):
//   - load: Aether.load of the .rknot (stream into wasm memory, checksums and block scales verified) vs a plain
//     read of the same file (fs stream, data discarded), read / load / read / load ..., medians; warm page cache;
//   - peak RSS (VmHWM of the child) vs weights + KV-cache bytes (target <= 1.05 x + 64 MB);
//   - prefill (P tokens, one batch of maxBatch) and decode (G tokens) tok/s on 1 and 2 threads (median of reps);
//   - Chromium (--browser): the same model through the engine Worker (js/src/browser) in /usr/bin/chromium.
//
//   nice -n 10 node bench/real-shapes.mjs [--model NAME[,..]|all] [--quant q4_0,q4_K_M,q8_0|all] [--ctx 1024]
//       [--prompt-tokens 64] [--gen-tokens 32] [--reps 2] [--threads 1,2] [--runs 3] [--browser] [--json]
//       [--dir /work/gen/real-shapes]
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { args, machine, median, repoRoot } from './lib/common.mjs';

const a = args();
const dist = path.join(repoRoot, 'dist/src');

function hwmKb() {
  try { return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]); } catch { return process.resourceUsage().maxRSS; }
}

// ------------------------------------------------------------------ child modes
if (a.argv[0] === '--child') {
  const [, mode, file] = a.argv;
  const out = {};
  if (mode === 'read') {
    const t0 = performance.now();
    for await (const c of fs.createReadStream(file, { highWaterMark: 4 << 20 })) void c;
    out.ms = performance.now() - t0;
  } else if (mode === 'run') {
    const { load } = await import(path.join(dist, 'index.js'));
    const threads = Number(a.opt('--threads', '1')), nCtx = Number(a.opt('--ctx', '1024'));
    const P = Number(a.opt('--prompt-tokens', '64')), G = Number(a.opt('--gen-tokens', '32')), reps = Number(a.opt('--reps', '2'));
    const t0 = performance.now();
    const model = await load(file, { threads, nCtx, maxBatch: P });
    out.load_ms = performance.now() - t0;
    out.rss_after_load_kb = hwmKb();
    const e = model.engine, c = model.config;
    out.n_ctx = e.nCtx;
    // KV-cache bytes from model.metrics() (what the engine allocated, by dtype) where available
    const kv = typeof model.metrics === 'function' ? model.metrics().kvCache : null;
    if (kv?.byDtype?.length) {
      out.kv_dtype = kv.byDtype.map((d) => d.dtype).join('+');
      out.kv_bytes = kv.byDtype.reduce((s, d) => s + d.bytes, 0);
    } else {
      out.kv_dtype = e.kvDtype ?? 'f32';
      out.kv_bytes = Math.round(2 * c.n_layers * e.nCtx * c.n_kv_heads * c.head_dim * ({ f32: 4, f16: 2 }[out.kv_dtype] ?? 4));
    }
    out.weights_bytes = e.dataSize;
    out.arena_bytes = e.arenaSize;
    out.memory_bytes = e.heap?.memory?.buffer?.byteLength;
    if (P > 0) {
      let s = 12345;
      const prompt = [model.tokenizer.bosId ?? 1];
      while (prompt.length < P) { s = (s * 1103515245 + 12345) >>> 0; prompt.push(3 + (s % (c.vocab_size - 3))); }
      const pre = [], dec = [];
      for (let r = 0; r < reps + 1; r++) {
        const t1 = performance.now();
        e.forward(prompt, 0);
        const t2 = performance.now();
        let tok = 3;
        for (let i = 0; i < G; i++) { e.forward([tok], P + i); tok = 3 + ((tok * 31 + 7) % (c.vocab_size - 3)); }
        const t3 = performance.now();
        if (r === 0 && reps > 0) continue;   // warm-up
        pre.push((P / (t2 - t1)) * 1000);
        dec.push((G / (t3 - t2)) * 1000);
        try { out.logits_finite = e.logits().every((v) => Number.isFinite(v)); } catch (err) { out.logits_error = `${err.code ?? ''} ${err.message}`.slice(0, 300); }
      }
      out.prefill_tps = median(pre); out.decode_tps = median(dec); out.prefill_all = pre; out.decode_all = dec;
    }
    model.dispose();
  }
  out.hwm_kb = hwmKb();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

// ------------------------------------------------------------------ driver
const { MODELS, QUANTS, generate } = await import('./gen-gguf.mjs');
const { convertModel } = await import(path.join(dist, 'formats/convert.js'));
const models = a.opt('--model', 'all') === 'all' ? Object.keys(MODELS) : a.opt('--model').split(',');
const quants = a.opt('--quant', 'all') === 'all' ? QUANTS : a.opt('--quant').split(',');
const threadsList = a.opt('--threads', '1,2').split(',').map(Number);
const runs = Number(a.opt('--runs', '3'));
const dir = a.opt('--dir', '/work/gen/real-shapes');
const passOn = ['--ctx', '--prompt-tokens', '--gen-tokens', '--reps'].flatMap((f) => (a.opt(f) !== undefined ? [f, a.opt(f)] : []));
const log = (s) => { if (!a.has('--json')) console.log(s); };

function child(mode, file, extra = []) {
  const r = spawnSync(process.execPath, ['--no-liftoff', '--no-wasm-lazy-compilation', path.join(repoRoot, 'bench/real-shapes.mjs'), '--child', mode, file, ...extra],
    { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || !line?.startsWith('{')) return { error: (r.stderr || r.stdout || `exit ${r.status}`).trim().split('\n').slice(-3).join(' | ') };
  return JSON.parse(line);
}

const report = { machine: machine(), command: `node bench/real-shapes.mjs ${a.argv.join(' ')}`, results: [] };
log(`machine: ${JSON.stringify(report.machine)}`);
// fixed cost of a load (compiling the wasm modules with TurboFan, instantiating): the shipped 17 MB model
const tiny = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
if (fs.existsSync(tiny)) {
  const b = child('run', tiny, [...passOn.filter((x, i, arr) => arr[i - 1] !== '--ctx' && x !== '--ctx'), '--prompt-tokens', '0', '--ctx', '256']);
  report.baseline = { model: 'tiny-llama-a-q8_0.rknot', bytes: fs.statSync(tiny).size, load_ms: b.load_ms, error: b.error };
  log(`baseline load of ${report.baseline.model} (${(report.baseline.bytes / 2 ** 20).toFixed(0)} MiB): ${b.load_ms?.toFixed(0)} ms`);
}
for (const name of models) for (const quant of quants) {
  const g = await generate(name, quant, dir, { log });
  const rk = path.join(dir, `${name}-${quant}.rknot`);
  let convertMs = null;
  if (!fs.existsSync(rk) || fs.statSync(rk).mtimeMs < fs.statSync(g.file).mtimeMs) {
    const t0 = performance.now();
    await convertModel(g.file, rk, { quant: 'keep' });
    convertMs = performance.now() - t0;
  }
  const res = { model: name, quant, gguf_bytes: g.bytes, rknot_bytes: fs.statSync(rk).size, convert_ms: convertMs, types: g.types };
  // load vs read, interleaved, warm cache (one untimed read first)
  child('read', rk);
  const reads = [], loads = [];
  let last;
  for (let i = 0; i < runs; i++) {
    const r = child('read', rk);
    if (r.error) { res.error = r.error; break; }
    reads.push(r.ms);
    last = child('run', rk, [...passOn, '--prompt-tokens', '0', '--threads', '1']);
    if (last.error) { res.error = last.error; break; }
    loads.push(last.load_ms);
  }
  if (!res.error) {
    Object.assign(res, { read_ms: median(reads), load_ms: median(loads), load_over_read: median(loads) / median(reads), reads, loads,
      weights_bytes: last.weights_bytes, kv_bytes: last.kv_bytes, kv_dtype: last.kv_dtype, n_ctx: last.n_ctx, arena_bytes: last.arena_bytes,
      load_hwm_bytes: last.hwm_kb * 1024 });
    res.rss_target_bytes = 1.05 * (last.weights_bytes + last.kv_bytes) + 64 * 2 ** 20;
    res.threads = {};
    for (const t of threadsList) {
      const r = child('run', rk, [...passOn, '--threads', String(t)]);
      res.threads[t] = r.error ? { error: r.error } : { prefill_tps: r.prefill_tps, decode_tps: r.decode_tps, prefill_all: r.prefill_all, decode_all: r.decode_all,
        hwm_bytes: r.hwm_kb * 1024, logits_finite: r.logits_finite, logits_error: r.logits_error };
    }
    const peak = Math.max(res.load_hwm_bytes, ...Object.values(res.threads).map((x) => x.hwm_bytes ?? 0));
    res.peak_rss_bytes = peak;
    res.rss_over_target = peak / res.rss_target_bytes;
  }
  report.results.push(res);
  const MB = (b) => (b / 2 ** 20).toFixed(0);
  if (res.error) log(`${name} ${quant}: ERROR ${res.error}`);
  else {
    log(`${name} ${quant}: file ${MB(res.rknot_bytes)} MiB, read ${res.read_ms.toFixed(0)} ms, load ${res.load_ms.toFixed(0)} ms (x${res.load_over_read.toFixed(2)}), ` +
      `peak RSS ${MB(res.peak_rss_bytes)} MiB vs weights ${MB(res.weights_bytes)} + KV ${MB(res.kv_bytes)} (${res.kv_dtype}, ctx ${res.n_ctx}) -> x${res.rss_over_target.toFixed(2)} of target; ` +
      Object.entries(res.threads).map(([t, x]) => x.error ? `${t}T error ${x.error}` : `${t}T prefill ${x.prefill_tps.toFixed(1)} decode ${x.decode_tps.toFixed(2)} tok/s`).join('; '));
  }
}
if (a.has('--browser')) {
  const { browserRuns } = await import('./lib/real-shapes-browser.mjs');
  report.browser = await browserRuns(report.results.filter((r) => !r.error).map((r) => ({ ...r, file: path.join(dir, `${r.model}-${r.quant}.rknot`) })),
    { threadsList, ctx: Number(a.opt('--ctx', '1024')), P: Number(a.opt('--prompt-tokens', '64')), G: Number(a.opt('--gen-tokens', '32')), log });
}
if (a.has('--json')) process.stdout.write(JSON.stringify(report, null, 1) + '\n');
const outFile = a.opt('--out');
if (outFile) fs.writeFileSync(outFile, JSON.stringify(report, null, 1));
