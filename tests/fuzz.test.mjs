// CI-sized fuzzing: every fuzz target (fuzz/fuzz.mjs: the JS parsers of untrusted bytes and the libFuzzer targets over
// the C validators built with ASan/UBSan) runs for a few seconds with 0 findings, and every input a fuzzer once
// broke (tests/fixtures/fuzz/<target>/) is replayed. Long runs: docs/FUZZING.md.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { repoRoot } from './helpers/formats.mjs';

const SECONDS = Number(process.env.AETHER_FUZZ_SECONDS ?? 3);
const FIXTURES = path.join(repoRoot, 'tests/fixtures/fuzz');

function fuzz(target, seconds) {
  const r = spawnSync(process.execPath, [path.join(repoRoot, 'fuzz/fuzz.mjs'), '--target', target, '--seconds', String(seconds), '--quiet', '--seed', String(Date.now() % 100000), '--corpus', 'none'],
    { encoding: 'utf8', timeout: 600000 });
  const line = r.stdout.trim().split('\n').filter((l) => l.startsWith('{"target"')).pop();
  assert.ok(line, `${target}: no result\n${r.stdout}\n${r.stderr}`);
  const res = JSON.parse(line);
  assert.equal(res.crash, undefined, `${target}: finding ${res.crash}\n${res.error}`);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(res.runs > 0, JSON.stringify(res));
  return res;
}

for (const target of ['gguf', 'gguf-load', 'rknot', 'safetensors', 'spm', 'tokenizer-json']) {
  test(`fuzz ${target} (JS, coverage-guided) for ${SECONDS} s: no error other than AetherError, no hang, no crash`, { timeout: 600000 }, () => {
    const res = fuzz(target, SECONDS);
    assert.ok(res.rejected > 0 && res.accepted > 0, `both refused and accepted inputs: ${JSON.stringify(res)}`);
    // coverage guidance works: V8 block coverage of the parser was read and new inputs joined the corpus
    assert.equal(res.kind, 'js-coverage');
    assert.ok(res.coverage_blocks > 20 && res.corpus > res.seeds, `coverage grew: ${JSON.stringify(res)}`);
  });
}

for (const target of ['rknot-check', 'model-init']) {
  test(`fuzz ${target} (libFuzzer, ASan + UBSan) for ${SECONDS} s: no finding`, { timeout: 900000 }, () => {
    fuzz(target, SECONDS);
  });
}

test('inputs a fuzzer once broke are refused cleanly (regression fixtures)', { timeout: 600000 }, async () => {
  const { JS_TARGETS } = await import('../fuzz/targets.mjs');
  const { makeRng } = await import('../fuzz/mutate.mjs');
  let n = 0;
  for (const dir of fs.readdirSync(FIXTURES)) {
    for (const f of fs.readdirSync(path.join(FIXTURES, dir))) {
      const file = path.join(FIXTURES, dir, f);
      n++;
      if (JS_TARGETS[dir]) {
        const t = JS_TARGETS[dir];
        await t.prepare?.();
        for (let seed = 1; seed <= 8; seed++) {
          try { await t.run(new Uint8Array(fs.readFileSync(file)), makeRng(seed)); } catch (e) {
            assert.equal(e?.constructor?.name, 'AetherError', `${dir}/${f}: ${e?.stack ?? e}`);
          }
        }
        t.cleanup?.();
      } else {
        const bin = path.join(repoRoot, 'build/fuzz', dir);
        const r = spawnSync('bash', [path.join(repoRoot, 'fuzz/c/build.sh')], { encoding: 'utf8' });
        assert.equal(r.status, 0, r.stderr);
        const run = spawnSync(bin, [file], { encoding: 'utf8' });
        assert.equal(run.status, 0, `${dir}/${f}:\n${run.stderr}`);
      }
    }
  }
  assert.ok(n >= 2, `${n} fixtures`);
});
