// The JS mirror of the C ABI (js/src/generated/abi.ts, src/model/abi_check.c) is what
// scripts/gen-abi.mjs writes from the C sources today, and the generator notices a changed source.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { repoRoot } from './helpers/paths.mjs';

const GEN = path.join(repoRoot, 'scripts/gen-abi.mjs');
const { INPUTS, OUT_TS, OUT_C } = await import(GEN);
const run = (...args) => spawnSync(process.execPath, [GEN, ...args], { encoding: 'utf8' });

test('generated ABI mirror is up to date (npm run gen:abi)', () => {
  const r = run('--check');
  assert.equal(r.status, 0, `${r.stderr}${r.stdout}`);
});

test('the staleness check fails when a C source changes (sampler field, dtype row, status code)', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-abi-'));
  try {
    for (const f of [...INPUTS, OUT_TS, OUT_C]) {
      fs.mkdirSync(path.dirname(path.join(tmp, f)), { recursive: true });
      fs.copyFileSync(path.join(repoRoot, f), path.join(tmp, f));
    }
    assert.equal(run('--check', '--root', tmp).status, 0, 'a faithful copy is not stale');
    const edits = [
      ['src/model/sampler.h', (s) => s.replace('float min_p;', 'float min_p;\n  float extra_;')],
      ['src/kernels/dtypes.inc', (s) => s.replace('#undef AE_DTYPE', 'AE_DTYPE(Q3_K, q3_K, 11, 256, 110, Q8_K, W, 108, -1)\n#undef AE_DTYPE')],
      ['src/core/status.h', (s) => s.replace('};', '  AE_ERR_NEW = 9,           /* "new": test */\n};')],
    ];
    for (const [file, edit] of edits) {
      const p = path.join(tmp, file), orig = fs.readFileSync(p, 'utf8'), changed = edit(orig);
      assert.notEqual(changed, orig, `edit of ${file} applied`);
      fs.writeFileSync(p, changed);
      const r = run('--check', '--root', tmp);
      assert.equal(r.status, 1, `${file} changed: --check must fail`);
      assert.match(r.stderr, /js\/src\/generated\/abi\.ts is stale/);
      fs.writeFileSync(p, orig);
    }
    // and a regenerated mirror carries the change
    fs.writeFileSync(path.join(tmp, 'src/model/sampler.h'), edits[0][1](fs.readFileSync(path.join(tmp, 'src/model/sampler.h'), 'utf8')));
    assert.equal(run('--root', tmp).status, 0);
    const ts = fs.readFileSync(path.join(tmp, OUT_TS), 'utf8');
    assert.match(ts, /EXTRA_: 16, REPEAT_PENALTY: 20/);
    assert.match(fs.readFileSync(path.join(tmp, OUT_C), 'utf8'), /AE_ABI_AT\(ae_sampler, extra_, 16\);/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('mirror values are the ones the rest of the host uses', async () => {
  const abi = await import('../dist/src/generated/abi.js');
  const { DTYPES, DTYPE_NAMES } = await import('../dist/src/formats/dtypes.js');
  assert.deepEqual(DTYPE_NAMES, abi.DTYPE_ROWS.filter((d) => d.kind !== 'A').map((d) => d.name));
  for (const n of DTYPE_NAMES) {
    const row = abi.DTYPE_ROWS.find((d) => d.name === n);
    assert.equal(DTYPES[n].typeSize, row.typeSize);
    assert.equal(DTYPES[n].blockSize, row.blockSize);
  }
  assert.equal(abi.FWD.SIZE, 28);
  assert.equal(abi.AUX.SIZE, 80);
  assert.equal(abi.POOL.SIZE, 64);
  assert.equal(abi.STATUS_NAMES.length, Object.keys(abi.Status).length);
});

test('docs/rknot.md dtype table lists exactly the registry weight dtypes (id, block, bytes)', async () => {
  const abi = await import('../dist/src/generated/abi.js');
  const doc = fs.readFileSync(path.join(repoRoot, 'docs/rknot.md'), 'utf8');
  const rows = [...doc.matchAll(/^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \|/gm)].map((m) => [m[1], +m[2], +m[3], +m[4]]);
  const want = abi.DTYPE_ROWS.filter((d) => d.kind !== 'A').map((d) => [d.name, d.ggmlId, d.blockSize, d.typeSize]);
  assert.deepEqual(rows, want);
  const listed = /\| `dtype` \| ([^|]*)\|/.exec(doc)[1];
  for (const [n] of want) assert.ok(listed.includes(`\`${n}\``), `docs/rknot.md tensor field 'dtype' lists ${n}`);
});
