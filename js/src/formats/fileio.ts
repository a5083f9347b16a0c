/**
 * Positional, bounds-checked file reading for the format readers (Node only; node:fs is imported
 * dynamically so browser bundles that include this module do not break until it is called).
 */
import { AetherError } from '../errors.js';
import type { FileHandle } from 'node:fs/promises';

export type { FileHandle };

export async function nodeFs(): Promise<typeof import('node:fs/promises')> {
  try {
    return await import('node:fs/promises');
  } catch {
    throw new AetherError('unsupported', 'file paths need Node.js (node:fs is not available here)');
  }
}

/**
 * In-memory files that openForRead serves instead of the disk (path -> bytes). Used by the fuzzers (fuzz/targets.mjs)
 * to run the format readers on a million inputs without a file write and read per input; the readers cannot tell.
 */
const memoryFiles = new Map<string, Uint8Array>();
export function setMemoryFile(path: string, bytes: Uint8Array | undefined): void {
  if (bytes) memoryFiles.set(path, bytes); else memoryFiles.delete(path);
}
function memoryHandle(bytes: Uint8Array): FileHandle {
  const h = {
    async read(buf: Uint8Array, off: number, len: number, pos: number) {
      const n = Math.max(0, Math.min(len, bytes.length - pos));
      if (n > 0) buf.set(bytes.subarray(pos, pos + n), off);
      return { bytesRead: n, buffer: buf };
    },
    async stat() { return { size: bytes.length, isFile: () => true, isDirectory: () => false }; },
    async close() { /* nothing to release */ },
  };
  return h as unknown as FileHandle;
}

/** Open `path` for reading; a failure is a load_error naming the file (`name`, default the path). */
export async function openForRead(path: string, name = path): Promise<FileHandle> {
  const mem = memoryFiles.get(path);
  if (mem) return memoryHandle(mem);
  const fsp = await nodeFs();
  try {
    return await fsp.open(path, 'r');
  } catch (e) {
    throw new AetherError('load_error', `${name}: cannot open: ${(e as Error).message}`, { file: name });
  }
}

export function formatError(file: string, field: string, offset: number | undefined, msg: string, extra?: Record<string, unknown>): AetherError {
  const at = offset === undefined ? '' : ` at byte ${offset}`;
  return new AetherError('format_error', `${file}: ${field}${at}: ${msg}`, { file, field, offset, ...extra });
}

/** Read exactly `length` bytes at `position` or throw a format_error naming the file, field and offset. */
export async function readExact(fh: FileHandle, position: number, length: number, file: string, field: string, fileSize: number, into?: Uint8Array): Promise<Uint8Array> {
  if (position < 0 || length < 0 || position + length > fileSize) {
    throw formatError(file, field, position, `needs ${length} bytes but the file has ${Math.max(0, fileSize - position)} bytes left (file size ${fileSize}): truncated or corrupt`);
  }
  const buf = into ? into.subarray(0, length) : new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, done, length - done, position + done);
    if (bytesRead === 0) throw formatError(file, field, position + done, `unexpected end of file (expected ${length} bytes from byte ${position})`);
    done += bytesRead;
  }
  return buf;
}

const utf8Lenient = new TextDecoder('utf-8');
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/**
 * Sequential little-endian reader over a file with a read-ahead window; every read is bounds-checked
 * against the file size and reports the absolute byte offset on error.
 */
export class PosReader {
  pos = 0;
  private buf: Uint8Array = new Uint8Array(0);
  private view = new DataView(this.buf.buffer);
  private bufStart = 0;
  /** window: bytes read ahead per read (0: exactly what each field needs, for a stream whose size is unknown) */
  constructor(readonly fh: FileHandle, readonly size: number, readonly file: string, readonly window = 1 << 20) {}

  private async ensure(n: number, field: string): Promise<number> {
    if (this.pos + n > this.size) {
      throw formatError(this.file, field, this.pos, `needs ${n} bytes but only ${this.size - this.pos} remain (file size ${this.size}): truncated`);
    }
    const rel = this.pos - this.bufStart;
    if (rel >= 0 && rel + n <= this.buf.length) return rel;
    const len = Math.min(Math.max(n, this.window), this.size - this.pos);
    this.buf = await readExact(this.fh, this.pos, len, this.file, field, this.size);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.bufStart = this.pos;
    return 0;
  }

  async u8(field: string): Promise<number> { const o = await this.ensure(1, field); this.pos += 1; return this.view.getUint8(o); }
  async i8(field: string): Promise<number> { const o = await this.ensure(1, field); this.pos += 1; return this.view.getInt8(o); }
  async u16(field: string): Promise<number> { const o = await this.ensure(2, field); this.pos += 2; return this.view.getUint16(o, true); }
  async i16(field: string): Promise<number> { const o = await this.ensure(2, field); this.pos += 2; return this.view.getInt16(o, true); }
  async u32(field: string): Promise<number> { const o = await this.ensure(4, field); this.pos += 4; return this.view.getUint32(o, true); }
  async i32(field: string): Promise<number> { const o = await this.ensure(4, field); this.pos += 4; return this.view.getInt32(o, true); }
  async f32(field: string): Promise<number> { const o = await this.ensure(4, field); this.pos += 4; return this.view.getFloat32(o, true); }
  async f64(field: string): Promise<number> { const o = await this.ensure(8, field); this.pos += 8; return this.view.getFloat64(o, true); }
  async u64(field: string): Promise<bigint> { const o = await this.ensure(8, field); this.pos += 8; return this.view.getBigUint64(o, true); }
  async i64(field: string): Promise<bigint> { const o = await this.ensure(8, field); this.pos += 8; return this.view.getBigInt64(o, true); }

  /** u64 that must fit a JS safe integer and be <= max (a count or length). */
  async count(field: string, max: number, what = 'count'): Promise<number> {
    const at = this.pos;
    const v = await this.u64(field);
    if (v > BigInt(max)) throw formatError(this.file, field, at, `${what} ${v} exceeds the limit ${max}`);
    return Number(v);
  }

  async bytes(n: number, field: string): Promise<Uint8Array> {
    const o = await this.ensure(n, field);
    this.pos += n;
    return this.buf.subarray(o, o + n);
  }

  /** u64 length + UTF-8 bytes. `strict` rejects invalid UTF-8. */
  async string(field: string, maxLen: number, strict = false): Promise<string> {
    const at = this.pos;
    const len = await this.count(field, maxLen, 'string length');
    const b = await this.bytes(len, field);
    // fast path for short ASCII strings
    if (len < 64) {
      let ascii = true;
      for (let i = 0; i < len; i++) if (b[i] > 0x7f) { ascii = false; break; }
      if (ascii) return String.fromCharCode.apply(null, b as unknown as number[]);
    }
    try {
      return (strict ? utf8Strict : utf8Lenient).decode(b);
    } catch {
      throw formatError(this.file, field, at, 'string is not valid UTF-8');
    }
  }
}
