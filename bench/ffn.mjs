// FFN benchmark: one layer's SwiGLU FFN at tiny-llama-a shape (288 x 768) and Phi-3-mini shape
// (3072 x 8192), random weights, every FFN mode side by side in one run (dense, fused, fused with
// interleaved tiles, static and dynamic at several sparsities), 1 and 2 threads; then end-to-end decode
// (tiny-llama-a with saturation metadata, as `aether bench`) in the same run.
//   node bench/ffn.mjs [--json] [--quick] [--threads 1,2] [--shapes tiny,phi3] [--dtype q8_0]
//                      [--sparsity 0.25,0.5,0.7,0.8] [--e2e MODEL.rknot] [--no-e2e] [--rounds N]
// Modes are interleaved round-robin (rounds x modes), and the best round per mode is kept (on a shared
// machine other processes only ever add time; the median is in the JSON too). The time is per FFN call
// (one token: decode; 64 tokens: prefill batch) including the pool's job start. V8 runs TurboFan only.
import os from 'node:os';
import v8 from 'node:v8';
import fs from 'node:fs';
import { Engine } from '../dist/src/runtime/engine.js';
import { FfnRuntime } from '../dist/src/runtime/ffn.js';
import { encodeFromF32 } from '../dist/src/formats/quantize.js';
import { DTYPES } from '../dist/src/formats/dtypes.js';
import { histQuantile } from '../dist/src/profile/profile.js';
import { load } from '../dist/src/index.js';
import { args, machine, median } from './lib/common.mjs';

v8.setFlagsFromString('--no-liftoff');   // TurboFan only, as bench/kernels.mjs: no tier-up during the timing
const SHAPE_NAMES = ['tiny', 'phi3'];
const { has: flag, opt } = args();
const JSON_OUT = flag('--json'), QUICK = flag('--quick');
const THREADS = opt('--threads', '1,2').split(',').map(Number);
const SHAPES = opt('--shapes', 'tiny,phi3').split(',').filter((x) => SHAPE_NAMES.includes(x));
const DTYPE = opt('--dtype', 'q8_0');
const SPARS = opt('--sparsity', '0.25,0.5,0.7,0.8').split(',').map(Number);
const ROUNDS = +opt('--rounds', QUICK ? 3 : 7);
const E2E = flag('--no-e2e') ? null : opt('--e2e', '/tmp/aether-quality/tiny-llama-a-q8_0.sat.rknot');
const FIXTURES = 'tests/fixtures'; // tiny-llama-a/val.txt
const log = (...a) => { if (!JSON_OUT) console.log(...a); };
const SHAPE = { tiny: { dim: 288, hidden: 768, heads: 6, hd: 48 }, phi3: { dim: 3072, hidden: 8192, heads: 32, hd: 96 } };

function rand(seed) { let s = seed >>> 0 || 1; return () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return ((s >>> 0) / 4294967296) * 2 - 1; }; }

/** A one-layer model with random weights (the FFN is what is timed; attention weights are tiny). */
async function makeEngine(shape, dtype, threads, maxBatch) {
  const { dim: D, hidden: H, heads, hd } = SHAPE[shape];
  const V = 64;
  const config = { arch: 'llama', dim: D, n_layers: 1, n_heads: heads, n_kv_heads: heads, head_dim: hd, hidden_dim: H, vocab_size: V, n_ctx: 64, norm_eps: 1e-5, rope_theta: 10000, rope_type: 'norm' };
  const specs = [['token_embd.weight', 'f32', [D, V]], ['output_norm.weight', 'f32', [D]], ['blk.0.attn_norm.weight', 'f32', [D]],
    ['blk.0.attn_q.weight', 'f32', [D, D]], ['blk.0.attn_k.weight', 'f32', [D, D]], ['blk.0.attn_v.weight', 'f32', [D, D]],
    ['blk.0.attn_output.weight', 'f32', [D, D]], ['blk.0.ffn_norm.weight', 'f32', [D]],
    ['blk.0.ffn_gate.weight', dtype, [D, H]], ['blk.0.ffn_up.weight', dtype, [D, H]], ['blk.0.ffn_down.weight', dtype, [H, D]]];
  let off = 0;
  const tensors = specs.map(([name, dt, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1), bytes = n / DTYPES[dt].blockSize * DTYPES[dt].typeSize;
    const t = { name, dtype: dt, shape, offset: off, bytes };
    off = Math.ceil((off + bytes) / 64) * 64;
    return t;
  });
  const opts = { threads, maxBatch, modules: ['ffn-fused', 'ffn-saturated'] };
  const prep = await Engine.prepare(opts);
  const { engine, dest } = Engine.create(prep, config, tensors, off, opts);
  const r = rand(99);
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const f = new Float32Array(n);
    const isNorm = t.shape.length === 1, scale = t.name.includes('down') ? 1 / Math.sqrt(H) : 1 / Math.sqrt(D);
    for (let i = 0; i < n; i++) f[i] = isNorm ? 1 : r() * scale * 1.7;
    dest.set(encodeFromF32(t.dtype, f), t.offset);
  }
  await engine.finishLoad();
  return engine;
}


async function ffnBench(shape, threads) {
  const { dim: D, hidden: H } = SHAPE[shape];
  const NB = 64;
  const eng = await makeEngine(shape, DTYPE, threads, NB);
  const ffn = new FfnRuntime(eng);
  const r = rand(7);
  const xs = new Float32Array(NB * D).map(() => r());
  const reset = (n) => eng.modelBuf(0, n * D).set(xs.subarray(0, n * D));
  // dynamic thresholds for the target sparsities: profile |silu(g)| on the random inputs
  ffn.startProfile([0]);
  for (let i = 0; i < 4; i++) { reset(NB); eng.runFfnLayer(0, NB); }
  const hist = ffn.readProfile(0).hist;
  const modes = [['dense', 'dense', {}], ['fused', 'fused', {}], ['fused tile 32', 'fused', { tile: 32 }]];
  for (const s of SPARS) {
    const mask = new Uint8Array(H / 8);
    const rr = rand(1000 + s * 100), idx = [...Array(H).keys()].sort(() => rr());
    for (const i of idx.slice(0, Math.round(s * H))) mask[i >> 3] |= 1 << (i & 7);
    modes.push([`static ${s}`, 'static', { masks: [mask], compensation: false }]);
    modes.push([`dynamic ${s}`, 'dynamic', { threshold: histQuantile(hist, s) }]);
  }
  if (DTYPE !== 'f32') for (const s of [0.7, 0.8]) {
    modes.push([`dynamic ${s} down q8_0`, 'dynamic', { threshold: histQuantile(hist, s), downDtype: 'q8_0', down: 'neuron' }]);
    modes.push([`dynamic ${s} down f32`, 'dynamic', { threshold: histQuantile(hist, s), downDtype: 'f32', down: 'neuron' }]);
    modes.push([`dynamic ${s} down rows`, 'dynamic', { threshold: histQuantile(hist, s), down: 'rows' }]);
    modes.push([`dynamic ${s} down f16`, 'dynamic', { threshold: histQuantile(hist, s), down: 'neuron' }]);
  }
  const auxBefore = ffn.auxBytes, rssBefore = process.memoryUsage().rss;
  const auxPerMode = {};
  for (const [label, m, o] of modes) {   // build all aux data before timing
    const a0 = ffn.auxBytes;
    ffn.setMode(m, [0], o);
    auxPerMode[label] = ffn.auxBytes - a0;
  }
  const rssAfter = process.memoryUsage().rss;
  const out = [];
  for (const n of [1, NB]) {
    const times = modes.map(() => []);
    const sparsity = modes.map(() => 0);
    const target = QUICK ? 20 : (shape === 'phi3' ? 60 : 150);   // ms per measurement
    for (let round = 0; round < ROUNDS; round++) {
      for (let mi = 0; mi < modes.length; mi++) {
        const [, m, o] = modes[mi];
        ffn.setMode(m, [0], o);
        reset(n);
        eng.runFfnLayer(0, n);   // warm
        let iters = 0;
        const t0 = performance.now();
        let t1 = t0;
        while (t1 - t0 < target) { eng.runFfnLayer(0, n); iters++; t1 = performance.now(); }
        times[mi].push(((t1 - t0) / iters) * 1000);
        sparsity[mi] = 1 - eng.ffnActive(0) / (n * H);
      }
    }
    const base = Math.min(...times[0]);
    for (let mi = 0; mi < modes.length; mi++) {
      const us = Math.min(...times[mi]);
      out.push({ shape: `${shape} ${D}x${H}`, dtype: DTYPE, threads: eng.threads, tokens: n, mode: modes[mi][0], us_per_call: us, us_median: median(times[mi]), speedup_vs_dense: base / us, sparsity: sparsity[mi] });
    }
  }
  eng.dispose();
  const weightBytes = ['ffn_gate', 'ffn_up', 'ffn_down'].reduce((a, t) => a + eng.tensorInfo(`blk.0.${t}.weight`).bytes, 0);
  return { rows: out, auxBytes: ffn.auxBytes - auxBefore, memory: { ffn_weight_bytes: weightBytes, aux_bytes_per_mode: auxPerMode, rss_growth_bytes: rssAfter - rssBefore } };
}

async function e2eBench(file, threads) {
  const rows = [];
  const model = await load(file, { threads, modules: ['ffn-fused', 'ffn-saturated'], maxBatch: 64 });
  const sat = model.metadata.saturation;
  const modes = [['dense', 'dense', {}], ['fused', 'fused', {}], ['fused tile 32', 'fused', { tile: 32 }]];
  for (const lv of sat?.levels ?? []) {
    modes.push([`static ${lv.sparsity}`, 'static', { sparsity: lv.sparsity }]);
    modes.push([`dynamic ${lv.sparsity}`, 'dynamic', { sparsity: lv.sparsity }]);
  }
  for (const [, m, o] of modes) model.setFfnMode(m, undefined, o);
  const eng = model.engine, V = model.config.vocab_size, NL = model.config.n_layers, H = model.config.hidden_dim;
  // real text (held-out half of val.txt, not the calibration half): prompt, then teacher-forced decode
  const P = 32, G = QUICK ? 32 : 96;
  const { selectDocs } = await import('../dist/src/profile/text.js');
  const text = selectDocs(fs.readFileSync(`${FIXTURES}/tiny-llama-a/val.txt`, 'utf8'), '67:').text;
  const ids = model.tokenize(text.slice(0, 20000)).slice(0, P + G);
  const prompt = ids.slice(0, P);
  const times = modes.map(() => []), spars = modes.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (let mi = 0; mi < modes.length; mi++) {
      model.setFfnMode(modes[mi][1], undefined, modes[mi][2]);
      eng.forward(prompt, 0);
      let act = 0;
      const t0 = performance.now();
      for (let i = 0; i < G; i++) {
        eng.forward([ids[P + i]], P + i);
        for (let l = 0; l < NL; l++) act += eng.ffnActive(l);
      }
      times[mi].push((G / (performance.now() - t0)) * 1000);
      spars[mi].push(1 - act / (G * NL * H));
    }
  }
  const base = Math.max(...times[0]);
  for (let mi = 0; mi < modes.length; mi++) {
    const tps = Math.max(...times[mi]);
    rows.push({ model: file, threads: model.threads, mode: modes[mi][0], decode_tps: tps, decode_tps_median: median(times[mi]), speedup_vs_dense: tps / base, sparsity: median(spars[mi]) });
  }
  const aux = model.ffn.auxBytes;
  model.dispose();
  return { rows, auxBytes: aux };
}

const { date, node, nproc, cpu, loadavg } = machine();
const result = { date, node, cpus: nproc, cpu, loadavg_start: loadavg, rounds: ROUNDS, ffn: [], e2e: [], aux_bytes: {} };
for (const shape of SHAPES) {
  for (const t of THREADS) {
    const r = await ffnBench(shape, t);
    result.ffn.push(...r.rows);
    result.aux_bytes[`ffn ${shape} ${DTYPE}`] = r.auxBytes;
    (result.memory ??= {})[`${shape} ${DTYPE} ${t}T`] = r.memory;
    log(`\nFFN ${shape} (${SHAPE[shape].dim}x${SHAPE[shape].hidden}) ${DTYPE}, ${t} thread(s); FFN weights ${(r.memory.ffn_weight_bytes / 2 ** 20).toFixed(1)} MiB, aux data built for all modes ${(r.auxBytes / 2 ** 20).toFixed(1)} MiB (RSS +${(r.memory.rss_growth_bytes / 2 ** 20).toFixed(1)} MiB)`);
    log(`  aux MiB per mode: ${Object.entries(r.memory.aux_bytes_per_mode).filter(([, b]) => b > 0).map(([k, b]) => `${k}: ${(b / 2 ** 20).toFixed(2)}`).join(', ')}`);
    log('mode                          tokens   us/call (best, median)  vs dense  sparsity');
    for (const x of r.rows) log(`${x.mode.padEnd(28)} ${String(x.tokens).padStart(6)} ${x.us_per_call.toFixed(1).padStart(9)} ${x.us_median.toFixed(1).padStart(9)} ${x.speedup_vs_dense.toFixed(2).padStart(8)}x ${(x.sparsity * 100).toFixed(1).padStart(8)}%`);
  }
}
if (E2E) {
  if (!fs.existsSync(E2E)) {   // the profiled model of bench/quality.mjs: make it the same way
    const { execFileSync } = await import('node:child_process');
    fs.mkdirSync(E2E.replace(/\/[^/]*$/, ''), { recursive: true });
    log(`profiling models/tiny-llama-a-q8_0.rknot into ${E2E} (val.txt documents 0..66)`);
    execFileSync('node', ['dist/cli/aether.js', 'profile', 'models/tiny-llama-a-q8_0.rknot', '--calib', `${FIXTURES}/tiny-llama-a/val.txt`,
      '--docs', '0:67', '--target-sparsity', '0.1,0.25,0.4,0.5,0.6,0.7,0.8,0.9', '-o', E2E, '--json'], { stdio: 'ignore' });
  }
  for (const t of THREADS) {
    const r = await e2eBench(E2E, t);
    result.e2e.push(...r.rows);
    result.aux_bytes[`e2e ${E2E}`] = r.auxBytes;
    log(`\nend-to-end decode ${E2E}, ${t} thread(s)`);
    log('mode                      tok/s (best, median)  vs dense  sparsity');
    for (const x of r.rows) log(`${x.mode.padEnd(22)} ${x.decode_tps.toFixed(0).padStart(8)} ${x.decode_tps_median.toFixed(0).padStart(8)} ${x.speedup_vs_dense.toFixed(2).padStart(8)}x ${(x.sparsity * 100).toFixed(1).padStart(8)}%`);
  }
}
result.loadavg_end = os.loadavg();
if (JSON_OUT) console.log(JSON.stringify(result));
else log(`\naux bytes (weights copies etc.): ${JSON.stringify(result.aux_bytes)}\nload average start ${result.loadavg_start.map((x) => x.toFixed(2)).join(' ')}, end ${result.loadavg_end.map((x) => x.toFixed(2)).join(' ')}`);
process.exit(0);
