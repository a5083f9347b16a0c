// A streaming GGUF (v3) writer for the benchmark generators: the header (metadata key/values and the tensor
// table) is built in memory, tensor data is written to the file chunk by chunk (never the whole model in
// memory). Layout as ggml's gguf.cpp writes it: magic "GGUF", version 3, n_tensors (u64), n_kv (u64), the
// key/values, the tensor infos (name, n_dims, ne[] (u64), type (u32), offset (u64) relative to the data
// section), padding to general.alignment (32), the data with every tensor at a multiple of the alignment.
import fs from 'node:fs';

export const GGUF_T = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 };
const ALIGN = 32;

class Bytes {
  constructor() { this.parts = []; this.len = 0; }
  push(b) { this.parts.push(b); this.len += b.length; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  str(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  value(t, v) {
    const b = Buffer.alloc(8);
    switch (t) {
      case GGUF_T.u8: case GGUF_T.bool: this.push(Buffer.from([v ? Number(v) & 255 : 0])); return;
      case GGUF_T.i8: b.writeInt8(v); this.push(b.subarray(0, 1)); return;
      case GGUF_T.u16: b.writeUInt16LE(v); this.push(b.subarray(0, 2)); return;
      case GGUF_T.i16: b.writeInt16LE(v); this.push(b.subarray(0, 2)); return;
      case GGUF_T.u32: this.u32(v); return;
      case GGUF_T.i32: b.writeInt32LE(v); this.push(b.subarray(0, 4)); return;
      case GGUF_T.f32: b.writeFloatLE(v); this.push(b.subarray(0, 4)); return;
      case GGUF_T.u64: case GGUF_T.i64: this.u64(v); return;
      case GGUF_T.f64: b.writeDoubleLE(v); this.push(b); return;
      case GGUF_T.string: this.str(v); return;
      case GGUF_T.array: {
        const [et, arr] = v;
        this.u32(et); this.u64(arr.length);
        if (et === GGUF_T.f32) { const f = new Float32Array(arr); this.push(Buffer.from(f.buffer)); return; }
        if (et === GGUF_T.i32) { const f = new Int32Array(arr); this.push(Buffer.from(f.buffer)); return; }
        for (const x of arr) this.value(et, x);
        return;
      }
      default: throw new Error(`gguf-writer: value type ${t}`);
    }
  }
}

/**
 * Write a GGUF file. kv: [[key, type, value]]; tensors: [{ name, dims (ne, ggml order), type (ggml id), bytes }];
 * fill(tensor, write) streams a tensor's bytes by calling write(chunk) (chunks of any size, total = tensor.bytes).
 * Returns { headerBytes, dataBytes, fileBytes }.
 */
export async function writeGGUF(file, kv, tensors, fill) {
  const h = new Bytes();
  h.push(Buffer.from('GGUF', 'latin1'));
  h.u32(3); h.u64(tensors.length); h.u64(kv.length);
  for (const [k, t, v] of kv) { h.str(k); h.u32(t); h.value(t, v); }
  let off = 0;
  for (const t of tensors) {
    t.offset = off;
    h.str(t.name); h.u32(t.dims.length);
    for (const d of t.dims) h.u64(d);
    h.u32(t.type); h.u64(off);
    off += Math.ceil(t.bytes / ALIGN) * ALIGN;
  }
  const pad = (ALIGN - (h.len % ALIGN)) % ALIGN;
  h.push(Buffer.alloc(pad));
  const fd = fs.openSync(file + '.tmp', 'w');
  try {
    fs.writeSync(fd, Buffer.concat(h.parts));
    let pos = h.len;
    for (const t of tensors) {
      let written = 0;
      await fill(t, (chunk) => { fs.writeSync(fd, chunk, 0, chunk.length, pos); pos += chunk.length; written += chunk.length; });
      if (written !== t.bytes) throw new Error(`gguf-writer: ${t.name}: wrote ${written} bytes, expected ${t.bytes}`);
      const p = Math.ceil(t.bytes / ALIGN) * ALIGN - t.bytes;
      if (p) { fs.writeSync(fd, Buffer.alloc(p), 0, p, pos); pos += p; }
    }
    fs.closeSync(fd);
    fs.renameSync(file + '.tmp', file);
    return { headerBytes: h.len, dataBytes: off, fileBytes: pos };
  } catch (e) {
    try { fs.closeSync(fd); } catch { /* closed */ }
    fs.rmSync(file + '.tmp', { force: true });
    throw e;
  }
}
