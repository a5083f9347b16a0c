// GGUF files loaded directly (loader/gguf.ts): from a path, a Blob and a ReadableStream (chunked anywhere, with and
// without a size) the engine holds the same tensor table and the same data bytes as from the file `aether convert`
// writes, and generates the same tokens; truncation, a NaN scale and an abort are clear errors; no cache copy.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from '../dist/src/index.js';
import { convertModel } from '../dist/src/formats/convert.js';
import { encodeF16 } from '../dist/src/formats/quantize.js';
import { generateGGUF } from './helpers/gen-gguf.mjs';
import { makeTmpDir, buildGGUF, GGUF_T as T, assertAetherError, tinyDir } from './helpers/formats.mjs';

const tmp = makeTmpDir('gguf-load');
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
const PROMPT = [1, 5, 9, 3, 7, 11, 2, 4];

/** What a loaded model holds: its tensor table and its data section's bytes (after the load-time repacks). */
function snapshot(m) {
  const e = m.engine;
  const tensors = m.metadata.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, offset: t.offset, bytes: t.bytes }));
  return { tensors, config: m.config, data: Buffer.from(e.heap.u8(e.dataBase, e.dataSize)) };
}
async function greedy(m, n = 6) {
  const ids = PROMPT.filter((i) => i < m.config.vocab_size);
  const out = await m.complete(ids, { maxTokens: n, greedy: true });
  m.reset();
  return out.tokens;
}
/** A ReadableStream of `bytes` in chunks of the given sizes (cycled). */
function chunked(bytes, sizes) {
  let o = 0, k = 0;
  return new ReadableStream({
    pull(c) {
      if (o >= bytes.length) { c.close(); return; }
      const n = sizes[k++ % sizes.length];
      c.enqueue(bytes.slice(o, o + n));
      o += n;
    },
  });
}

test('every GGUF variant (q8_0, f16): path, Blob and streams give the converted file\'s tensors, bytes and tokens', { timeout: 240_000 }, async () => {
  const cases = [['llama3', 'q8_0'], ['smollm2', 'f16'], ['qwen2', 'q8_0'], ['qwen3', 'q8_0'], ['phi3', 'q8_0'], ['phi3-128k', 'f16'], ['gemma', 'q8_0'], ['gemma2', 'q8_0'], ['gemma3', 'q8_0']];
  for (const [name, dtype] of cases) {
    const { file } = generateGGUF(name, dtype, 7);
    const rk = path.join(tmp, `${name}-${dtype}.rknot`);
    await convertModel(file, rk, { quant: 'keep' });
    const bytes = new Uint8Array(fs.readFileSync(file));
    const ref = await load(rk, { threads: 1 });
    const want = snapshot(ref), wantTokens = await greedy(ref);
    ref.dispose();
    const sources = [
      ['path', file],
      ['Blob', new Blob([bytes])],
      ['stream, odd chunks', chunked(bytes, [1, 3, 7, 5000, 13, 65536])],
      ['stream, 1 MiB chunks', chunked(bytes, [1 << 20])],
    ];
    for (const [kind, src] of sources) {
      const m = await load(src, { threads: 1 });
      try {
        const got = snapshot(m);
        assert.deepEqual(got.tensors, want.tensors, `${name} ${dtype} ${kind}: tensor table`);
        assert.deepEqual(got.config, want.config, `${name} ${dtype} ${kind}: config`);
        assert.ok(got.data.equals(want.data), `${name} ${dtype} ${kind}: data bytes differ`);
        assert.deepEqual(await greedy(m), wantTokens, `${name} ${dtype} ${kind}: tokens`);
        assert.equal(m.metadata.source.input_format, 'gguf');
        assert.match(m.metadata.source.converter, /^aether-gguf-load/);
      } finally { m.dispose(); }
    }
  }
});

test('the shipped model\'s GGUF loads directly (no cache copy) and reproduces the PyTorch reference tokens', async () => {
  const file = path.join(tinyDir, 'tiny-llama-a-f32.gguf');
  const cache = path.join(os.tmpdir(), 'aether-cache');
  const before = fs.existsSync(cache) ? new Set(fs.readdirSync(cache)) : new Set();
  const ref = JSON.parse(fs.readFileSync(path.join(tinyDir, 'reference.json'), 'utf8')).prompts[2];
  const m = await load(file, { threads: 2 });
  try {
    const out = await m.complete(ref.prompt_ids ?? ref.prompt, { maxTokens: 12, greedy: true });
    assert.deepEqual(out.tokens, ref.generated_ids.slice(0, 12));
  } finally { m.dispose(); }
  const after = fs.existsSync(cache) ? fs.readdirSync(cache).filter((f) => !before.has(f) && f.startsWith('tiny-llama-a-f32')) : [];
  assert.deepEqual(after, [], 'no converted copy written');
});

/** A 1-layer llama GGUF with f16 weights and f16 norms (1-D tensors the loader converts to f32), data as given. */
function f16NormGGUF() {
  const D = 64, H = 2, KV = 1, HD = 32, HID = 128, V = 32;
  let s = 12345;
  const rnd = (n, scale, off = 0) => Float32Array.from({ length: n }, () => { s = (s * 1103515245 + 12345) >>> 0; return off + (s / 2 ** 32 - 0.5) * scale; });
  const specs = [['token_embd.weight', [D, V]], ['blk.0.attn_norm.weight', [D]], ['blk.0.attn_q.weight', [D, H * HD]], ['blk.0.attn_k.weight', [D, KV * HD]],
    ['blk.0.attn_v.weight', [D, KV * HD]], ['blk.0.attn_output.weight', [H * HD, D]], ['blk.0.ffn_norm.weight', [D]], ['blk.0.ffn_gate.weight', [D, HID]],
    ['blk.0.ffn_up.weight', [D, HID]], ['blk.0.ffn_down.weight', [HID, D]], ['output_norm.weight', [D]], ['output.weight', [D, V]]];
  const parts = [], tensors = [];
  let off = 0;
  for (const [name, dims] of specs) {
    const n = dims.reduce((a, b) => a * b, 1);
    const b = Buffer.from(encodeF16(rnd(n, dims.length === 1 ? 0.2 : 0.4, dims.length === 1 ? 1 : 0)));
    tensors.push({ name, dims, type: 1 /* GGML_TYPE_F16 */, offset: off });
    const padded = Math.ceil(b.length / 32) * 32;
    parts.push(b, Buffer.alloc(padded - b.length));
    off += padded;
  }
  const kv = [
    ['general.architecture', T.string, 'llama'], ['general.alignment', T.u32, 32],
    ['llama.embedding_length', T.u32, D], ['llama.block_count', T.u32, 1], ['llama.attention.head_count', T.u32, H],
    ['llama.attention.head_count_kv', T.u32, KV], ['llama.feed_forward_length', T.u32, HID], ['llama.context_length', T.u32, 64],
    ['llama.attention.layer_norm_rms_epsilon', T.f32, 1e-5], ['llama.rope.freq_base', T.f32, 10000],
    ['tokenizer.ggml.model', T.string, 'gpt2'],
    ['tokenizer.ggml.tokens', T.array, [T.string, Array.from({ length: V }, (_, i) => `tok${i}`)]],
    ['tokenizer.ggml.merges', T.array, [T.string, ['t o', 'to k']]],
    ['tokenizer.ggml.eos_token_id', T.u32, 2],
  ];
  return { bytes: buildGGUF({ kv, tensors, data: Buffer.concat(parts) }), tensors };
}

test('1-D tensors stored f16 are converted to f32 as the converter does; a NaN in one is a format_error at its byte', async () => {
  const { bytes, tensors } = f16NormGGUF();
  const file = path.join(tmp, 'f16norm.gguf'), rk = path.join(tmp, 'f16norm.rknot');
  fs.writeFileSync(file, bytes);
  await convertModel(file, rk, { quant: 'keep' });
  const ref = await load(rk, { threads: 1 });
  const want = snapshot(ref);
  ref.dispose();
  assert.equal(want.tensors.find((t) => t.name === 'blk.0.ffn_norm.weight').dtype, 'f32');
  for (const src of [file, chunked(new Uint8Array(bytes), [100, 7])]) {
    const m = await load(src, { threads: 1 });
    try { assert.ok(snapshot(m).data.equals(want.data)); } finally { m.dispose(); }
  }
  // a NaN (f16 0x7e00) in ffn_norm, element 5: named with its byte in the file
  const { readGGUF } = await import('../dist/src/formats/gguf.js');
  const ffnNorm = (await readGGUF(file)).tensors.find((t) => t.name === 'blk.0.ffn_norm.weight');
  const bad = Buffer.from(bytes);
  bad.writeUInt16LE(0x7e00, ffnNorm.offset + 5 * 2);
  const f = path.join(tmp, 'nan.gguf');
  fs.writeFileSync(f, bad);
  for (const src of [f, new Blob([bad])]) {
    await assertAetherError(() => load(src, { threads: 1 }), 'format_error', ['blk.0.ffn_norm.weight', 'element 5', 'NaN']);
  }
});

test('bad streams: truncated in the header or in a tensor (known and unknown size), a NaN block scale, an abort; the engine stays usable', async () => {
  const { file } = generateGGUF('llama3', 'q8_0', 3);
  const bytes = new Uint8Array(fs.readFileSync(file));
  // truncated inside the tensor data: the message names the tensor and where the stream ended
  const cut = bytes.slice(0, bytes.length - 1000);
  await assertAetherError(() => load(chunked(cut, [4096])), 'format_error', ['truncated', `stream ended at byte ${cut.length}`, "tensor 'blk.1.ffn_down.weight'"]);
  // a size known up front (a Blob, a file): the tensor table already says the file is short
  const f = path.join(tmp, 'cut.gguf');
  fs.writeFileSync(f, cut);
  for (const src of [new Blob([cut]), f]) await assertAetherError(() => load(src), 'format_error', ['blk.1.ffn_down.weight', 'out of range', `the file has ${cut.length} bytes`]);
  // truncated inside the header, stream of unknown size
  await assertAetherError(() => load(chunked(bytes.slice(0, 200), [64])), 'format_error', ['truncated', 'GGUF header']);
  // a NaN scale in token_embd's block 3 (q8_0: the f16 d at the block's first byte)
  const { readGGUF } = await import('../dist/src/formats/gguf.js');
  const g = await readGGUF(file);
  const emb = g.tensors.find((t) => t.name === 'token_embd.weight');
  const bad = bytes.slice();
  const at = emb.offset + 3 * 34;
  bad[at] = 0x00; bad[at + 1] = 0x7e;
  await assertAetherError(() => load(new Blob([bad])), 'format_error', ['token_embd.weight', 'block 3', `byte ${at}`, 'NaN or Inf']);
  // an abort while the stream stalls after the header
  const stalled = new ReadableStream({ start(c) { c.enqueue(bytes.slice(0, Math.min(bytes.length - 10, 1 << 16))); } });
  const ac = new AbortController();
  const p = load(stalled, { signal: ac.signal });
  setTimeout(() => ac.abort(), 300);
  await assert.rejects(p, (e) => e.name === 'AbortError' && e.code === 'aborted');
  // and a good load afterwards
  const m = await load(new Blob([bytes]), { threads: 1 });
  try { assert.equal((await greedy(m, 3)).length, 3); } finally { m.dispose(); }
});
