// ffn-saturated: static masks and dynamic thresholds against the dense path and a float64 JS reference
// of the masked FFN; 1 vs 2 threads bit for bit; per-layer switching and rollback to dense.
//
// Exactness: with nothing skipped, the 'rows' down layout (the model's own w_down over the full h) is
// the dense computation bit for bit (static: empty mask; dynamic: threshold 0). The 'neuron' layout
// (neuron-major down copy, y = sum_i h_i down[:, i]) sums in another order and, for q8_0/q4_0 models,
// reads h in f32 where the dense path quantises h to q8_0 first: it is compared with the JS reference
// (no h quantisation) instead, within float rounding, and with dense within the q8_0 activation error.
import test from 'node:test';
import assert from 'node:assert/strict';
import { tiny } from './helpers/paths.mjs';
import { Q8, tinyConverted, loadTiny, runLogits, bitDiff, maxAbsDiff, maxAbs, randomRows, ffnLayer, refMaskedFfn } from './helpers/ffn.mjs';

const files = { f32: () => tiny('tiny-llama-a-f32.gguf'), q8_0: () => Q8, q4_0: () => tinyConverted('q4_0'), f16: () => tinyConverted('f16') };
const NL = 6, H = 768;
const emptyMasks = () => Array.from({ length: NL }, () => new Uint8Array(H / 8));
function randomMask(frac, seed) {
  const r = randomRows(H, seed), m = new Uint8Array(H / 8);
  for (let i = 0; i < H; i++) if ((r[i] + 1) / 2 < frac) m[i >> 3] |= 1 << (i & 7);
  return m;
}
const popcount = (m) => m.reduce((a, b) => { let c = 0; for (; b; b &= b - 1) c++; return a + c; }, 0);

for (const [dtype, file] of Object.entries(files)) {
  test(`${dtype}: nothing skipped with the rows down == dense bit for bit (static empty mask, dynamic threshold 0); neuron-major close`, async () => {
    const model = await loadTiny(await file(), 1);
    try {
      const dense = runLogits(model);
      for (const [mode, opts] of [['static', { masks: emptyMasks(), down: 'rows' }], ['dynamic', { threshold: 0, down: 'rows' }]]) {
        model.setFfnMode(mode, undefined, opts);
        const r = runLogits(model);
        assert.equal(bitDiff(dense[0], r[0]), 0, `${mode} rows prefill`);
        assert.equal(bitDiff(dense[1], r[1]), 0, `${mode} rows decode`);
        assert.equal(model.engine.ffnActive(0), H);
      }
      // neuron-major: f32/f16 weights differ only in summation order; q8_0/q4_0 also by the dense
      // path's q8_0 quantisation of h (measured max |d logit| 0.077 q8_0, 0.063 q4_0, 3.8e-6 f32)
      const tol = { f32: 1e-4, f16: 1e-4, q8_0: 0.2, q4_0: 0.2 }[dtype];
      for (const [mode, opts] of [['static', { masks: emptyMasks(), down: 'neuron', downDtype: 'f32' }], ['dynamic', { threshold: 0, down: 'neuron', downDtype: 'f32' }]]) {
        model.setFfnMode(mode, undefined, opts);
        const r = runLogits(model);
        const d = Math.max(maxAbsDiff(dense[0], r[0]), maxAbsDiff(dense[1], r[1]));
        assert.ok(d < tol, `${mode} neuron-major: max |d logit| ${d} >= ${tol}`);
      }
    } finally { model.dispose(); }
  });
}

for (const dtype of ['f32', 'q8_0', 'q4_0']) {
  test(`${dtype}: masked static FFN and dynamic FFN match a float64 JS reference (layers 1 and 4, 3 rows)`, async () => {
    const model = await loadTiny(await files[dtype](), 1);
    try {
      const D = model.config.dim, x = randomRows(3 * D, 11);
      for (const layer of [1, 4]) {
        const mask = randomMask(0.4, 100 + layer);
        const masks = emptyMasks(); masks[layer] = mask;
        model.setFfnMode('static', [layer], { masks, down: 'neuron', downDtype: 'f32', compensation: false });
        const got = ffnLayer(model, layer, x, 3);
        assert.equal(model.engine.ffnActive(layer), 3 * (H - popcount(mask)));
        const thr = 0.15;
        model.setFfnMode('dynamic', [layer], { threshold: thr, down: 'neuron', downDtype: 'f32' });
        const gotDyn = ffnLayer(model, layer, x, 3);
        const active = model.engine.ffnActive(layer);
        let refActive = 0;
        for (let b = 0; b < 3; b++) {
          const row = x.subarray(b * D, (b + 1) * D);
          const ref = refMaskedFfn(model, layer, row, { mask });
          const e = maxAbsDiff(got.subarray(b * D, (b + 1) * D), ref), scale = maxAbs(ref);
          assert.ok(e <= 2e-5 * scale, `static layer ${layer} row ${b}: max error ${e} (scale ${scale})`);
          const refD = refMaskedFfn(model, layer, row, { threshold: thr });
          const eD = maxAbsDiff(gotDyn.subarray(b * D, (b + 1) * D), refD);
          assert.ok(eD <= 2e-5 * maxAbs(refD), `dynamic layer ${layer} row ${b}: max error ${eD}`);
        }
        assert.ok(active > 0.2 * 3 * H && active < 0.9 * 3 * H, `dynamic computed ${active} of ${3 * H} neurons`);
        model.setFfnMode('dense', [layer]);
      }
    } finally { model.dispose(); }
  });
}

test('1 vs 2 threads bit for bit in every saturated variant (q8_0 and f16 models, prefill and decode)', async () => {
  for (const f of [Q8, await tinyConverted('f16')]) {
    const variants = [
      ['static', { masks: Array.from({ length: NL }, (_, l) => randomMask(0.5, l + 1)), down: 'neuron' }],
      ['static', { masks: Array.from({ length: NL }, (_, l) => randomMask(0.3, l + 9)), down: 'rows' }],
      ['dynamic', { threshold: 0.2, down: 'neuron' }],
      ['dynamic', { threshold: 0.2, down: 'neuron', downDtype: 'q8_0' }],
      ['dynamic', { threshold: 0.1, down: 'rows' }],
      ['dynamic', { threshold: 0.3, down: 'neuron', downDtype: 'q4_0' }],
    ];
    const out = [];
    for (const threads of [1, 2]) {
      const model = await loadTiny(f, threads);
      try {
        out.push(variants.map(([m, o]) => { model.setFfnMode(m, undefined, o); return [...runLogits(model), model.engine.ffnActive(3)]; }));
      } finally { model.dispose(); }
    }
    variants.forEach(([m, o], i) => {
      assert.equal(bitDiff(out[0][i][0], out[1][i][0]), 0, `${f} ${m} ${JSON.stringify(o).slice(0, 60)} prefill`);
      assert.equal(bitDiff(out[0][i][1], out[1][i][1]), 0, `${f} ${m} decode`);
      assert.equal(out[0][i][2], out[1][i][2], `${f} ${m} active count`);
    });
  }
});

test('per-layer switching and rollback: layers back to dense give the dense logits exactly', async () => {
  const model = await loadTiny(Q8, 2);
  try {
    const dense = runLogits(model);
    model.setFfnMode('dynamic', [0, 1, 2], { threshold: 0.25 });
    model.setFfnMode('static', [3, 4], { masks: Array.from({ length: NL }, (_, l) => randomMask(0.5, 50 + l)) });
    model.setFfnMode('fused', [5]);
    const mixed = runLogits(model);
    assert.ok(bitDiff(dense[0], mixed[0]) > 0);
    assert.deepEqual(model.ffn.modes, ['dynamic', 'dynamic', 'dynamic', 'static', 'static', 'fused']);
    model.setFfnMode('dense', [0, 1, 2, 3, 4]);
    const back = runLogits(model);
    assert.equal(bitDiff(dense[0], back[0]), 0);
    assert.equal(bitDiff(dense[1], back[1]), 0);
    model.setFfnMode('static', [3, 4]);   // options remembered, data cached: same result as before
    model.setFfnMode('dynamic', [0, 1, 2]);
    const again = runLogits(model);
    assert.equal(bitDiff(mixed[0], again[0]), 0);
    model.setFfnMode('dense');
    assert.equal(bitDiff(dense[1], runLogits(model)[1]), 0);
  } finally { model.dispose(); }
});

test('static and dynamic without saturation metadata or options fail clearly; model stays dense', async () => {
  // the shipped q8_0 file carries saturation metadata: convert one without it
  const model = await loadTiny(await tinyConverted('q8_0'), 1);
  try {
    const dense = runLogits(model);
    assert.throws(() => model.setFfnMode('static'), (e) => e.code === 'invalid_argument' && /aether profile/.test(e.message));
    assert.throws(() => model.setFfnMode('dynamic', [9], { threshold: 0 }), (e) => e.code === 'invalid_argument');
    assert.equal(bitDiff(dense[0], runLogits(model)[0]), 0);
  } finally { model.dispose(); }
});
