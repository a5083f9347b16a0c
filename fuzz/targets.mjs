// Fuzz targets over the parsers of untrusted bytes (JS side). Each target: seeds() -> Uint8Array[] (real files from
// tests/fixtures and models/, and small generated ones), mutate(bytes, rng, seeds) -> Uint8Array, run(bytes) -> Promise.
// A target "passes" an input when run() resolves or throws an AetherError; anything else (TypeError, RangeError,
// a hang, a crash of the process) is a finding.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mutateBytesN, mutateJson } from './mutate.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => import(path.join(root, 'dist/src', p));

/** Scratch file for targets whose parser reads a path (tmpfs when there is one). */
function scratchFile(name) {
  const dir = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  return path.join(dir, `aether-fuzz-${process.pid}-${name}`);
}

const enc = new TextEncoder(), dec = new TextDecoder();
const u8 = (b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

/** Mutate either the raw bytes or, for JSON text, the parsed structure. */
function mutateJsonText(bytes, rng, seeds) {
  if (rng.chance(0.6)) {
    try {
      const j = JSON.parse(dec.decode(bytes));
      let v = j;
      for (let i = 0, n = 1 + rng.int(3); i < n; i++) v = mutateJson(v, rng);
      return enc.encode(JSON.stringify(v));
    } catch { /* not JSON any more: byte mutations */ }
  }
  return mutateBytesN(bytes, rng, seeds);
}

// ---------------------------------------------------------------------------------------------
// .rknot: header, JSON metadata, tensor table, streamed data checks

function rknotParts(bytes) {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < 32) return null;
  const jl = Number(b.readBigUInt64LE(16)), ds = Number(b.readBigUInt64LE(24));
  const off = Math.ceil((32 + jl) / 64) * 64;
  if (32 + jl > b.length) return null;
  return { head: b.subarray(0, 32), json: b.subarray(32, 32 + jl), data: b.subarray(off, off + ds) };
}
function rknotAssemble(head, jsonBytes, data) {
  const h = Buffer.from(head);
  h.writeBigUInt64LE(BigInt(jsonBytes.length), 16);
  h.writeBigUInt64LE(BigInt(data.length), 24);
  const off = Math.ceil((32 + jsonBytes.length) / 64) * 64;
  return u8(Buffer.concat([h, Buffer.from(jsonBytes), Buffer.alloc(off - 32 - jsonBytes.length), Buffer.from(data)]));
}

/**
 * t.load (loadRknotStreamDetailed) over `bytes` as a stream split at random points (the loader must not care), with
 * the size given half of the time, into a plain buffer; plan() as the engine's: a data section beyond the wasm32
 * memory is refused with an AetherError (Heap.alloc).
 */
async function streamedLoad(t, bytes, rng, name) {
  const sizes = [1 + rng.int(64), 1 + rng.int(4096), 1 + rng.int(1 << 16)];
  let p = 0, i = 0;
  const stream = new ReadableStream({ pull(c) { if (p >= bytes.length) { c.close(); return; } const n = sizes[i++ % 3]; c.enqueue(bytes.slice(p, p + n)); p += n; } });
  const plan = (m, h) => {
    if (h.dataSize > 64 << 20) throw new t.AetherError('load_error', `out of wasm memory: need ${h.dataSize} bytes`);
    return { dest: new Uint8Array(h.dataSize + 64).subarray(0, h.dataSize) };
  };
  await t.load(stream, { plan, source: { name, size: rng.chance(0.5) ? bytes.length : undefined } });
}

const rknot = {
  name: 'rknot',
  about: '.rknot header + JSON metadata + tensor table + streamed CRC / scale / value checks (loadRknotStream)',
  async seeds() {
    const out = [];
    const { writeRknot } = await dist('formats/rknot.js');
    const { quantizeQ8_0 } = await dist('formats/quantize.js');
    for (const quant of ['q8_0', 'f32']) {
      const f = scratchFile(`seed-${quant}.rknot`);
      const cfg = { arch: 'llama', dim: 32, n_layers: 1, n_heads: 2, n_kv_heads: 1, head_dim: 16, hidden_dim: 64, vocab_size: 16, n_ctx: 32,
        norm_eps: 1e-5, rope_theta: 10000, rope_dim: 16, rope_type: 'norm', tie_embeddings: false, qkv_bias: false, fused_qkv: false, bos_token_id: 1, eos_token_id: 2 };
      const tokens = Array.from({ length: 16 }, (_, i) => (i === 0 ? '<unk>' : i === 1 ? '<s>' : i === 2 ? '</s>' : `t${i}`));
      const w = (name, shape) => ({ name, dtype: quant, shape }), n = (name, len) => ({ name, dtype: 'f32', shape: [len] });
      const tensors = [w('token_embd.weight', [32, 16]), n('blk.0.attn_norm.weight', 32), w('blk.0.attn_q.weight', [32, 32]), w('blk.0.attn_k.weight', [32, 16]),
        w('blk.0.attn_v.weight', [32, 16]), w('blk.0.attn_output.weight', [32, 32]), n('blk.0.ffn_norm.weight', 32), w('blk.0.ffn_gate.weight', [32, 64]),
        w('blk.0.ffn_up.weight', [32, 64]), w('blk.0.ffn_down.weight', [64, 32]), n('output_norm.weight', 32), w('output.weight', [32, 16])];
      const meta = { format: { required_features: [], optional_features: [] }, config: cfg,
        tokenizer: { model: 'llama', tokens, scores: tokens.map((_, i) => -i), token_type: tokens.map((_, i) => (i < 3 ? 3 : 1)), bos_token_id: 1, eos_token_id: 2 }, tensors };
      await writeRknot(f, meta, (spec, i) => {
        const x = new Float32Array(spec.shape.reduce((a, b) => a * b, 1)).map((_, j) => Math.sin(j * 0.37 + i) * 0.1);
        return spec.dtype === 'q8_0' ? quantizeQ8_0(x) : u8(x);
      });
      out.push(u8(fs.readFileSync(f)));
      fs.rmSync(f, { force: true });
    }
    return out;
  },
  mutate(bytes, rng, seeds) {
    const p = rknotParts(bytes);
    if (p && rng.chance(0.5)) {
      // structure-aware: mutate the metadata JSON and reassemble a consistent header
      const j = mutateJsonText(p.json, rng, []);
      return rknotAssemble(p.head, j, rng.chance(0.8) ? p.data : mutateBytesN(u8(p.data), rng, []));
    }
    return mutateBytesN(bytes, rng, seeds);
  },
  async prepare() { this.load = (await dist('loader/stream.js')).loadRknotStreamDetailed; this.AetherError = (await dist('errors.js')).AetherError; },
  run(bytes, rng) { return streamedLoad(this, bytes, rng, 'fuzz.rknot'); },
};

// ---------------------------------------------------------------------------------------------
// GGUF: header, metadata, tensor infos, then the converter's planning (config keys, tokenizer import)

const gguf = {
  name: 'gguf',
  about: 'GGUF header / metadata / tensor infos (readGGUF) and the converter plan over them (planConversion: config bounds, tokenizer import)',
  async seeds() {
    const out = [];
    // the real model's header (metadata with its 4096-token tokenizer, tensor infos) without the tensor data
    const real = fs.readFileSync(path.join(root, 'tests/fixtures/tiny-llama-a/tiny-llama-a-f32.gguf'));
    const { readGGUF } = await dist('formats/gguf.js');
    const g = await readGGUF(path.join(root, 'tests/fixtures/tiny-llama-a/tiny-llama-a-f32.gguf'));
    out.push(u8(real.subarray(0, g.dataOffset)));
    // small complete files of several architectures
    const { generateGGUF } = await import(path.join(root, 'tests/helpers/gen-gguf.mjs'));
    for (const [n, dt] of [['llama3', 'q8_0'], ['qwen2', 'q4_0'], ['phi3-128k', 'f16'], ['gemma2', 'q8_0']]) {
      const r = generateGGUF(n, dt);
      out.push(u8(fs.readFileSync(r.file)));
      fs.rmSync(path.dirname(r.file), { recursive: true, force: true });
    }
    return out;
  },
  mutate(bytes, rng, seeds) { return mutateBytesN(bytes, rng, seeds, 6); },
  async prepare() {
    // in memory: the reader sees the bytes through openForRead (setMemoryFile), no disk I/O per input
    this.plan = (await dist('formats/convert.js')).planGGUF;
    this.setMemoryFile = (await dist('formats/fileio.js')).setMemoryFile;
    this.file = '/aether-fuzz/in.gguf';
  },
  async run(bytes) {
    this.setMemoryFile(this.file, bytes);
    await this.plan(this.file, 'keep');
  },
  cleanup() { this.setMemoryFile(this.file, undefined); },
};

// GGUF loaded directly (loader/gguf.ts): the same files streamed in pieces of random sizes, with and without a size:
// the header read from the stream's buffered prefix, the plan, the placement of every tensor's bytes and their checks
const ggufLoad = {
  name: 'gguf-load',
  about: 'GGUF streamed into memory (loadRknotStreamDetailed -> loader/gguf.ts): header from the stream prefix, plan, placement, scale / value checks',
  seeds() { return gguf.seeds(); },
  mutate(bytes, rng, seeds) { return mutateBytesN(bytes, rng, seeds, 6); },
  async prepare() { this.load = (await dist('loader/stream.js')).loadRknotStreamDetailed; this.AetherError = (await dist('errors.js')).AetherError; },
  run(bytes, rng) { return streamedLoad(this, bytes, rng, 'fuzz.gguf'); },
};

// ---------------------------------------------------------------------------------------------
// safetensors header

function safetensorsBytes(tensors, metadata = { format: 'pt' }, pad = true) {
  const header = {};
  const parts = [];
  let off = 0;
  for (const [name, dtype, shape] of tensors) {
    const n = shape.reduce((a, b) => a * b, 1) * (dtype === 'F32' ? 4 : 2);
    header[name] = { dtype, shape, data_offsets: [off, off + n] };
    parts.push(Buffer.alloc(n, 0x3c));
    off += n;
  }
  if (metadata) header.__metadata__ = metadata;
  let h = Buffer.from(JSON.stringify(header));
  if (pad) h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(h.length));
  return u8(Buffer.concat([len, h, ...parts]));
}

const safetensors = {
  name: 'safetensors',
  about: 'safetensors header length, JSON header, dtypes, shapes, offsets, coverage (readSafetensors)',
  async seeds() {
    const out = [
      safetensorsBytes([['model.embed_tokens.weight', 'F16', [16, 8]], ['model.layers.0.input_layernorm.weight', 'F32', [8]], ['lm_head.weight', 'BF16', [16, 8]]]),
      safetensorsBytes([['a', 'F32', [2, 3]], ['b', 'F16', [5]]], null, false),
      safetensorsBytes([['x', 'BF16', [1, 1, 4]]], { format: 'pt', note: 'x'.repeat(40) }),
    ];
    // the head of the real (derived) checkpoint: its JSON header with every tensor of tiny-llama-a
    try {
      const { tiny } = await import(path.join(root, 'bench/lib/tiny-model.mjs'));
      const b = fs.readFileSync(tiny('hf/model.safetensors'));
      const hl = Number(b.readBigUInt64LE(0));
      out.push(u8(b.subarray(0, 8 + hl)));
    } catch { /* derived file unavailable: the generated seeds suffice */ }
    return out;
  },
  mutate(bytes, rng, seeds) {
    const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (b.length >= 8 && rng.chance(0.5)) {
      const hl = Number(b.readBigUInt64LE(0));
      if (8 + hl <= b.length) {
        const j = mutateJsonText(u8(b.subarray(8, 8 + hl)), rng, []);
        const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(Math.max(0, j.length + (rng.chance(0.2) ? rng.int(3) - 1 : 0))));
        return u8(Buffer.concat([len, Buffer.from(j), b.subarray(8 + hl)]));
      }
    }
    return mutateBytesN(bytes, rng, seeds);
  },
  async prepare() {
    this.read = (await dist('formats/safetensors.js')).readSafetensors;
    this.setMemoryFile = (await dist('formats/fileio.js')).setMemoryFile;
    this.file = '/aether-fuzz/in.safetensors';
  },
  async run(bytes) {
    this.setMemoryFile(this.file, bytes);
    await this.read(this.file);
  },
  cleanup() { this.setMemoryFile(this.file, undefined); },
};

// ---------------------------------------------------------------------------------------------
// tokenizers: SentencePiece protobuf, tokenizer.json; each parsed, built and run on text

const SAMPLE = 'Hello wörld! 12345 <s> </s> \u2581x\n\t  日本語 🙂 <0x41>';

async function exercise(tokenizerData) {
  const { createTokenizer } = await dist('tokenizer/index.js');
  const t = createTokenizer(tokenizerData);
  // addBos only when there is a BOS (asking for one a tokenizer does not have is refused: a finding-free early exit
  // that would keep the fuzzer away from encode / decode)
  const ids = t.encode(SAMPLE, { addBos: t.bosId !== undefined, parseSpecial: true });
  t.decode(ids);
  t.decode([0, 1, 2, t.vocabSize - 1]);
  const d = t.createDecoder();
  for (const id of ids.slice(0, 16)) d.push(id);
}

/** A SentencePiece ModelProto with only the pieces (field 1) `keep(index)` selects; every other field as is. */
function spmKeepPieces(b, keep) {
  const varint = (p) => { let v = 0, sh = 0, c; do { c = b[p++]; v += (c & 0x7f) * 2 ** sh; sh += 7; } while (c & 0x80); return [v, p]; };
  const parts = [];
  let p = 0, piece = 0;
  while (p < b.length) {
    const s = p;
    let key, len;
    [key, p] = varint(p);
    const wt = key & 7;
    if (wt === 2) { [len, p] = varint(p); p += len; } else if (wt === 0) [, p] = varint(p); else if (wt === 5) p += 4; else if (wt === 1) p += 8;
    else throw new Error(`tokenizer.model: wire type ${wt}`);
    if (Math.floor(key / 8) !== 1 || keep(piece++)) parts.push(b.subarray(s, p));
  }
  return Buffer.concat(parts);
}

const spm = {
  name: 'spm',
  about: 'SentencePiece tokenizer.model protobuf (tokenizerFromSentencePiece), then encode / decode',
  async seeds() {
    // the real tokenizer.model (4096 pieces), and copies with fewer pieces (the first 300 / 600: specials, the 256
    // byte pieces, the first merges), which parse ~10x faster and reach the same code
    const real = fs.readFileSync(path.join(root, 'tests/fixtures/tiny-llama-a/tokenizer.model'));
    return [u8(real), u8(spmKeepPieces(real, (i) => i < 300)), u8(spmKeepPieces(real, (i) => i < 600 && (i < 259 || i % 3 === 0)))];
  },
  mutate(bytes, rng, seeds) { return mutateBytesN(bytes, rng, seeds, 6); },
  async prepare() { this.parse = (await dist('tokenizer/import.js')).tokenizerFromSentencePiece; },
  async run(bytes) { await exercise(this.parse(bytes, 'fuzz/tokenizer.model')); },
};

function tokenizerJsonSeeds() {
  // byte-level BPE (GPT-2 / Llama 3 / Qwen style)
  const bytesToUnicode = () => {
    const bs = [];
    for (let i = 33; i <= 126; i++) bs.push(i);
    for (let i = 161; i <= 172; i++) bs.push(i);
    for (let i = 174; i <= 255; i++) bs.push(i);
    const cs = bs.slice();
    let n = 0;
    for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
    return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
  };
  const vocab = {};
  for (const [, ch] of bytesToUnicode()) vocab[ch] = Object.keys(vocab).length;
  const merges = ['Ġ t', 'h e', 'Ġt he', 'i n', 'Ġ a', 'e r', 'o n', 'Ġ w', 'o r', 'l l'];
  for (const m of merges) vocab[m.replace(' ', '')] = Object.keys(vocab).length;
  const bl = {
    version: '1.0', added_tokens: [{ id: Object.keys(vocab).length, content: '<|endoftext|>', special: true }],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, behavior: 'Isolated' }, { type: 'ByteLevel', add_prefix_space: false }] },
    decoder: { type: 'ByteLevel' },
    model: { type: 'BPE', vocab, merges },
  };
  // SentencePiece-style BPE (Llama 2 / Gemma style tokenizer.json)
  const sv = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) sv[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = Object.keys(sv).length;
  for (const p of ['▁', 'e', 't', 'h', '▁t', 'he', '▁the', 'l', 'o', 'll', 'lo', '▁w', 'r', 'd']) sv[p] = Object.keys(sv).length;
  const sp = {
    version: '1.0', added_tokens: [{ id: 0, content: '<unk>', special: true }, { id: 1, content: '<s>', special: true }, { id: 2, content: '</s>', special: true }],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: { type: 'BPE', unk_token: '<unk>', byte_fallback: true, vocab: sv, merges: ['▁ t', 'h e', '▁t he', 'l l', 'l o', '▁ w'] },
  };
  return [bl, sp].map((j) => enc.encode(JSON.stringify(j)));
}

const tokenizerJson = {
  name: 'tokenizer-json',
  about: 'Hugging Face tokenizer.json (+ tokenizer_config.json fields) import (tokenizerFromHFJson), then encode / decode',
  async seeds() {
    const out = tokenizerJsonSeeds();
    // the tokenizer.json the HF test generator writes (byte-level BPE with specials)
    const { generateHF } = await import(path.join(root, 'tests/helpers/gen-gguf.mjs'));
    const h = generateHF('qwen2');
    out.push(u8(fs.readFileSync(path.join(h.dir, 'tokenizer.json'))));
    fs.rmSync(h.dir, { recursive: true, force: true });
    return out;
  },
  mutate(bytes, rng, seeds) { return mutateJsonText(bytes, rng, seeds); },
  async prepare() { this.parse = (await dist('tokenizer/import.js')).tokenizerFromHFJson; },
  async run(bytes, rng, plain = false) {
    const config = !plain && rng.chance(0.3) ? { add_bos_token: rng.chance(0.5), add_eos_token: rng.pick([true, false, '0', 1, null]), bos_token: '<s>', eos_token: { content: '</s>' },
      // an added token id: mostly near the vocabulary, sometimes far (a far id pads the token arrays up to the
      // 65,536-entry bound: legal and bounded, but ~100x slower to build)
      added_tokens_decoder: rng.chance(0.5) ? { [String(rng.chance(0.9) ? rng.int(1000) : rng.int(100000))]: { content: '<x>', special: true } } : undefined } : undefined;
    await exercise(this.parse(dec.decode(bytes), { config, file: 'fuzz/tokenizer.json' }));
  },
};

export const JS_TARGETS = { gguf, 'gguf-load': ggufLoad, rknot, safetensors, spm, 'tokenizer-json': tokenizerJson };
