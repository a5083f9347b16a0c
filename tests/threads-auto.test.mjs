// threads: 'auto' (the API's opt-in, the CLI's default): the physical cores, at most AUTO_THREADS_MAX, read from sysfs
// on Linux; the same tokens as one thread; bad values refused naming the option.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { load } from '../dist/src/index.js';
import { AUTO_THREADS_MAX, autoThreads, physicalCores } from '../dist/src/validate.js';
import { repoRoot, makeTmpDir, assertAetherError } from './helpers/formats.mjs';

const CLI = path.join(repoRoot, 'dist/cli/aether.js');
const Q8 = path.join(repoRoot, 'models/tiny-llama-a-q8_0.rknot');

/** A fake sysfs cpu directory: cpus[i] = the sibling list file's text of cpu i; `file` its name. */
function fakeSysfs(cpus, file = 'core_cpus_list') {
  const root = makeTmpDir('sysfs-');
  cpus.forEach((list, i) => {
    const topo = path.join(root, `cpu${i}`, 'topology');
    fs.mkdirSync(topo, { recursive: true });
    if (list !== null) fs.writeFileSync(path.join(topo, file), `${list}\n`);
  });
  fs.mkdirSync(path.join(root, 'cpufreq'));   // not a cpuN directory: ignored
  fs.writeFileSync(path.join(root, 'online'), `0-${cpus.length - 1}\n`);
  return root;
}

test('physicalCores counts distinct sibling sets (SMT pairs, no SMT, the older file name, no sysfs)', async () => {
  assert.equal(await physicalCores(fakeSysfs(['0,4', '1,5', '2,6', '3,7', '0,4', '1,5', '2,6', '3,7'])), 4);
  assert.equal(await physicalCores(fakeSysfs(['0-1', '0-1', '2-3', '2-3'])), 2);
  assert.equal(await physicalCores(fakeSysfs(['0', '1', '2'])), 3);
  assert.equal(await physicalCores(fakeSysfs(['0-1', '0-1'], 'thread_siblings_list')), 1);
  assert.equal(await physicalCores(fakeSysfs([null, null])), undefined);   // topology without the files
  assert.equal(await physicalCores(path.join(makeTmpDir('nosysfs-'), 'absent')), undefined);
});

test("autoThreads: within [1, AUTO_THREADS_MAX] and this machine's hardware threads", async () => {
  const n = await autoThreads(true);
  const hw = os.availableParallelism();
  assert.ok(Number.isInteger(n) && n >= 1 && n <= Math.min(AUTO_THREADS_MAX, hw), `${n} (hw ${hw})`);
  if (os.platform() === 'linux') {
    const cores = await physicalCores();
    if (cores !== undefined) assert.equal(n, Math.max(1, Math.min(AUTO_THREADS_MAX, hw, cores)));
  }
});

test("load({ threads: 'auto' }) runs on autoThreads() threads and gives one thread's tokens; bad values are refused", async () => {
  const want = await autoThreads(true);
  const a = await load(Q8, { threads: 'auto' });
  const one = await load(Q8, { threads: 1 });
  try {
    assert.equal(a.threads, want);
    assert.ok(!a.warnings.some((w) => w.includes('hardware threads')), JSON.stringify(a.warnings));
    const ta = await a.complete('The Debian project is', { maxTokens: 12, greedy: true });
    const t1 = await one.complete('The Debian project is', { maxTokens: 12, greedy: true });
    assert.deepEqual(ta.tokens ?? ta.text, t1.tokens ?? t1.text);
  } finally { a.dispose(); one.dispose(); }
  for (const threads of ['two', 'AUTO', 0, 257, 1.5, true, null]) await assertAetherError(() => load(Q8, { threads }), 'invalid_argument', ['threads']);
});

test('the CLI runs threads auto by default; --threads N and --threads auto; a bad value is refused', async () => {
  const want = await autoThreads(true);
  const run = (...a) => JSON.parse(execFileSync(process.execPath, [CLI, 'run', Q8, '-p', 'The Debian project is', '-n', '8', '--greedy', '--json', ...a], { encoding: 'utf8' }));
  const d = run(), auto = run('--threads', 'auto'), one = run('-t', '1');
  assert.equal(d.threads, want);
  assert.equal(auto.threads, want);
  assert.equal(one.threads, 1);
  assert.deepEqual(d.tokens, one.tokens);
  for (const bad of ['two', '0', '2.5']) {
    const r = spawnSync(process.execPath, [CLI, 'run', Q8, '-p', 'x', '--json', '--threads', bad], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(JSON.parse(r.stdout).error.message, /--threads: expected auto or an integer/);
  }
});

test('2 threads start from `node <V8 flags> --input-type=module -e` (the V8 flags Node refuses in a worker execArgv are dropped)', async () => {
  const one = await load(Q8, { threads: 1 });
  const want = (await one.complete('Hello', { maxTokens: 6, greedy: true })).tokens;
  one.dispose();
  const src = `
    import { load } from ${JSON.stringify(path.join(repoRoot, 'dist/src/index.js'))};
    const m = await load(${JSON.stringify(Q8)}, { threads: 2 });
    const r = await m.complete('Hello', { maxTokens: 6, greedy: true });
    console.log(JSON.stringify({ threads: m.threads, tokens: r.tokens }));
    m.dispose();`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--no-liftoff', '--stack-size=2000', '--input-type=module', '-e', src], { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(out.threads, 2);
  assert.deepEqual(out.tokens, want);
});
