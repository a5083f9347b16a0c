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
//       [--dir /work/gen/real-shapes] [--md FILE] [--out FILE.json] [--all]
//
//   --all       the whole table of docs/PERFORMANCE.md in one command: every model at Q4_0, plus Q4_K_M and Q8_0 for
//               SmolLM2-135M and Qwen2.5-0.5B, Node and Chromium (--browser), 1 and 2 threads; generates and converts
//               the files that are missing. Prints the Markdown tables at the end (also to --md FILE).
//               With --model / --quant it keeps only those rows of that set (to run the table model by model).
//   --out FILE  the JSON report, rewritten after every model (a partial run keeps what it measured)
//   --from-json A.json,B.json  no measuring: the Markdown tables of earlier --out reports merged (one table from
//               a run done model by model)
//   --help      this text
//
// Load is also split by CPU time (user / system of the child, worker threads and libuv's pool included) and
// compared with two reads: `read` (fs stream into a reused 4 MiB buffer, data discarded: the baseline)
// and `read into memory` (positional reads into a fresh wasm memory of the file's size: what any loader that copies
// the file must pay, page faults and zeroing of the new pages included), and a load without the CRC-32 checks
// (load option verify: false; the block-scale checks stay) to show their share. The memory plan's total (Engine plan: runtime + weights + KV + scratch)
// is reported next to the wasm memory's byteLength and the peak RSS.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { args, machine, median, repoRoot } from './lib/common.mjs';

const a = args();
if (a.has('--help') || a.has('-h')) {
  // the usage is the header comment of this file
  const src = fs.readFileSync(new URL(import.meta.url), 'utf8').split('\n');
  const end = src.findIndex((l) => !l.startsWith('//') && !l.startsWith('#!'));
  console.log(src.slice(1, end).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}
if (a.argv[0] !== '--child') {
  const known = new Set(['--model', '--quant', '--ctx', '--prompt-tokens', '--gen-tokens', '--reps', '--threads', '--runs', '--browser', '--json', '--dir', '--md', '--out', '--all', '--from-json']);
  const bad = a.argv.filter((x) => x.startsWith('--') && !known.has(x));
  if (bad.length) { console.error(`unknown option ${bad.join(', ')} (see --help)`); process.exit(2); }
}
const dist = path.join(repoRoot, 'dist/src');

function hwmKb() {
  try { return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]); } catch { return process.resourceUsage().maxRSS; }
}

// ------------------------------------------------------------------ child modes
if (a.argv[0] === '--child') {
  const [, mode, file] = a.argv;
  const out = {};
  const c0 = process.cpuUsage();
  const cpu = () => { const c = process.cpuUsage(c0); return { user_ms: c.user / 1000, sys_ms: c.system / 1000 }; };
  if (mode === 'read') {
    const t0 = performance.now();
    for await (const c of fs.createReadStream(file, { highWaterMark: 4 << 20 })) void c;
    out.ms = performance.now() - t0;
    out.cpu = cpu();
  } else if (mode === 'readinto') {
    const { Heap } = await import(path.join(dist, 'runtime/memory.js'));
    const t0 = performance.now();
    const fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size, heap = new Heap(false), dest = heap.u8(heap.alloc(size, 64), size);
    for (let off = 0; off < size;) off += fs.readSync(fd, dest, off, Math.min(4 << 20, size - off), off);
    fs.closeSync(fd);
    out.ms = performance.now() - t0;
    out.cpu = cpu();
  } else if (mode === 'run') {
    const { load } = await import(path.join(dist, 'index.js'));
    const threads = Number(a.opt('--threads', '1')), nCtx = Number(a.opt('--ctx', '1024'));
    const P = Number(a.opt('--prompt-tokens', '64')), G = Number(a.opt('--gen-tokens', '32')), reps = Number(a.opt('--reps', '2'));
    const t0 = performance.now();
    const model = await load(file, { threads, nCtx, maxBatch: Math.max(1, P), verify: !a.has('--no-verify') });
    out.load_ms = performance.now() - t0;
    out.load_cpu = cpu();
    out.rss_after_load_kb = hwmKb();
    out.plan_total = model.engine.plan.total;
    const e = model.engine, c = model.config;
    out.n_ctx = e.nCtx;
    // KV-cache bytes and dtypes from the memory plan (what the engine allocated)
    const kvd = e.plan.kvDtype;
    out.kv_dtype = kvd.k === kvd.v ? kvd.k : `K ${kvd.k} / V ${kvd.v}`;
    out.kv_bytes = e.plan.kvCache;
    out.weights_bytes = e.dataSize;
    out.arena_bytes = e.arenaSize;
    out.memory_bytes = e.heap?.memory?.buffer?.byteLength;
    if (P > 0) {
      let s = 12345;
      const prompt = [model.tokenizer.bosId ?? 1];
      while (prompt.length < P) { s = (s * 1103515245 + 12345) >>> 0; prompt.push(3 + (s % (c.vocab_size - 3))); }
      const pre = [], dec = [], preCpu = [], decCpu = [];
      for (let r = 0; r < reps + 1; r++) {
        const u1 = process.cpuUsage(), t1 = performance.now();
        e.forward(prompt, 0);
        const u2 = process.cpuUsage(), t2 = performance.now();
        let tok = 3;
        for (let i = 0; i < G; i++) { e.forward([tok], P + i); tok = 3 + ((tok * 31 + 7) % (c.vocab_size - 3)); }
        const u3 = process.cpuUsage(), t3 = performance.now();
        if (r === 0 && reps > 0) continue;   // warm-up
        // CPU time of the process (all threads) / wall time: 1.0 = one core busy the whole time; below the thread
        // count = the threads waited (for each other, or for a core other processes held)
        const us = (x, y) => (y.user - x.user + y.system - x.system) / 1000;
        preCpu.push(us(u1, u2) / (t2 - t1)); decCpu.push(us(u2, u3) / (t3 - t2));
        pre.push((P / (t2 - t1)) * 1000);
        dec.push((G / (t3 - t2)) * 1000);
        try { out.logits_finite = e.logits().every((v) => Number.isFinite(v)); } catch (err) { out.logits_error = `${err.code ?? ''} ${err.message}`.slice(0, 300); }
      }
      out.prefill_tps = median(pre); out.decode_tps = median(dec); out.prefill_all = pre; out.decode_all = dec;
      out.prefill_cpu_share = median(preCpu); out.decode_cpu_share = median(decCpu);
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
const { openRknot } = await import(path.join(dist, 'formats/rknot-node.js'));
const ALL = a.has('--all');
// --all: every model at Q4_0, the other two quants for two models (the table of docs/PERFORMANCE.md)
const ALL_PAIRS = [...Object.keys(MODELS).map((m) => [m, 'q4_0']), ...['smollm2-135m', 'qwen2.5-0.5b'].flatMap((m) => [[m, 'q4_K_M'], [m, 'q8_0']])];
const models = a.opt('--model', 'all') === 'all' ? Object.keys(MODELS) : a.opt('--model').split(',');
const quants = a.opt('--quant', 'all') === 'all' ? QUANTS : a.opt('--quant').split(',');
const pairs = ALL ? ALL_PAIRS.filter(([m, q]) => models.includes(m) && quants.includes(q)) : models.flatMap((m) => quants.map((q) => [m, q]));
for (const [m, q] of pairs) {
  if (!MODELS[m]) throw new Error(`unknown model ${m} (${Object.keys(MODELS).join(', ')})`);
  if (!QUANTS.includes(q)) throw new Error(`unknown quant ${q} (${QUANTS.join(', ')})`);
}
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

const FROM = a.opt('--from-json')?.split(',');
let report = { machine: machine(), command: `node bench/real-shapes.mjs ${a.argv.join(' ')}`, results: [] };
if (FROM) pairs.length = 0;
log(`machine: ${JSON.stringify(report.machine)}`);
// fixed cost of a load (compiling the wasm modules with TurboFan, instantiating): the shipped 17 MB model
const tiny = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');
if (fs.existsSync(tiny) && !FROM) {
  const b = child('run', tiny, [...passOn.filter((x, i, arr) => arr[i - 1] !== '--ctx' && x !== '--ctx'), '--prompt-tokens', '0', '--ctx', '256']);
  report.baseline = { model: 'tiny-llama-a-q8_0.rknot', bytes: fs.statSync(tiny).size, load_ms: b.load_ms, load_cpu: b.load_cpu, error: b.error };
  log(`baseline load of ${report.baseline.model} (${(report.baseline.bytes / 2 ** 20).toFixed(0)} MiB): ${b.load_ms?.toFixed(0)} ms`);
}
const cpuMs = (c) => c.user_ms + c.sys_ms;
for (const [name, quant] of pairs) {
  const g = await generate(name, quant, dir, { log });
  const rk = path.join(dir, `${name}-${quant}.rknot`);
  let convertMs = null;
  // reconvert when missing, older than the GGUF, or written by a converter that still pinned the KV dtype (the
  // runtime default, f16, is what this bench measures)
  const stale = fs.existsSync(rk) && (await openRknot(rk)).meta.kv_cache?.dtype !== undefined;
  if (stale || !fs.existsSync(rk) || fs.statSync(rk).mtimeMs < fs.statSync(g.file).mtimeMs) {
    const t0 = performance.now();
    await convertModel(g.file, rk, { quant: 'keep' });
    convertMs = performance.now() - t0;
  }
  const res = { model: name, quant, gguf_bytes: g.bytes, rknot_bytes: fs.statSync(rk).size, convert_ms: convertMs, types: g.types, loadavg_start: os.loadavg() };
  // load vs reads, interleaved, warm page cache (one untimed read first)
  child('read', rk);
  const reads = [], intos = [], loads = [], loadsNv = [];
  let last, lastNv, lastRead, lastInto;
  for (let i = 0; i < runs; i++) {
    lastRead = child('read', rk);
    if (lastRead.error) { res.error = lastRead.error; break; }
    reads.push(lastRead.ms);
    lastInto = child('readinto', rk);
    if (lastInto.error) { res.error = lastInto.error; break; }
    intos.push(lastInto.ms);
    last = child('run', rk, [...passOn, '--prompt-tokens', '0', '--threads', '1']);
    if (last.error) { res.error = last.error; break; }
    loads.push(last.load_ms);
    lastNv = child('run', rk, [...passOn, '--prompt-tokens', '0', '--threads', '1', '--no-verify']);
    if (lastNv.error) { res.error = lastNv.error; break; }
    loadsNv.push(lastNv.load_ms);
  }
  if (!res.error) {
    Object.assign(res, { read_ms: median(reads), read_into_ms: median(intos), load_ms: median(loads), load_noverify_ms: median(loadsNv),
      load_over_read: median(loads) / median(reads), load_over_read_into: median(loads) / median(intos), reads, intos, loads, loads_noverify: loadsNv,
      // CPU of the last run of each (ms, user + system): where a load's time goes beyond a read's
      cpu: { read: lastRead.cpu, read_into: lastInto.cpu, load: last.load_cpu, load_noverify: lastNv.load_cpu },
      weights_bytes: last.weights_bytes, kv_bytes: last.kv_bytes, kv_dtype: last.kv_dtype, n_ctx: last.n_ctx, arena_bytes: last.arena_bytes,
      plan_total_bytes: last.plan_total, memory_bytes: last.memory_bytes, load_hwm_bytes: last.hwm_kb * 1024 });
    res.rss_target_bytes = 1.05 * (last.weights_bytes + last.kv_bytes) + 64 * 2 ** 20;
    res.threads = {};
    for (const t of threadsList) {
      const r = child('run', rk, [...passOn, '--threads', String(t)]);
      res.threads[t] = r.error ? { error: r.error } : { prefill_tps: r.prefill_tps, decode_tps: r.decode_tps, prefill_all: r.prefill_all, decode_all: r.decode_all,
        prefill_cpu_share: r.prefill_cpu_share, decode_cpu_share: r.decode_cpu_share, loadavg: os.loadavg(),
        hwm_bytes: r.hwm_kb * 1024, logits_finite: r.logits_finite, logits_error: r.logits_error };
    }
    const peak = Math.max(res.load_hwm_bytes, ...Object.values(res.threads).map((x) => x.hwm_bytes ?? 0));
    res.peak_rss_bytes = peak;
    res.rss_over_target = peak / res.rss_target_bytes;
  }
  res.loadavg_end = os.loadavg();
  report.results.push(res);
  if (a.opt('--out')) fs.writeFileSync(a.opt('--out'), JSON.stringify(report, null, 1));
  const MB = (b) => (b / 2 ** 20).toFixed(0);
  if (res.error) log(`${name} ${quant}: ERROR ${res.error}`);
  else {
    log(`${name} ${quant}: file ${MB(res.rknot_bytes)} MiB, read ${res.read_ms.toFixed(0)} ms, read into memory ${res.read_into_ms.toFixed(0)} ms, ` +
      `load ${res.load_ms.toFixed(0)} ms (x${res.load_over_read.toFixed(2)} of read, x${res.load_over_read_into.toFixed(2)} of read into memory; ` +
      `without CRC ${res.load_noverify_ms.toFixed(0)} ms); CPU ms read ${cpuMs(res.cpu.read).toFixed(0)}, into ${cpuMs(res.cpu.read_into).toFixed(0)}, ` +
      `load ${cpuMs(res.cpu.load).toFixed(0)} (user ${res.cpu.load.user_ms.toFixed(0)}), no CRC ${cpuMs(res.cpu.load_noverify).toFixed(0)}; ` +
      `peak RSS ${MB(res.peak_rss_bytes)} MiB vs weights ${MB(res.weights_bytes)} + KV ${MB(res.kv_bytes)} (${res.kv_dtype}, ctx ${res.n_ctx}) -> x${res.rss_over_target.toFixed(2)} of target; ` +
      `plan ${MB(res.plan_total_bytes)} MiB, wasm memory ${MB(res.memory_bytes)} MiB; ` +
      Object.entries(res.threads).map(([t, x]) => x.error ? `${t}T error ${x.error}` : `${t}T prefill ${x.prefill_tps.toFixed(1)} decode ${x.decode_tps.toFixed(2)} tok/s`).join('; '));
  }
}
if ((a.has('--browser') || ALL) && !FROM) {
  const { browserRuns } = await import('./lib/real-shapes-browser.mjs');
  report.browser = await browserRuns(report.results.filter((r) => !r.error).map((r) => ({ ...r, file: path.join(dir, `${r.model}-${r.quant}.rknot`) })),
    { threadsList, ctx: Number(a.opt('--ctx', '1024')), P: Number(a.opt('--prompt-tokens', '64')), G: Number(a.opt('--gen-tokens', '32')), log });
}
report.machine_end = machine();
if (FROM) {
  const reps = FROM.map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
  report = { command: reps.map((r) => r.command).join('`; `'), machine: reps[0].machine, machine_end: reps.at(-1).machine_end ?? reps.at(-1).machine,
    results: reps.flatMap((r) => r.results), browser: reps.flatMap((r) => r.browser ?? []) };
}

/** The Markdown tables of docs/PERFORMANCE.md from a report. */
function markdown(rep) {
  const MiB = (b) => `${(b / 2 ** 20).toFixed(0)}`;
  const s = (ms) => (ms >= 10000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`);
  const f = (x, d = 1) => (x === undefined || x === null ? '-' : x.toFixed(d));
  const label = (r) => `${r.model} | ${r.quant}`;
  const out = [`Command: \`${rep.command}\`; ${rep.machine.date} - ${rep.machine_end.date}; ${rep.machine.nproc} CPUs (${rep.machine.cpu}), Node ${rep.machine.node}; ` +
    `load average at start ${rep.machine.loadavg.map((x) => x.toFixed(1)).join(' / ')}, at end ${rep.machine_end.loadavg.map((x) => x.toFixed(1)).join(' / ')}.`, ''];
  out.push('| model | quant | file MiB | read | read into memory | load | load / read | load / read into memory | load without CRC | CPU ms: read / into memory / load / load without CRC | peak RSS MiB | weights + KV MiB (KV dtype, ctx) | RSS / target | plan MiB | wasm memory MiB | load avg (1 min) |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rep.results) {
    if (r.error) { out.push(`| ${label(r)} | error: ${r.error.slice(0, 120)} |`); continue; }
    out.push(`| ${label(r)} | ${MiB(r.rknot_bytes)} | ${s(r.read_ms)} | ${s(r.read_into_ms)} | ${s(r.load_ms)} | ${f(r.load_over_read, 2)} | ${f(r.load_over_read_into, 2)} | ${s(r.load_noverify_ms)} | ` +
      `${[r.cpu.read, r.cpu.read_into, r.cpu.load, r.cpu.load_noverify].map((c) => cpuMs(c).toFixed(0)).join(' / ')} | ${MiB(r.peak_rss_bytes)} | ` +
      `${MiB(r.weights_bytes)} + ${MiB(r.kv_bytes)} (${r.kv_dtype}, ${r.n_ctx}) | ${f(r.rss_over_target, 2)} | ${MiB(r.plan_total_bytes)} | ${MiB(r.memory_bytes)} | ${r.loadavg_start[0].toFixed(1)}-${r.loadavg_end[0].toFixed(1)} |`);
  }
  out.push('', '| model | quant | ' + threadsList.map((t) => `Node ${t}T prefill | Node ${t}T decode`).join(' | ') + ' | ' +
    threadsList.map((t) => `Chromium ${t}T load | Chromium ${t}T prefill | Chromium ${t}T decode | Chromium ${t}T peak PSS MiB`).join(' | ') + ' | load avg (1 min) Node / Chromium |');
  out.push('|---|---|' + threadsList.map(() => '---|---|').join('') + threadsList.map(() => '---|---|---|---|').join('') + '---|');
  for (const r of rep.results) {
    if (r.error) continue;
    const node = threadsList.map((t) => { const x = r.threads[t]; if (x?.error) return 'error | error';
      const sh = (v) => (v === undefined ? '' : ` (${v.toFixed(2)})`);
      return `${f(x?.prefill_tps)}${sh(x?.prefill_cpu_share)} | ${f(x?.decode_tps, 2)}${sh(x?.decode_cpu_share)}`; }).join(' | ');
    const br = threadsList.map((t) => {
      const x = (rep.browser ?? []).find((b) => b.model === r.model && b.quant === r.quant && b.threads === t);
      return !x ? '- | - | - | -' : x.error ? `error: ${x.error.slice(0, 60)} | - | - | -` : `${s(x.loadMs)} | ${f(x.prefillTps)} | ${f(x.decodeTps, 2)} | ${MiB(x.peakPss)}`;
    }).join(' | ');
    const bl = (rep.browser ?? []).filter((b) => b.model === r.model && b.quant === r.quant && b.loadavg_start);
    const la = bl.length ? `${Math.min(...bl.map((b) => b.loadavg_start[0])).toFixed(1)}-${Math.max(...bl.map((b) => b.loadavg_end[0])).toFixed(1)}` : '-';
    out.push(`| ${label(r)} | ${node} | ${br} | ${r.loadavg_start[0].toFixed(1)}-${r.loadavg_end[0].toFixed(1)} / ${la} |`);
  }
  return out.join('\n');
}
const md = markdown(report);
if (a.has('--json')) process.stdout.write(JSON.stringify(report, null, 1) + '\n');
else if (ALL || FROM || a.opt('--md')) console.log('\n' + md);
if (a.opt('--md')) fs.writeFileSync(a.opt('--md'), md + '\n');
const outFile = a.opt('--out');
if (outFile) fs.writeFileSync(outFile, JSON.stringify(report, null, 1));
