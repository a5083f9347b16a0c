/**
 * .rknot file readers (Node; format: docs/rknot.md): header + metadata, one tensor, or a whole-file
 * verification, all through the bounds-checked reads of fileio.ts.
 */
import { AetherError } from '../errors.js';
import { crc32 } from './checksum.js';
import { openForRead, readExact, type FileHandle } from './fileio.js';
import {
  checkBlockScales, checkRknotFileSize, checkTensorChecksum, fmtErr, parseRknotHeader, parseRknotJson, RKNOT_HEADER_SIZE,
  validateRknotMetadata, type RknotHeader, type RknotMetadata, type RknotTensor,
} from './rknot-read.js';

/** A numeric Node file descriptor, or anything with FileHandle's positional read and stat. */
export type FdLike = number | Pick<FileHandle, 'read' | 'stat'>;

async function asHandle(fd: number): Promise<Pick<FileHandle, 'read' | 'stat'>> {
  const fs = await import('node:fs');
  return {
    read: ((buf: Uint8Array, off: number, len: number, pos: number) => new Promise((res, rej) =>
      fs.read(fd, buf, off, len, pos, (e, n) => (e ? rej(e) : res({ bytesRead: n, buffer: buf }))))) as unknown as FileHandle['read'],
    stat: (() => new Promise((res, rej) => fs.fstat(fd, (e, s) => (e ? rej(e) : res(s))))) as FileHandle['stat'],
  };
}

/**
 * Read the header and the JSON metadata (parsed, not validated) from bytes (the start of a file, or the
 * whole file) or from a Node file descriptor / FileHandle.
 */
export async function readRknotHeader(src: Uint8Array | FdLike, fileName = '<buffer>'): Promise<{ header: RknotHeader; meta: unknown; fileSize?: number }> {
  if (src instanceof Uint8Array) {
    const header = parseRknotHeader(src, fileName);
    const end = RKNOT_HEADER_SIZE + header.jsonLength;
    if (src.length < end) throw fmtErr(fileName, 'metadata', src.length, `truncated: JSON metadata needs bytes ${RKNOT_HEADER_SIZE}..${end}, got ${src.length} bytes`);
    return { header, meta: parseRknotJson(src.subarray(RKNOT_HEADER_SIZE, end), fileName) };
  }
  const fh = (typeof src === 'number' ? await asHandle(src) : src) as FileHandle;
  const size = (await fh.stat()).size;
  const header = parseRknotHeader(await readExact(fh, 0, RKNOT_HEADER_SIZE, fileName, 'header', size), fileName);
  const meta = parseRknotJson(await readExact(fh, RKNOT_HEADER_SIZE, header.jsonLength, fileName, 'metadata', size), fileName);
  checkRknotFileSize(header, size, fileName);
  return { header, meta, fileSize: size };
}

/** Open a .rknot file: read and validate header + metadata. */
export async function openRknot(path: string): Promise<{ header: RknotHeader; meta: RknotMetadata; fileSize: number }> {
  const fh = await openForRead(path);
  try {
    const { header, meta, fileSize } = await readRknotHeader(fh, path);
    return { header, meta: validateRknotMetadata(meta, fileSize, path, header), fileSize: fileSize! };
  } finally {
    await fh.close();
  }
}

/** Read one tensor's bytes (checksum and block scales verified unless verify is false). */
export async function readRknotTensor(path: string, name: string, opts: { verify?: boolean } = {}): Promise<{ info: RknotTensor; data: Uint8Array }> {
  const { header, meta, fileSize } = await openRknot(path);
  const info = meta.tensors.find((t) => t.name === name);
  if (!info) throw new AetherError('invalid_argument', `${path}: no tensor named '${name}'`, { file: path, tensor: name });
  const fh = await openForRead(path);
  try {
    const data = await readExact(fh, header.dataOffset + info.offset, info.bytes, path, name, fileSize);
    if (opts.verify !== false) {
      checkTensorChecksum(info, crc32(data), path);
      checkBlockScales(info, data, path, header.dataOffset);
    }
    return { info, data };
  } finally {
    await fh.close();
  }
}

/**
 * Verify a whole .rknot file (Node): header, metadata, and every tensor's checksum and block scales,
 * reading tensors in file order through one reused buffer. Returns the number of tensors checked.
 */
export async function verifyRknotFile(path: string, opts: { onProgress?: (done: number, total: number) => void } = {}): Promise<{ tensors: number; bytes: number }> {
  const { header, meta, fileSize } = await openRknot(path);
  const fh = await openForRead(path);
  try {
    let buf = new Uint8Array(0);
    let done = 0;
    const sorted = [...meta.tensors].sort((a, b) => a.offset - b.offset);
    for (const t of sorted) {
      if (buf.length < t.bytes) buf = new Uint8Array(t.bytes);
      const data = await readExact(fh, header.dataOffset + t.offset, t.bytes, path, t.name, fileSize, buf);
      checkTensorChecksum(t, crc32(data), path);
      checkBlockScales(t, data, path, header.dataOffset);
      done += t.bytes;
      opts.onProgress?.(done, header.dataSize);
    }
    return { tensors: sorted.length, bytes: done };
  } finally {
    await fh.close();
  }
}
