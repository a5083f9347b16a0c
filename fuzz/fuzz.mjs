#!/usr/bin/env node
// Fuzzer driver: `npm run fuzz -- --target NAME --seconds N [--runs N] [--seed S]` (NAME 'all' runs every target).
//
// JS targets (fuzz/targets.mjs: gguf, gguf-load, rknot, safetensors, spm, tokenizer-json) run in a child process under a seeded
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
const JS_NAMES = ['gguf', 'gguf-load', 'rknot', 'safetensors', 'spm', 'tokenizer-json'];

function parseArgs(argv) {
  const o = { target: undefined, seconds: 10, runs: 0, seed: 1, slowMs: 5000, child: false, quiet: false, coverage: true, batch: 0, corpus: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--target' || a === '-t') o.target = v();
    else if (a === '--seconds' || a === '-s') o.seconds = Number(v());
    else if (a === '--runs') o.runs = Number(v());
    else if (a === '--seed') o.seed = Number(v());
    else if (a === '--slow-ms') o.slowMs = Number(v());
    else if (a === '--child') o.child = true;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '--no-coverage') o.coverage = false;
    else if (a === '--batch') o.batch = Number(v());
    else if (a === '--corpus') o.corpus = v();
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
  const { CoverageTracker } = await import('./coverage.mjs');
  const t = JS_TARGETS[o.target];
  // coverage of the parsers only (dist/src), started before they are imported so every block is instrumented
  const cov = o.coverage ? new CoverageTracker((url) => url.includes('/dist/src/')) : null;
  const seeds = await t.seeds();
  await t.prepare?.();
  const rng = makeRng(o.seed);
  // the input being run, kept in a file the parent reads if this process dies (one pre-opened fd, length-prefixed)
  const cur = path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : root, `aether-fuzz-cur-${o.target}-${process.pid}.bin`);
  const curFd = fs.openSync(cur, 'w+');
  const curLen = Buffer.alloc(4);
  process.stdout.write(JSON.stringify({ cur }) + '\n');
  const t0 = performance.now(), end = t0 + o.seconds * 1000;
  let runs = 0, reruns = 0, rejected = 0, slowest = 0, slowestCpu = 0, lastReport = t0;
  const exec = async (input, runSeed, seedRun) => {
    try {
      await t.run(input, makeRng(runSeed), seedRun);
      return false;
    } catch (e) {
      if (e?.constructor?.name !== 'AetherError') {
        const f = saveFinding(o.target, input, `${o.target}: ${e?.stack ?? e}`);
        process.stdout.write(JSON.stringify({ target: o.target, crash: f, error: String(e?.stack ?? e).split('\n').slice(0, 6).join('\n'), runs }) + '\n');
        process.exit(1);
      }
      return true;
    }
  };
  const one = async (input, runSeed, seedRun = false) => {
    curLen.writeUInt32LE(input.length, 0);
    fs.writeSync(curFd, curLen, 0, 4, 0);
    fs.writeSync(curFd, input, 0, input.length, 4);
    const s = performance.now();
    const refused = await exec(input, runSeed, seedRun);
    const wall = performance.now() - s;
    if (wall > slowest) slowest = wall;
    // judged by CPU time, not wall time (a shared, loaded machine stretches wall time): an input slow by the wall
    // clock is run again with process.cpuUsage() around it (too costly to call for every input)
    if (wall > Math.min(o.slowMs, 50)) {
      const c0 = process.cpuUsage();
      await exec(input, runSeed, seedRun);
      const c = process.cpuUsage(c0), dt = (c.user + c.system) / 1000;
      if (dt > slowestCpu) slowestCpu = dt;
      if (dt > o.slowMs) {
        const f = saveFinding(o.target, input, `${o.target}: slow input, ${dt.toFixed(0)} ms CPU (${wall.toFixed(0)} ms wall)`);
        process.stdout.write(JSON.stringify({ target: o.target, crash: f, error: `slow input: ${dt.toFixed(0)} ms CPU (limit ${o.slowMs})`, runs }) + '\n');
        process.exit(1);
      }
    }
    return refused;
  };

  // the corpus: the seeds, the inputs kept by earlier runs (o.corpus), then every input that reached new coverage
  const corpus = seeds.slice();
  const corpusDir = o.corpus === 'none' ? null : path.resolve(o.corpus ?? path.join(root, 'build/fuzz/corpus', o.target));
  if (corpusDir && fs.existsSync(corpusDir)) for (const f of fs.readdirSync(corpusDir).sort()) corpus.push(new Uint8Array(fs.readFileSync(path.join(corpusDir, f))));
  const loaded = corpus.length;
  const keep = (input) => {
    corpus.push(input);
    if (corpusDir) {
      fs.mkdirSync(corpusDir, { recursive: true });
      fs.writeFileSync(path.join(corpusDir, crypto.createHash('sha1').update(input).digest('hex').slice(0, 16)), input);
    }
  };
  cov?.reset();
  // every seed / corpus input must pass as is (seeds with a fixed run seed)
  for (let i = 0; i < loaded; i++) {
    if (await one(corpus[i], 1, i < seeds.length)) rejected++;
    runs++;
    if (cov) cov.add(cov.take());
  }
  const ring = [];
  let batch = 1, novelBatches = 0;
  const maxBatch = o.batch > 0 ? o.batch : 64;
  while ((o.runs > 0 ? runs < o.runs : true) && (o.runs > 0 && !o.seconds ? true : performance.now() < end)) {
    const pending = [];
    for (let k = 0; k < (cov ? batch : 1); k++) {
      // corpus entries: half the time the smaller of two (small inputs run faster and mutate into more distinct ones)
      const base = cov ? pickBase(corpus, rng) : ring.length && rng.chance(0.3) ? rng.pick(ring) : rng.pick(seeds);
      const input = t.mutate(base, rng, seeds);
      const runSeed = rng.u32();
      if (await one(input, runSeed)) rejected++;
      runs++;
      pending.push([input, runSeed]);
      if (!cov && input.length < 4 << 20) { if (ring.length < 64) ring.push(input); else ring[rng.int(64)] = input; }
    }
    if (cov) {
      const hits = cov.take();
      if (pending.length === 1 ? cov.novel(hits, false) : cov.novel(hits, true)) {
        novelBatches++;
        if (pending.length === 1) { cov.add(hits); if (pending[0][0].length < 1 << 20) keep(pending[0][0]); }
        else {
          // which inputs of the batch were novel: re-run them one by one (deterministic for input + run seed)
          for (const [input, runSeed] of pending) {
            await one(input, runSeed);
            reruns++;
            const h = cov.take();
            if (cov.novel(h, false)) { cov.add(h); if (input.length < 1 << 20) keep(input); }
          }
        }
        batch = Math.max(1, batch >> 1);
      } else batch = Math.min(maxBatch, batch * 2);
    }
    const now = performance.now();
    if (!o.quiet && now - lastReport > 10000) {
      lastReport = now;
      process.stderr.write(`fuzz ${o.target}: ${runs} runs, ${(runs / ((now - t0) / 1000)).toFixed(0)}/s, ${rejected} rejected with AetherError` +
        (cov ? `, ${cov.blocks} blocks, ${cov.features} features, corpus ${corpus.length}, batch ${batch}` : '') + '\n');
    }
  }
  t.cleanup?.();
  fs.closeSync(curFd);
  fs.rmSync(cur, { force: true });
  const secs = (performance.now() - t0) / 1000;
  const res = { target: o.target, kind: cov ? 'js-coverage' : 'js-mutation', runs, seconds: +secs.toFixed(1), execs_per_s: Math.round(runs / secs), rejected, accepted: runs - rejected,
    slowest_wall_ms: +slowest.toFixed(1), slowest_cpu_ms: +slowestCpu.toFixed(1), seeds: seeds.length, crashes: 0 };
  if (cov) {
    Object.assign(res, { coverage_blocks: cov.blocks, features: cov.features, corpus: corpus.length, corpus_loaded: loaded - seeds.length, novel_batches: novelBatches, reruns,
      cov_takes: cov.takes, cov_take_ms: +(cov.takeMs / cov.takes).toFixed(3) });
    cov.stop();
  }
  process.stdout.write(JSON.stringify(res) + '\n');
}

function pickBase(corpus, rng) {
  const a = rng.pick(corpus);
  if (!rng.chance(0.5)) return a;
  const b = rng.pick(corpus);
  return b.length < a.length ? b : a;
}

function runJs(o) {
  return new Promise((resolve) => {
    const args = ['--max-old-space-size=2048', '--stack-size=2000', path.join(here, 'fuzz.mjs'), '--child', '--target', o.target, '--seconds', String(o.seconds),
      '--runs', String(o.runs), '--seed', String(o.seed), '--slow-ms', String(o.slowMs), ...(o.quiet ? ['--quiet'] : []),
      ...(o.coverage ? [] : ['--no-coverage']), ...(o.batch ? ['--batch', String(o.batch)] : []), ...(o.corpus ? ['--corpus', o.corpus] : [])];
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
      if (cur && fs.existsSync(cur)) { const b = fs.readFileSync(cur); f = saveFinding(o.target, b.subarray(4, 4 + b.readUInt32LE(0)), `${o.target}: process died (code ${code}, signal ${signal})`); fs.rmSync(cur, { force: true }); }
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
