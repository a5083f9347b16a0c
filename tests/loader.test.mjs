// Streaming loader: every source kind, chunk splits anywhere, wasm-memory destination, checksum / scale /
// truncation errors, abort (the source is closed, nothing left open).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';

import { loadRknotStream, loadRknotStreamDetailed } from '../dist/src/loader/stream.js';
import { openSource } from '../dist/src/loader/source.js';
import { openRknot, readRknotTensor } from '../dist/src/formats/rknot.js';
import { convertModel } from '../dist/src/formats/convert.js';
import { crc32, formatChecksum } from '../dist/src/formats/checksum.js';
import { tinyModel, makeTmpDir, assertAetherError, rawRknot, splitRknot, writeSyntheticRknot } from './helpers/formats.mjs';

const M = tinyModel();
const tmp = makeTmpDir('loader');
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const q8 = path.join(tmp, 'tiny-q8_0.rknot');
const f32 = path.join(tmp, 'tiny-f32.rknot');
await convertModel(M.q8_0, q8, { quant: 'keep' });
await convertModel(M.f32, f32, { quant: 'keep' });
const q8Bytes = fs.readFileSync(q8);

const BASE = 0x10000 * 8;
/** plan() that places the data section in a WebAssembly.Memory at BASE (as the runtime does). */
function wasmPlan() {
  const st = {};
  st.plan = (meta, header) => {
    const pages = Math.ceil((BASE + header.dataSize) / 65536);
    st.memory = new WebAssembly.Memory({ initial: pages, maximum: pages + 1 });
    return { dest: new Uint8Array(st.memory.buffer, BASE, header.dataSize) };
  };
  return st;
}

async function checkAllTensors(file, dest, meta) {
  for (const t of meta.tensors) {
    const { data } = await readRknotTensor(file, t.name);
    assert.ok(Buffer.compare(Buffer.from(data), Buffer.from(dest.buffer, dest.byteOffset + t.offset, t.bytes)) === 0, `${t.name} differs`);
  }
}

function chunked(bytes, sizes) {
  return Readable.from((function* () {
    let i = 0, k = 0;
    while (i < bytes.length) { const n = sizes[k++ % sizes.length]; yield bytes.subarray(i, i + n); i += n; }
  })(), { objectMode: true });
}

test('load from a path (direct) into wasm memory: tensors land at base + offset; progress reaches the file size', async () => {
  for (const file of [q8, f32]) {
    const st = wasmPlan();
    const events = [];
    const r = await loadRknotStreamDetailed(file, { plan: st.plan, onProgress: (e) => events.push(e) });
    const size = fs.statSync(file).size;
    assert.equal(r.bytes, size);
    assert.equal(r.dest.byteOffset, BASE);
    assert.ok(events.length > 0 && events.at(-1).loaded === size && events.every((e) => e.type === 'progress' && e.total === size));
    for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded >= events[i - 1].loaded);
    await checkAllTensors(file, r.dest, r.meta);
  }
  const meta = await loadRknotStream(q8, { plan: wasmPlan().plan });
  assert.equal(meta.config.arch, 'llama');
});

test('load from a Node stream, a web ReadableStream, a Blob, a file: URL and an http URL', async () => {
  const { meta } = await openRknot(q8);
  const sources = {
    'node stream': () => fs.createReadStream(q8, { highWaterMark: 1 << 16 }),
    'web stream': () => Readable.toWeb(fs.createReadStream(q8)),
    blob: () => new Blob([q8Bytes]),
    'file url': () => pathToFileURL(q8),
    'file url string': () => pathToFileURL(q8).href,
  };
  for (const [kind, make] of Object.entries(sources)) {
    const st = wasmPlan();
    const r = await loadRknotStreamDetailed(make(), { plan: st.plan, direct: false });
    assert.equal(r.bytes, q8Bytes.length, kind);
    await checkAllTensors(q8, r.dest, meta);
  }
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-length': q8Bytes.length, 'content-type': 'application/octet-stream' });
    res.end(q8Bytes);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${server.address().port}/m.rknot`;
    const src = await openSource(url);
    assert.equal(src.size, q8Bytes.length);
    await src.close();
    const st = wasmPlan();
    const events = [];
    const r = await loadRknotStreamDetailed(url, { plan: st.plan, onProgress: (e) => events.push(e) });
    assert.equal(r.bytes, q8Bytes.length);
    assert.equal(events.at(-1).total, q8Bytes.length);
    await checkAllTensors(q8, r.dest, meta);
  } finally {
    server.close();
  }
});

test('chunks may split anywhere: 1-byte chunks through the header, odd sizes through tensors', async () => {
  const { meta } = await openRknot(q8);
  for (const sizes of [[1, 2, 3, 5, 7, 11], [31, 33, 34, 64, 65], [4093, 1, 65536], [q8Bytes.length]]) {
    const st = wasmPlan();
    const r = await loadRknotStreamDetailed(chunked(q8Bytes, sizes.map((s) => s)), { plan: st.plan, source: { size: q8Bytes.length } });
    assert.equal(r.bytes, q8Bytes.length);
    if (sizes[0] === 31) await checkAllTensors(q8, r.dest, meta);
  }
});

test('truncated stream: format_error naming the source, the byte reached and the size expected', async () => {
  const cut = q8Bytes.length - 1000;
  const e = await assertAetherError(loadRknotStream(chunked(q8Bytes.subarray(0, cut), [1 << 16]), { plan: wasmPlan().plan, source: { name: 'cut.rknot' } }),
    'format_error', ['cut.rknot', `ended at byte ${cut}`, `expected ${q8Bytes.length}`, 'output.weight']);
  assert.equal(e.details.offset, cut);
  await assertAetherError(loadRknotStream(chunked(q8Bytes.subarray(0, 20), [7]), { plan: wasmPlan().plan, source: { name: 'h.rknot' } }), 'format_error', ['h.rknot', 'ended at byte 20', 'header']);
  await assertAetherError(loadRknotStream(chunked(q8Bytes.subarray(0, 5000), [999]), { plan: wasmPlan().plan, source: { name: 'j.rknot' } }), 'format_error', ['j.rknot', 'ended at byte 5000', 'JSON metadata']);
  // a known size makes the header check fail before any data is read
  await assertAetherError(loadRknotStream(chunked(q8Bytes.subarray(0, cut), [1 << 16]), { plan: wasmPlan().plan, source: { name: 'sz.rknot', size: cut } }), 'format_error', ['sz.rknot', 'truncated']);
  const f = path.join(tmp, 'cut.rknot');
  fs.writeFileSync(f, q8Bytes.subarray(0, cut));
  await assertAetherError(loadRknotStream(f, { plan: wasmPlan().plan }), 'format_error', [f, `ended at byte ${cut}`, `expected ${q8Bytes.length}`]);
  await assertAetherError(loadRknotStream(chunked(Buffer.concat([q8Bytes, Buffer.alloc(10)]), [1 << 20]), { plan: wasmPlan().plan, source: { name: 'long.rknot' } }), 'format_error', ['long.rknot', 'after the end of the data section']);
});

test('checksum mismatch (checksum_error naming the tensor) and NaN scales (format_error naming tensor and block) while streaming', async () => {
  const { meta, data } = splitRknot(q8Bytes);
  const t = meta.tensors.find((x) => x.name === 'blk.4.ffn_up.weight');
  const bad = Buffer.from(data); bad[t.offset + 1000] ^= 0x40;
  const f = path.join(tmp, 'crc.rknot');
  fs.writeFileSync(f, rawRknot(meta, bad));
  let planned = false;
  for (const src of [f, fs.createReadStream(f)]) {
    const e = await assertAetherError(loadRknotStream(src, { plan: (m, h) => { planned = true; return { dest: new Uint8Array(h.dataSize) }; } }), 'checksum_error', ["'blk.4.ffn_up.weight'", 'checksum mismatch', t.checksum]);
    assert.equal(e.details.tensor, 'blk.4.ffn_up.weight');
  }
  assert.ok(planned);
  // verify: false skips checksums
  await loadRknotStream(f, { verify: false, plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }) });
  // Inf scale in block 7 with a matching checksum
  const inf = Buffer.from(data); inf.writeUInt16LE(0x7c00, t.offset + 7 * 34);
  const m2 = structuredClone(meta);
  m2.tensors.find((x) => x.name === t.name).checksum = formatChecksum(crc32(inf.subarray(t.offset, t.offset + t.bytes)));
  const f2 = path.join(tmp, 'inf.rknot');
  const bytes2 = rawRknot(m2, inf);
  fs.writeFileSync(f2, bytes2);
  const dataOffset = splitRknot(bytes2).dataOffset;
  for (const src of [f2, chunked(bytes2, [33, 4096])]) {
    const e = await assertAetherError(loadRknotStream(src, { plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }) }), 'format_error', ["'blk.4.ffn_up.weight'", 'block 7', 'NaN or Inf scale', `byte ${dataOffset + t.offset + 7 * 34}`]);
    assert.equal(e.details.block, 7);
  }
});

test('direct path read variants (chunk size, reads in flight, staged copies) give the same bytes and the same errors', async () => {
  const variants = [{}, { directChunk: 65536, readAhead: 0 }, { directChunk: 65536, readAhead: 1 << 20 }, { directStaged: true }, { directStaged: true, directChunk: 65536, readAhead: 0 }];
  const { meta, data } = splitRknot(q8Bytes);
  const t = meta.tensors.find((x) => x.name === 'blk.4.ffn_up.weight');
  const bad = Buffer.from(data); bad[t.offset + 1000] ^= 0x40;
  const f = path.join(tmp, 'crc-variants.rknot');
  fs.writeFileSync(f, rawRknot(meta, bad));
  const short = path.join(tmp, 'short-variants.rknot');
  fs.writeFileSync(short, q8Bytes.subarray(0, q8Bytes.length - 100000));
  for (const v of variants) {
    const st = wasmPlan();
    const events = [];
    const r = await loadRknotStreamDetailed(q8, { plan: st.plan, onProgress: (e) => events.push(e), ...v });
    assert.equal(r.bytes, q8Bytes.length, JSON.stringify(v));
    assert.equal(events.at(-1).loaded, q8Bytes.length, JSON.stringify(v));
    await checkAllTensors(q8, r.dest, r.meta);
    const e = await assertAetherError(loadRknotStream(f, { plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }), ...v }), 'checksum_error', ["'blk.4.ffn_up.weight'", 'checksum mismatch']);
    assert.equal(e.details.tensor, 'blk.4.ffn_up.weight');
    await assertAetherError(loadRknotStream(short, { plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }), ...v }), 'format_error', ['truncated']);
    // an abort while reads are in flight: AbortError, the file closed after they settle
    const ac = new AbortController();
    let n = 0;
    await assertAetherError(loadRknotStream(q8, { plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }), signal: ac.signal,
      onProgress: () => { if (++n === 2) ac.abort(); }, ...v, directChunk: 65536 }), 'aborted');
  }
});

test('metadata is validated before plan() is called; plan() results are checked', async () => {
  const { meta, data } = splitRknot(q8Bytes);
  const m = structuredClone(meta);
  m.format.required_features = ['quantum_kv'];
  let called = false;
  await assertAetherError(loadRknotStream(chunked(rawRknot(m, data), [1 << 20]), { plan: () => { called = true; return { dest: new Uint8Array(data.length) }; }, source: { name: 'feat.rknot' } }), 'unsupported', ['feat.rknot', 'quantum_kv']);
  assert.equal(called, false);
  const m3 = structuredClone(meta);
  m3.tensors.find((x) => x.name === 'blk.0.attn_q.weight').shape = [288, 96];
  m3.tensors.find((x) => x.name === 'blk.0.attn_q.weight').bytes = 288 / 32 * 34 * 96;
  await assertAetherError(loadRknotStream(chunked(rawRknot(m3, data), [1 << 20]), { plan: () => ({ dest: new Uint8Array(data.length) }), source: { name: 'shape.rknot' } }), 'config_error', ['shape.rknot', 'blk.0.attn_q.weight.shape', 'expected [288, 288]']);
  const mem = new Uint8Array(new ArrayBuffer(data.length + 64));
  await assertAetherError(loadRknotStream(q8, { plan: () => ({ dest: mem.subarray(8) }) }), 'invalid_argument', ['byte offset 8', 'multiple of 64']);
  await assertAetherError(loadRknotStream(q8, { plan: () => ({ dest: new Uint8Array(100) }) }), 'invalid_argument', ['returned 100 bytes']);
  // a GGUF magic hands the stream to the GGUF loader (loader/gguf.ts), whose reader names what is wrong
  await assertAetherError(loadRknotStream(chunked(Buffer.from('GGUF....' + 'x'.repeat(100)), [50]), { plan: () => ({ dest: new Uint8Array(1) }), source: { name: 'g.gguf' } }), 'format_error', ['g.gguf', 'version at byte 4', 'expected 2 or 3']);
  await assertAetherError(loadRknotStream(chunked(Buffer.from('GGUX....' + 'x'.repeat(100)), [50]), { plan: () => ({ dest: new Uint8Array(1) }), source: { name: 'x.gguf' } }), 'format_error', ['x.gguf', 'magic']);
});

const openFds = () => fs.readdirSync('/proc/self/fd').length;

test('abort: AbortError / code aborted, the source is closed and nothing is left open', async () => {
  // Node stream source: destroyed on abort
  const ac = new AbortController();
  const s = fs.createReadStream(f32, { highWaterMark: 1 << 16 });
  const e = await assertAetherError(loadRknotStream(s, { signal: ac.signal, plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }), onProgress: (p) => { if (p.loaded > 3e6) ac.abort(); } }), 'aborted', []);
  assert.equal(e.name, 'AbortError');
  assert.ok(s.destroyed, 'the stream was not destroyed');
  // a stalled source (never ends): abort still returns promptly and cancels the web stream
  let cancelled = false;
  const stalled = new ReadableStream({ start(c) { c.enqueue(q8Bytes.subarray(0, 100000)); }, cancel() { cancelled = true; } });
  const ac2 = new AbortController();
  setTimeout(() => ac2.abort(), 50);
  await assertAetherError(loadRknotStream(stalled, { signal: ac2.signal, plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }) }), 'aborted', []);
  assert.ok(cancelled, 'the web stream was not cancelled');
  // direct path and streaming path from a file: no file descriptor left open
  const before = openFds();
  for (const direct of [true, false]) {
    const ac3 = new AbortController();
    await assertAetherError(loadRknotStream(f32, { direct, signal: ac3.signal, plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }), onProgress: (p) => { if (p.loaded > 2e6) ac3.abort(); } }), 'aborted', [f32]);
  }
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(openFds(), before, 'a file descriptor was left open');
  // already aborted
  await assertAetherError(loadRknotStream(q8, { signal: AbortSignal.abort(), plan: () => { throw new Error('no'); } }), 'aborted', []);
  // http: the server sees the connection closed
  let closed, requested = false;
  const gotClose = new Promise((r) => { closed = r; });
  const server = http.createServer((req, res) => {
    requested = true;
    res.writeHead(200, { 'content-length': q8Bytes.length });
    res.write(q8Bytes.subarray(0, 200000));
    res.on('close', () => closed());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const ac4 = new AbortController();
    setTimeout(() => ac4.abort(), 100);
    await assertAetherError(loadRknotStream(`http://127.0.0.1:${server.address().port}/x.rknot`, { signal: ac4.signal, plan: (m, h) => ({ dest: new Uint8Array(h.dataSize) }) }), 'aborted', ['x.rknot']);
    // under load the abort (100 ms) can come before fetch() has sent the request (undici loads lazily): then there
    // is no connection to close, and waiting for one hung the suite
    if (requested) await gotClose;
  } finally {
    server.closeAllConnections?.();
    server.close();
  }
});

test('synthetic model (q8_0, 64-byte aligned tensors) loads through every path', async () => {
  const f = path.join(tmp, 'syn.rknot');
  const { meta } = await writeSyntheticRknot(f);
  for (const direct of [true, false]) {
    const st = wasmPlan();
    const r = await loadRknotStreamDetailed(f, { direct, plan: st.plan });
    await checkAllTensors(f, r.dest, meta);
  }
  const http404 = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  await new Promise((r) => http404.listen(0, '127.0.0.1', r));
  try {
    await assertAetherError(loadRknotStream(`http://127.0.0.1:${http404.address().port}/missing.rknot`, { plan: wasmPlan().plan }), 'load_error', ['missing.rknot', 'HTTP 404']);
  } finally { http404.close(); }
  await assertAetherError(loadRknotStream(path.join(tmp, 'nope.rknot'), { plan: wasmPlan().plan }), 'load_error', ['nope.rknot']);
});
