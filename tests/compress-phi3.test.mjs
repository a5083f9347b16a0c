// The compression CLI on a generated Phi-3-architecture model (fused qkv, gate/up split by the converter), through
// the fast path (--linalg fast: streamed calibration, SLQ spectra, randomised factors) that Phi-3-mini-size models
// take: analyze (scores against the exact path), lora-plan from the written atlas, compress aa-svd and prune; the
// compressed files load and generate, 1 vs 2 threads bit-identical. The full-size run (32 layers, dim 3072, FFN 8192)
// is written down in docs/PERFORMANCE.md ("Compressed FFN").
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { generateGGUF } from './helpers/gen-gguf.mjs';
import { load } from '../dist/src/index.js';
import { repoRoot } from './helpers/paths.mjs';

const CLI = path.join(repoRoot, 'dist/cli/aether.js');
const VAL = path.join(repoRoot, 'tests/fixtures/tiny-llama-a/val.txt');
const CAL = ['--calib', VAL, '--docs', '0:4', '--max-tokens', '256'];
const run = (...a) => JSON.parse(execFileSync(process.execPath, [CLI, ...a, '--json'], { encoding: 'utf8', maxBuffer: 1 << 26 }));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-cmp-phi3-'));
const { file } = generateGGUF('phi3', 'q8_0', 3, { shape: { HIDDEN: 192 } });

test('analyze --linalg fast on a Phi-3-architecture model == the exact path; atlas -> lora-plan', () => {
  const atlasFile = path.join(tmp, 'atlas.rknot');
  const fast = run('analyze', file, ...CAL, '--linalg', 'fast', '-o', atlasFile);
  const exact = run('analyze', file, ...CAL, '--linalg', 'exact');
  assert.equal(fast.matrices.length, 10, '2 layers x attn_qkv, attn_output, ffn_gate, ffn_up, ffn_down');
  assert.deepEqual(fast.matrices.map((m) => `${m.layer}.${m.name}`), exact.matrices.map((m) => `${m.layer}.${m.name}`));
  for (let i = 0; i < fast.matrices.length; i++) {
    const f = fast.matrices[i], e = exact.matrices[i], at = `${f.layer}.${f.name}`;
    for (const k of ['sigma1', 'sigma2', 'stable_rank']) assert.ok(Math.abs(f[k] - e[k]) <= 1e-4 * Math.abs(e[k]), `${at} ${k}: ${f[k]} vs ${e[k]}`);
    for (const k of ['energy75', 'energy50', 'aa_energy75', 'aa_energy50']) {
      assert.ok(f[k] > 0 && f[k] <= 1 + 1e-9, `${at} ${k} in (0, 1]`);
      // both paths regularise with the same ridge (analyze.ts calibRidge); the energies of the fast path come from
      // the SLQ quadrature measure (8 probes x 48 steps), up to ~0.03 from the exact ones on these small matrices
      const tol = k.startsWith('aa_') ? 0.04 : 0.02;
      assert.ok(Math.abs(f[k] - e[k]) < tol, `${at} ${k}: fast ${f[k]} vs exact ${e[k]}`);
    }
    assert.ok(Number.isFinite(f.alpha), `${at} alpha`);
  }
  const plan = run('lora-plan', atlasFile, '-o', path.join(tmp, 'plan.json'));
  const cfg = JSON.parse(fs.readFileSync(path.join(tmp, 'plan.json'), 'utf8'));
  assert.deepEqual([...cfg.target_modules].sort(), ['down_proj', 'gate_up_proj', 'o_proj', 'qkv_proj']);
  assert.ok(plan.entries.length === 8, 'one entry per module and layer');
});

test('compress --linalg fast (aa-svd 0.5) and prune 0.75 of a Phi-3-architecture model: smaller, loads, generates; 1 vs 2 threads identical', async () => {
  const dense = await load(file, { threads: 1 });
  const D = dense.config.dim, H = dense.config.hidden_dim;
  dense.dispose();
  for (const [method, w] of [['aa-svd', '0.5'], ['prune', '0.75']]) {
    const out = path.join(tmp, `${method}-${w}.rknot`);
    const r = run('compress', file, '--method', method, '--ffn-width', w, ...CAL, '--linalg', 'fast', '-o', out);
    assert.equal(r.layers.length, 2);
    for (const L of r.layers) {
      if (method === 'aa-svd') assert.equal(L.rank, 32 * Math.max(1, Math.round((0.5 * D * H) / (D + H) / 32)), 'rank of a width-0.5 FFN');
      else assert.equal(L.width, 32 * Math.round((0.75 * H) / 32), 'kept neurons: a multiple of 32');
    }
    assert.ok(r.file_bytes < r.input_bytes || method === 'prune', `${method}: ${r.file_bytes} < ${r.input_bytes}`);
    const toks = [];
    for (const threads of [1, 2]) {
      const m = await load(out, { threads });
      try {
        assert.deepEqual(m.compression(), ['compressed', 'compressed'], 'both layers run the compressed variant');
        const ids = [];
        for await (const p of m.generate('The Debian project is', { maxTokens: 8, greedy: true })) if (p.token >= 0) ids.push(p.token);
        assert.ok(ids.length >= 1 && ids.length <= 8, `${ids.length} tokens`);
        toks.push(ids);
      } finally { m.dispose(); }
    }
    assert.deepEqual(toks[0], toks[1], `${method}: 1 vs 2 threads`);
  }
});
