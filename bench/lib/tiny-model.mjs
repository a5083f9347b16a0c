// Files of tiny-llama-a that the repository does not ship, derived at test time from the shipped
// tests/fixtures/tiny-llama-a/tiny-llama-a-f32.gguf with the project's own quantisers
// (js/src/formats/quantize.ts), then checked byte for byte (sha256) against the originals published in
// the model's folder (tests/fixtures/tiny-llama-a/derived.json). The checksum makes the derivation an
// assertion, not a copy: if our f16 rounding or q8_0 quantiser drifted from ggml's, every test using
// these files fails here. `tiny(name)` gives the path of a shipped or derived file (tests and benches).
//
// - tiny-llama-a-q8_0.gguf: 2-D weights Q8_0 (ggml quantize_row_q8_0_ref), norms F32, file_type 7
// - tiny-llama-a-f16.gguf : 2-D weights F16 (round to nearest even), norms F32, file_type 1
// - hf/model.safetensors  : every tensor F16, HF names, [out, in] shapes, q_proj / k_proj rows permuted
//   for rotate-half RoPE the way transformers' convert_llama_weights_to_hf.py does
//   (HF row h*hd + p*hd/2 + i = GGUF row h*hd + 2i + p)
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { encodeF16, quantizeQ8_0 } from '../../dist/src/formats/quantize.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The shipped files (data) and where derived ones are written (git-ignored). */
export const tinyDir = path.join(repoRoot, 'tests/fixtures/tiny-llama-a');
export const derivedDir = path.join(repoRoot, 'build/test-fixtures/tiny-llama-a');

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

/** Byte-level walk of a GGUF v3 file: metadata entries (with byte ranges) and tensor infos. */
function walkGGUF(buf) {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let p = 0;
  const u32 = () => { const v = dv.getUint32(p, true); p += 4; return v; };
  const u64 = () => { const v = Number(dv.getBigUint64(p, true)); p += 8; return v; };
  const str = () => { const n = u64(); const s = buf.toString('utf8', p, p + n); p += n; return s; };
  const SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skip = (t) => {
    if (t === 8) str();
    else if (t === 9) { const et = u32(), n = u64(); for (let i = 0; i < n; i++) skip(et); }
    else p += SIZE[t];
  };
  if (u32() !== 0x46554747) throw new Error('not a GGUF file');
  const version = u32();
  const nTensors = u64(), nKV = u64();
  const kv = new Map();
  for (let i = 0; i < nKV; i++) {
    const key = str(), type = u32(), at = p;
    skip(type);
    kv.set(key, { type, at });
  }
  const kvEnd = p;
  const tensors = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str(), nd = u32(), dims = [];
    for (let j = 0; j < nd; j++) dims.push(u64());
    tensors.push({ name, dims, type: u32(), offset: u64() });
  }
  const alignment = kv.has('general.alignment') ? dv.getUint32(kv.get('general.alignment').at, true) : 32;
  const dataOffset = Math.ceil(p / alignment) * alignment;
  return { version, kv, kvEnd, tensors, alignment, dataOffset };
}

function f32Tensor(buf, g, t) {
  const n = t.dims.reduce((a, b) => a * b, 1);
  const start = g.dataOffset + t.offset;
  return new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + start + n * 4));
}

/** Re-encode the f32 GGUF with 2-D weights as `dtype` ('q8_0' | 'f16'), same metadata and layout. */
function deriveGGUF(f32buf, dtype) {
  const g = walkGGUF(f32buf);
  const ggmlType = { f16: 1, q8_0: 8 }[dtype];
  const fileType = { f16: 1, q8_0: 7 }[dtype];
  const header = Buffer.from(f32buf.subarray(0, g.kvEnd));
  const ft = g.kv.get('general.file_type');
  if (!ft || ft.type !== 4) throw new Error('f32 GGUF: general.file_type missing or not u32');
  header.writeUInt32LE(fileType, ft.at);
  const datas = [];
  const infos = [];
  let off = 0;
  for (const t of g.tensors) {
    if (t.type !== 0) throw new Error(`f32 GGUF: tensor ${t.name} is not F32`);
    const x = f32Tensor(f32buf, g, t);
    const matrix = t.dims.length > 1;
    const data = !matrix ? new Uint8Array(x.buffer) : dtype === 'f16' ? encodeF16(x) : quantizeQ8_0(x);
    const info = Buffer.alloc(8 + Buffer.byteLength(t.name) + 4 + 8 * t.dims.length + 4 + 8);
    let p = info.writeBigUInt64LE(BigInt(Buffer.byteLength(t.name)), 0);
    p += info.write(t.name, p);
    p = info.writeUInt32LE(t.dims.length, p);
    for (const d of t.dims) p = info.writeBigUInt64LE(BigInt(d), p);
    p = info.writeUInt32LE(matrix ? ggmlType : 0, p);
    info.writeBigUInt64LE(BigInt(off), p);
    infos.push(info);
    const padded = Math.ceil(data.length / g.alignment) * g.alignment;
    datas.push(Buffer.from(data.buffer, data.byteOffset, data.length), Buffer.alloc(padded - data.length));
    off += padded;
  }
  const head = Buffer.concat([header, ...infos]);
  return Buffer.concat([head, Buffer.alloc(Math.ceil(head.length / g.alignment) * g.alignment - head.length), ...datas]);
}

/** HF-layout F16 safetensors of the f32 GGUF (names, [out, in] shapes, q/k rows permuted for rotate-half). */
function deriveSafetensors(f32buf) {
  const g = walkGGUF(f32buf);
  const get = (key) => g.kv.get(key);
  const dv = new DataView(f32buf.buffer, f32buf.byteOffset, f32buf.byteLength);
  const nHeads = dv.getUint32(get('llama.attention.head_count').at, true);
  const nKV = dv.getUint32(get('llama.attention.head_count_kv').at, true);
  const nLayers = dv.getUint32(get('llama.block_count').at, true);
  const byName = new Map(g.tensors.map((t) => [t.name, t]));
  const order = [['model.embed_tokens.weight', 'token_embd.weight']];
  const per = [['input_layernorm', 'attn_norm'], ['self_attn.q_proj', 'attn_q'], ['self_attn.k_proj', 'attn_k'],
    ['self_attn.v_proj', 'attn_v'], ['self_attn.o_proj', 'attn_output'], ['post_attention_layernorm', 'ffn_norm'],
    ['mlp.gate_proj', 'ffn_gate'], ['mlp.up_proj', 'ffn_up'], ['mlp.down_proj', 'ffn_down']];
  for (let l = 0; l < nLayers; l++) for (const [hf, gg] of per) order.push([`model.layers.${l}.${hf}.weight`, `blk.${l}.${gg}.weight`]);
  order.push(['model.norm.weight', 'output_norm.weight'], ['lm_head.weight', 'output.weight']);
  const header = {};
  const datas = [];
  let off = 0;
  for (const [hfName, ggName] of order) {
    const t = byName.get(ggName);
    if (!t) throw new Error(`f32 GGUF: tensor ${ggName} missing`);
    let data = encodeF16(f32Tensor(f32buf, g, t));
    const heads = /attn_q/.test(ggName) ? nHeads : /attn_k/.test(ggName) ? nKV : 0;
    if (heads) {
      const rowBytes = t.dims[0] * 2, hd = t.dims[1] / heads;
      const out = new Uint8Array(data.length);
      for (let h = 0; h < heads; h++) for (let i = 0; i < hd / 2; i++) for (let p = 0; p < 2; p++) {
        const src = (h * hd + 2 * i + p) * rowBytes, dst = (h * hd + p * (hd / 2) + i) * rowBytes;
        out.set(data.subarray(src, src + rowBytes), dst);
      }
      data = out;
    }
    header[hfName] = { dtype: 'F16', shape: [...t.dims].reverse(), data_offsets: [off, off + data.length] };
    datas.push(Buffer.from(data.buffer, data.byteOffset, data.length));
    off += data.length;
  }
  header.__metadata__ = { format: 'pt' };
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, Buffer.from(json), ...datas]);
}

/**
 * Path of derived file `name` ('tiny-llama-a-q8_0.gguf', 'tiny-llama-a-f16.gguf' or 'hf/model.safetensors'),
 * made once into `cacheDir` (atomically) and checked against its published sha256 on every first use.
 */
export function derive(name, fixtureDir, cacheDir) {
  const expected = JSON.parse(fs.readFileSync(path.join(fixtureDir, 'derived.json'), 'utf8')).files[name];
  if (!expected) throw new Error(`no derivation recipe for ${name}`);
  const out = path.join(cacheDir, name);
  if (fs.existsSync(out) && sha256(fs.readFileSync(out)) === expected.sha256) return out;
  const f32buf = fs.readFileSync(path.join(fixtureDir, 'tiny-llama-a-f32.gguf'));
  const bytes = name === 'hf/model.safetensors' ? deriveSafetensors(f32buf)
    : name === 'tiny-llama-a-q8_0.gguf' ? deriveGGUF(f32buf, 'q8_0')
      : deriveGGUF(f32buf, 'f16');
  const got = sha256(bytes);
  if (got !== expected.sha256) {
    throw new Error(`${name} derived from tiny-llama-a-f32.gguf has sha256 ${got}, the published file has ${expected.sha256}: ` +
      'the project\'s quantiser / f16 rounding / HF permutation no longer matches the reference');
  }
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, out);
  return out;
}

const DERIVED = new Set(['tiny-llama-a-q8_0.gguf', 'tiny-llama-a-f16.gguf', 'hf/model.safetensors']);

/** The HF folder: the shipped json files, tokenizer.model and the derived model.safetensors. */
function hfFolder() {
  const dir = path.join(derivedDir, 'hf');
  derive('hf/model.safetensors', tinyDir, derivedDir);
  for (const f of fs.readdirSync(path.join(tinyDir, 'hf'))) fs.copyFileSync(path.join(tinyDir, 'hf', f), path.join(dir, f));
  fs.copyFileSync(path.join(tinyDir, 'tokenizer.model'), path.join(dir, 'tokenizer.model'));
  return dir;
}

/**
 * Path of a file of tiny-llama-a ('tiny-llama-a-f32.gguf', 'tiny-llama-a-q8_0.gguf', 'hf', 'val.txt', ...):
 * shipped or derived; throws (the test fails, never skips) when it is neither.
 */
export function tiny(file) {
  if (file === 'hf' || file === 'hf/') return hfFolder();
  if (file.startsWith('hf/') && file !== 'hf/model.safetensors') return path.join(hfFolder(), file.slice(3));
  if (DERIVED.has(file)) return derive(file, tinyDir, derivedDir);
  const p = path.join(tinyDir, file);
  if (!fs.existsSync(p)) throw new Error(`missing ${p}: not a file of tests/fixtures/tiny-llama-a/ nor one derived from it`);
  return p;
}
