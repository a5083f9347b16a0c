#!/usr/bin/env node
// Fuzzer driver: `npm run fuzz -- --target NAME --seconds N [--runs N] [--seed S]` (NAME 'all' runs every target).
//
// JS targets (fuzz/targets.mjs: gguf, rknot, safetensors, spm, tokenizer-json) run in a child process under a seeded
// mutation fuzzer (fuzz/mutate.mjs; not coverage-guided, see docs/FUZZING.md for why not Jazzer.js). An input fails when
// the parser throws anything but an AetherError, takes longer than --slow-ms, or kills the process (heap limit,
// crash); the input is saved to fuzz/crashes/ and the run exits 1.
// C targets (fuzz/c/*.c: rknot-check, model-init) are libFuzzer binaries built natively with clang
// -fsanitize=fuzzer,address,undefined over the portable C sources (fuzz/c/build.sh).
import { spawnSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
export const C_TARGETS = ['rknot-check', 'model-init'];
const JS_NAMES = ['gguf', 'rknot', 'safetensors', 'spm', 'tokenizer-json'];

function parseArgs(argv) {
  const o = { target: undefined, seconds: 10, runs: 0, seed: 1, slowMs: 5000, child: false, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--target' || a === '-t') o.target = v();
    else if (a === '--seconds' || a === '-s') o.seconds = Number(v());
    else if (a === '--runs') o.runs = Number(v());
    else if (a === '--seed') o.seed = Number(v());
    else if (a === '--slow-ms') o.slowMs = Number(v());
    else if (a === '--child') o.child = true;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '--list') o.list = true;
    else throw new Error(`fuzz: unknown argument ${a}`);
  }
  return o;
}

function saveFinding(target, bytes, what) {
  const dir = path.join(root, 'fuzz/crashes');
  fs.mkdirSync(dir, { recursive: true });
  const h = crypto.createHash('sha1').update(bytes).digest('hex').slice(0, 12);
  const f = path.join(dir, `${target}-${h}.bin`);
  fs.writeFileSync(f, bytes);
  fs.writeFileSync(f.replace(/\.bin$/, '.txt'), what + '\n');
  return f;
}

/** The child: run one JS target for o.seconds / o.runs. Prints one JSON result line. */
async function childMain(o) {
  const { JS_TARGETS } = await import('./targets.mjs');
  const { makeRng } = await import('./mutate.mjs');
  const t = JS_TARGETS[o.target];
  const seeds = await t.seeds();
  await t.prepare?.();
  const rng = makeRng(o.seed);
  const cur = path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : root, `aether-fuzz-cur-${o.target}-${process.pid}.bin`);
  process.stdout.write(JSON.stringify({ cur }) + '\n');
  const ring = [];
  const t0 = performance.now(), end = t0 + o.seconds * 1000;
  let runs = 0, rejected = 0, slowest = 0, lastReport = t0;
  const one = async (input, seedRun = false) => {
    fs.writeFileSync(cur, input);
    const s = performance.now(), c0 = process.cpuUsage();
    try {
      await t.run(input, seedRun ? makeRng(1) : rng, seedRun);
    } catch (e) {
      if (e?.constructor?.name !== 'AetherError') {
        const f = saveFinding(o.target, input, `${o.target}: ${e?.stack ?? e}`);
        process.stdout.write(JSON.stringify({ target: o.target, crash: f, error: String(e?.stack ?? e).split('\n').slice(0, 6).join('\n'), runs }) + '\n');
        process.exit(1);
      }
      rejected++;
    }
    // CPU time, not wall time: on a shared, loaded machine wall time says nothing about the input
    const c = process.cpuUsage(c0), dt = (c.user + c.system) / 1000, wall = performance.now() - s;
    if (dt > slowest) slowest = dt;
    if (dt > o.slowMs) {
      const f = saveFinding(o.target, input, `${o.target}: slow input, ${dt.toFixed(0)} ms CPU (${wall.toFixed(0)} ms wall)`);
      process.stdout.write(JSON.stringify({ target: o.target, crash: f, error: `slow input: ${dt.toFixed(0)} ms CPU (limit ${o.slowMs})`, runs }) + '\n');
      process.exit(1);
    }
    runs++;
  };
  for (const s of seeds) await one(s, true); // every seed must pass as is
  while ((o.runs > 0 ? runs < o.runs : true) && (o.runs > 0 && !o.seconds ? true : performance.now() < end)) {
    const base = ring.length && rng.chance(0.3) ? rng.pick(ring) : rng.pick(seeds);
    const input = t.mutate(base, rng, seeds);
    await one(input);
    if (input.length < 4 << 20) { if (ring.length < 64) ring.push(input); else ring[rng.int(64)] = input; }
    const now = performance.now();
    if (!o.quiet && now - lastReport > 10000) {
      lastReport = now;
      process.stderr.write(`fuzz ${o.target}: ${runs} runs, ${(runs / ((now - t0) / 1000)).toFixed(0)}/s, ${rejected} rejected with AetherError\n`);
    }
  }
  t.cleanup?.();
  fs.rmSync(cur, { force: true });
  const secs = (performance.now() - t0) / 1000;
  process.stdout.write(JSON.stringify({ target: o.target, kind: 'js-mutation', runs, seconds: +secs.toFixed(1), execs_per_s: Math.round(runs / secs), rejected, accepted: runs - rejected, slowest_cpu_ms: +slowest.toFixed(1), seeds: seeds.length, crashes: 0 }) + '\n');
}

function runJs(o) {
  return new Promise((resolve) => {
    const args = ['--max-old-space-size=2048', '--stack-size=2000', path.join(here, 'fuzz.mjs'), '--child', '--target', o.target, '--seconds', String(o.seconds),
      '--runs', String(o.runs), '--seed', String(o.seed), '--slow-ms', String(o.slowMs), ...(o.quiet ? ['--quiet'] : [])];
    const ch = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    ch.stdout.on('data', (d) => { out += d; });
    ch.on('close', (code, signal) => {
      const lines = out.trim().split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return { raw: l }; } });
      const cur = lines.find((l) => l.cur)?.cur;
      const res = lines.filter((l) => l.target).pop();
      if (res) { resolve(res); return; }
      // died without a result: heap limit, abort, signal
      let f;
      if (cur && fs.existsSync(cur)) { f = saveFinding(o.target, fs.readFileSync(cur), `${o.target}: process died (code ${code}, signal ${signal})`); fs.rmSync(cur, { force: true }); }
      resolve({ target: o.target, crash: f ?? '(input lost)', error: `process died: code ${code}, signal ${signal}` });
    });
  });
}

function buildC() {
  const r = spawnSync('bash', [path.join(here, 'c/build.sh')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('fuzz: building the C fuzz targets failed (fuzz/c/build.sh)');
}

function runC(o) {
  const bin = path.join(root, 'build/fuzz', o.target);
  buildC();
  const corpus = path.join(root, 'build/fuzz/corpus', o.target);
  fs.mkdirSync(corpus, { recursive: true });
  const seeds = path.join(here, 'c/seeds', o.target);
  const artifacts = path.join(root, 'fuzz/crashes') + '/';
  fs.mkdirSync(artifacts, { recursive: true });
  const args = [`-max_total_time=${o.seconds}`, `-seed=${o.seed}`, '-rss_limit_mb=2048', '-timeout=60', `-artifact_prefix=${artifacts}${o.target}-`, '-print_final_stats=1'];
  if (o.runs > 0) args.push(`-runs=${o.runs}`);
  args.push(corpus);
  if (fs.existsSync(seeds)) args.push(seeds);
  const t0 = performance.now();
  const r = spawnSync(bin, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  const log = (r.stdout ?? '') + (r.stderr ?? '');
  const runs = Number(/stat::number_of_executed_units:\s*(\d+)/.exec(log)?.[1] ?? /Done (\d+) runs/.exec(log)?.[1] ?? 0);
  const secs = (performance.now() - t0) / 1000;
  if (r.status !== 0) {
    const art = /Test unit written to (\S+)/.exec(log)?.[1];
    return { target: o.target, kind: 'libfuzzer', crash: art ?? '(see log)', error: log.split('\n').filter((l) => /ERROR|runtime error|SUMMARY|deadly/.test(l)).slice(0, 6).join('\n'), runs };
  }
  const cov = /cov: (\d+) ft: (\d+)/g;
  let m, last;
  while ((m = cov.exec(log))) last = m;
  return { target: o.target, kind: 'libfuzzer', runs, seconds: +secs.toFixed(1), execs_per_s: Math.round(runs / secs), coverage_edges: last ? Number(last[1]) : undefined, features: last ? Number(last[2]) : undefined, crashes: 0 };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.child) return childMain(o);
  const all = [...JS_NAMES, ...C_TARGETS];
  if (o.list || !o.target) {
    console.log(`targets: ${all.join(', ')} (or 'all')\nusage: npm run fuzz -- --target NAME --seconds N [--runs N] [--seed S]`);
    if (!o.target) process.exitCode = o.list ? 0 : 2;
    return;
  }
  const names = o.target === 'all' ? all : [o.target];
  let failed = 0;
  for (const name of names) {
    if (!all.includes(name)) throw new Error(`fuzz: unknown target ${name} (${all.join(', ')})`);
    const res = C_TARGETS.includes(name) ? runC({ ...o, target: name }) : await runJs({ ...o, target: name });
    console.log(JSON.stringify(res));
    if (res.crash) failed++;
  }
  process.exitCode = failed ? 1 : 0;
}

await main();
