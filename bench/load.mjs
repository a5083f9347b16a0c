#!/usr/bin/env node
// Load benchmark: streaming a .rknot into WebAssembly.Memory (with checksum + block-scale verification)
// vs just reading the same file (fs stream, data discarded), and peak RSS of a load vs the model bytes.
//
//   node bench/load.mjs [--runs N] [--synthetic-mb MB] [--out-dir DIR (keep the files)] [--json]
//
// Models: tiny-llama-a converted (q8_0 and f32, keep) and a synthetic q8_0 model of ~MB megabytes
// (default 200; 0 skips it), all written to os.tmpdir(). Files are read from a warm page cache (one
// untimed read first). Times are medians over N runs (default 7), loads and reads interleaved.
// Peak RSS: each load runs in a fresh child process (3 times, median); reported as peak RSS (VmHWM) of the load
// child - peak RSS of a baseline child that imports the same modules and creates a 1-page memory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { args } from './lib/common.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, '../dist/src');
const { loadRknotStreamDetailed } = await import(path.join(dist, 'loader/stream.js'));
const BASE = 0x10000 * 8;

function freshPlan() {
  return (meta, header) => {
    const pages = Math.ceil((BASE + header.dataSize) / 65536);
    const memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    return { dest: new Uint8Array(memory.buffer, BASE, header.dataSize) };
  };
}

// ------------------------------------------------------------------ child modes
const { argv, opt: optStr } = args();
if (argv[0] === '--child') {
  const [, mode, file] = argv;
  let extra = {};
  if (mode === 'load' || mode === 'load-stream') {
    const r = await loadRknotStreamDetailed(file, { plan: freshPlan(), direct: mode === 'load' });
    extra = { bytes: r.bytes, data_size: r.header.dataSize };
  } else if (mode === 'read') {
    for await (const c of fs.createReadStream(file, { highWaterMark: 4 << 20 })) void c;
  } else {
    new WebAssembly.Memory({ initial: 1 }); // baseline: same imports, nothing loaded
  }
  // VmHWM (peak RSS of this process's own address space). process.resourceUsage().maxRSS is not used: on
  // Linux it also counts the parent's RSS at fork time (the rusage high-water mark survives execve).
  let hwm = process.resourceUsage().maxRSS;
  try { hwm = Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]); } catch { /* not Linux */ }
  process.stdout.write(JSON.stringify({ maxRSS_kb: hwm, ...extra }) + '\n');
  process.exit(0);
}

// ------------------------------------------------------------------ options
const opt = (name, def) => { const v = optStr(`--${name}`); return v === undefined ? def : Number(v); };
const json = argv.includes('--json');
const runs = opt('runs', 7);
const synthMB = opt('synthetic-mb', 200);
const log = (...a) => { if (!json) console.log(...a); };

const { tiny } = await import('./lib/tiny-model.mjs'); // shipped f32 GGUF, derived q8_0 (sha256-checked)
const outDirArg = argv.includes('--out-dir') ? argv[argv.indexOf('--out-dir') + 1] : undefined;
const tmp = outDirArg ?? fs.mkdtempSync(path.join(os.tmpdir(), 'aether-bench-load-'));
if (outDirArg) fs.mkdirSync(outDirArg, { recursive: true });

const { convertModel } = await import(path.join(dist, 'formats/convert.js'));
const { writeRknot } = await import(path.join(dist, 'formats/rknot.js'));

const files = [];
for (const [src, name] of [['tiny-llama-a-q8_0.gguf', 'tiny-llama-a q8_0'], ['tiny-llama-a-f32.gguf', 'tiny-llama-a f32']]) {
  const out = path.join(tmp, src.replace('.gguf', '.rknot'));
  await convertModel(tiny(src), out, { quant: 'keep', hashInput: false });
  files.push({ name, file: out });
}

if (synthMB > 0) {
  // llama-shaped q8_0 model: dim 1024, hidden 2816, vocab 16000, layers chosen to reach ~synthMB
  const dim = 1024, hidden = 2816, vocab = 16000, heads = 16, kvHeads = 4, hd = 64;
  const perLayer = (dim * dim * 2 + dim * kvHeads * hd * 2 + dim * hidden * 3) * 34 / 32;
  const layers = Math.max(1, Math.round((synthMB * 1e6 - 2 * vocab * dim * 34 / 32) / perLayer));
  const config = { arch: 'llama', dim, n_layers: layers, n_heads: heads, n_kv_heads: kvHeads, head_dim: hd, hidden_dim: hidden, vocab_size: vocab,
    n_ctx: 2048, norm_eps: 1e-5, rope_theta: 10000, rope_dim: hd, rope_type: 'norm', tie_embeddings: false, qkv_bias: false, fused_qkv: false, bos_token_id: 1, eos_token_id: 2 };
  const tokens = Array.from({ length: vocab }, (_, i) => `t${i}`);
  const W = (name, shape) => ({ name, dtype: 'q8_0', shape });
  const N = (name) => ({ name, dtype: 'f32', shape: [dim] });
  const tensors = [W('token_embd.weight', [dim, vocab])];
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`;
    tensors.push(N(p + 'attn_norm.weight'), W(p + 'attn_q.weight', [dim, heads * hd]), W(p + 'attn_k.weight', [dim, kvHeads * hd]), W(p + 'attn_v.weight', [dim, kvHeads * hd]),
      W(p + 'attn_output.weight', [heads * hd, dim]), N(p + 'ffn_norm.weight'), W(p + 'ffn_gate.weight', [dim, hidden]), W(p + 'ffn_up.weight', [dim, hidden]), W(p + 'ffn_down.weight', [hidden, dim]));
  }
  tensors.push(N('output_norm.weight'), W('output.weight', [dim, vocab]));
  const out = path.join(tmp, 'synthetic-q8_0.rknot');
  let seed = 1;
  await writeRknot(out, { config, tokenizer: { model: 'llama', tokens, scores: tokens.map(() => 0) }, tensors }, function* (spec) {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const bytes = spec.dtype === 'f32' ? n * 4 : n / 32 * 34;
    for (let o = 0; o < bytes; o += 8 << 20) {
      const len = Math.min(8 << 20, bytes - o);
      const b = new Uint8Array(len);
      const u = new Uint32Array(b.buffer, 0, len >>> 2);
      for (let i = 0; i < u.length; i++) { seed = (seed * 1664525 + 1013904223) >>> 0; u[i] = seed; }
      if (spec.dtype === 'f32') { const f = new Float32Array(b.buffer); for (let i = 0; i < f.length; i++) f[i] = 1; }
      else for (let k = (34 - (o % 34)) % 34; k + 1 < len; k += 34) { b[k] = 0x00; b[k + 1] = 0x20; } // finite f16 scales
      yield b;
    }
  });
  files.push({ name: `synthetic q8_0 (${layers} layers)`, file: out });
}

// ------------------------------------------------------------------ timing
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };

async function readOnce(file) {
  const t = performance.now();
  for await (const c of fs.createReadStream(file, { highWaterMark: 4 << 20 })) void c;
  return performance.now() - t;
}
async function readReuseOnce(file) {
  // positional reads into one reused 4 MiB buffer: the I/O floor without allocation effects
  const t = performance.now();
  const fh = await fs.promises.open(file, 'r');
  const buf = Buffer.allocUnsafeSlow(4 << 20);
  try {
    for (let pos = 0; ; pos += buf.length) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
      if (bytesRead < buf.length) break;
    }
  } finally { await fh.close(); }
  return performance.now() - t;
}
async function readAllocOnce(file) {
  const t = performance.now();
  await fs.promises.readFile(file); // allocates a file-sized buffer (fresh pages) and reads into it
  return performance.now() - t;
}
function touchOnce(bytes) {
  const t = performance.now();
  const m = new WebAssembly.Memory({ initial: Math.ceil(bytes / 65536) });
  const u = new Uint8Array(m.buffer);
  for (let p = 0; p < u.length; p += 4096) u[p] = 1; // first touch of every page of a fresh memory
  return performance.now() - t;
}
async function loadOnce(file, opts, plan) {
  const t = performance.now();
  await loadRknotStreamDetailed(file, { plan, ...opts });
  return performance.now() - t;
}
function child1(mode, file) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, file ?? ''], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`child ${mode} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}
/** median maxRSS of 3 fresh child processes */
function child(mode, file) {
  const rs = [child1(mode, file), child1(mode, file), child1(mode, file)];
  const kb = median(rs.map((r) => r.maxRSS_kb));
  return { ...rs[0], maxRSS_kb: kb, all_kb: rs.map((r) => r.maxRSS_kb) };
}

const results = [];
const baseline = child('baseline');
for (const { name, file } of files) {
  const size = fs.statSync(file).size;
  await readOnce(file); // warm the page cache
  await loadOnce(file, {}, freshPlan());
  // a pre-touched destination (memory already committed) isolates the loader from page-fault costs
  let warmDest;
  const warmPlan = (meta, header) => {
    if (!warmDest) { warmDest = freshPlan()(meta, header).dest; warmDest.fill(1); }
    return { dest: warmDest };
  };
  const t = { read: [], read_reuse: [], read_alloc: [], touch_fresh_memory: [], load: [], load_warm_dest: [], load_stream: [], load_noverify: [] };
  for (let i = 0; i < runs; i++) {
    t.read.push(await readOnce(file));
    t.read_reuse.push(await readReuseOnce(file));
    t.read_alloc.push(await readAllocOnce(file));
    t.touch_fresh_memory.push(touchOnce(size));
    t.load.push(await loadOnce(file, {}, freshPlan()));
    t.load_warm_dest.push(await loadOnce(file, {}, warmPlan));
    t.load_stream.push(await loadOnce(file, { direct: false }, freshPlan()));
    t.load_noverify.push(await loadOnce(file, { verify: false, checkScales: false }, freshPlan()));
  }
  const med = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)]));
  const rss = child('load', file);
  const rssStream = child('load-stream', file);
  const rssRead = child('read', file);
  const peak = (rss.maxRSS_kb - baseline.maxRSS_kb) * 1024;
  const peakStream = (rssStream.maxRSS_kb - baseline.maxRSS_kb) * 1024;
  const r = {
    model: name, file_bytes: size, data_bytes: rss.data_size, runs,
    ms: Object.fromEntries(Object.entries(med).map(([k, v]) => [k, +v.toFixed(2)])),
    load_over_read: +(med.load / med.read).toFixed(3),
    load_over_read_alloc: +(med.load / med.read_alloc).toFixed(3),
    load_warm_dest_over_read_reuse: +(med.load_warm_dest / med.read_reuse).toFixed(3),
    load_warm_dest_over_read: +(med.load_warm_dest / med.read).toFixed(3),
    load_stream_over_read: +(med.load_stream / med.read).toFixed(3),
    read_GBps: +(size / med.read / 1e6).toFixed(2),
    load_GBps: +(size / med.load / 1e6).toFixed(2),
    peak_rss_over_baseline_bytes: peak,
    peak_over_model_bytes: +(peak / size).toFixed(3),
    peak_stream_over_baseline_bytes: peakStream,
    peak_stream_over_model_bytes: +(peakStream / size).toFixed(3),
    read_only_peak_over_baseline_bytes: (rssRead.maxRSS_kb - baseline.maxRSS_kb) * 1024,
    baseline_maxRSS_bytes: baseline.maxRSS_kb * 1024,
    maxRSS_kb_samples: { baseline: baseline.all_kb, load: rss.all_kb, load_stream: rssStream.all_kb, read: rssRead.all_kb },
  };
  results.push(r);
  const f = (x) => x.toFixed(1);
  log(`${name}: ${(size / 1e6).toFixed(1)} MB (median of ${runs})`);
  log(`  baselines: fs stream read+discard ${f(med.read)} ms (${r.read_GBps} GB/s); positional read into one reused buffer ${f(med.read_reuse)} ms;`);
  log(`             readFile (fresh buffer + read) ${f(med.read_alloc)} ms; first touch of a fresh wasm memory of that size alone ${f(med.touch_fresh_memory)} ms`);
  log(`  load (direct, verify) into fresh wasm memory ${f(med.load)} ms = ${r.load_over_read}x stream read, ${r.load_over_read_alloc}x readFile`);
  log(`  load (direct, verify) into pre-touched memory ${f(med.load_warm_dest)} ms = ${r.load_warm_dest_over_read}x stream read, ${r.load_warm_dest_over_read_reuse}x reused-buffer read`);
  log(`  load (stream path, verify) ${f(med.load_stream)} ms; load (direct, no checks) ${f(med.load_noverify)} ms`);
  log(`  peak RSS over baseline: direct ${f(peak / 1e6)} MB = ${r.peak_over_model_bytes}x file, stream ${f(peakStream / 1e6)} MB = ${r.peak_stream_over_model_bytes}x, fs stream read alone ${f(r.read_only_peak_over_baseline_bytes / 1e6)} MB`);
}
if (!outDirArg) fs.rmSync(tmp, { recursive: true, force: true });
const out = { node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), crc32: (await import(path.join(dist, 'formats/checksum.js'))).crc32Impl, results };
if (json) process.stdout.write(JSON.stringify(out) + '\n');
else log(`(node ${out.node}, ${out.cpus} cpus, load average ${out.loadavg.map((x) => x.toFixed(2)).join(' ')}, crc32 ${out.crc32})`);
