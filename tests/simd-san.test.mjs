// The SIMD128 kernels against their scalar references under AddressSanitizer + UndefinedBehaviorSanitizer, in wasm:
// fuzz/c/build-simd-san.sh builds src/kernels (SIMD and reference) with emscripten's -fsanitize=address,undefined and
// fuzz/c/simd_san.c (exact-size buffers, tails, every dtype, row ops, attention; docs/FUZZING.md). Node runs it.
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { repoRoot } from './helpers/formats.mjs';

const JS = path.join(repoRoot, 'build/simd-san/simd-san.cjs');
const run = (...args) => spawnSync(process.execPath, ['--no-experimental-fetch', JS, ...args], { encoding: 'utf8', timeout: 600000 });

test('emscripten ASan + UBSan build of the SIMD128 kernels and their references', { timeout: 900000 }, () => {
  const r = spawnSync('bash', [path.join(repoRoot, 'fuzz/c/build-simd-san.sh')], { encoding: 'utf8', timeout: 900000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
});

test('SIMD128 kernels == scalar references, no ASan / UBSan report (two seeds)', { timeout: 900000 }, () => {
  for (const seed of ['1', String(1 + (Date.now() % 100000))]) {
    const r = run(seed);
    const out = r.stdout + r.stderr;
    assert.doesNotMatch(out, /AddressSanitizer|runtime error|UndefinedBehaviorSanitizer/, out.slice(-4000));
    assert.equal(r.status, 0, out.slice(-4000));
    const m = /simd-san: (\d+) checks, 0 failures/.exec(out);
    assert.ok(m && Number(m[1]) > 100000, out.slice(-2000));
    for (const fam of ['dtype q4_K', 'dtype q6_K', 'dtype bf16', 'row ops', 'attention_kv']) assert.ok(out.includes(fam), `${fam} checked`);
  }
});

test('the harness can fail: a SIMD kernel writing one float past its buffer is stopped by ASan', { timeout: 600000 }, () => {
  const r = run('--overflow');
  const out = r.stdout + r.stderr;
  assert.notEqual(r.status, 0, out);
  assert.match(out, /AddressSanitizer: heap-buffer-overflow/);
});
