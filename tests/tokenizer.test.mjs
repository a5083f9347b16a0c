// Tokenizer tests on the real tiny-llama-a SentencePiece model (tests/fixtures/tiny-llama-a).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { createTokenizer } from '../dist/src/tokenizer/index.js';
import { parseSentencePieceModel, tokenizerFromSentencePiece } from '../dist/src/tokenizer/sentencepiece-model.js';
import { tokenizerFromGGUFMetadata, tokenizerFromHFFolder } from '../dist/src/tokenizer/import.js';
import { tiny as tinyFile, tinyDir } from './helpers/paths.mjs';

const need = tinyFile;

const spBytes = () => new Uint8Array(fs.readFileSync(need('tokenizer.model')));
let cached;
function tiny() {
  if (!cached) cached = createTokenizer(tokenizerFromSentencePiece(spBytes(), 'tokenizer.model'));
  return cached;
}
const reference = () => JSON.parse(fs.readFileSync(need('reference.json'), 'utf8'));

/** Documents of val.txt: separated by lines holding only 0x1E. */
function valDocs() {
  const text = fs.readFileSync(need('val.txt'), 'utf8');
  const docs = [];
  let cur = [];
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    if (line === '\x1e') {
      docs.push(cur.join('\n'));
      cur = [];
    } else cur.push(line);
  }
  if (cur.length) docs.push(cur.join('\n'));
  return docs;
}

test('tokenizer.model parses: BPE, 4096 pieces, settings from the README', () => {
  const m = parseSentencePieceModel(spBytes(), 'tokenizer.model');
  assert.equal(m.pieces.length, 4096);
  assert.equal(m.trainer_spec.model_type, 2);
  assert.equal(m.trainer_spec.byte_fallback, true);
  assert.equal(m.trainer_spec.split_digits, true);
  assert.equal(m.trainer_spec.allow_whitespace_only_pieces, true);
  assert.equal(m.trainer_spec.unk_id, 0);
  assert.equal(m.trainer_spec.bos_id, 1);
  assert.equal(m.trainer_spec.eos_id, 2);
  assert.equal(m.trainer_spec.pad_id, -1);
  assert.equal(m.normalizer_spec.name, 'identity');
  assert.equal(m.normalizer_spec.add_dummy_prefix, true);
  assert.equal(m.normalizer_spec.remove_extra_whitespaces, false);
  assert.deepEqual(m.pieces.slice(0, 4).map((p) => [p.piece, p.type]), [['<unk>', 2], ['<s>', 3], ['</s>', 3], ['<0x00>', 6]]);
  const d = tokenizerFromSentencePiece(spBytes());
  assert.equal(d.model, 'llama');
  assert.equal(d.bos_token_id, 1);
  assert.equal(d.eos_token_id, 2);
  assert.equal(d.unknown_token_id, 0);
  assert.equal(d.padding_token_id, undefined);
  assert.equal(d.add_space_prefix, true);
  assert.equal(d.token_type.filter((t) => t === 6).length, 256);
});

test('reference prompts encode to the reference ids (with BOS)', () => {
  const tok = tiny();
  assert.equal(tok.vocabSize, 4096);
  assert.equal(tok.bosId, 1);
  assert.equal(tok.eosId, 2);
  for (const p of reference().prompts) {
    assert.deepEqual(tok.encode(p.prompt), p.prompt_ids, p.prompt);
    assert.deepEqual(tok.encode(p.prompt, { addBos: false }), p.prompt_ids.slice(1), p.prompt);
    assert.equal(tok.decode(p.prompt_ids), p.prompt);
  }
});

test('reference continuations decode to the reference text; pieces match', () => {
  const tok = tiny();
  for (const p of reference().prompts) {
    assert.equal(tok.decode(p.generated_ids), p.generated_text, p.prompt);
    if (p.prompt_plus_generation_text !== undefined) {
      assert.equal(tok.decode([...p.prompt_ids, ...p.generated_ids]), p.prompt_plus_generation_text);
    }
    if (p.generated_pieces) {
      assert.equal(p.generated_pieces.length, p.generated_ids.length);
      p.generated_ids.forEach((id, i) => assert.equal(tok.tokenToPiece(id), p.generated_pieces[i], `piece of ${id}`));
    }
    // streaming gives the same text
    const dec = tok.createDecoder();
    let s = '';
    for (const id of p.generated_ids) s += dec.push(id);
    s += dec.flush();
    assert.equal(s, p.generated_text);
  }
});

test('val.txt: decode(encode(doc)) === doc for every document, ~3.32 chars/token, streaming == decode', () => {
  const tok = tiny();
  const docs = valDocs();
  assert.ok(docs.length > 100, `expected >100 documents, got ${docs.length}`);
  let chars = 0;
  let tokens = 0;
  const t0 = performance.now();
  const encoded = docs.map((d) => tok.encode(d, { addBos: true, addEos: true }));
  const ms = performance.now() - t0;
  for (let i = 0; i < docs.length; i++) {
    const ids = encoded[i];
    assert.equal(ids[0], 1);
    assert.equal(ids[ids.length - 1], 2);
    const back = tok.decode(ids);
    if (back !== docs[i]) assert.fail(`document ${i} does not round-trip (first difference at ${[...back].findIndex((c, k) => c !== [...docs[i]][k])})`);
    chars += [...docs[i]].length;
    tokens += ids.length;
  }
  const ratio = chars / tokens;
  assert.ok(ratio > 3.25 && ratio < 3.4, `chars/token ${ratio.toFixed(4)} not about 3.32`);
  // speed is a bench matter (the machine running the suite may be loaded): printed, not asserted
  console.log(`encoding val.txt: ${ms.toFixed(0)} ms for ${tokens} tokens`);
  // streaming decoder on every document
  for (let i = 0; i < docs.length; i++) {
    const dec = tok.createDecoder();
    let s = '';
    for (const id of encoded[i]) s += dec.push(id);
    s += dec.flush();
    assert.equal(s, docs[i], `streaming document ${i}`);
  }
});

test('byte fallback and streaming: partial UTF-8 is held back', () => {
  const tok = tiny();
  const text = 'naïve 日本 😀 ok';
  const ids = tok.encode(text);
  assert.equal(tok.decode(ids), text);
  const emoji = tok.encode('😀', { addBos: false });
  // '▁' + 4 byte pieces (F0 9F 98 80)
  assert.deepEqual(emoji.slice(-4).map((id) => tok.tokenToPiece(id)), ['<0xF0>', '<0x9F>', '<0x98>', '<0x80>']);
  const dec = tok.createDecoder();
  const outs = ids.map((id) => dec.push(id));
  assert.equal(outs.join('') + dec.flush(), text);
  for (const o of outs) assert.ok(!o.includes('\uFFFD'), 'no replacement characters while streaming valid text');
  // a dangling lead byte becomes U+FFFD at flush, and decode() agrees
  const lead = tok.pieceToId('<0xE6>');
  const d2 = tok.createDecoder();
  assert.equal(d2.push(lead), '');
  assert.equal(d2.flush(), '\uFFFD');
  assert.equal(tok.decode([lead]), '\uFFFD');
});

test('special tokens: control tokens only with parseSpecial; skipSpecial; isEog', () => {
  const tok = tiny();
  const plain = tok.encode('<s>hi</s>', { addBos: false });
  assert.ok(!plain.includes(1) && !plain.includes(2), 'control tokens are not parsed by default');
  assert.equal(tok.decode(plain), '<s>hi</s>');
  const parsed = tok.encode('<s>hi</s>', { addBos: false, parseSpecial: true });
  assert.equal(parsed[0], 1);
  assert.equal(parsed[parsed.length - 1], 2);
  assert.equal(tok.decode(parsed), 'hi');
  assert.equal(tok.decode(parsed, { skipSpecial: false }), '<s> hi</s>');
  assert.ok(tok.isEog(2));
  assert.ok(!tok.isEog(1));
  assert.deepEqual(tok.encode(''), [1]);
  assert.deepEqual(tok.encode('', { addBos: false }), []);
  assert.deepEqual(tok.encode('x', { addBos: false, addEos: true }).slice(-1), [2]);
  assert.throws(() => tok.tokenToPiece(4096), (e) => e.code === 'tokenizer_error');
  assert.throws(() => tok.decode([-1]), (e) => e.code === 'tokenizer_error');
  // whitespace runs, leading spaces, digits split
  for (const s of ['  two leading', 'tabs\tand\n\nnewlines  ', '12345', ' ', '\n']) assert.equal(tok.decode(tok.encode(s)), s);
  // a lone '▁' first piece loses its space, the next piece keeps its own
  const sp = tok.pieceToId('▁');
  const the = tok.pieceToId('▁the');
  assert.ok(sp !== undefined && the !== undefined);
  assert.equal(tok.decode([1, sp, the]), ' the');
  const d = tok.createDecoder();
  assert.equal(d.push(1) + d.push(sp) + d.push(the), ' the');
  const digits = tok.encode('2024', { addBos: false }).map((id) => tok.tokenToPiece(id));
  assert.ok(digits.every((p) => p.replace('▁', '').length <= 1), `digits are split: ${digits}`);
});

test('malformed tokenizer.model -> tokenizer_error naming the file and offset', () => {
  const good = spBytes();
  const cases = [
    ['empty', new Uint8Array(0)],
    ['one byte', good.subarray(0, 1)],
    ['7 bytes', good.subarray(0, 7)],
    ['100 bytes', good.subarray(0, 100)],
    ['1000 bytes', good.subarray(0, 1000)],
    ['half', good.subarray(0, good.length >> 1)],
    ['minus 1', good.subarray(0, good.length - 1)],
    ['minus 3', good.subarray(0, good.length - 3)],
    ['json', new TextEncoder().encode('{"model": {"type": "BPE"}}')],
    ['wire type 7', new Uint8Array([0x0f, 0x00])],
    ['huge length', new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00])],
    ['long varint', new Uint8Array([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])],
  ];
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
  for (let k = 0; k < 20; k++) {
    const g = new Uint8Array(64 + k * 37);
    for (let i = 0; i < g.length; i++) g[i] = rnd();
    cases.push([`garbage ${k}`, g]);
  }
  // a piece whose string is not UTF-8
  cases.push(['bad utf8', new Uint8Array([0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe])]);
  for (const [name, bytes] of cases) {
    assert.throws(
      () => tokenizerFromSentencePiece(bytes, 'broken.model'),
      (e) => {
        assert.equal(e.code, 'tokenizer_error', `${name}: ${e.code} ${e.message}`);
        assert.match(e.message, /broken\.model/, name);
        assert.match(e.message, /offset \d+/, name);
        return true;
      },
      name,
    );
  }
});

// Minimal GGUF metadata reader (test-only), to check tokenizerFromGGUFMetadata on the real files.
function readGGUFMetadata(file) {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(2 * 1024 * 1024);
  const n = fs.readSync(fd, buf, 0, buf.length, 0);
  fs.closeSync(fd);
  let o = 0;
  const u32 = () => { const v = buf.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = buf.readBigUInt64LE(o); o += 8; return v; };
  const str = () => { const len = Number(u64()); const s = buf.toString('utf8', o, o + len); o += len; return s; };
  const val = (t) => {
    switch (t) {
      case 0: return buf.readUInt8(o++);
      case 1: return buf.readInt8(o++);
      case 2: { const v = buf.readUInt16LE(o); o += 2; return v; }
      case 3: { const v = buf.readInt16LE(o); o += 2; return v; }
      case 4: return u32();
      case 5: { const v = buf.readInt32LE(o); o += 4; return v; }
      case 6: { const v = buf.readFloatLE(o); o += 4; return v; }
      case 7: return buf.readUInt8(o++) !== 0;
      case 8: return str();
      case 9: { const et = u32(); const len = Number(u64()); const a = new Array(len); for (let i = 0; i < len; i++) a[i] = val(et); return a; }
      case 10: return u64();
      case 11: { const v = buf.readBigInt64LE(o); o += 8; return v; }
      case 12: { const v = buf.readDoubleLE(o); o += 8; return v; }
      default: throw new Error(`gguf type ${t}`);
    }
  };
  assert.equal(buf.toString('latin1', 0, 4), 'GGUF');
  o = 4;
  u32();
  u64();
  const nkv = Number(u64());
  const kv = new Map();
  for (let i = 0; i < nkv; i++) {
    const k = str();
    kv.set(k, val(u32()));
    assert.ok(o < n, 'metadata fits in the first 2 MiB');
  }
  return kv;
}

test('tokenizerFromGGUFMetadata on the real GGUF equals the SentencePiece model', () => {
  const kv = readGGUFMetadata(need('tiny-llama-a-q8_0.gguf'));
  const g = tokenizerFromGGUFMetadata(kv);
  const s = tokenizerFromSentencePiece(spBytes());
  assert.equal(g.model, 'llama');
  assert.deepEqual(g.tokens, s.tokens);
  assert.deepEqual(g.token_type, s.token_type);
  assert.equal(g.scores.length, 4096);
  for (let i = 0; i < 4096; i++) assert.ok(Math.abs(g.scores[i] - s.scores[i]) < 1e-3, `score ${i}`);
  assert.equal(g.bos_token_id, 1);
  assert.equal(g.eos_token_id, 2);
  assert.equal(g.unknown_token_id, 0);
  assert.equal(g.add_bos_token, true);
  assert.equal(g.add_eos_token, false);
  const tok = createTokenizer(g);
  for (const p of reference().prompts) assert.deepEqual(tok.encode(p.prompt), p.prompt_ids);

  // typed arrays, bigint ids and {type, value} wrappers are accepted too
  const kv2 = new Map(kv);
  kv2.set('tokenizer.ggml.scores', Float32Array.from(kv.get('tokenizer.ggml.scores')));
  kv2.set('tokenizer.ggml.token_type', Int32Array.from(kv.get('tokenizer.ggml.token_type')));
  kv2.set('tokenizer.ggml.bos_token_id', 1n);
  kv2.set('tokenizer.ggml.eos_token_id', { type: 'uint32', value: 2 });
  kv2.set('tokenizer.ggml.eot_token_id', 2);
  const g2 = tokenizerFromGGUFMetadata(kv2);
  assert.equal(g2.bos_token_id, 1);
  assert.equal(g2.eos_token_id, 2);
  assert.deepEqual(createTokenizer(g2).encode('The Debian project is'), [1, 335, 1096, 3345, 296]);

  const broken = new Map(kv);
  broken.set('tokenizer.ggml.scores', [1, 2, 3]);
  assert.throws(() => tokenizerFromGGUFMetadata(broken), (e) => e.code === 'tokenizer_error' && /tokenizer\.ggml\.scores/.test(e.message));
  const bert = new Map(kv);
  bert.set('tokenizer.ggml.model', 'bert');
  assert.throws(() => tokenizerFromGGUFMetadata(bert), (e) => e.code === 'unsupported');
  const none = new Map();
  assert.throws(() => tokenizerFromGGUFMetadata(none), (e) => e.code === 'tokenizer_error');
});

test('tokenizerFromHFFolder on tiny-llama-a/hf (tokenizer.model + configs)', async () => {
  need('hf/tokenizer.model');
  const d = await tokenizerFromHFFolder(tinyFile('hf'));
  assert.equal(d.model, 'llama');
  assert.equal(d.bos_token_id, 1);
  assert.equal(d.eos_token_id, 2);
  assert.equal(d.add_bos_token, true);
  assert.equal(d.add_eos_token, false);
  const tok = createTokenizer(d);
  for (const p of reference().prompts) assert.deepEqual(tok.encode(p.prompt), p.prompt_ids);
  await assert.rejects(() => tokenizerFromHFFolder(path.join(tinyDir, 'does-not-exist')), (e) => e.code === 'tokenizer_error');
});

test('bad TokenizerData -> tokenizer_error', () => {
  assert.throws(() => createTokenizer({ model: 'llama', tokens: [] }), (e) => e.code === 'tokenizer_error');
  assert.throws(() => createTokenizer({ model: 'llama', tokens: ['a', 'b'] }), (e) => e.code === 'tokenizer_error'); // no scores
  assert.throws(() => createTokenizer({ model: 'gpt2', tokens: ['a'] }), (e) => e.code === 'tokenizer_error'); // no merges
  assert.throws(() => createTokenizer({ model: 'llama', tokens: ['a'], scores: [0], bos_token_id: 5 }), (e) => e.code === 'tokenizer_error');
  assert.throws(() => createTokenizer({ model: 'wpm', tokens: ['a'] }), (e) => e.code === 'unsupported');
});

test('tokenizer.json import errors', async () => {
  const { tokenizerFromHFJson } = await import('../dist/src/tokenizer/tokenizer-json.js');
  assert.throws(() => tokenizerFromHFJson('{not json', { file: 'x/tokenizer.json' }), (e) => e.code === 'tokenizer_error' && /x\/tokenizer\.json/.test(e.message));
  assert.throws(() => tokenizerFromHFJson({ model: { type: 'WordPiece', vocab: {} } }), (e) => e.code === 'unsupported');
  assert.throws(() => tokenizerFromHFJson({ model: { type: 'BPE', vocab: { a: -1 }, merges: [] } }), (e) => e.code === 'tokenizer_error');
  assert.throws(() => tokenizerFromHFJson({ model: { type: 'BPE', vocab: { a: 0 }, merges: [3] }, pre_tokenizer: { type: 'ByteLevel' } }), (e) => e.code === 'tokenizer_error');
  // a tiny byte-level BPE built by hand: merges apply in rank order, added tokens are whole-string matches
  const { BYTE_TO_UNICODE } = await import('../dist/src/tokenizer/bpe.js');
  const vocab = {};
  BYTE_TO_UNICODE.forEach((c, b) => { vocab[c] = b; });
  const data = tokenizerFromHFJson({
    model: { type: 'BPE', vocab: { ...vocab, he: 256, ll: 257, hell: 258, hello: 259 }, merges: ['h e', 'l l', 'he ll', 'hell o'] },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, use_regex: true },
    decoder: { type: 'ByteLevel' },
    added_tokens: [{ id: 260, content: '<|end|>', special: true }, { id: 261, content: '[tool]', special: false }],
  }, { config: { eos_token: '<|end|>' } });
  assert.equal(data.model, 'gpt2');
  assert.equal(data.eos_token_id, 260);
  assert.deepEqual(data.token_type.slice(258), [1, 1, 3, 4]);
  const tok = createTokenizer(data);
  assert.deepEqual(tok.encode('hello'), [259]);
  assert.deepEqual(tok.encode('hel[tool]'), [256, 'l'.charCodeAt(0), 261]);
  assert.deepEqual(tok.encode('x<|end|>', { parseSpecial: true }), ['x'.charCodeAt(0), 260]);
  assert.ok(tok.isEog(260));
  assert.equal(tok.decode([259, 260, 261]), 'hello[tool]');
});

test('special tokens with regex metacharacters are matched literally', () => {
  const specials = ['<|a-b|>', '[x]', '(y)', '{z}', 'a.b', 'q?', '+*', '^$', '\\', '/s/', 'é-ü'];
  const tokens = ['<unk>', 'a', 'b', ...specials];
  const data = {
    model: 'llama', tokens, scores: tokens.map(() => 0), token_type: [2, 1, 1, ...specials.map(() => 3)],
    unknown_token_id: 0, add_space_prefix: false, add_bos_token: false,
  };
  const tok = createTokenizer(data);
  for (let i = 0; i < specials.length; i++) {
    assert.deepEqual(tok.encode(specials[i], { parseSpecial: true }), [3 + i], specials[i]);
  }
  assert.deepEqual(tok.encode('a<|a-b|>b', { parseSpecial: true }), [1, 3, 2]);
});
