// Soak, CI-sized (the full run is bench/soak.mjs: 10,000 tokens and 200 cycles): 2,000 tokens of generation and
// 40 load/dispose cycles on 1 and 2 threads, RSS flat within the stated bound (run in a child process so that other
// tests' allocations do not count).
import test from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { repoRoot } from './helpers/formats.mjs';

// Bound: the tiny model's whole wasm memory is ~12 MB; growth after warm-up must stay under 3 of it (before the
// dispose fix, 40 two-thread cycles grew ~320 MB).
const BOUND_MB = 36;

test('soak: 2000 tokens and 40 load/dispose cycles on 1 and 2 threads keep RSS flat', { timeout: 900000 }, () => {
  const code = `
    import { soakGenerate, soakCycles } from ${JSON.stringify(path.join(repoRoot, 'bench/soak.mjs'))};
    const out = [];
    for (const t of [1, 2]) out.push({ kind: 'generate', ...(await soakGenerate(t, 2000)) });
    for (const t of [1, 2]) out.push({ kind: 'cycles', ...(await soakCycles(t, 40)) });
    console.log(JSON.stringify(out));
  `;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 900000 }).trim().split('\n').pop());
  for (const r of out) {
    assert.ok(r.rss.growth_mb < BOUND_MB, `${r.kind} on ${r.threads} thread(s): RSS grew ${r.rss.growth_mb} MB after warm-up (${JSON.stringify(r.rss)})`);
    if (r.kind === 'generate') assert.ok(r.tokens >= 2000);
  }
});

test('soak summary: growth is measured after warm-up, robust to one noisy sample, and sees a steady leak', async () => {
  const { summary } = await import(path.join(repoRoot, 'bench/soak.mjs'));
  // warm-up growth of 20 MB in the first cycles, then flat with one 30 MB spike at the end: no growth
  const flat = [60, 70, 80, ...Array(36).fill(80), 110, 80];
  assert.equal(summary(flat).growth_mb, 0);
  // 8 MB per cycle (the leak the dispose fix removed): 30 cycles after warm-up are ~240 MB
  const leak = Array.from({ length: 41 }, (_, i) => 50 + 8 * i);
  assert.ok(summary(leak).growth_mb > 200, JSON.stringify(summary(leak)));
  assert.equal(summary([5]).growth_mb, 0);
});
