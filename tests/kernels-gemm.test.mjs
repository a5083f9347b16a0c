// Prefill GEMM (ae_matmul: each dtype's batched kernel, kind WM in src/kernels/dtypes.inc, or the row kernel
// over row chunks) == the matvec per token, bit for bit, for every weight dtype of the registry: token
// counts that fill 4-token tiles and leave tails, row ranges that start and end anywhere, rows longer than
// one column chunk, strided activations and outputs; and == the scalar reference (ae_matvec_ref per token)
// bit for bit where the activation is quantised. Run: node --test tests/kernels-gemm.test.mjs
import test from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, rng, TYPE_NAMES, BLOCK, ROW, WEIGHT_TYPES, f32bits, sameBits, assertBitsEqual, randomRow } from './helpers/kernels.mjs';

const k = await loadKernels({ pages: 4096 });
const X = k.x;
const REF = 1, SIMD = 0;

function withMark(fn) { const m = k.mark(); try { return fn(); } finally { k.release(m); } }
const vdt = (type) => X.kt_traits(type, 0, 2);

// [rows, cols, nvec, r0, r1]
const CASES = [[5, 256, 1, 0, 5], [9, 512, 2, 1, 9], [16, 256, 4, 0, 16], [37, 768, 5, 3, 35], [21, 3072, 7, 2, 21],
  [33, 8192, 8, 0, 33], [12, 2304, 13, 4, 12], [8, 288 * 8, 64, 0, 8], [40, 4096, 9, 7, 40]];

test('matmul == matvec per token (bit for bit) and == the reference for quantised activations, every weight dtype', () => {
  const r = rng(77);
  for (const type of WEIGHT_TYPES) for (const [rows, cols, nvec, r0, r1] of CASES) {
    if (cols % BLOCK[type][0]) continue;
    withMark(() => {
      const W = k.putU8(randomRow(r, type, rows * cols, 0.03));
      const xqs = Math.ceil(k.rowSize(vdt(type), cols) / 16) * 16 + 48, ystr = rows + 3;
      const xq = k.alloc(xqs * nvec), y = k.alloc(ystr * nvec * 4), yv = k.alloc(rows * 4), yr = k.alloc(rows * 4);
      for (let b = 0; b < nvec; b++) X.kt_quantize(type, SIMD, k.putF32(r.floats(cols)), xq + b * xqs, cols);
      k.f32(y, ystr * nvec).fill(NaN);
      X.kt_matmul(type, W, cols, xq, xqs, nvec, y, ystr, r0, r1);
      for (let b = 0; b < nvec; b++) {
        const what = `${TYPE_NAMES[type]} ${rows}x${cols} nvec ${nvec} rows ${r0}..${r1} token ${b}`;
        X.kt_matvec(type, SIMD, W, cols, xq + b * xqs, yv, r0, r1);
        const got = k.f32(y + (b * ystr + r0) * 4, r1 - r0);
        assertBitsEqual(got, k.f32(yv + r0 * 4, r1 - r0), `${what} vs matvec`);
        if (ROW[type].act !== 'f32') {
          X.kt_matvec(type, REF, W, cols, xq + b * xqs, yr, r0, r1);
          assertBitsEqual(got, k.f32(yr + r0 * 4, r1 - r0), `${what} vs reference`);
        }
        // nothing outside [r0, r1) written
        const row = k.f32(y + b * ystr * 4, ystr);
        for (let i = 0; i < ystr; i++) if (i < r0 || i >= r1) assert.ok(Number.isNaN(row[i]), `${what}: wrote row ${i}`);
      }
    });
  }
});

// The q8_0 / q4_0 GEMM converts a row's block scales by moving the half's bits into a float (d_w 2^-112, exact for
// finite halves) and takes d_x 2^112; rows with an inf / NaN scale take the exact conversion (test below). Here: zero,
// negative, subnormal and the largest finite halves as weight scales, and tiny activations (subnormal or zero d_x).
test('q8_0 / q4_0 matmul == matvec == reference with zero, subnormal and extreme finite scales', () => {
  const r = rng(79);
  for (const name of ['q8_0', 'q4_0']) withMark(() => {
    const type = +Object.keys(TYPE_NAMES).find((t) => TYPE_NAMES[t] === name);
    const rows = 10, cols = 1024, nvec = 7, rs = k.rowSize(type, cols), bs = BLOCK[type][1], nb = cols / BLOCK[type][0];
    const bytes = randomRow(r, type, rows * cols, 0.03);
    const halves = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x1234];
    for (let row = 0; row < rows; row++) for (let b = 0; b < nb; b += 1 + (row % 3)) {
      const h = halves[(row + b) % halves.length], p = row * rs + b * bs;
      bytes[p] = h & 0xff; bytes[p + 1] = h >> 8;
    }
    const W = k.putU8(bytes);
    const xqs = Math.ceil(k.rowSize(vdt(type), cols) / 16) * 16;
    const xq = k.alloc(xqs * nvec), y = k.alloc(rows * nvec * 4), yv = k.alloc(rows * 4), yr = k.alloc(rows * 4);
    const scales = [1, 1e-6, 3e-8, 0, 1e4, 1, 2e-7];   // activation magnitudes: normal, subnormal and zero d_x
    for (let b = 0; b < nvec; b++) X.kt_quantize(type, SIMD, k.putF32(r.floats(cols).map((v) => v * scales[b])), xq + b * xqs, cols);
    X.kt_matmul(type, W, cols, xq, xqs, nvec, y, rows, 0, rows);
    for (let b = 0; b < nvec; b++) {
      X.kt_matvec(type, SIMD, W, cols, xq + b * xqs, yv, 0, rows);
      X.kt_matvec(type, REF, W, cols, xq + b * xqs, yr, 0, rows);
      assertBitsEqual(k.f32(y + b * rows * 4, rows), k.f32(yv, rows), `${name} token ${b} vs matvec`);
      assertBitsEqual(k.f32(y + b * rows * 4, rows), k.f32(yr, rows), `${name} token ${b} vs reference`);
    }
  });
});

test('matmul == matvec with infinite and NaN weight scales (quantised dtypes) or weights (f16)', () => {
  const r = rng(78);
  for (const type of WEIGHT_TYPES.filter((t) => ROW[t].act !== 'f32' || TYPE_NAMES[t] === 'f16')) withMark(() => {
    const f16 = TYPE_NAMES[type] === 'f16';
    const rows = 12, cols = f16 ? 1024 + 13 : 1024, nvec = 6, rs = k.rowSize(type, cols), bs = BLOCK[type][1];
    const bytes = randomRow(r, type, rows * cols, 0.03);
    // quantised: the f16 scale of a block; f16: one element
    const off = f16 ? 74 : ROW[type].scaleOffsets[0];
    assert.ok(off >= 0, `${TYPE_NAMES[type]} has a scale offset`);
    // an inf in row 1, a NaN in row 6 (f16 bits 0x7c00 / 0x7e00)
    for (const [row, h] of [[1, 0x7c00], [6, 0x7e00]]) { const p = row * rs + 2 * bs + off; bytes[p] = h & 0xff; bytes[p + 1] = h >> 8; }
    const W = k.putU8(bytes);
    const xqs = Math.ceil(k.rowSize(vdt(type), cols) / 16) * 16;
    const xq = k.alloc(xqs * nvec), y = k.alloc(rows * nvec * 4), yv = k.alloc(rows * 4);
    let nonFinite = 0;
    for (let b = 0; b < nvec; b++) X.kt_quantize(type, SIMD, k.putF32(r.floats(cols)), xq + b * xqs, cols);
    X.kt_matmul(type, W, cols, xq, xqs, nvec, y, rows, 0, rows);
    for (let b = 0; b < nvec; b++) {
      X.kt_matvec(type, SIMD, W, cols, xq + b * xqs, yv, 0, rows);
      assertBitsEqual(k.f32(y + b * rows * 4, rows), k.f32(yv, rows), `${TYPE_NAMES[type]} token ${b}`);
      nonFinite += [...k.f32(yv, rows)].filter((v) => !Number.isFinite(v)).length;
    }
    assert.ok(nonFinite >= nvec, `${TYPE_NAMES[type]}: the inf / NaN reached the results`);
  });
});
