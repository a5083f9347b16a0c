// aether profile-heads: attention statistics per layer and head (C accumulators), K/V spectra, head classes,
// the attention_heads section written to .rknot and checked on reading.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { load } from '../dist/src/aether.js';
import { profileHeads, symmetricEigenvalues, energyRank } from '../dist/src/profile/heads.js';
import { checkAttentionHeads } from '../dist/src/formats/heads.js';
import { openRknot } from '../dist/src/formats/rknot-node.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = path.join(ROOT, 'models/tiny-llama-a-q8_0.rknot');
const VAL = path.join(ROOT, 'tests/fixtures/tiny-llama-a/val.txt');

test('symmetric eigenvalues (Jacobi) against a matrix with known spectrum; energy rank', () => {
  // Q diag(5, 3, 1, 0.5) Q^T with Q a product of two rotations
  const n = 4, d = [5, 3, 1, 0.5];
  const c1 = Math.cos(0.7), s1 = Math.sin(0.7), c2 = Math.cos(-1.1), s2 = Math.sin(-1.1);
  const Q = [[c1, -s1, 0, 0], [s1, c1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]].map((r) => r.slice());
  const R = [[1, 0, 0, 0], [0, c2, 0, -s2], [0, 0, 1, 0], [0, s2, 0, c2]];
  const QR = Q.map((r) => R[0].map((_, j) => r.reduce((a, x, k) => a + x * R[k][j], 0)));
  const A = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) for (let k = 0; k < n; k++) A[i * n + j] += QR[i][k] * d[k] * QR[j][k];
  const ev = Array.from(symmetricEigenvalues(A, n)).sort((a, b) => b - a);
  ev.forEach((v, i) => assert.ok(Math.abs(v - d[i]) < 1e-9, `eigenvalue ${i}: ${v} vs ${d[i]}`));
  assert.equal(energyRank([3, 1, 1], 0.8), 1);   // 9 of 11
  assert.equal(energyRank([3, 1, 1], 0.9), 2);   // 10 of 11
});

test('profileHeads: statistics in range, 1 vs 2 threads identical, classes follow the threshold', { timeout: 180_000 }, async () => {
  const text = fs.readFileSync(VAL, 'utf8');
  const r = [];
  for (const threads of [1, 2]) {
    const m = await load(MODEL, { threads });
    try { r.push((await profileHeads(m, text, { sinks: 4, window: 16, maxTokens: 1024, calibration: { text: 'val.txt' } })).heads); } finally { m.dispose(); }
  }
  assert.deepEqual(r[0], r[1], 'statistics do not depend on the thread count');
  const h = r[0];
  const cfg = { n_layers: 6, n_heads: 6, n_kv_heads: 2 };
  checkAttentionHeads(h, cfg);
  assert.equal(h.calibration.window_tokens, 256);
  assert.equal(h.calibration.windows, 4);
  for (const ly of h.layers) {
    for (const x of ly.heads) {
      assert.equal(x.queries, 4 * (256 - 20), 'queries at positions >= sinks + window, every window');
      assert.ok(x.entropy > 0 && x.entropy_rel > 0 && x.entropy_rel <= 1, `entropy ${x.entropy} rel ${x.entropy_rel}`);
      assert.ok(x.sink_mass >= 0 && x.window_mass > 0 && x.sink_mass + x.window_mass <= 1 + 1e-9);
      assert.equal(x.class, x.sink_mass + x.window_mass >= 0.9 ? 'local' : 'retrieval');
    }
    for (const sv of [...ly.k_singular_values, ...ly.v_singular_values]) {
      assert.equal(sv.length, 48);
      assert.ok(sv.every((v, i) => v >= 0 && (i === 0 || v <= sv[i - 1])), 'descending, non-negative');
      assert.ok(sv[0] > 0);
    }
    ly.k_rank90.forEach((k) => assert.ok(k >= 1 && k <= 48));
  }
  // a window as large as most of the context: every head is local; a window of 1 and no sinks: (almost) none
  const m = await load(MODEL);
  try {
    const wide = (await profileHeads(m, text, { sinks: 4, window: 200, threshold: 0.5, maxTokens: 256 })).heads;
    assert.ok(wide.layers.every((ly) => ly.heads.every((x) => x.window_mass + x.sink_mass > 0.5)));
    const narrow = (await profileHeads(m, text, { sinks: 0, window: 1, threshold: 0.99, maxTokens: 256 })).heads;
    assert.ok(narrow.local_fraction < 0.5, `few heads put 99% on the current token (${narrow.local_fraction})`);
  } finally { m.dispose(); }
});

test('aether profile-heads -o: the section is written, read back and checked; bad sections refused', { timeout: 120_000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-heads-'));
  try {
    const out = path.join(dir, 'h.rknot');
    const { stdout } = await promisify(execFile)(process.execPath, ['dist/cli/aether.js', 'profile-heads', MODEL, '--calib', VAL, '--docs', '0:67',
      '--max-tokens', '512', '--window', '32', '-o', out, '--json'], { cwd: ROOT });
    const j = JSON.parse(stdout);
    assert.equal(j.attention_heads.window, 32);
    assert.equal(j.attention_heads.calibration.docs, '0:67');
    const { meta } = await openRknot(out);
    assert.deepEqual(meta.attention_heads, j.attention_heads);
    assert.equal(meta.tensors.length, (await openRknot(MODEL)).meta.tensors.length);
    const cfg = { n_layers: 6, n_heads: 6, n_kv_heads: 2 };
    assert.throws(() => checkAttentionHeads({ ...j.attention_heads, n_heads: 5 }, cfg), { code: 'format_error', message: /attention_heads\.n_heads/ });
    const bad = structuredClone(j.attention_heads);
    bad.layers[2].kv_heads = ['local'];
    assert.throws(() => checkAttentionHeads(bad, cfg), { code: 'format_error', message: /attention_heads\.layers\[2\]\.kv_heads/ });
    await assert.rejects(promisify(execFile)(process.execPath, ['dist/cli/aether.js', 'profile-heads', MODEL, '--calib', VAL, '--threshold', '2'], { cwd: ROOT }), /--threshold must be in/);
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
});
