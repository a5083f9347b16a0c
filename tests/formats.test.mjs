// Formats: dtypes / f16 / ggml quantisers, GGUF + safetensors readers, .rknot writer / validator, converter.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { DTYPES, tensorBytes } from '../dist/src/formats/dtypes.js';
import { crc32, crc32js, formatChecksum } from '../dist/src/formats/checksum.js';
import {
  f32ToF16, f16ToF32, quantizeQ8_0, quantizeQ4_0, decodeToF32, encodeF16,
} from '../dist/src/formats/quantize.js';
import { readGGUF, readGGUFTensor } from '../dist/src/formats/gguf.js';
import { readSafetensors, readSafetensorsModel } from '../dist/src/formats/safetensors.js';
import {
  openRknot, readRknotTensor, readRknotHeader, validateRknotMetadata, writeRknot, verifyRknotFile, RKNOT_MAGIC, RKNOT_VERSION,
} from '../dist/src/formats/rknot.js';
import { convertModel, planConversion } from '../dist/src/formats/convert.js';
import {
  tinyModel, makeTmpDir, sha256, assertAetherError, buildGGUF, GGUF_T as T, tinySyntheticMeta, syntheticData,
  writeSyntheticRknot, rawRknot, splitRknot,
} from './helpers/formats.mjs';

const M = tinyModel(); // throws (fails every test) when the shared model is missing
const tmp = makeTmpDir('formats');
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const eqBytes = (a, b) => Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.length), Buffer.from(b.buffer, b.byteOffset, b.length)) === 0;

// ---------------------------------------------------------------------------------------------
// element formats

test('dtype table and tensor byte sizes', () => {
  assert.deepEqual([DTYPES.q8_0.blockSize, DTYPES.q8_0.typeSize, DTYPES.q8_0.ggmlId], [32, 34, 8]);
  assert.deepEqual([DTYPES.q4_0.blockSize, DTYPES.q4_0.typeSize, DTYPES.q4_0.ggmlId], [32, 18, 2]);
  assert.deepEqual([DTYPES.q4_K.blockSize, DTYPES.q4_K.typeSize, DTYPES.q6_K.typeSize], [256, 144, 210]);
  assert.equal(tensorBytes('q8_0', [288, 4096]), 288 / 32 * 34 * 4096);
  assert.match(tensorBytes('q8_0', [30, 2]), /multiple of the q8_0 block size/);
  assert.match(tensorBytes('f32', [2 ** 40, 2 ** 40]), /overflows/);
});

test('crc32: check value, native == portable, incremental', () => {
  const b = new TextEncoder().encode('123456789');
  assert.equal(crc32(b), 0xcbf43926);
  assert.equal(crc32js(b), 0xcbf43926);
  const big = new Uint8Array(100003).map((_, i) => (i * 7919) & 0xff);
  assert.equal(crc32(big), crc32js(big));
  assert.equal(crc32(big.subarray(50001), crc32(big.subarray(0, 50001))), crc32(big));
  assert.equal(formatChecksum(0xcbf43926), 'crc32:cbf43926');
});

test('f16: every half round-trips through f32; round to nearest even', () => {
  for (let h = 0; h < 65536; h++) {
    const e = (h >>> 10) & 0x1f, m = h & 0x3ff;
    if (e === 31 && m !== 0) continue; // NaN payloads: only quiet-ness is preserved
    assert.equal(f32ToF16(f16ToF32(h)), h, `half 0x${h.toString(16)}`);
  }
  assert.equal(f32ToF16(1 + 2 ** -11), 0x3c00);            // tie -> even (down)
  assert.equal(f32ToF16(1 + 3 * 2 ** -11), 0x3c02);        // tie -> even (up)
  assert.equal(f32ToF16(65520), 0x7c00);                   // rounds to inf
  assert.equal(f32ToF16(2 ** -25), 0x0000);                // half of the smallest subnormal: tie -> 0
  assert.equal(f32ToF16(Math.fround(2 ** -25 * 1.0000001)), 0x0001);
  assert.throws(() => encodeF16(new Float32Array([1e6])), /overflows the f16 range/);
});

test('q4_0 block layout: d = max / -8, low nibbles = elements 0..15, high = 16..31', () => {
  const x = new Float32Array(32);
  for (let i = 0; i < 32; i++) x[i] = (i - 16) / 4; // max magnitude -4 at i = 0
  const q = quantizeQ4_0(x);
  assert.equal(q.length, 18);
  assert.equal(f16ToF32(q[0] | (q[1] << 8)), 0.5); // d = -4 / -8
  // x / d + 8.5 truncated: element 0 -> -8 + 8.5 = 0.5 -> 0; element 16 -> 0 + 8.5 -> 8
  assert.equal(q[2] & 0xf, 0);
  assert.equal(q[2] >>> 4, 8);
  assert.equal(q[2 + 15] & 0xf, Math.min(15, Math.trunc(-1 / 4 / 0.5 + 8.5)));
  const y = decodeToF32('q4_0', q, 32);
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(y[i] - x[i]) <= 0.5 / 2 + 1e-6, `element ${i}: ${y[i]} vs ${x[i]}`);
  // ggml keeps the first element of largest magnitude (strict <)
  const z = new Float32Array(32); z[3] = 2; z[7] = -2;
  assert.equal(f16ToF32(quantizeQ4_0(z)[0] | (quantizeQ4_0(z)[1] << 8)), -0.25);
});

test('q8_0: quantising the f32 GGUF reproduces the q8_0 GGUF bytes exactly; f16 likewise', async () => {
  const f32 = await readGGUF(M.f32);
  const q8 = await readGGUF(M.q8_0);
  const f16 = await readGGUF(M.f16);
  let quantised = 0;
  for (const t of f32.tensors) {
    const x = decodeToF32('f32', await readGGUFTensor(f32, t.name), t.bytes / 4);
    const tq = q8.tensors.find((u) => u.name === t.name);
    const t16 = f16.tensors.find((u) => u.name === t.name);
    if (tq.dtype === 'q8_0') {
      assert.ok(eqBytes(quantizeQ8_0(x), await readGGUFTensor(q8, t.name)), `${t.name}: q8_0 bytes differ`);
      quantised++;
    }
    if (t16.dtype === 'f16') assert.ok(eqBytes(encodeF16(x), await readGGUFTensor(f16, t.name)), `${t.name}: f16 bytes differ`);
  }
  assert.equal(quantised, 44);
});

// ---------------------------------------------------------------------------------------------
// GGUF reader

test('readGGUF: tiny-llama-a f32 header, metadata and tensor table', async () => {
  const g = await readGGUF(M.f32);
  assert.equal(g.version, 3);
  assert.equal(g.alignment, 32);
  assert.equal(g.metadata.get('general.architecture'), 'llama');
  assert.equal(g.metadata.get('llama.block_count'), 6);
  assert.equal(g.metadata.get('tokenizer.ggml.tokens').length, 4096);
  assert.equal(g.metadataTypes.get('tokenizer.ggml.scores'), 'array<f32>');
  assert.equal(g.tensors.length, 57);
  const e = g.tensors.find((t) => t.name === 'token_embd.weight');
  assert.deepEqual(e.dims, [288, 4096]);
  assert.equal(e.bytes, 288 * 4096 * 4);
  assert.equal(e.offset % 32, 0);
  assert.ok(g.tensors.every((t) => t.offset >= g.dataOffset && t.offset + t.bytes <= g.fileSize));
});

const goodKV = [['general.architecture', T.string, 'llama'], ['general.alignment', T.u32, 32], ['x.arr', T.array, [T.string, ['a', 'b']]]];
const f32Tensor = (name, dims, offset) => ({ name, dims, type: 0, offset });

async function ggufCase(name, spec, code, patterns) {
  const file = path.join(tmp, name + '.gguf');
  fs.writeFileSync(file, Buffer.isBuffer(spec) ? spec : buildGGUF(spec));
  return assertAetherError(() => readGGUF(file), code, [file, ...patterns]);
}

test('readGGUF: a synthetic valid file (nested arrays, all value types) reads back', async () => {
  const file = path.join(tmp, 'ok.gguf');
  const kv = [
    ['a.u8', T.u8, 200], ['a.i8', T.i8, -5], ['a.u16', T.u16, 60000], ['a.i16', T.i16, -300], ['a.u32', T.u32, 4e9], ['a.i32', T.i32, -2e9],
    ['a.f32', T.f32, 0.5], ['a.bool', T.bool, true], ['a.str', T.string, 'héllo'], ['a.u64', T.u64, 2n ** 60n], ['a.i64', T.i64, -7], ['a.f64', T.f64, 1.25],
    ['a.nested', T.array, [T.array, [[T.u32, [1, 2]], [T.u32, [3]]]]],
  ];
  fs.writeFileSync(file, buildGGUF({ kv, tensors: [f32Tensor('w', [8, 2], 0), f32Tensor('v', [8], 64)], data: Buffer.alloc(96) }));
  const g = await readGGUF(file);
  assert.equal(g.metadata.get('a.i8'), -5);
  assert.equal(g.metadata.get('a.str'), 'héllo');
  assert.equal(g.metadata.get('a.u64'), 2n ** 60n);
  assert.deepEqual(g.metadata.get('a.nested'), [[1, 2], [3]]);
  assert.equal(g.tensors.length, 2);
});

test('readGGUF: malformed files fail with format_error naming file, field and byte offset', async () => {
  const real = fs.readFileSync(M.q8_0);
  await ggufCase('trunc-header', real.subarray(0, 20), 'format_error', ['too short']);
  await ggufCase('trunc-kv', real.subarray(0, 5000), 'format_error', ['tokenizer.ggml.tokens', 'at byte', 'truncated']);
  await ggufCase('trunc-data', real.subarray(0, real.length - 100), 'format_error', ['output.weight.offset', 'out of range']);
  await ggufCase('magic', { raw: { magic: 0x46554748 } }, 'format_error', ['magic', 'at byte 0', 'GGUF']);
  await ggufCase('v1', { raw: { version: 1 } }, 'unsupported', ['version', 'version 1']);
  await ggufCase('v99', { raw: { version: 99 } }, 'format_error', ['version', 'at byte 4', 'expected 2 or 3']);
  await ggufCase('ntensors', { raw: { nTensors: 2n ** 62n } }, 'format_error', ['tensor_count', 'at byte 8', 'exceeds']);
  await ggufCase('nkv-fit', { raw: { nKV: 100000 } }, 'format_error', ['metadata_kv_count', 'cannot fit']);
  // string length far beyond the file
  const bad = buildGGUF({ kv: [['k', T.string, 'abc']] });
  bad.writeBigUInt64LE(2n ** 40n, 24 + 8 + 1 + 4); // the value's length field
  await ggufCase('strlen', bad, 'format_error', ["'k'".slice(1, 2), 'string length', 'exceeds']);
  await ggufCase('valtype', Buffer.concat([buildGGUF({ raw: { nKV: 1 } }).subarray(0, 24), Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0x6b, 99, 0, 0, 0]), Buffer.alloc(64)]), 'format_error', ['k', 'value type 99']);
  await ggufCase('dupkey', { kv: [['a', T.u32, 1], ['a', T.u32, 2]] }, 'format_error', ['a', 'duplicate metadata key']);
  await ggufCase('align', { kv: [['general.alignment', T.u32, 24]] }, 'format_error', ['general.alignment', 'power of two']);
  await ggufCase('dims-overflow', { kv: goodKV, tensors: [f32Tensor('big', [2 ** 40, 2 ** 40], 0)], data: Buffer.alloc(64) }, 'format_error', ['big.ne[1]', 'at byte', 'overflow']);
  await ggufCase('dims-zero', { tensors: [f32Tensor('z', [4, 0], 0)], data: Buffer.alloc(64) }, 'format_error', ['z.ne[1]', 'dim is 0']);
  await ggufCase('ndims', { tensors: [f32Tensor('d5', [1, 1, 1, 1, 1], 0)], data: Buffer.alloc(64) }, 'format_error', ['d5.n_dims', '5 dims']);
  // a real ggml type Aether does not read (iq2_xxs: id 16)
  const iq2 = await ggufCase('dtype', { tensors: [{ name: 'w', dims: [256], type: 16, offset: 0 }], data: Buffer.alloc(256) }, 'unsupported', ['w.type', 'IQ2_XXS', 'at byte', 'expected F32, F16, Q4_0']);
  assert.equal(iq2.details.field, 'w.type');
  await ggufCase('dtype-unknown', { tensors: [{ name: 'w', dims: [32], type: 77, offset: 0 }], data: Buffer.alloc(256) }, 'format_error', ['w.type', 'unknown type 77']);
  await ggufCase('blocksize', { tensors: [{ name: 'q', dims: [30], type: 8, offset: 0 }], data: Buffer.alloc(64) }, 'format_error', ['q', 'multiple of the q8_0 block size']);
  await ggufCase('misaligned', { tensors: [f32Tensor('m', [4], 16)], data: Buffer.alloc(64) }, 'format_error', ['m.offset', 'alignment 32']);
  await ggufCase('range', { tensors: [f32Tensor('r', [64], 32)], data: Buffer.alloc(64) }, 'format_error', ['r.offset', 'out of range']);
  await ggufCase('overlap', { tensors: [f32Tensor('a', [16], 0), f32Tensor('b', [16], 32)], data: Buffer.alloc(128) }, 'format_error', ["'a'", 'b', 'overlaps']);
  await ggufCase('dupname', { tensors: [f32Tensor('a', [8], 0), f32Tensor('a', [8], 32)], data: Buffer.alloc(64) }, 'format_error', ['a', 'duplicate tensor name']);
  await ggufCase('bool', Buffer.concat([buildGGUF({ kv: [['b', T.bool, true]] }).subarray(0, 24 + 8 + 1 + 4), Buffer.from([7]), Buffer.alloc(40)]), 'format_error', ['b', 'bool value 7']);
});

// ---------------------------------------------------------------------------------------------
// safetensors

function buildSafetensors(header, data) {
  const h = Buffer.from(JSON.stringify(header));
  const n = Buffer.alloc(8); n.writeBigUInt64LE(BigInt(h.length));
  return Buffer.concat([n, h, data]);
}

test('safetensors: tiny-llama-a hf reads; malformed files fail naming the file and tensor', async () => {
  const m = await readSafetensorsModel(M.hf);
  assert.equal(m.tensors.size, 57);
  assert.deepEqual(m.tensors.get('model.embed_tokens.weight').shape, [4096, 288]);
  const sf = async (name, bytes, code, patterns) => {
    const f = path.join(tmp, name + '.safetensors');
    fs.writeFileSync(f, bytes);
    return assertAetherError(() => readSafetensors(f), code, [f, ...patterns]);
  };
  await sf('json', Buffer.concat([Buffer.from([5, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{nope')]), 'format_error', ['header', 'does not parse']);
  await sf('hlen', Buffer.concat([Buffer.from([0, 0, 0, 0, 0, 0, 1, 0]), Buffer.from('{}')]), 'format_error', ['header length', 'exceeds']);
  await sf('range', buildSafetensors({ w: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, Buffer.alloc(8)), 'format_error', ['w.data_offsets', 'out of range']);
  await sf('size', buildSafetensors({ w: { dtype: 'F32', shape: [4], data_offsets: [0, 12] } }, Buffer.alloc(16)), 'format_error', ['w.data_offsets', 'needs 16']);
  await sf('overlap', buildSafetensors({ a: { dtype: 'F16', shape: [4], data_offsets: [0, 8] }, b: { dtype: 'F16', shape: [4], data_offsets: [4, 12] } }, Buffer.alloc(16)), 'format_error', ['overlaps']);
  await sf('dtype', buildSafetensors({ w: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, Buffer.alloc(8)), 'unsupported', ['w.dtype', 'I64']);
  await sf('dtype2', buildSafetensors({ w: { dtype: 'Q9', shape: [1], data_offsets: [0, 8] } }, Buffer.alloc(8)), 'format_error', ['w.dtype', 'unknown dtype']);
});

test('safetensors: sharded checkpoint via model.safetensors.index.json', async () => {
  const dir = path.join(tmp, 'sharded');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'a.safetensors'), buildSafetensors({ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, Buffer.alloc(8, 1)));
  fs.writeFileSync(path.join(dir, 'b.safetensors'), buildSafetensors({ y: { dtype: 'BF16', shape: [2, 2], data_offsets: [0, 8] } }, Buffer.alloc(8, 2)));
  fs.writeFileSync(path.join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: 'a.safetensors', y: 'b.safetensors' } }));
  const m = await readSafetensorsModel(dir);
  assert.deepEqual([...m.tensors.keys()].sort(), ['x', 'y']);
  assert.equal(m.tensors.get('y').file, path.join(dir, 'b.safetensors'));
  fs.writeFileSync(path.join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: 'a.safetensors', y: 'b.safetensors', z: 'b.safetensors' } }));
  await assertAetherError(() => readSafetensorsModel(dir), 'format_error', ['z', 'missing']);
});

// ---------------------------------------------------------------------------------------------
// .rknot writer and validator (synthetic model)

test('writeRknot + openRknot + readRknotTensor: synthetic model round-trips', async () => {
  const f = path.join(tmp, 'syn.rknot');
  const { meta, header } = await writeSyntheticRknot(f);
  const bytes = fs.readFileSync(f);
  assert.ok(eqBytes(bytes.subarray(0, 8), RKNOT_MAGIC));
  assert.equal(bytes.readUInt32LE(8), RKNOT_VERSION);
  assert.equal(bytes.length, header.dataOffset + header.dataSize);
  assert.equal(header.dataOffset % 64, 0);
  assert.ok(!fs.existsSync(f + '.tmp'));
  const o = await openRknot(f);
  assert.deepEqual(o.meta.config, meta.config);
  for (const [i, t] of o.meta.tensors.entries()) {
    assert.equal(t.offset % 64, 0);
    const { data } = await readRknotTensor(f, t.name);
    assert.ok(eqBytes(data, syntheticData(t, i + 1)), t.name);
  }
  // header reading from bytes and from an fd
  const fromBytes = await readRknotHeader(bytes, f);
  assert.equal(fromBytes.header.dataSize, header.dataSize);
  const fd = fs.openSync(f, 'r');
  try { assert.equal((await readRknotHeader(fd, f)).header.jsonLength, header.jsonLength); } finally { fs.closeSync(fd); }
});

test('writeRknot refuses inconsistent input and leaves no file behind', async () => {
  const f = path.join(tmp, 'bad-write.rknot');
  const meta = tinySyntheticMeta();
  await assertAetherError(() => writeRknot(f, meta, (spec) => new Uint8Array(3)), 'invalid_argument', ['token_embd.weight', 'got 3 bytes']);
  assert.ok(!fs.existsSync(f) && !fs.existsSync(f + '.tmp'));
  const bad = tinySyntheticMeta();
  bad.tensors[2].shape = [64, 96];
  await assertAetherError(() => writeRknot(f, bad, (spec, i) => new Uint8Array(tensorBytes(spec.dtype, spec.shape))), 'config_error', ['blk.0.attn_q.weight.shape', '[64, 64]']);
  assert.ok(!fs.existsSync(f) && !fs.existsSync(f + '.tmp'));
});

/** A valid synthetic file split into parts, to derive malformed variants. */
async function baseParts() {
  const f = path.join(tmp, 'base.rknot');
  if (!fs.existsSync(f)) await writeSyntheticRknot(f);
  return splitRknot(fs.readFileSync(f));
}

async function rknotCase(name, bytes, code, patterns) {
  const file = path.join(tmp, `bad-${name}.rknot`);
  fs.writeFileSync(file, bytes);
  return assertAetherError(() => openRknot(file), code, [file, ...patterns]);
}

test('.rknot: malformed headers fail with format_error / unsupported naming file, field and offset', async () => {
  const { meta, data } = await baseParts();
  const good = rawRknot(meta, data);
  await rknotCase('trunc-header', good.subarray(0, 20), 'format_error', ['header', 'truncated']);
  await rknotCase('trunc-json', good.subarray(0, 100), 'format_error', ['metadata', 'truncated']);
  await rknotCase('trunc-data', good.subarray(0, good.length - 10), 'format_error', ['file size', 'truncated', `expected ${good.length}`]);
  await rknotCase('trailing', Buffer.concat([good, Buffer.alloc(64)]), 'format_error', ['unexpected bytes after the data section']);
  await rknotCase('magic', rawRknot(meta, data, { magic: Buffer.from('GGUF\0\0\0\0') }), 'format_error', ['magic', 'at byte 0', 'not a .rknot']);
  await rknotCase('version0', rawRknot(meta, data, { version: 0 }), 'format_error', ['version', 'at byte 8']);
  await rknotCase('version2', rawRknot(meta, data, { version: 2 }), 'unsupported', ['version', 'at byte 8', 'newer']);
  await rknotCase('flags', rawRknot(meta, data, { flags: 4 }), 'unsupported', ['flags', 'at byte 12']);
  await rknotCase('datasize', rawRknot(meta, data, { dataSize: 100 }), 'format_error', ['data_size', 'at byte 24']);
  const text = JSON.stringify(meta);
  await rknotCase('json', rawRknot(meta, data, { jsonText: text.slice(0, 100) + '}' + text.slice(101) }), 'format_error', ['metadata', 'at byte 32', 'does not parse']);
  await rknotCase('utf8', rawRknot(meta, data, { jsonText: text.replace('"<unk>"', '"\udc00"') }).fill(0xff, 40, 41), 'format_error', ['metadata']);
});

test('.rknot: malformed metadata fails with the right code naming the field', async () => {
  const { meta, data } = await baseParts();
  const variant = (fn) => { const m = structuredClone(meta); fn(m); return rawRknot(m, data); };
  const t = (m, name) => m.tensors.find((x) => x.name === name);
  await rknotCase('feature', variant((m) => { m.format.required_features = ['sparse_ffn_v9']; }), 'unsupported', ['format.required_features', 'sparse_ffn_v9']);
  await rknotCase('fmtver', variant((m) => { m.format.version = 3; }), 'unsupported', ['format.version']);
  await rknotCase('overlap', variant((m) => { t(m, 'blk.0.attn_q.weight').offset = t(m, 'blk.0.attn_norm.weight').offset; }), 'format_error', ['overlaps']);
  await rknotCase('range', variant((m) => { t(m, 'output.weight').offset = data.length; }), 'format_error', ['output.weight.offset', 'out of range']);
  await rknotCase('align', variant((m) => { t(m, 'output.weight').offset += 32; }), 'format_error', ['output.weight.offset', 'multiple of 64']);
  await rknotCase('dims', variant((m) => { t(m, 'token_embd.weight').shape = [2 ** 40, 2 ** 40]; }), 'format_error', ['token_embd.weight.shape', 'overflows']);
  await rknotCase('dimneg', variant((m) => { t(m, 'token_embd.weight').shape = [64, -1]; }), 'format_error', ['token_embd.weight.shape', 'positive integer']);
  await rknotCase('dtype', variant((m) => { t(m, 'token_embd.weight').dtype = 'iq2_xxs'; }), 'format_error', ['token_embd.weight.dtype', 'unknown dtype "iq2_xxs"']);
  await rknotCase('bytes', variant((m) => { t(m, 'token_embd.weight').bytes += 1; }), 'format_error', ['token_embd.weight.bytes']);
  await rknotCase('checksum', variant((m) => { t(m, 'token_embd.weight').checksum = 'md5:00'; }), 'format_error', ['token_embd.weight.checksum']);
  await rknotCase('dup', variant((m) => { m.tensors.push({ ...m.tensors[0] }); }), 'format_error', ['token_embd.weight', 'duplicate']);
  await rknotCase('shape-q', variant((m) => { const q = t(m, 'blk.0.attn_q.weight'); q.shape = [64, 32]; q.bytes /= 2; }), 'config_error', ['blk.0.attn_q.weight.shape', 'expected [64, 64]']);
  await rknotCase('missing', variant((m) => { m.tensors = m.tensors.filter((x) => x.name !== 'blk.0.ffn_down.weight'); }), 'config_error', ['blk.0.ffn_down.weight', 'missing']);
  await rknotCase('tied', variant((m) => { m.config.tie_embeddings = true; }), 'config_error', ['output.weight', 'tie_embeddings']);
  await rknotCase('heads', variant((m) => { m.config.n_kv_heads = 3; }), 'config_error', ['config.n_kv_heads']);
  await rknotCase('arch', variant((m) => { m.config.arch = 'gpt-j'; }), 'unsupported', ['config.arch', 'gpt-j']);
  await rknotCase('cfgtype', variant((m) => { m.config.dim = '64'; }), 'format_error', ['config.dim']);
  await rknotCase('rope', variant((m) => { m.config.rope_type = 'yarn'; }), 'format_error', ['config.rope_type']);
  await rknotCase('eps', variant((m) => { m.config.norm_eps = null; }), 'format_error', ['config.norm_eps']);
  await rknotCase('tok', variant((m) => { m.tokenizer.scores.pop(); }), 'format_error', ['tokenizer.scores']);
  await rknotCase('vocab', variant((m) => { m.tokenizer.tokens.push('x'); m.tokenizer.scores.push(0); m.tokenizer.token_type.push(1); }), 'config_error', ['tokenizer.tokens', 'vocab_size']);
  await rknotCase('normdtype', variant((m) => { const n = t(m, 'output_norm.weight'); n.dtype = 'f16'; n.bytes = 128; }), 'config_error', ['output_norm.weight.dtype', 'f32']);
  await rknotCase('kv', variant((m) => { m.kv_cache = { dtype: 'q6_K' }; }), 'format_error', ['kv_cache.dtype']);
  // unknown optional keys are accepted and preserved
  const ok = path.join(tmp, 'extra-keys.rknot');
  fs.writeFileSync(ok, variant((m) => { m.future_section = { a: 1 }; m.saturation = { layers: [] }; m.quality = [{ ppl: 1 }]; }));
  assert.deepEqual((await openRknot(ok)).meta.future_section, { a: 1 });
  // validate directly (without a header): file size unknown
  assert.equal(validateRknotMetadata(structuredClone(meta), undefined, 'x.rknot').config.dim, 64);
});

test('.rknot tensor data: checksum mismatch and NaN/Inf block scales are caught', async () => {
  const { meta, data } = await baseParts();
  const q = meta.tensors.find((x) => x.name === 'blk.0.attn_v.weight');
  const flipped = Buffer.from(data); flipped[q.offset + 5] ^= 1;
  const f1 = path.join(tmp, 'bad-crc.rknot');
  fs.writeFileSync(f1, rawRknot(meta, flipped));
  await assertAetherError(() => readRknotTensor(f1, 'blk.0.attn_v.weight'), 'checksum_error', [f1, "'blk.0.attn_v.weight'", 'checksum mismatch']);
  await assertAetherError(() => verifyRknotFile(f1), 'checksum_error', [f1, "'blk.0.attn_v.weight'"]);
  const okFile = path.join(tmp, 'ok-verify.rknot');
  fs.writeFileSync(okFile, rawRknot(meta, data));
  assert.equal((await verifyRknotFile(okFile)).tensors, meta.tensors.length);
  // a NaN scale (f16 0x7e00) in block 3 with a matching checksum: the scale check catches it
  const nan = Buffer.from(data); nan.writeUInt16LE(0x7e00, q.offset + 3 * 34);
  const m2 = structuredClone(meta);
  m2.tensors.find((x) => x.name === q.name).checksum = formatChecksum(crc32(nan.subarray(q.offset, q.offset + q.bytes)));
  const f2 = path.join(tmp, 'bad-nan.rknot');
  fs.writeFileSync(f2, rawRknot(m2, nan));
  await assertAetherError(() => readRknotTensor(f2, q.name), 'format_error', [f2, "'blk.0.attn_v.weight'", 'block 3', 'NaN or Inf scale']);
  const inf = Buffer.from(data); inf.writeUInt16LE(0xfc00, q.offset);
  fs.writeFileSync(f2, rawRknot(meta, inf));
  await assertAetherError(() => readRknotTensor(f2, q.name, { verify: true }), 'checksum_error', [q.name]);
});

// ---------------------------------------------------------------------------------------------
// converter round trips on the real model

const convCache = new Map();
async function convert(input, quant) {
  const key = `${input}|${quant}`;
  if (!convCache.has(key)) {
    const out = path.join(tmp, `${path.basename(input)}-${quant}.rknot`);
    convCache.set(key, { out, summary: await convertModel(input, out, { quant }) });
  }
  return convCache.get(key);
}

for (const kind of ['f32', 'f16', 'q8_0']) {
  test(`convert ${kind} GGUF (keep): every tensor equals the GGUF's bytes; config from the GGUF`, async () => {
    const before = sha256(M[kind]);
    const { out, summary } = await convert(M[kind], 'keep');
    assert.equal(sha256(M[kind]), before, 'the input changed');
    const g = await readGGUF(M[kind]);
    const o = await openRknot(out);
    assert.equal(o.meta.tensors.length, g.tensors.length);
    const c = o.meta.config;
    assert.deepEqual(
      [c.arch, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size, c.n_ctx, c.norm_eps, c.rope_theta, c.rope_dim, c.rope_type, c.tie_embeddings, c.qkv_bias, c.fused_qkv, c.bos_token_id, c.eos_token_id],
      ['llama', 288, 6, 6, 2, 48, 768, 4096, 256, 1e-5, 10000, 48, 'norm', false, false, false, 1, 2]);
    for (const t of g.tensors) {
      const r = await readRknotTensor(out, t.name);
      assert.equal(r.info.dtype, t.dtype, t.name);
      assert.deepEqual(r.info.shape, t.dims, t.name);
      assert.ok(eqBytes(r.data, await readGGUFTensor(g, t.name)), `${t.name}: bytes differ`);
    }
    assert.equal(o.meta.tokenizer.tokens.length, 4096);
    assert.equal(o.meta.source.files[0].sha256, before);
    assert.equal(summary.quant, 'keep');
  });
}

test('convert f32 GGUF --quant q8_0 == the q8_0 GGUF (ggml reference quantiser); --quant f16 == the f16 GGUF', async () => {
  for (const [quant, ref] of [['q8_0', M.q8_0], ['f16', M.f16]]) {
    const { out } = await convert(M.f32, quant);
    const g = await readGGUF(ref);
    for (const t of g.tensors) {
      const r = await readRknotTensor(out, t.name);
      assert.equal(r.info.dtype, t.dtype, `${quant} ${t.name}`);
      assert.ok(eqBytes(r.data, await readGGUFTensor(g, t.name)), `${quant} ${t.name}: bytes differ from ${path.basename(ref)}`);
    }
  }
});

test('convert f32 GGUF --quant q4_0: 2-D weights q4_0 (ggml reference), norms f32, error bounded', async () => {
  const { out } = await convert(M.f32, 'q4_0');
  const g = await readGGUF(M.f32);
  for (const t of g.tensors) {
    const r = await readRknotTensor(out, t.name);
    const x = decodeToF32('f32', await readGGUFTensor(g, t.name), t.bytes / 4);
    if (t.dims.length === 1) { assert.equal(r.info.dtype, 'f32'); continue; }
    assert.equal(r.info.dtype, 'q4_0', t.name);
    assert.ok(eqBytes(r.data, quantizeQ4_0(x)), t.name);
    const y = decodeToF32('q4_0', r.data, x.length);
    for (let b = 0; b < x.length / 32; b++) {
      let amax = 0; for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]));
      for (let j = 0; j < 32; j++) assert.ok(Math.abs(y[b * 32 + j] - x[b * 32 + j]) <= amax / 8 * 1.01 + 1e-7, `${t.name} block ${b}`);
    }
  }
});

/** HF q/k rows are permuted for rotate-half RoPE: HF row h*hd + p*hd/2 + i = GGUF row h*hd + 2i + p. */
function unpermuteRows(hf, nHeads, hd, rowBytes) {
  const out = new Uint8Array(hf.length);
  for (let h = 0; h < nHeads; h++) for (let i = 0; i < hd / 2; i++) for (let p = 0; p < 2; p++) {
    const src = (h * hd + p * (hd / 2) + i) * rowBytes, dst = (h * hd + 2 * i + p) * rowBytes;
    out.set(hf.subarray(src, src + rowBytes), dst);
  }
  return out;
}

test('convert hf/ folder (keep): f16 tensors equal the f16 GGUF; q/k are HF-permuted and rope_type is neox', async () => {
  const before = sha256(path.join(M.hf, 'model.safetensors'));
  const { out } = await convert(M.hf, 'keep');
  assert.equal(sha256(path.join(M.hf, 'model.safetensors')), before);
  const o = await openRknot(out);
  assert.equal(o.meta.config.rope_type, 'neox');
  assert.equal((await openRknot((await convert(M.f16, 'keep')).out)).meta.config.rope_type, 'norm');
  const g = await readGGUF(M.f16);
  for (const t of g.tensors) {
    const r = await readRknotTensor(out, t.name);
    const want = await readGGUFTensor(g, t.name);
    assert.deepEqual(r.info.shape, t.dims, t.name);
    if (t.dims.length === 1) {
      // HF stores norms as f16; the rknot holds them as f32 (exact upcast) = the GGUF's f32 rounded to f16
      assert.equal(r.info.dtype, 'f32');
      const x = decodeToF32('f32', want, t.bytes / 4);
      assert.ok(eqBytes(encodeF16(decodeToF32('f32', r.data, t.bytes / 4)), encodeF16(x)), t.name);
    } else if (/attn_[qk]\.weight$/.test(t.name)) {
      assert.ok(!eqBytes(r.data, want), `${t.name} should be permuted`);
      const heads = t.name.includes('attn_q') ? 6 : 2;
      assert.ok(eqBytes(unpermuteRows(r.data, heads, 48, 288 * 2), want), `${t.name}: not the HF permutation of the GGUF tensor`);
    } else {
      assert.ok(eqBytes(r.data, want), `${t.name}: bytes differ`);
    }
  }
  // the tokenizer imported from the HF folder matches the GGUF's
  const gt = (await openRknot((await convert(M.f16, 'keep')).out)).meta.tokenizer;
  assert.deepEqual(o.meta.tokenizer.tokens, gt.tokens);
  assert.deepEqual(o.meta.tokenizer.token_type, gt.token_type);
  assert.equal(o.meta.tokenizer.bos_token_id, 1);
});

test('convert hf/ --quant q8_0 and q4_0 from f16 safetensors', async () => {
  for (const quant of ['q8_0', 'q4_0']) {
    const { out, summary } = await convert(M.hf, quant);
    const o = await openRknot(out);
    assert.ok(o.meta.tensors.every((t) => (t.shape.length === 1 ? t.dtype === 'f32' : t.dtype === quant)));
    assert.equal(summary.input_format, 'safetensors');
    const r = await readRknotTensor(out, 'blk.2.ffn_down.weight');
    assert.equal(r.info.dtype, quant);
  }
});

test('convert: refuses OUT == IN, never modifies the input, leaves no OUT.tmp; an aborted convert leaves nothing', async () => {
  const copy = path.join(tmp, 'copy.gguf');
  fs.copyFileSync(M.q8_0, copy);
  const before = sha256(copy);
  await assertAetherError(() => convertModel(copy, copy, { quant: 'keep' }), 'invalid_argument', ['refusing to overwrite the input']);
  await assertAetherError(() => convertModel(copy, path.join(tmp, '.', 'copy.gguf'), { quant: 'q4_0' }), 'invalid_argument', ['input']);
  const link = path.join(tmp, 'link.gguf');
  fs.linkSync(copy, link);
  await assertAetherError(() => convertModel(copy, link, { quant: 'keep' }), 'invalid_argument', ['input']);
  await assertAetherError(() => convertModel(M.hf, path.join(M.hf, 'model.safetensors'), {}), 'invalid_argument', ['input']);
  assert.equal(sha256(copy), before);
  const out = path.join(tmp, 'aborted.rknot');
  const ac = new AbortController();
  await assertAetherError(() => convertModel(copy, out, { quant: 'q4_0', signal: ac.signal, chunkBytes: 1 << 16, onProgress: (e) => { if (e.phase === 'convert' && e.done > 1e5) ac.abort(); } }), 'aborted', [out]);
  assert.ok(!fs.existsSync(out) && !fs.existsSync(out + '.tmp'));
  assert.equal(sha256(copy), before);
});

test('convert: unsupported or inconsistent inputs are refused clearly', async () => {
  const g = (name, spec) => { const f = path.join(tmp, name + '.gguf'); fs.writeFileSync(f, buildGGUF(spec)); return f; };
  await assertAetherError(() => planConversion(g('arch', { kv: [['general.architecture', T.string, 'gptneox']] })), 'unsupported', ['general.architecture', 'gptneox']);
  await assertAetherError(() => planConversion(g('noembd', { kv: [['general.architecture', T.string, 'llama']] })), 'config_error', ['token_embd.weight']);
  await assertAetherError(() => planConversion(M.f32, 'q3_K'), 'invalid_argument', ['q3_K']);
  await assertAetherError(() => planConversion(path.join(tmp, 'nope')), 'load_error', ['nope']);
});

test('CLI: aether convert --json and aether inspect --json (rknot and GGUF); errors as JSON with exit code 1', async () => {
  const { spawnSync } = await import('node:child_process');
  const cli = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../dist/cli/aether.js');
  const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
  const out = path.join(tmp, 'cli.rknot');
  const c = run('convert', M.q8_0, '-o', out, '--quant', 'q4_0', '--json');
  assert.equal(c.status, 0, c.stderr);
  const summary = JSON.parse(c.stdout);
  assert.equal(summary.quant, 'q4_0');
  assert.equal(summary.n_tensors, 57);
  assert.ok(summary.tensors.some((t) => t.name === 'blk.0.ffn_up.weight' && t.dtype === 'q4_0' && t.src_dtype === 'q8_0'));
  const i = run('inspect', out, '--json', '--verify');
  assert.equal(i.status, 0, i.stderr);
  const info = JSON.parse(i.stdout);
  assert.equal(info.kind, 'rknot');
  assert.equal(info.tensors.length, 57);
  assert.equal(info.tokenizer.n_tokens, 4096);
  assert.ok(!('tokens' in info.tokenizer));
  assert.match(info.verified, /all 57 checksums/);
  const g = run('inspect', M.f32, '--json');
  assert.equal(g.status, 0, g.stderr);
  const gi = JSON.parse(g.stdout);
  assert.equal(gi.kind, 'gguf');
  assert.equal(gi.metadata['tokenizer.ggml.tokens'].array_length, 4096);
  const text = run('inspect', out);
  assert.equal(text.status, 0);
  assert.match(text.stdout, /57 tensors:\nname\s+dtype\s+shape\s+offset\s+bytes\s+checksum\ntoken_embd.weight\s+q4_0\s+\[288, 4096\]\s+0\s/);
  const bad = run('convert', M.q8_0, '-o', M.q8_0, '--json');
  assert.equal(bad.status, 1);
  assert.equal(JSON.parse(bad.stdout).error.code, 'invalid_argument');
  const q = run('convert', M.q8_0, '-o', out, '--quant', 'q2_K');
  assert.equal(q.status, 1);
  assert.match(q.stderr, /--quant q2_K: expected one of keep, f32, f16, bf16, q8_0, q5_0, q4_0/);
});
