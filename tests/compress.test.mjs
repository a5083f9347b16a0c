// Compression suite (aether analyze / compress): the linear algebra against ml-matrix, the calibration
// capture hook (no effect on the forward, 1 vs 2 threads identical), and `aether analyze` on tiny-llama-a.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Matrix, SingularValueDecomposition } from 'ml-matrix';
import { repoRoot, tiny } from './helpers/paths.mjs';
import { Q8, loadTiny, runLogits, bitDiff, randomRows } from './helpers/ffn.mjs';
import { mat, matmul, singularValues, lowRank, whitening, symmetricFromUpper, accumulateGram, powerLawAlpha, spearman, energyKept, transpose } from '../dist/src/compress/linalg.js';
import { calibrate, calibrationWindows, blockMoments } from "../dist/src/compress/calib.js";
import { selectDocs } from '../dist/src/profile/text.js';
import { openRknot } from '../dist/src/formats/rknot-node.js';

const rand = (r, c, seed) => mat(r, c, randomRows(r * c, seed));
const fro = (A) => Math.sqrt(A.data.reduce((a, v) => a + v * v, 0));
const sub = (A, B) => ({ rows: A.rows, cols: A.cols, data: A.data.map((v, i) => v - B.data[i]) });

test('singular values and truncations match ml-matrix SVD (tall and wide)', () => {
  for (const [r, c] of [[40, 24], [24, 40]]) {
    const W = rand(r, c, r * 7 + c);
    const ref = new SingularValueDecomposition(new Matrix(Array.from({ length: r }, (_, i) => Array.from(W.data.subarray(i * c, (i + 1) * c)))), { autoTranspose: true }).diagonal;
    const s = singularValues(W);
    for (let i = 0; i < ref.length; i++) assert.ok(Math.abs(s[i] - ref[i]) < 1e-9 * ref[0], `sigma ${i}: ${s[i]} vs ${ref[i]}`);
    const k = 10;
    const { B, A } = lowRank(W, k);
    const err = fro(sub(W, matmul(B, A)));
    const want = Math.sqrt(ref.slice(k).reduce((a, v) => a + v * v, 0));   // Eckart-Young
    assert.ok(Math.abs(err - want) < 1e-9 * want, `rank-${k} error ${err} vs ${want}`);
    assert.ok(Math.abs(energyKept(s, k) - (1 - want ** 2 / fro(W) ** 2)) < 1e-12);
  }
});

test('activation-aware truncation minimises ||(W - W_k) X|| and beats plain SVD on it', () => {
  const out = 30, inp = 20, N = 400, k = 8;
  const W = rand(out, inp, 3);
  // inputs with very unequal feature scales (what RMSNorm outputs look like)
  const X = randomRows(N * inp, 5).map((v, i) => v * (1 + 20 * ((i % inp) === 3) + 5 * ((i % inp) === 11)));
  const acc = new Float64Array(inp * inp);
  accumulateGram(acc, inp, Float32Array.from(X), N);
  const C = symmetricFromUpper(acc, inp, 1 / N);
  const { S, ridge } = whitening(C);
  const SSt = matmul(S, transpose(S));
  for (let i = 0; i < inp * inp; i++) {
    const want = C.data[i] + (i % (inp + 1) === 0 ? ridge : 0);   // S S^T = C + ridge I
    assert.ok(Math.abs(SSt.data[i] - want) < 1e-9 * C.data[3 * inp + 3], `S S^T [${i}]`);
  }
  const Xm = transpose(mat(N, inp, X));  // inp x N
  const errOn = (B, A) => fro(matmul(sub(W, matmul(B, A)), Xm));
  const aa = lowRank(W, k, S), plain = lowRank(W, k);
  const want = Math.sqrt(N * aa.sigma.slice(k).reduce((a, v) => a + v * v, 0));
  assert.ok(Math.abs(errOn(aa.B, aa.A) - want) < 1e-4 * want, `aa error ${errOn(aa.B, aa.A)} vs tail ${want}`);
  assert.ok(errOn(aa.B, aa.A) < 0.9 * errOn(plain.B, plain.A), 'activation-aware truncation is better on W X');
  // wide matrix path (out < in)
  const W2 = rand(12, 20, 9), aa2 = lowRank(W2, 5, S);
  const want2 = Math.sqrt(N * aa2.sigma.slice(5).reduce((a, v) => a + v * v, 0));
  const e2 = fro(matmul(sub(W2, matmul(aa2.B, aa2.A)), Xm));
  assert.ok(Math.abs(e2 - want2) < 1e-4 * want2, `wide aa error ${e2} vs ${want2}`);
});

test('power-law alpha (Hill MLE, xmin by KS) recovers the exponent of Pareto samples; Spearman', () => {
  for (const alpha of [2, 3.5]) {
    const u = randomRows(4000, 11).map((v) => (v + 1) / 2 + 1e-9);
    const x = Array.from(u, (v) => Math.pow(v, -1 / (alpha - 1)));   // Pareto(xmin 1, alpha)
    const fit = powerLawAlpha(x);
    assert.ok(Math.abs(fit.alpha - alpha) < 0.2, `alpha ${fit.alpha} vs ${alpha}`);
  }
  assert.equal(spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1);
  assert.equal(spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1);
  assert.ok(Math.abs(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) - 0.8) < 1e-12);
});

test('calibration capture does not change the forward; moments identical with 1 and 2 threads', async () => {
  const text = selectDocs(fs.readFileSync(tiny('val.txt'), 'utf8'), '0:2').text;
  const res = [];
  for (const threads of [1, 2]) {
    const model = await loadTiny(Q8, threads);
    try {
      const before = runLogits(model);
      const wins = calibrationWindows(model, text, 64, 300);
      const cal = await calibrate(model, wins);
      assert.equal(cal.tokens, 300);
      const after = runLogits(model);
      assert.equal(bitDiff(before[0], after[0]) + bitDiff(before[1], after[1]), 0, 'capture off again: same logits');
      // the last layer's captured h equals the dense FFN's h left in hb by a forward of the same tokens
      const L = model.config.n_layers - 1, H = model.config.hidden_dim, eng = model.engine;
      const area = eng.heap.alloc(eng.captureOffset(4) * 4, 64);
      eng.setCapture(L, area);
      model.reset(); eng.forward(wins[0].slice(0, 16), 0);
      eng.setCapture(L, 0);
      const h = eng.heap.f32(area + eng.captureOffset(3) * 4, 16 * H);
      assert.equal(bitDiff(h, eng.modelBuf(2, 16 * H)), 0, 'captured h == hb');
      const NL = model.config.n_layers;
      res.push(Array.from({ length: NL }, (_, l) => cal.layer(l)).map((x) => [x.blocks.ffn.xx, x.blocks.down.sum]));
      if (threads === 1) {
        // streamed (per-layer files of captured rows, what large models use): the same statistics bit for bit
        const st = await calibrate(model, wins, { mode: 'streamed' });
        try {
          assert.equal(st.mode, 'streamed');
          for (let l = 0; l < NL; l++) {
            const a = cal.layer(l), b = st.layer(l);
            for (const blk of ['attn', 'wo', 'ffn', 'down']) {
              assert.equal(b.blocks[blk].X.length, 300 * b.blocks[blk].d);
              assert.deepEqual(blockMoments(b.blocks[blk]), a.blocks[blk].xx, `layer ${l} ${blk}: moments from the streamed rows`);
              assert.deepEqual(b.blocks[blk].sum, a.blocks[blk].sum);
              assert.deepEqual(b.blocks[blk].sq, a.blocks[blk].sq);
            }
          }
        } finally { st.dispose(); }
        assert.throws(() => st.layer(0), /disposed/);
      }
    } finally { model.dispose(); }
  }
  for (let l = 0; l < res[0].length; l++) for (let j = 0; j < 2; j++) assert.deepEqual(res[0][l][j], res[1][l][j]);
});

test('aether analyze prints the scores as a table (no calibration: plain spectra only)', () => {
  const stdout = execFileSync(process.execPath, [path.join(repoRoot, 'dist/cli/aether.js'), 'analyze', Q8, '--layers', '0'], { encoding: 'utf8' });
  const lines = stdout.trimEnd().split('\n');
  const head = lines.findIndex((l) => /^layer\s+matrix\s+shape\s+sigma1\s+sigma2\s+s1\/s2\s+stable-rank\s+alpha\s+energy75\s+energy50\s*$/.test(l));
  assert.ok(head >= 0, `table header in:\n${stdout}`);
  const rows = lines.slice(head + 1).filter((l) => /^\s*0\s+(attn|ffn)_\w+\s+\d+x\d+\s/.test(l));
  assert.equal(rows.length, 7, 'q, k, v, o, gate, up, down of layer 0');
  for (const r of rows) {
    const f = r.trim().split(/\s+/);
    const [s1, s2, cliff] = [Number(f[3]), Number(f[4]), Number(f[5])];
    assert.ok(s1 >= s2 && s2 > 0 && Math.abs(cliff - s1 / s2) < 0.02 * cliff, r);
  }
});

let atlasFile;   // written by the analyze test below, read by the --from-atlas test
test('aether analyze: table scores, atlas in the output metadata, SVG chart', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-analyze-'));
  const out = path.join(dir, 'atlas.rknot'), svg = path.join(dir, 'atlas.svg');
  atlasFile = out;
  const stdout = execFileSync(process.execPath, [path.join(repoRoot, 'dist/cli/aether.js'), 'analyze', Q8, '--calib', tiny('val.txt'),
    '--docs', '0:67', '--max-tokens', '512', '--layers', '0,5', '-o', out, '--chart', svg, '--json'], { encoding: 'utf8' });
  const r = JSON.parse(stdout);
  assert.equal(r.matrices.length, 14);
  for (const m of r.matrices) {
    assert.ok(m.sigma1 >= m.sigma2 && m.sigma2 > 0);
    assert.ok(Math.abs(m.cliff - m.sigma1 / m.sigma2) < 1e-9);
    assert.ok(m.stable_rank >= 1 && m.stable_rank <= Math.min(m.rows, m.cols));
    assert.ok(m.energy50 > 0 && m.energy50 <= m.energy75 && m.energy75 <= 1);
    assert.ok(m.aa_energy50 > 0 && m.aa_energy50 <= m.aa_energy75 && m.aa_energy75 <= 1 + 1e-12);
    assert.ok(m.alpha > 1 && m.alpha_tail >= 10);
  }
  assert.deepEqual(r.atlas.layers.map((L) => L.layer), [0, 5]);
  return openRknot(out).then(({ meta }) => {
    assert.deepEqual(meta.compression.atlas.layers.map((L) => L.mode), r.atlas.layers.map((L) => L.mode));
    assert.equal(meta.compression.atlas.calibration.tokens, 512);
    const s = fs.readFileSync(svg, 'utf8');
    assert.match(s, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.ok(s.trimEnd().endsWith('</svg>'));
    assert.equal((s.match(/<g class="panel"/g) ?? []).length, 4);
    assert.equal((s.match(/class="series" data-matrix="ffn_down"/g) ?? []).length, 4, 'one ffn_down line per panel');
    assert.ok(!/NaN|undefined/.test(s));
  });
});

// ---- aether compress: variants, per-layer modes, rollback ----
import { load } from '../dist/src/index.js';
import { loadKernels, T } from './helpers/kernels.mjs';
import { ffnLayer } from './helpers/ffn.mjs';

const CLI = path.join(repoRoot, 'dist/cli/aether.js');
const cdir = fs.mkdtempSync(path.join(os.tmpdir(), 'aether-compress-'));
const compressed = {};
function compressOnce(key, args) {
  if (!compressed[key]) {
    const out = path.join(cdir, `${key}.rknot`);
    const r = JSON.parse(execFileSync(process.execPath, [CLI, 'compress', Q8, '--calib', tiny('val.txt'), '--docs', '0:67', '--max-tokens', '1024', '-o', out, '--json', ...args], { encoding: 'utf8' }));
    compressed[key] = { out, r };
  }
  return compressed[key];
}

test('aether compress --method prune: smaller file, pruned width, bias compensation, loads and generates; no dense rollback', async () => {
  const { out, r } = compressOnce('prune50', ['--method', 'prune', '--ffn-width', '0.5']);
  assert.ok(r.file_bytes < r.input_bytes, `${r.file_bytes} < ${r.input_bytes}`);
  assert.equal(fs.statSync(out).size, r.file_bytes);
  assert.equal(r.layers.length, 6);
  for (const L of r.layers) { assert.equal(L.width, 384); assert.ok(L.kept_score > 0.5 && L.kept_score <= 1); }
  const { meta } = await openRknot(out);
  assert.ok(meta.format.required_features.includes('ffn_compressed'));
  assert.ok(!meta.tensors.some((t) => /ffn_(gate|up|down)\.weight$/.test(t.name)), 'dense FFN weights dropped');
  const logits = [];
  for (const threads of [1, 2]) {
    const model = await loadTiny(out, threads);
    try {
      assert.deepEqual(model.compression(), Array(6).fill('compressed'));
      assert.deepEqual(Array.from({ length: 6 }, (_, l) => model.engine.compressedWidth(l)), Array(6).fill(384));
      assert.throws(() => model.setCompression('dense'), (e) => e.code === 'unsupported' && /no dense FFN weights/.test(e.message));
      assert.throws(() => model.setFfnMode('fused'), (e) => e.code === 'unsupported');
      assert.deepEqual(model.compression(), Array(6).fill('compressed'), 'a refused switch changes nothing');
      const [a, b] = runLogits(model);
      assert.ok(a.every(Number.isFinite) && b.every(Number.isFinite));
      logits.push([a, b]);
      const { text } = await model.complete('The Debian project is', { maxTokens: 12, greedy: true });
      assert.ok(text.length > 0);
    } finally { model.dispose(); }
  }
  assert.equal(bitDiff(logits[0][0], logits[1][0]) + bitDiff(logits[0][1], logits[1][1]), 0, '1 vs 2 threads bit-identical');
});

test('aether compress --method aa-svd --keep-dense: per-layer switch; dense == the source model bit for bit', async () => {
  const { out, r } = compressOnce('aasvd50k', ['--method', 'aa-svd', '--ffn-width', '0.5', '--keep-dense']);
  assert.ok(r.file_bytes > r.input_bytes, 'keep-dense adds the factors');
  for (const L of r.layers) { assert.equal(L.rank, 96); assert.ok(L.params < 0.55 * L.params_dense); }
  const src = await loadTiny(Q8, 1);
  const ref = runLogits(src);
  src.dispose();
  const model = await loadTiny(out, 1);
  try {
    assert.deepEqual(model.compression(), Array(6).fill('compressed'), 'compressed by default');
    const comp = runLogits(model);
    assert.ok(bitDiff(comp[0], ref[0]) > 0, 'the variant computes something else');
    assert.deepEqual(model.setCompression('dense'), Array(6).fill('dense'));
    const dense = runLogits(model);
    assert.equal(bitDiff(dense[0], ref[0]) + bitDiff(dense[1], ref[1]), 0, 'rollback to dense = the source model');
    model.setCompression({ layers: { 2: 'compressed' } });
    assert.deepEqual(model.compression(), ['dense', 'dense', 'compressed', 'dense', 'dense', 'dense']);
    const one = runLogits(model);
    assert.ok(bitDiff(one[0], ref[0]) > 0 && bitDiff(one[0], comp[0]) > 0);
    model.setCompression('compressed');
    const again = runLogits(model);
    assert.equal(bitDiff(again[0], comp[0]), 0, 'switching back is exact');
    assert.deepEqual(model.approximations().map((a) => a.compression), Array(6).fill('compressed'));
    model.rollback({ kinds: ['compression'], layers: [1, 4] });
    assert.deepEqual(model.compression(), ['compressed', 'dense', 'compressed', 'compressed', 'dense', 'compressed'], 'rollback of some layers');
    model.rollback();
    assert.deepEqual(model.compression(), Array(6).fill('dense'), 'rollback() covers compression');
    const rolled = runLogits(model);
    assert.equal(bitDiff(rolled[0], ref[0]) + bitDiff(rolled[1], ref[1]), 0, 'rollback() = the source model bit for bit');
    model.setCompression('compressed');
    assert.throws(() => model.setCompression({ layers: { 9: 'dense' } }), (e) => e.code === 'invalid_argument');
    assert.throws(() => model.setCompression('atlas'), (e) => e.code === 'invalid_argument' && /no compression.atlas/.test(e.message));
    assert.throws(() => model.setCompression('half'), (e) => e.code === 'invalid_argument');
  } finally { model.dispose(); }
});

test('aether compress --from-atlas: per-layer widths from the atlas, layers outside it stay dense; setCompression(\'atlas\')', async () => {
  assert.ok(atlasFile && fs.existsSync(atlasFile), 'the analyze test wrote an atlas (layers 0 and 5 only)');
  const { meta: am } = await openRknot(atlasFile);
  const modes = Object.fromEntries(am.compression.atlas.layers.map((L) => [L.layer, L.mode]));
  assert.deepEqual(Object.keys(modes).map(Number), [0, 5]);
  const want = [0, 1, 2, 3, 4, 5].map((l) => (modes[l] === '50' ? 0.5 : modes[l] === '75' ? 0.75 : null));
  const out = path.join(cdir, 'from-atlas.rknot');
  const r = JSON.parse(execFileSync(process.execPath, [CLI, 'compress', atlasFile, '--from-atlas', '--method', 'aa-svd', '--calib', tiny('val.txt'),
    '--docs', '0:67', '--max-tokens', '1024', '--keep-dense', '-o', out, '--json'], { encoding: 'utf8' }));
  assert.deepEqual(r.layers.map((L) => [L.layer, L.width_ratio]), want.map((w, l) => [l, w]).filter(([, w]) => w !== null), 'one compressed layer per atlas entry, at its width');
  for (const L of r.layers) assert.equal(L.rank, L.width_ratio === 0.5 ? 96 : 160);
  const { meta } = await openRknot(out);
  assert.equal(meta.compression.from_atlas, true);
  assert.deepEqual(meta.compression.atlas.layers.map((L) => L.mode), am.compression.atlas.layers.map((L) => L.mode), 'the atlas is kept');
  const model = await loadTiny(out, 1);
  try {
    const byAtlas = want.map((w) => (w === null ? 'dense' : 'compressed'));
    assert.deepEqual(model.compression(), byAtlas, 'compressed where the atlas says so, dense elsewhere');
    const a = runLogits(model);
    model.setCompression('dense');
    assert.deepEqual(model.compression(), Array(6).fill('dense'));
    assert.deepEqual(model.setCompression('atlas'), byAtlas, "setCompression('atlas') follows the file's atlas");
    const b = runLogits(model);
    assert.equal(bitDiff(a[0], b[0]) + bitDiff(a[1], b[1]), 0, 'back to the same computation');
    const { text } = await model.complete('The Debian project is', { maxTokens: 8, greedy: true });
    assert.ok(text.length > 0);
  } finally { model.dispose(); }
});

test('compressed files (aa-svd and prune, width 0.75 and 0.5): 1 vs 2 threads bit-identical, with blocking waits', async () => {
  // spin 0: every barrier blocks in memory.atomic.wait32, the path on which Node 20's baseline compiler ran the
  // factored FFN wrong (src/core/pool.h, js/src/runtime/env.ts optimisingTierOnly)
  // the factored files first: their first 2-thread runs are this process's first runs of the threaded build
  // (not yet tiered up, where the baseline compiler went wrong)
  const files = [
    compressOnce('aasvd75', ['--method', 'aa-svd', '--ffn-width', '0.75']).out,
    compressOnce('aasvd50k', ['--method', 'aa-svd', '--ffn-width', '0.5', '--keep-dense']).out,
    compressOnce('prune75', ['--method', 'prune', '--ffn-width', '0.75']).out,
    compressOnce('prune50', ['--method', 'prune', '--ffn-width', '0.5']).out,
  ];
  for (const file of files) {
    const runs = [];
    for (const threads of [1, 2]) {
      const model = await loadTiny(file, threads, { spin: 0 });
      try {
        assert.ok(model.compression().every((c) => c === 'compressed'), path.basename(file));
        const rep = [];
        for (let i = 0; i < 3; i++) rep.push(runLogits(model));
        const long = runLogits(model, Array.from({ length: 24 }, (_, i) => 1 + ((i * 37) % 900)));
        const { text } = await model.complete('The Debian project is', { maxTokens: 16, greedy: true });
        runs.push({ rep, long, text });
      } finally { model.dispose(); }
    }
    const [a, b] = runs;
    for (let i = 0; i < 3; i++) {
      assert.equal(bitDiff(a.rep[0][0], b.rep[i][0]) + bitDiff(a.rep[0][1], b.rep[i][1]), 0, `${path.basename(file)}: 2 threads, repeat ${i}`);
    }
    assert.equal(bitDiff(a.long[0], b.long[0]) + bitDiff(a.long[1], b.long[1]), 0, `${path.basename(file)}: 24-token prefill`);
    assert.ok(a.rep[0][0].every(Number.isFinite));
    assert.equal(b.text, a.text, `${path.basename(file)}: greedy text`);
  }
  for (const file of files.slice(0, 2)) {   // factored files, each in a fresh process (2 threads first)
    const r = JSON.parse(execFileSync(process.execPath, [path.join(repoRoot, 'tests/helpers/threads-check.mjs'), file], { encoding: 'utf8' }));
    assert.deepEqual(r, { diff: 0, finite: true }, `${path.basename(file)}: fresh process, 2 threads first`);
  }
});

test('factored FFN matrices: y = B (A x) is exactly two matrix-vector products of the kernels', async () => {
  const { out } = compressOnce('aasvd50k', ['--method', 'aa-svd', '--ffn-width', '0.5', '--keep-dense']);
  const model = await loadTiny(out, 1);
  const k = await loadKernels({ st: true });
  try {
    const D = 288, H = 768, layer = 3, eng = model.engine;
    const A = eng.tensorInfo(`blk.${layer}.ffn_down_a.weight`), B = eng.tensorInfo(`blk.${layer}.ffn_down_b.weight`);
    const r = A.shape[1];
    assert.equal(A.dtype, 'q8_0'); assert.equal(B.dtype, 'q8_0');
    const type = T.Q8_0;
    const wa = k.putU8(eng.tensorBytes(A.name)), wb = k.putU8(eng.tensorBytes(B.name));
    for (const n of [1, 3]) {
      ffnLayer(model, layer, randomRows(n * D, 17 + n), n);
      const h = eng.modelBuf(2, n * H).slice(), t = eng.modelBuf(1, n * r).slice(), y = eng.modelBuf(4, n * D).slice();
      for (let b = 0; b < n; b++) {
        const xq = k.alloc(k.rowSize(type, H)), tk = k.alloc(4 * r), tq = k.alloc(k.rowSize(type, r)), yk = k.alloc(4 * D);
        k.x.kt_quantize(type, 0, k.putF32(h.subarray(b * H, (b + 1) * H)), xq, H);
        k.x.kt_matvec(type, 0, wa, H, xq, tk, 0, r);
        assert.equal(bitDiff(k.f32(tk, r), t.subarray(b * r, (b + 1) * r)), 0, `A h, n=${n}, row ${b}`);
        k.x.kt_quantize(type, 0, tk, tq, r);
        k.x.kt_matvec(type, 0, wb, r, tq, yk, 0, D);
        assert.equal(bitDiff(k.f32(yk, D), y.subarray(b * D, (b + 1) * D)), 0, `B (A h), n=${n}, row ${b}`);
      }
    }
  } finally { model.dispose(); }
});
