// Compressed FFN files in Debian's chromium (playwright-core, no downloaded browser), through the engine Worker
// (the browser client): an aa-svd 0.5 file with --keep-dense (factored FFN, y = B (A x)) and a pruned 0.5 file
// load from URL and generate; greedy tokens with 2 threads == 1 thread == the Node CLI's; setCompression('dense')
// on the --keep-dense file gives the uncompressed model's tokens; compression() / rollback() through the Worker.
// Fails (does not skip) when chromium is missing: set AETHER_CHROMIUM to use another binary.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer } from '../examples/browser/server.mjs';
import { generateGGUF } from './helpers/gen-gguf.mjs';
import { launchChromium, requireChromium } from '../scripts/chromium.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = 'models/tiny-llama-a-q8_0.rknot';
const PROMPT = 'The Debian project is';
const N = 24;
const WAIT = { timeout: 60_000 };
const run = promisify(execFile);

const cleanups = [];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-browser-compress-'));
const files = { aa: path.join(dir, 'aa-svd-0.5-keep.rknot'), prune: path.join(dir, 'prune-0.5.rknot'), phi3: path.join(dir, 'phi3-aa-svd-0.5.rknot') };
const cliTokens = {};

async function cli(...args) {
  const { stdout } = await run(process.execPath, ['dist/cli/aether.js', ...args], { cwd: ROOT, maxBuffer: 1 << 26 });
  return stdout;
}

before(async () => {
  requireChromium();
  const calib = ['--calib', 'tests/fixtures/tiny-llama-a/val.txt', '--docs', '0:67', '--max-tokens', '512', '--json'];
  await cli('compress', SRC, '--method', 'aa-svd', '--ffn-width', '0.5', '--keep-dense', ...calib, '-o', files.aa);
  await cli('compress', SRC, '--method', 'prune', '--ffn-width', '0.5', ...calib, '-o', files.prune);
  // a Phi-3-architecture model (fused qkv) compressed through the fast path large models take
  const phi3 = generateGGUF('phi3', 'q8_0', 3, { shape: { HIDDEN: 192 } }).file;
  await cli('compress', phi3, '--method', 'aa-svd', '--ffn-width', '0.5', '--linalg', 'fast', ...calib.slice(0, 4), '--max-tokens', '256', '--json', '-o', files.phi3);
  for (const [k, f] of Object.entries({ dense: SRC, ...files })) {
    cliTokens[k] = JSON.parse(await cli('run', f, '-p', PROMPT, '-n', String(N), '--greedy', '--threads', '2', '--json')).tokens;
    if (k === 'phi3') assert.ok(cliTokens[k].length >= 1 && cliTokens[k].length <= N, 'random weights may end early');
    else assert.equal(cliTokens[k].length, N);
  }
});

after(async () => {
  for (const c of cleanups.reverse()) await c();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('compressed files in Chromium through the engine Worker: 1 vs 2 threads, == Node CLI, dense rollback', { timeout: 180_000 }, async () => {
  const server = await startServer({ port: 0, isolate: true, mounts: { '/cmp/': dir } });
  cleanups.push(() => server.close());
  const { page, close } = await launchChromium();
  cleanups.push(close);
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${server.url}examples/browser/`);
  await page.waitForSelector('body[data-ready="1"]', WAIT);
  assert.equal(await page.evaluate(() => crossOriginIsolated), true);

  const out = await page.evaluate(async ({ prompt, n }) => {
    const { Aether } = window.aetherDemo;
    const res = {};
    for (const name of ['aa-svd-0.5-keep', 'prune-0.5', 'phi3-aa-svd-0.5']) {
      const url = new URL(`/cmp/${name}.rknot`, location.href).href;
      const r = res[name] = {};
      for (const threads of [2, 1]) {
        const m = await Aether.load(url, { threads, cache: false });
        r[`modes${threads}`] = await m.compression();
        r[`tokens${threads}`] = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
        r[`threads${threads}`] = m.threads ?? threads;
        if (threads === 2 && name === 'aa-svd-0.5-keep') {
          r.dense = await m.setCompression('dense');
          r.denseTokens = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
          r.layer2 = await m.setCompression({ layers: { 2: 'compressed' } });
          await m.rollback({ kinds: ['compression'] });
          r.afterRollback = await m.compression();
          r.back = await m.setCompression('compressed');
          r.backTokens = (await m.complete(prompt, { maxTokens: n, greedy: true })).tokens;
        }
        if (name === 'prune-0.5' && threads === 2) {
          try { await m.setCompression('dense'); r.pruneDense = 'accepted'; } catch (e) { r.pruneDense = e.code; }
        }
        await m.dispose();
      }
    }
    return res;
  }, { prompt: PROMPT, n: N });

  const aa = out['aa-svd-0.5-keep'], pr = out['prune-0.5'];
  const six = (m) => Array(6).fill(m);
  assert.deepEqual(aa.modes2, six('compressed'));
  assert.deepEqual(aa.modes1, six('compressed'));
  assert.deepEqual(aa.tokens2, aa.tokens1, 'aa-svd: 2 threads == 1 thread in the page');
  assert.deepEqual(aa.tokens2, cliTokens.aa, 'aa-svd: page == Node CLI');
  assert.deepEqual(aa.dense, six('dense'));
  assert.deepEqual(aa.denseTokens, cliTokens.dense, "setCompression('dense') == the source model");
  assert.deepEqual(aa.layer2, ['dense', 'dense', 'compressed', 'dense', 'dense', 'dense']);
  assert.deepEqual(aa.afterRollback, six('dense'));
  assert.deepEqual(aa.back, six('compressed'));
  assert.deepEqual(aa.backTokens, aa.tokens2, 'switching back is exact');
  assert.deepEqual(pr.modes2, six('compressed'));
  assert.deepEqual(pr.tokens2, pr.tokens1, 'prune: 2 threads == 1 thread in the page');
  assert.deepEqual(pr.tokens2, cliTokens.prune, 'prune: page == Node CLI');
  assert.equal(pr.pruneDense, 'unsupported', 'no dense weights in the pruned file');
  const ph = out['phi3-aa-svd-0.5'];
  assert.deepEqual(ph.modes2, ['compressed', 'compressed']);
  assert.deepEqual(ph.tokens2, ph.tokens1, 'phi3 aa-svd (fast path): 2 threads == 1 thread in the page');
  assert.deepEqual(ph.tokens2, cliTokens.phi3, 'phi3 aa-svd (fast path): page == Node CLI');
  assert.deepEqual(pageErrors, []);
});
