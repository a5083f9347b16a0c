// The npm package as users get it: `npm pack`, install the tarball into an empty project (offline from
// the npm cache, else from the registry), import it, generate, run the `aether` bin with npx, check the
// browser export condition and the type declarations. Needs `npm run build` (npm test does it).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROMPT = 'The Debian project is';
const exec = promisify(execFile);
const npm = (args, cwd) => exec('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, timeout: 180_000, maxBuffer: 1 << 24 });
const node = (args, cwd) => exec(process.execPath, args, { cwd, timeout: 60_000 });

test('npm pack -> install in an empty project -> import, generate, npx aether, browser condition, types', { timeout: 300_000 }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-pack-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  // ---- the tarball ----
  const { stdout: packOut } = await npm(['pack', '--pack-destination', tmp, '--json'], ROOT);
  const pack = JSON.parse(packOut.slice(packOut.indexOf('[')))[0];
  const files = new Set(pack.files.map((f) => f.path));
  for (const f of ['package.json', 'README.md', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/browser/index.js',
    'dist/src/browser/index.d.ts', 'dist/src/browser/engine-worker.js', 'dist/src/runtime/worker.js', 'dist/cli/aether.js',
    'wasm/core.wasm', 'wasm/core-st.wasm', 'models/tiny-llama-a-q8_0.rknot']) {
    assert.ok(files.has(f), `${f} is in the package`);
  }
  for (const f of files) assert.match(f, /^(package\.json|README\.md|LICENSE|dist\/|wasm\/[^/]+\.wasm$|models\/)/, `unexpected file ${f}`);
  assert.ok(![...files].some((f) => f.includes('kernels-test')), 'the kernel test module is not shipped');
  const tgz = path.join(tmp, pack.filename);
  const { stdout: listing } = await exec('tar', ['tvzf', tgz]);
  assert.match(listing, /^-rwxr-xr-x .* package\/dist\/cli\/aether\.js$/m, 'the bin is executable in the tarball');
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(pkg.scripts?.[s], undefined, `no '${s}' script`);

  // ---- install into an empty project ----
  const proj = path.join(tmp, 'proj');
  fs.mkdirSync(proj);
  // Pin the dependencies to the versions of the repo's lockfile: those are in the npm cache after `npm ci`,
  // so --offline works (an unpinned range would pick the newest version the cached registry index lists).
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  const deps = Object.fromEntries(Object.keys(pkg.dependencies ?? {}).map((d) => [d, lock.packages[`node_modules/${d}`].version]));
  fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'aether-pack-test', private: true, type: 'module', dependencies: deps }));
  try {
    await npm(['install', '--offline', tgz], proj);
  } catch (e) {
    t.diagnostic(`offline install failed (${String(e.stderr ?? e.message).trim().split('\n')[0]}); installing from the registry`);
    await npm(['install', tgz], proj);
  }
  const installed = path.join(proj, 'node_modules/aether-wasm');
  const bin = path.join(installed, 'dist/cli/aether.js');
  assert.equal(fs.readFileSync(bin, 'utf8').split('\n')[0], '#!/usr/bin/env node');
  assert.ok(fs.statSync(bin).mode & 0o111, 'bin is executable');

  // ---- import and generate (2 threads: the worker script and the wasm resolve inside node_modules) ----
  fs.writeFileSync(path.join(proj, 'use.mjs'), `
import { fileURLToPath } from 'node:url';
import { Aether } from 'aether-wasm';
const model = await Aether.load(fileURLToPath(import.meta.resolve('aether-wasm/models/tiny-llama-a-q8_0.rknot')), { threads: 2 });
const tokens = [];
for await (const piece of model.generate(${JSON.stringify(PROMPT)}, { maxTokens: 8, greedy: true })) tokens.push(piece.token);
console.log(JSON.stringify({ tokens, threads: model.threads }));
model.dispose();
`);
  const used = JSON.parse((await node(['use.mjs'], proj)).stdout);
  assert.equal(used.threads, 2);
  assert.equal(used.tokens.length, 8);

  // ---- the bin through npx (--no: never fetch a package from the registry) ----
  const model = path.join(installed, 'models/tiny-llama-a-q8_0.rknot');
  const { stdout: cliOut } = await exec('npx', ['--no', 'aether', 'run', model, '-p', PROMPT, '-n', '8', '--greedy', '--json'], { cwd: proj, timeout: 60_000 });
  const cli = JSON.parse(cliOut);
  assert.deepEqual(cli.tokens, used.tokens, 'npx aether run = the library');

  // ---- export conditions: Node gets the Node host, the "browser" condition the Worker host ----
  const keys = async (...flags) => (await node([...flags, '--input-type=module', '-e',
    "const m = await import('aether-wasm'); console.log(Object.keys(m).sort().join(','))"], proj)).stdout.trim().split(',');
  const nodeKeys = await keys();
  const browserKeys = await keys('--conditions=browser');
  assert.ok(nodeKeys.includes('Aether') && nodeKeys.includes('AetherModel') && !nodeKeys.includes('BrowserModel'), nodeKeys.join());
  assert.ok(browserKeys.includes('Aether') && browserKeys.includes('BrowserModel') && !browserKeys.includes('AetherModel'), browserKeys.join());

  // ---- type declarations: both entries type-check from a consumer's point of view ----
  fs.writeFileSync(path.join(proj, 'node.ts'), `
import { Aether, AetherError, type GeneratedPiece } from 'aether-wasm';
const model = await Aether.load('m.rknot', { threads: 2, onProgress: (e) => console.log(e.loaded / e.total) });
for await (const piece of model.generate('x', { maxTokens: 4 })) { const p: GeneratedPiece = piece; console.log(p.text); }
const ids: number[] = model.tokenize('x');
const done: void = model.dispose();
console.log(ids, done, AetherError);
`);
  fs.writeFileSync(path.join(proj, 'browser.ts'), `
import { Aether, type LoadEvent } from 'aether-wasm';
const model = await Aether.load(new Blob([]), { threads: 2, cache: true, onProgress: (e: LoadEvent) => console.log(e.type) });
for await (const piece of model.chat([{ role: 'user', content: 'hi' }], { maxTokens: 4 })) console.log(piece.text);
const ids: Promise<number[]> = model.tokenize('x');
const done: Promise<void> = model.dispose();
console.log(ids, done);
`);
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const tscArgs = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022',
    '--lib', 'es2022,dom', '--skipLibCheck', '--typeRoots', path.join(ROOT, 'node_modules/@types'), '--types', 'node'];
  const typecheck = async (...args) => {
    try { await node([tsc, ...tscArgs, ...args], proj); } catch (e) { assert.fail(`tsc ${args.join(' ')}:\n${e.stdout}${e.stderr}`); }
  };
  await typecheck('node.ts');
  await typecheck('--customConditions', 'browser', 'browser.ts');
});
