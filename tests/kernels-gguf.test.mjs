// Real data: dequantise tensors of the tiny model's q8_0 and f16 GGUF files with the SIMD and reference
// to_float kernels and compare with the f32 GGUF of the same model (and an independent JS block reader).
// The files come from tests/helpers/paths.mjs (shipped f32, derived q8_0 / f16 checked by sha256 against
// the published files).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { tiny } from './helpers/paths.mjs';
import { loadKernels, T, halfBitsToF32Bits, floatToHalfBits, bitsF32 } from './helpers/kernels.mjs';


// Minimal GGUF (v2/v3) reader: tensor name -> { type, dims, offset (absolute) }.
function readGguf(path) {
  const buf = readFileSync(path);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 0;
  const u32 = () => { const v = dv.getUint32(o, true); o += 4; return v; };
  const u64 = () => { const v = Number(dv.getBigUint64(o, true)); o += 8; return v; };
  const str = () => { const n = u64(); const s = buf.toString('utf8', o, o + n); o += n; return s; };
  assert.equal(buf.toString('latin1', 0, 4), 'GGUF', `${path}: magic`);
  o = 4;
  const version = u32();
  assert.ok(version === 2 || version === 3, `${path}: GGUF version ${version}`);
  const nTensors = u64(), nKv = u64();
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  let alignment = 32;
  const skipValue = (t) => {
    if (t === 8) return str();
    if (t === 9) { const et = u32(), n = u64(); for (let i = 0; i < n; i++) skipValue(et); return null; }
    const size = SIZES[t];
    assert.ok(size, `${path}: kv type ${t}`);
    const v = t === 4 ? dv.getUint32(o, true) : null;
    o += size;
    return v;
  };
  for (let i = 0; i < nKv; i++) {
    const key = str(), t = u32(), v = skipValue(t);
    if (key === 'general.alignment' && v) alignment = v;
  }
  const tensors = new Map();
  for (let i = 0; i < nTensors; i++) {
    const name = str(), nd = u32(), dims = [];
    for (let d = 0; d < nd; d++) dims.push(u64());
    const type = u32(), offset = u64();
    tensors.set(name, { type, dims, offset });
  }
  const dataStart = Math.ceil(o / alignment) * alignment;
  for (const t of tensors.values()) t.offset += dataStart;
  return { buf, tensors };
}

test('GGUF tensors: q8_0 and f16 dequantise (SIMD == reference == JS) to within rounding of the f32 file', async () => {
  const g32 = readGguf(tiny('tiny-llama-a-f32.gguf')), g16 = readGguf(tiny('tiny-llama-a-f16.gguf')), g8 = readGguf(tiny('tiny-llama-a-q8_0.gguf'));
  const k = await loadKernels({ pages: 1024 });
  let checkedQ8 = 0, checkedF16 = 0;
  for (const [name, t8] of g8.tensors) {
    const t32 = g32.tensors.get(name);
    if (!t32 || t32.type !== T.F32) continue;
    const n = t8.dims.reduce((a, b) => a * b, 1);
    const ref = new Float32Array(g32.buf.buffer.slice(g32.buf.byteOffset + t32.offset, g32.buf.byteOffset + t32.offset + 4 * n));
    if (t8.type === T.Q8_0 && checkedQ8 < 6) {
      const bytes = (n / 32) * 34, src = k.putU8(g8.buf.subarray(t8.offset, t8.offset + bytes));
      const ys = k.alloc(4 * n), yr = k.alloc(4 * n);
      k.x.kt_to_float(T.Q8_0, 0, src, ys, n);
      k.x.kt_to_float(T.Q8_0, 1, src, yr, n);
      const S = k.f32(ys, n), R = k.f32(yr, n), dv = new DataView(g8.buf.buffer, g8.buf.byteOffset + t8.offset, bytes);
      for (let b = 0; b < n / 32; b++) {
        const d = bitsF32(halfBitsToF32Bits(dv.getUint16(34 * b, true)));
        for (let j = 0; j < 32; j++) {
          const i = 32 * b + j, js = Math.fround(dv.getInt8(34 * b + 2 + j) * d);
          assert.equal(S[i], R[i], `${name} SIMD vs ref at ${i}`);
          assert.equal(R[i], js, `${name} ref vs JS at ${i}`);
          // q8_0 of the f32 weights: |x - q d| <= d/2 plus the fp16 rounding of d (|q| <= 127)
          assert.ok(Math.abs(R[i] - ref[i]) <= Math.abs(d) * (0.5 + 127 * 2 ** -11) + 1e-30, `${name}[${i}]: ${R[i]} vs f32 ${ref[i]}`);
        }
      }
      checkedQ8++;
    }
    const t16 = g16.tensors.get(name);
    if (t16 && t16.type === T.F16 && checkedF16 < 6) {
      const src = k.putU8(g16.buf.subarray(t16.offset, t16.offset + 2 * n)), ys = k.alloc(4 * n);
      k.x.kt_to_float(T.F16, 0, src, ys, n);
      const S = k.f32(ys, n), H = new DataView(g16.buf.buffer, g16.buf.byteOffset + t16.offset, 2 * n);
      for (let i = 0; i < n; i++) {
        assert.equal(H.getUint16(2 * i, true), floatToHalfBits(ref[i]), `${name}[${i}]: f16 file != RNE(f32)`);
        assert.equal(S[i], bitsF32(halfBitsToF32Bits(H.getUint16(2 * i, true))), `${name}[${i}] f16 to_float`);
      }
      checkedF16++;
    }
  }
  assert.ok(checkedQ8 >= 3, `checked ${checkedQ8} q8_0 tensors`);
  assert.ok(checkedF16 >= 3, `checked ${checkedF16} f16 tensors`);
});
