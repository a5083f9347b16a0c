#!/usr/bin/env node
// Load A/B: Aether.load of model files with two (or more) builds of the library side by side, against a plain read
// of the same file, every measurement in a fresh child process (node --no-liftoff --no-wasm-lazy-compilation, as
// the aether CLI runs), runs interleaved read / into / A / B / read / into / A / B ..., medians; warm page cache.
//
//   node bench/load-ab.mjs --file F.rknot[,G.gguf] [--dist NAME=DIR,NAME=DIR] [--runs 5] [--threads 1] [--ctx 1024]
//                          [--no-verify] [--json] [--out F.json]   (--ctx: nCtx, default the engine's)
//
// --dist: each NAME=DIR[@READ], DIR a repository root with dist/ and wasm/ (default: this checkout, named 'this'), READ the
// load option `read` as JSON without commas, e.g. 'staged=.@{"staged":true}' (a 1 MiB chunk: add "chunk":1048576 after
// a ';' -> written 'staged=.@{"staged":true;"chunk":1048576}'). A build made for the
// comparison: `git archive BASE js tsconfig.json package.json | tar -x -C /tmp/base && ln -s $PWD/wasm /tmp/base/wasm
// && ln -s $PWD/node_modules /tmp/base/node_modules && (cd /tmp/base && npx tsc -p tsconfig.json)`.
// Reported per file: `read` (fs stream into a reused 4 MiB buffer, data discarded: issue 11's baseline), `into`
// (positional 4 MiB reads into a fresh wasm memory of the file's size: page faults included), and per build the
// load time (timed in the child around load(), wall), its CPU (user + system of the child during load(), all
// threads), peak RSS (VmHWM) and load / read, load / into; with two builds also the ratio of the second to the first
// pair by pair (median). A .gguf is converted on the fly by load() (cached in the OS temp folder after the first
// conversion; the untimed warm-up load does that conversion).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { args, machine, median, repoRoot } from './lib/common.mjs';

const a = args();
const hwmKb = () => { try { return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]); } catch { return 0; } };

if (a.argv[0] === '--child') {
  const [, mode, root, file] = a.argv;
  const c0 = process.cpuUsage();
  const out = {};
  const t0 = performance.now();
  if (mode === 'read') {
    for await (const c of fs.createReadStream(file, { highWaterMark: 4 << 20 })) void c;
  } else if (mode === 'into') {
    const fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const m = new WebAssembly.Memory({ initial: Math.ceil((size + 65536) / 65536), maximum: 65536 });
    const dest = new Uint8Array(m.buffer, 65536, size);
    for (let off = 0; off < size;) off += fs.readSync(fd, dest, off, Math.min(4 << 20, size - off), off);
    fs.closeSync(fd);
  } else {
    const [dir, readJson] = root.split('@');
    const { load } = await import(pathToFileURL(path.join(dir, 'dist/src/index.js')).href);
    const model = await load(file, { threads: Number(a.opt('--threads', '1')), nCtx: a.opt('--ctx') !== undefined ? Number(a.opt('--ctx')) : undefined, verify: !a.has('--no-verify'), warmup: false,
      ...(readJson ? { read: JSON.parse(readJson) } : {}) });
    out.plan_total = model.engine.plan.total;
    out.weights = model.engine.plan.weights;
    out.kv = model.engine.plan.kvCache;
    model.dispose();
  }
  out.ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  out.cpu_ms = (c.user + c.system) / 1000;
  out.hwm_kb = hwmKb();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

const files = (a.opt('--file') ?? '').split(',').filter(Boolean);
if (!files.length) { console.error('usage: node bench/load-ab.mjs --file F[,G] [--dist NAME=DIR,...] [--runs 5]'); process.exit(2); }
const dists = (a.opt('--dist') ?? `this=${repoRoot}`).split(',').map((s) => {
  const [n, d] = s.split('=');
  const [dir, read] = d.split('@');
  return { name: n, root: path.resolve(dir) + (read ? `@${read.replaceAll(';', ',')}` : '') };
});
const runs = Number(a.opt('--runs', '5'));
const pass = ['--threads', '--ctx'].flatMap((f) => (a.opt(f) !== undefined ? [f, a.opt(f)] : [])).concat(a.has('--no-verify') ? ['--no-verify'] : []);
const log = (s) => { if (!a.has('--json')) console.log(s); };

function child(mode, root, file) {
  const r = spawnSync(process.execPath, ['--no-liftoff', '--no-wasm-lazy-compilation', path.join(repoRoot, 'bench/load-ab.mjs'), '--child', mode, root, file, ...pass],
    { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || !line?.startsWith('{')) throw new Error(`${mode} ${root} ${file}: ${(r.stderr || r.stdout).trim().split('\n').slice(-4).join(' | ')}`);
  return JSON.parse(line);
}

const report = { machine: machine(), command: `node bench/load-ab.mjs ${a.argv.join(' ')}`, loadavg_start: os.loadavg(), results: [] };
log(`machine: ${JSON.stringify(report.machine)}`);
for (const file of files) {
  // warm-up: page cache, and the on-the-fly conversion of a GGUF (cached afterwards)
  child('read', repoRoot, file);
  for (const d of dists) child('load', d.root, file);
  const res = { file, bytes: fs.statSync(file).size, loadavg_start: os.loadavg(), read: [], into: [], builds: Object.fromEntries(dists.map((d) => [d.name, []])) };
  for (let r = 0; r < runs; r++) {
    res.read.push(child('read', repoRoot, file));
    res.into.push(child('into', repoRoot, file));
    // alternate the order of the builds from run to run
    const order = r % 2 ? [...dists].reverse() : dists;
    for (const d of order) res.builds[d.name].push(child('load', d.root, file));
  }
  res.loadavg_end = os.loadavg();
  const med = (xs, k) => median(xs.map((x) => x[k]));
  const readMs = med(res.read, 'ms'), intoMs = med(res.into, 'ms');
  res.summary = { read_ms: readMs, into_ms: intoMs, read_cpu_ms: med(res.read, 'cpu_ms'), into_cpu_ms: med(res.into, 'cpu_ms'), builds: {} };
  const first = dists[0].name;
  for (const d of dists) {
    const xs = res.builds[d.name];
    const s = { load_ms: med(xs, 'ms'), cpu_ms: med(xs, 'cpu_ms'), hwm_mib: med(xs, 'hwm_kb') / 1024, load_over_read: med(xs, 'ms') / readMs, load_over_into: med(xs, 'ms') / intoMs,
      weights_mib: xs[0].weights / 2 ** 20, kv_mib: xs[0].kv / 2 ** 20 };
    s.rss_over_target = (s.hwm_mib * 2 ** 20) / (1.05 * (xs[0].weights + xs[0].kv) + 64 * 2 ** 20);
    if (d.name !== first) s.ratio_vs_first = median(xs.map((x, i) => x.ms / res.builds[first][i].ms));
    res.summary.builds[d.name] = s;
  }
  report.results.push(res);
  const S = res.summary;
  log(`${path.basename(file)} (${(res.bytes / 2 ** 20).toFixed(0)} MiB), load average ${res.loadavg_start[0].toFixed(1)} -> ${res.loadavg_end[0].toFixed(1)}: ` +
    `read ${S.read_ms.toFixed(0)} ms (CPU ${S.read_cpu_ms.toFixed(0)}), into memory ${S.into_ms.toFixed(0)} ms (CPU ${S.into_cpu_ms.toFixed(0)})`);
  for (const [n, s] of Object.entries(S.builds)) {
    log(`  ${n.padEnd(8)} load ${s.load_ms.toFixed(0)} ms (x${s.load_over_read.toFixed(2)} read, x${s.load_over_into.toFixed(2)} into), CPU ${s.cpu_ms.toFixed(0)} ms, ` +
      `peak RSS ${s.hwm_mib.toFixed(0)} MiB (x${s.rss_over_target.toFixed(3)} of 1.05 x (weights ${s.weights_mib.toFixed(0)} + KV ${s.kv_mib.toFixed(0)}) + 64 MiB)` +
      (s.ratio_vs_first !== undefined ? `, ${n}/${first} ${s.ratio_vs_first.toFixed(3)} (median of pairs)` : ''));
  }
}
report.loadavg_end = os.loadavg();
if (a.opt('--out')) fs.writeFileSync(a.opt('--out'), JSON.stringify(report, null, 2));
if (a.has('--json')) console.log(JSON.stringify(report));
