/**
 * .rknot writer (Node; format: docs/rknot.md): lays out the tensor table, streams tensor data with
 * CRC-32s and commits the file atomically (`path.tmp`, then rename).
 */
import { AetherError } from '../errors.js';
import { crc32, formatChecksum } from './checksum.js';
import { isDTypeName, tensorBytes, type DTypeName } from './dtypes.js';
import { nodeFs } from './fileio.js';
import {
  align64, configFeatures, RKNOT_HEADER_SIZE, RKNOT_MAGIC, RKNOT_VERSION, validateRknotMetadata,
  type RknotConfig, type RknotFormatInfo, type RknotHeader, type RknotMetadata, type RknotTensor,
} from './rknot-read.js';

/** Encode the fixed header. */
export function encodeRknotHeader(jsonLength: number, dataSize: number): Uint8Array {
  const b = new Uint8Array(RKNOT_HEADER_SIZE);
  b.set(RKNOT_MAGIC, 0);
  const dv = new DataView(b.buffer);
  dv.setUint32(8, RKNOT_VERSION, true);
  dv.setUint32(12, 0, true);
  dv.setBigUint64(16, BigInt(jsonLength), true);
  dv.setBigUint64(24, BigInt(dataSize), true);
  return b;
}

export interface RknotTensorSpec {
  name: string;
  dtype: DTypeName;
  shape: number[];
}

/** Metadata to write: the tensor table without offsets, sizes and checksums (the writer fills them in). */
export type RknotWriteMetadata = Omit<RknotMetadata, 'tensors' | 'format'> & { format?: Partial<RknotFormatInfo>; tensors: RknotTensorSpec[] };

export type TensorData = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
export type TensorSource =
  | AsyncIterable<{ info: { name: string }; data: TensorData }>
  | Iterable<{ info: { name: string }; data: TensorData }>
  | ((spec: RknotTensorSpec, index: number) => TensorData | Promise<TensorData>);

export interface WriteRknotOptions {
  signal?: AbortSignal;
  /** called after each chunk is written */
  onProgress?: (e: { written: number; total: number; tensor: string }) => void;
  /** validate the final metadata before committing the file (default true) */
  validate?: boolean;
}

const PLACEHOLDER = formatChecksum(0);

/** Compute offsets (64-aligned, in table order) and sizes; returns the tensor table and the data section size. */
export function layoutTensors(specs: RknotTensorSpec[]): { tensors: RknotTensor[]; dataSize: number } {
  let off = 0;
  const tensors = specs.map((s) => {
    if (!isDTypeName(s.dtype)) throw new AetherError('invalid_argument', `tensor '${s.name}': unknown dtype ${JSON.stringify(s.dtype)}`);
    const bytes = tensorBytes(s.dtype, s.shape);
    if (typeof bytes === 'string') throw new AetherError('invalid_argument', `tensor '${s.name}': ${bytes}`);
    const t: RknotTensor = { name: s.name, dtype: s.dtype, shape: [...s.shape], offset: off, bytes, checksum: PLACEHOLDER };
    off = align64(off + bytes);
    return t;
  });
  return { tensors, dataSize: off };
}

function serialise(meta: RknotMetadata): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(meta));
}

async function* chunksOf(d: TensorData): AsyncIterable<Uint8Array> {
  if (d instanceof Uint8Array) { yield d; return; }
  if (Symbol.asyncIterator in (d as object)) { yield* d as AsyncIterable<Uint8Array>; return; }
  yield* d as Iterable<Uint8Array>;
}

/**
 * Streaming writer: lays out the tensors (table order), writes the header with placeholder checksums,
 * streams each tensor's data (one tensor, or one chunk of a tensor, in memory at a time) computing
 * CRC-32s, then rewrites the header with the real checksums (same length: fixed-width hex). Writes
 * `${path}.tmp` and renames it to `path` on success; on failure or abort the temporary file is removed.
 */
export async function writeRknot(path: string, meta: RknotWriteMetadata, tensors: TensorSource, opts: WriteRknotOptions = {}): Promise<{ meta: RknotMetadata; header: RknotHeader; fileSize: number }> {
  const fsp = await nodeFs();
  const { tensors: table, dataSize } = layoutTensors(meta.tensors);
  const full: RknotMetadata = {
    ...(meta as unknown as RknotMetadata),
    format: {
      version: RKNOT_VERSION,
      required_features: [...new Set([...(meta.format?.required_features ?? []), ...configFeatures(meta.config as Partial<RknotConfig>)])],
      optional_features: meta.format?.optional_features ?? [],
    },
    tensors: table,
  };
  // key order: format first
  const ordered: RknotMetadata = { format: full.format, config: full.config, tokenizer: full.tokenizer, tensors: table } as RknotMetadata;
  for (const [k, v] of Object.entries(full)) if (!(k in ordered)) (ordered as Record<string, unknown>)[k] = v;
  let json = serialise(ordered);
  const jsonLength = json.length;
  const dataOffset = align64(RKNOT_HEADER_SIZE + jsonLength);
  const header: RknotHeader = { version: RKNOT_VERSION, flags: 0, jsonLength, dataSize, dataOffset };
  const fileSize = dataOffset + dataSize;
  const tmp = `${path}.tmp`;
  let fh;
  try {
    fh = await fsp.open(tmp, 'w');
  } catch (e) {
    throw new AetherError('invalid_argument', `${path}: cannot write ${tmp}: ${(e as Error).message}`, { file: path });
  }
  let ok = false;
  try {
    await fh.write(encodeRknotHeader(jsonLength, dataSize), 0, RKNOT_HEADER_SIZE, 0);
    await fh.write(json, 0, json.length, RKNOT_HEADER_SIZE);
    const byName = new Map(table.map((t, i) => [t.name, i]));
    const done = new Set<string>();
    let written = 0;
    const writeOne = async (name: string, data: TensorData) => {
      const i = byName.get(name);
      if (i === undefined) throw new AetherError('invalid_argument', `${path}: tensor '${name}' is not in the tensor table`);
      if (done.has(name)) throw new AetherError('invalid_argument', `${path}: tensor '${name}' written twice`);
      const t = table[i];
      let pos = 0, crc = 0;
      for await (const chunk of chunksOf(data)) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        if (pos + chunk.length > t.bytes) throw new AetherError('invalid_argument', `${path}: tensor '${name}' got more than its ${t.bytes} bytes`);
        let w = 0;
        while (w < chunk.length) {
          const { bytesWritten } = await fh.write(chunk, w, chunk.length - w, dataOffset + t.offset + pos + w);
          w += bytesWritten;
        }
        crc = crc32(chunk, crc);
        pos += chunk.length;
        written += chunk.length;
        opts.onProgress?.({ written, total: dataSize, tensor: name });
      }
      if (pos !== t.bytes) throw new AetherError('invalid_argument', `${path}: tensor '${name}' got ${pos} bytes, expected ${t.bytes}`);
      t.checksum = formatChecksum(crc);
      done.add(name);
    };
    if (typeof tensors === 'function') {
      for (let i = 0; i < table.length; i++) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        await writeOne(table[i].name, await tensors(meta.tensors[i], i));
      }
    } else {
      for await (const item of tensors as AsyncIterable<{ info: { name: string }; data: TensorData }>) {
        if (opts.signal?.aborted) throw new AetherError('aborted', `${path}: write aborted`, { file: path });
        await writeOne(item.info.name, item.data);
      }
    }
    const missing = table.filter((t) => !done.has(t.name)).map((t) => t.name);
    if (missing.length) throw new AetherError('invalid_argument', `${path}: no data for tensor(s) ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}`);
    json = serialise(ordered);
    if (json.length !== jsonLength) throw new Error(`internal: metadata length changed from ${jsonLength} to ${json.length}`);
    if (opts.validate !== false) validateRknotMetadata(JSON.parse(new TextDecoder().decode(json)), fileSize, path, header);
    await fh.write(json, 0, json.length, RKNOT_HEADER_SIZE);
    await fh.truncate(fileSize); // zero padding up to the end of the data section
    await fh.sync();
    ok = true;
  } finally {
    await fh.close();
    if (!ok) await fsp.unlink(tmp).catch(() => {});
  }
  await fsp.rename(tmp, path);
  return { meta: ordered, header, fileSize };
}
