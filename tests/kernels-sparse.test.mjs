// Kernels of the ffn-saturated module (src/kernels/simd128/sparse_simd128.c) vs their scalar references
// (src/kernels/ref/sparse_ref.c), through wasm/kernels-test.wasm: bit for bit (tests/helpers/tolerances.mjs
// SPARSE_EXACT).
import test from 'node:test';
import assert from 'node:assert/strict';
import * as TOL from './helpers/tolerances.mjs';
import { loadKernels, rng, T, TYPE_NAMES, DTYPE_ROWS, f32bits, sameBits, assertBitsEqual, randomRow } from './helpers/kernels.mjs';

const k = await loadKernels({ pages: 1024 });
const X = k.x;
const REF = 1, SIMD = 0;
function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }

const AXPY_TYPES = [T.F32, T.F16, T.Q8_0, T.Q4_0];

test('axpy_rows (neuron-major down): the dtypes that have it', () => {
  const have = DTYPE_ROWS.filter((d) => X.kt_axpy_supported(d.ggmlId)).map((d) => d.ggmlId);
  assert.deepEqual(have.sort((a, b) => a - b), [...AXPY_TYPES].sort((a, b) => a - b));
  assert.equal(X.kt_axpy_supported(99), 0);
});

test('axpy_rows: SIMD == reference bit for bit, any column range and neuron list', () => {
  assert.equal(TOL.SPARSE_EXACT, 0);
  const r = rng(71);
  for (const type of AXPY_TYPES) for (const D of [32, 96, 2080]) for (const cnt of [1, 3, 4, 5, 9, 33]) withMark(() => {
    const H = 40, rs = k.rowSize(type, D);
    const W = k.putU8(randomRow(r, type, H * D, 0.05));
    const idx = k.alloc(cnt * 4), coef = k.alloc(cnt * 4);
    const iv = k.i32(idx, cnt), cv = k.f32(coef, cnt);
    for (let j = 0; j < cnt; j++) { iv[j] = r.int(0, H - 1); cv[j] = r.next() < 0.1 ? 0 : r.normal() * 10 ** r.int(-3, 2); }
    const y0 = r.floats(D);
    for (const [d0, d1] of [[0, D], [D > 32 ? 32 : 0, D], [0, 32]]) {
      const ys = k.putF32(y0), yr = k.putF32(y0);
      X.kt_axpy_rows(SIMD, type, W, rs, idx, coef, cnt, d0, d1, ys);
      X.kt_axpy_rows(REF, type, W, rs, idx, coef, cnt, d0, d1, yr);
      assertBitsEqual(k.f32(ys, D), k.f32(yr, D), `${TYPE_NAMES[type]} D=${D} cnt=${cnt} [${d0}, ${d1})`);
      const out = k.f32(ys, D);
      for (let c = 0; c < D; c++) if (c < d0 || c >= d1) assert.equal(out[c], y0[c], 'columns outside [d0, d1) untouched');
    }
  });
});

test('gather_dot (gathered q8_0 / q4_0 rows): SIMD == reference == vec_dot reference per row, incl. inf/nan scales', () => {
  const r = rng(72);
  for (const type of [T.Q8_0, T.Q4_0]) for (const nb of [1, 2, 3, 5, 16, 97]) for (const cnt of [1, 2, 3, 4, 5, 7, 8, 13]) withMark(() => {
    const n = 32 * nb, H = 20, rs = k.rowSize(type, n);
    const bytes = randomRow(r, type, H * n, 0.05);
    const ts = type === T.Q8_0 ? 34 : 18;
    if (nb > 2) new DataView(bytes.buffer).setUint16(3 * rs + Math.floor(nb / 2) * ts, 0x7c00, true);   // block scale d = inf
    const W = k.putU8(bytes);
    const xq = k.alloc(k.rowSize(T.Q8_0, n));
    X.kt_quantize(T.Q8_0, REF, k.putF32(r.floats(n)), xq, n);
    const rows = k.alloc(cnt * 4), rv = k.u32(rows, cnt);
    for (let j = 0; j < cnt; j++) rv[j] = W + r.int(0, H - 1) * rs;
    if (cnt > 2 && nb > 2) rv[1] = W + 3 * rs;   // a row with an inf scale somewhere
    const prep = k.alloc(nb * 64, 16), dx = k.alloc(nb * 4), ys = k.alloc(cnt * 4), yr = k.alloc(cnt * 4);
    X.kt_gather_dot(SIMD, type, rows, cnt, nb, xq, prep, dx, ys);
    X.kt_gather_dot(REF, type, rows, cnt, nb, xq, 0, 0, yr);
    assertBitsEqual(k.f32(ys, cnt), k.f32(yr, cnt), `${TYPE_NAMES[type]} nb=${nb} cnt=${cnt}`);
    const yv = k.f32(yr, cnt);
    for (let j = 0; j < cnt; j++) assert.ok(sameBits(yv[j], X.kt_vec_dot(type, REF, n, rv[j], xq)), `row ${j} == vec_dot_ref`);
  });
});
