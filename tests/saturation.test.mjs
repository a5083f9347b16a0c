// The saturation metadata module (js/src/formats/saturation.ts): codec round trips and the checks the FFN
// runtime applies before using a file's section.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  b64decode, b64encode, b64ToF32, f32ToB64, maskFromIndices, maskBit, checkSaturation,
} from '../dist/src/formats/saturation.js';

const cfg = { dim: 8, hidden_dim: 20, n_layers: 2 };
function meta() {
  const layer = (k) => ({ frozen: b64encode(maskFromIndices(20, [k, k + 3])), n_frozen: 2, threshold: 0.25, compensation: f32ToB64(new Float32Array(8).fill(k)) });
  return {
    version: 1, method: 'variance', hidden_dim: 20, n_layers: 2,
    levels: [{ sparsity: 0.1, layers: [layer(0), layer(5)] }],
    layers: [{ mean: f32ToB64(new Float32Array(20)) }, { mean: f32ToB64(new Float32Array(20).fill(1.5)) }],
  };
}

test('codec: base64 bytes, f32 arrays and LSB-first masks round trip', () => {
  const u = Uint8Array.from({ length: 300 }, (_, i) => (i * 37) & 255);
  assert.deepEqual(b64decode(b64encode(u)), u);
  const f = Float32Array.from([1.5, -0, Infinity, 3e-39]);
  assert.deepEqual(b64ToF32(f32ToB64(f)), f);
  const m = maskFromIndices(20, [0, 7, 8, 19]);
  assert.equal(m.length, 3);
  assert.deepEqual(Array.from({ length: 20 }, (_, i) => maskBit(m, i) ? i : -1).filter((i) => i >= 0), [0, 7, 8, 19]);
});

test('checkSaturation: a well-formed section passes; each malformed field is named', () => {
  assert.equal(checkSaturation(undefined, cfg), undefined);
  assert.equal(checkSaturation(meta(), cfg).levels[0].layers[1].n_frozen, 2);
  const bad = (edit, field) => {
    const m = meta(); edit(m);
    assert.throws(() => checkSaturation(m, cfg, 'x.rknot'), (e) => e.code === 'format_error' && e.details.field === `saturation.${field}` && e.message.startsWith('x.rknot: '), field);
  };
  bad((m) => { m.version = 2; }, 'version');
  bad((m) => { m.hidden_dim = 24; }, 'hidden_dim');
  bad((m) => { m.n_layers = 3; }, 'n_layers');
  bad((m) => { m.levels = {}; }, 'levels');
  bad((m) => { m.levels[0].sparsity = 1.5; }, 'levels[0].sparsity');
  bad((m) => { m.levels[0].layers.pop(); }, 'levels[0].layers');
  bad((m) => { m.levels[0].layers[1].frozen = b64encode(new Uint8Array(4)); }, 'levels[0].layers[1].frozen');
  bad((m) => { m.levels[0].layers[0].threshold = 'x'; }, 'levels[0].layers[0].threshold');
  bad((m) => { m.levels[0].layers[0].compensation = f32ToB64(new Float32Array(7)); }, 'levels[0].layers[0].compensation');
  bad((m) => { m.layers[1].mean = 5; }, 'layers[1].mean');
});
