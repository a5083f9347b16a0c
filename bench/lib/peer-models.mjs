// Synthetic llama-architecture GGUFs for bench/peers.mjs: the same file goes to every runtime. Random weights with
// a standard deviation of about 0.02 (f32: uniform floats; q8_0 / q4_0: random quant bytes under one fixed block
// scale), norms 1, every 2-D tensor (token_embd and output too) in the file's dtype; a SentencePiece-style
// vocabulary (<unk>, <s>, </s>, the 256 byte tokens, then words) so llama.cpp's tokenizer set-up accepts it.
// The benchmark feeds token ids, never text. Files are written to /work/gen/peers (or --out) once and reused.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

export const SHAPES = {
  // the s15m-like shape of docs/PERFORMANCE.md (stories15M: dim 288, 6 layers, 6 heads, hidden 768, vocab 32000)
  s15m: { dim: 288, layers: 6, heads: 6, kvHeads: 6, ffn: 768, vocab: 32000, ctx: 1024 },
  // (The Phi-3 shape of bench/peers.mjs is bench/gen-gguf.mjs's phi3-mini-4k, the real phi3 architecture. The
  // llama-architecture copy that was here failed in llama.cpp with `_Map_base::at`: llama_vocab::load sets token
  // attributes by general.name, and a name containing "phi3" / "phi-3" makes it look up "</s>", "<unk>", "<s>" and
  // "<|endoftext|>" with token_to_id.at(), which throws when the vocabulary lacks one of them.)
};
const GGML = { f32: 0, q4_0: 2, q8_0: 8 };
const FTYPE = { f32: 0, q4_0: 2, q8_0: 7 };
const BLOCK = { f32: [1, 4], q4_0: [32, 18], q8_0: [32, 34] };
const KV_T = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 };

function fp16(x) {   // positive normal values only (the block scales)
  const f = new Float32Array([x]), u = new Uint32Array(f.buffer)[0];
  return (((u >>> 23) & 0xff) - 112) << 10 | ((u >>> 13) & 0x3ff);
}

class Header {
  constructor() { this.parts = []; this.len = 0; }
  push(b) { this.parts.push(b); this.len += b.length; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  str(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  kv(key, t, v) {
    this.str(key); this.u32(t);
    if (t === KV_T.string) this.str(v);
    else if (t === KV_T.u32) this.u32(v);
    else if (t === KV_T.bool) this.push(Buffer.from([v ? 1 : 0]));
    else if (t === KV_T.f32) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
    else if (t === KV_T.array) {
      const [et, arr] = v;
      this.u32(et); this.u64(arr.length);
      if (et === KV_T.string) for (const s of arr) this.str(s);
      else if (et === KV_T.f32) this.push(Buffer.from(new Float32Array(arr).buffer));
      else if (et === KV_T.i32) this.push(Buffer.from(new Int32Array(arr).buffer));
    }
  }
}

/** Fill `buf` (a whole number of blocks of dtype) with random weights. */
function fillRandom(buf, dtype) {
  crypto.randomFillSync(buf);
  if (dtype === 'f32') {
    const u = new Uint32Array(buf.buffer, buf.byteOffset, buf.length / 4), f = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
    for (let i = 0; i < u.length; i++) f[i] = (u[i] / 4294967296 - 0.5) * 0.0693;   // uniform, std 0.02
    return;
  }
  const [, ts] = BLOCK[dtype];
  const d = fp16(dtype === 'q8_0' ? 0.02 / 73.3 : 0.02 / 4.6);
  for (let o = 0; o < buf.length; o += ts) {
    buf[o] = d & 255; buf[o + 1] = d >> 8;
    if (dtype === 'q8_0') for (let i = o + 2; i < o + ts; i++) if (buf[i] === 128) buf[i] = 129;   // no -128 (ggml never writes it)
  }
}

/** Write (or reuse) OUT/<name>.gguf for shape `shapeName` with `layers` layers in `dtype`; returns the path. */
export async function peerModel(shapeName, dtype, { layers, out = '/work/gen/peers', force = false } = {}) {
  const s = { ...SHAPES[shapeName] };
  if (!s) throw new Error(`unknown shape ${shapeName} (${Object.keys(SHAPES).join(', ')})`);
  if (!BLOCK[dtype]) throw new Error(`dtype ${dtype}: expected f32, q8_0 or q4_0`);
  if (layers) s.layers = layers;
  const name = `${shapeName}-L${s.layers}-${dtype}`;
  const file = path.join(out, `${name}.gguf`);
  if (fs.existsSync(file) && !force) return file;
  fs.mkdirSync(out, { recursive: true });
  const headDim = s.dim / s.heads, kvd = s.kvHeads * headDim;
  const tensors = [['token_embd.weight', [s.dim, s.vocab]]];
  for (let l = 0; l < s.layers; l++) {
    const p = `blk.${l}.`;
    tensors.push([p + 'attn_norm.weight', [s.dim]], [p + 'attn_q.weight', [s.dim, s.dim]], [p + 'attn_k.weight', [s.dim, kvd]],
      [p + 'attn_v.weight', [s.dim, kvd]], [p + 'attn_output.weight', [s.dim, s.dim]], [p + 'ffn_norm.weight', [s.dim]],
      [p + 'ffn_gate.weight', [s.dim, s.ffn]], [p + 'ffn_up.weight', [s.dim, s.ffn]], [p + 'ffn_down.weight', [s.ffn, s.dim]]);
  }
  tensors.push(['output_norm.weight', [s.dim]], ['output.weight', [s.dim, s.vocab]]);
  const tokens = ['<unk>', '<s>', '</s>'], scores = [0, 0, 0], types = [2, 3, 3];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`); scores.push(0); types.push(6); }
  // words SentencePiece can merge back from characters: the 26 bare letters, then "▁" + every letter string in
  // shortlex order (a, b, .., z, aa, ab, ..), so each word's prefixes are tokens too and a detokenized id sequence
  // tokenizes back to the same ids (bench/peers.mjs gives wllama, whose API takes text only, the prompt as text)
  for (let c = 0; c < 26; c++) { tokens.push(String.fromCharCode(97 + c)); scores.push(-1e6); types.push(1); }
  const word = (i) => { let w = ''; i++; while (i > 0) { i--; w = String.fromCharCode(97 + (i % 26)) + w; i = Math.floor(i / 26); } return w; };
  for (let i = 0; tokens.length < s.vocab; i++) { tokens.push(`\u2581${word(i)}`); scores.push(-i); types.push(1); }
  const h = new Header();
  h.push(Buffer.from('GGUF', 'latin1')); h.u32(3); h.u64(tensors.length);
  const kvs = [
    ['general.architecture', KV_T.string, 'llama'], ['general.name', KV_T.string, `aether-peers-${name}`],
    ['general.file_type', KV_T.u32, FTYPE[dtype]], ['general.alignment', KV_T.u32, 32],
    ['llama.context_length', KV_T.u32, s.ctx], ['llama.embedding_length', KV_T.u32, s.dim], ['llama.block_count', KV_T.u32, s.layers],
    ['llama.feed_forward_length', KV_T.u32, s.ffn], ['llama.attention.head_count', KV_T.u32, s.heads],
    ['llama.attention.head_count_kv', KV_T.u32, s.kvHeads], ['llama.rope.dimension_count', KV_T.u32, headDim],
    ['llama.rope.freq_base', KV_T.f32, 10000], ['llama.attention.layer_norm_rms_epsilon', KV_T.f32, 1e-5],
    ['llama.vocab_size', KV_T.u32, s.vocab],
    ['tokenizer.ggml.model', KV_T.string, 'llama'], ['tokenizer.ggml.tokens', KV_T.array, [KV_T.string, tokens]],
    ['tokenizer.ggml.scores', KV_T.array, [KV_T.f32, scores]], ['tokenizer.ggml.token_type', KV_T.array, [KV_T.i32, types]],
    ['tokenizer.ggml.bos_token_id', KV_T.u32, 1], ['tokenizer.ggml.eos_token_id', KV_T.u32, 2],
    ['tokenizer.ggml.unknown_token_id', KV_T.u32, 0], ['tokenizer.ggml.add_bos_token', KV_T.bool, true],
  ];
  h.u64(kvs.length);
  for (const [k, t, v] of kvs) h.kv(k, t, v);
  const infos = [];
  let off = 0;
  for (const [tname, ne] of tensors) {
    const dt = ne.length === 1 ? 'f32' : dtype;
    const n = ne.reduce((a, b) => a * b, 1), [bs, ts] = BLOCK[dt];
    const bytes = (n / bs) * ts;
    h.str(tname); h.u32(ne.length); for (const d of ne) h.u64(d); h.u32(GGML[dt]); h.u64(off);
    infos.push({ dt, bytes, norm: ne.length === 1 });
    off += Math.ceil(bytes / 32) * 32;
  }
  h.push(Buffer.alloc((32 - (h.len % 32)) % 32));
  const fd = fs.openSync(file + '.tmp', 'w');
  try {
    fs.writeSync(fd, Buffer.concat(h.parts));
    for (const t of infos) {
      if (t.norm) { const f = new Float32Array(t.bytes / 4).fill(1); fs.writeSync(fd, Buffer.from(f.buffer)); }
      else {
        const ts = BLOCK[t.dt][1], chunk = Math.floor((8 << 20) / ts) * ts;
        for (let w = 0; w < t.bytes; w += chunk) {
          const buf = Buffer.alloc(Math.min(chunk, t.bytes - w));
          fillRandom(buf, t.dt);
          fs.writeSync(fd, buf);
        }
      }
      const pad = Math.ceil(t.bytes / 32) * 32 - t.bytes;
      if (pad) fs.writeSync(fd, Buffer.alloc(pad));
    }
    fs.closeSync(fd);
    fs.renameSync(file + '.tmp', file);
  } catch (e) {
    try { fs.closeSync(fd); } catch { /* closed */ }
    fs.rmSync(file + '.tmp', { force: true });
    throw e;
  }
  return file;
}
