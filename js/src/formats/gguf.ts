/**
 * GGUF reader (versions 2 and 3, little-endian). Reads the header, metadata and tensor infos from a
 * file by positions (the header can be many MB: 150k-token vocab arrays), bounds-checks every read
 * against the file size, checks counts against caps, string lengths, tensor dims for overflow, tensor
 * data ranges for alignment / range / overlap and the tensor type against the dtypes we read.
 * Every error is AetherError('format_error' | 'unsupported') naming the file, the field and the byte offset.
 */
import { AetherError } from '../errors.js';
import { dtypeByGgmlId, GGML_TYPE_NAMES, ggmlTypeName, supportedGgmlTypes, tensorBytes, type DTypeName } from './dtypes.js';
import { formatError, nodeFs, PosReader, readExact, openForRead } from './fileio.js';

export const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian

export const GGUF_VALUE_TYPES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;
export type GGUFValueType = typeof GGUF_VALUE_TYPES[number];

export interface GGUFTensorInfo {
  name: string;
  /** ggml type id */
  type: number;
  dtype: DTypeName;
  /** ggml order: dims[0] = ne0 = row length */
  dims: number[];
  /** absolute byte offset in the file */
  offset: number;
  bytes: number;
}

export interface GGUFFile {
  path: string;
  version: number;
  metadata: Map<string, unknown>;
  /** GGUF value type of every metadata key ('array<string>' etc. for arrays) */
  metadataTypes: Map<string, string>;
  tensors: GGUFTensorInfo[];
  alignment: number;
  /** absolute offset of the tensor data section */
  dataOffset: number;
  fileSize: number;
}

/** Caps: far above real models, low enough that a corrupt count fails fast instead of allocating. */
export const GGUF_LIMITS = {
  maxTensors: 1 << 20,
  maxKV: 1 << 20,
  maxKeyLength: 65535,
  maxStringLength: 64 << 20,
  maxArrayLength: 1 << 28,
  maxArrayDepth: 4,
  maxTensorName: 64, // GGML_MAX_NAME
  maxDims: 4,        // GGML_MAX_DIMS
};

/** Minimum bytes one array element of a type occupies (for a cheap count-vs-remaining-bytes check). */
const MIN_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 8, 9: 12, 10: 8, 11: 8, 12: 8 };

const FIXED: Record<number, { size: number; get: (dv: DataView, o: number) => unknown }> = {
  0: { size: 1, get: (dv, o) => dv.getUint8(o) },
  1: { size: 1, get: (dv, o) => dv.getInt8(o) },
  2: { size: 2, get: (dv, o) => dv.getUint16(o, true) },
  3: { size: 2, get: (dv, o) => dv.getInt16(o, true) },
  4: { size: 4, get: (dv, o) => dv.getUint32(o, true) },
  5: { size: 4, get: (dv, o) => dv.getInt32(o, true) },
  6: { size: 4, get: (dv, o) => dv.getFloat32(o, true) },
  7: { size: 1, get: (dv, o) => dv.getUint8(o) },
  10: { size: 8, get: (dv, o) => bigToNumber(dv.getBigUint64(o, true)) },
  11: { size: 8, get: (dv, o) => bigToNumber(dv.getBigInt64(o, true)) },
  12: { size: 8, get: (dv, o) => dv.getFloat64(o, true) },
};

function bigToNumber(v: bigint): number | bigint {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v;
}

async function readValue(r: PosReader, type: number, field: string, depth: number): Promise<{ value: unknown; typeName: string }> {
  switch (type) {
    case 0: return { value: await r.u8(field), typeName: 'u8' };
    case 1: return { value: await r.i8(field), typeName: 'i8' };
    case 2: return { value: await r.u16(field), typeName: 'u16' };
    case 3: return { value: await r.i16(field), typeName: 'i16' };
    case 4: return { value: await r.u32(field), typeName: 'u32' };
    case 5: return { value: await r.i32(field), typeName: 'i32' };
    case 6: return { value: await r.f32(field), typeName: 'f32' };
    case 7: {
      const at = r.pos;
      const b = await r.u8(field);
      if (b > 1) throw formatError(r.file, field, at, `bool value ${b}, expected 0 or 1`);
      return { value: b === 1, typeName: 'bool' };
    }
    case 8: return { value: await r.string(field, GGUF_LIMITS.maxStringLength), typeName: 'string' };
    case 9: {
      if (depth >= GGUF_LIMITS.maxArrayDepth) throw formatError(r.file, field, r.pos, `arrays nested deeper than ${GGUF_LIMITS.maxArrayDepth}`);
      const tAt = r.pos;
      const et = await r.u32(field);
      if (et > 12) throw formatError(r.file, field, tAt, `array element type ${et}, expected 0..12`);
      const cAt = r.pos;
      const n = await r.count(field, GGUF_LIMITS.maxArrayLength, 'array length');
      if (n * MIN_SIZE[et] > r.size - r.pos) {
        throw formatError(r.file, field, cAt, `array of ${n} ${GGUF_VALUE_TYPES[et]} needs at least ${n * MIN_SIZE[et]} bytes but only ${r.size - r.pos} remain: truncated or corrupt`);
      }
      const fixed = FIXED[et];
      if (fixed && n > 0) {
        // fast path: one bounds-checked read for the whole array of fixed-size values
        const b = await r.bytes(n * fixed.size, field);
        const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
        const out: unknown[] = new Array(n);
        for (let i = 0; i < n; i++) out[i] = fixed.get(dv, i * fixed.size);
        if (et === 7) {
          for (let i = 0; i < n; i++) {
            const v = out[i] as number;
            if (v > 1) throw formatError(r.file, field, r.pos - b.length + i, `bool value ${v}, expected 0 or 1`);
            out[i] = v === 1;
          }
        }
        return { value: out, typeName: `array<${GGUF_VALUE_TYPES[et]}>` };
      }
      const out: unknown[] = new Array(n);
      let tn = GGUF_VALUE_TYPES[et] as string;
      for (let i = 0; i < n; i++) {
        const v = await readValue(r, et, field, depth + 1);
        out[i] = v.value;
        if (i === 0) tn = v.typeName;
      }
      return { value: out, typeName: `array<${tn}>` };
    }
    case 10: return { value: bigToNumber(await r.u64(field)), typeName: 'u64' };
    case 11: return { value: bigToNumber(await r.i64(field)), typeName: 'i64' };
    case 12: return { value: await r.f64(field), typeName: 'f64' };
    default: throw formatError(r.file, field, r.pos - 4, `metadata value type ${type}, expected 0..12`);
  }
}

/** Read and check a GGUF file's header, metadata and tensor table (not the tensor data). */
export async function readGGUF(path: string): Promise<GGUFFile> {
  const fh = await openForRead(path);
  try {
    const size = (await fh.stat()).size;
    return await parseGGUF(new PosReader(fh, size, path), path, size);
  } finally {
    await fh.close();
  }
}

/**
 * Parse a GGUF header, metadata and tensor table through `r` (positional reads; `size` the file's bytes, or
 * Number.MAX_SAFE_INTEGER when a stream does not say: then a truncation shows when the data ends). Exported for the
 * GGUF loader (loader/gguf.ts), which reads from a stream's buffered prefix.
 */
export async function parseGGUF(r: PosReader, path: string, size: number): Promise<GGUFFile> {
  if (size < 24) throw formatError(path, 'header', 0, `file is ${size} bytes, too short for a GGUF header (24 bytes)`);
  const magic = await r.u32('magic');
  if (magic !== GGUF_MAGIC) {
    throw formatError(path, 'magic', 0, `expected "GGUF" (47 47 55 46), got ${hex4(magic)}`);
  }
  const version = await r.u32('version');
  if (version === 1) throw new AetherError('unsupported', `${path}: version at byte 4: GGUF version 1 is not supported (expected 2 or 3)`, { file: path, field: 'version', offset: 4 });
  if (version !== 2 && version !== 3) {
    if ((version & 0xffff) === 0 && version >>> 24 >= 1 && version >>> 24 <= 3) {
      throw new AetherError('unsupported', `${path}: version at byte 4: big-endian GGUF is not supported`, { file: path, field: 'version', offset: 4 });
    }
    throw formatError(path, 'version', 4, `GGUF version ${version}, expected 2 or 3`);
  }
  const nTensors = await r.count('tensor_count', GGUF_LIMITS.maxTensors, 'tensor count');
  const nKV = await r.count('metadata_kv_count', GGUF_LIMITS.maxKV, 'metadata key count');
  // each KV takes at least 8 (key len) + 4 (type) + 1 bytes, each tensor info at least 8 + 4 + 8 + 4 + 8
  if (nKV * 13 + nTensors * 32 > size - r.pos) {
    throw formatError(path, 'metadata_kv_count', 16, `${nKV} metadata keys and ${nTensors} tensors cannot fit in the ${size}-byte file`);
  }

  const metadata = new Map<string, unknown>();
  const metadataTypes = new Map<string, string>();
  for (let i = 0; i < nKV; i++) {
    const kAt = r.pos;
    const key = await r.string(`metadata key #${i}`, GGUF_LIMITS.maxKeyLength, true);
    if (metadata.has(key)) throw formatError(path, key, kAt, `duplicate metadata key`);
    const tAt = r.pos;
    const type = await r.u32(key);
    if (type > 12) throw formatError(path, key, tAt, `metadata value type ${type}, expected 0..12`);
    const { value, typeName } = await readValue(r, type, key, 0);
    metadata.set(key, value);
    metadataTypes.set(key, typeName);
  }

  let alignment = 32;
  if (metadata.has('general.alignment')) {
    const a = metadata.get('general.alignment');
    const t = metadataTypes.get('general.alignment');
    if (t !== 'u32' || typeof a !== 'number' || a === 0 || (a & (a - 1)) !== 0) {
      throw formatError(path, 'general.alignment', undefined, `expected a non-zero power of two u32, got ${String(a)} (${t})`);
    }
    alignment = a;
  }

  const raw: { name: string; type: number; dims: number[]; rel: bigint; at: number }[] = [];
  const names = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const at = r.pos;
    const name = await r.string(`tensor info #${i} name`, GGUF_LIMITS.maxTensorName, true);
    if (name.length === 0) throw formatError(path, `tensor info #${i} name`, at, 'empty tensor name');
    if (names.has(name)) throw formatError(path, name, at, 'duplicate tensor name');
    names.add(name);
    const ndAt = r.pos;
    const nd = await r.u32(`${name}.n_dims`);
    if (nd < 1 || nd > GGUF_LIMITS.maxDims) throw formatError(path, `${name}.n_dims`, ndAt, `${nd} dims, expected 1..${GGUF_LIMITS.maxDims}`);
    const dims: number[] = [];
    let prod = 1n;
    for (let d = 0; d < nd; d++) {
      const dAt = r.pos;
      const v = await r.u64(`${name}.ne[${d}]`);
      if (v === 0n) throw formatError(path, `${name}.ne[${d}]`, dAt, 'dim is 0, expected >= 1');
      prod *= v;
      if (v > BigInt(Number.MAX_SAFE_INTEGER) || prod > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw formatError(path, `${name}.ne[${d}]`, dAt, `dims overflow: element count exceeds 2^53 (dim ${v})`);
      }
      dims.push(Number(v));
    }
    const tAt = r.pos;
    const type = await r.u32(`${name}.type`);
    if (!dtypeByGgmlId(type)) {
      // a real ggml type we do not read: 'unsupported'; an id that is no ggml type at all: 'format_error'
      throw new AetherError(GGML_TYPE_NAMES[type] ? 'unsupported' : 'format_error',
        `${path}: ${name}.type at byte ${tAt}: ggml type ${type} (${ggmlTypeName(type)}) is not supported (expected ${supportedGgmlTypes()})`,
        { file: path, field: `${name}.type`, offset: tAt, type });
    }
    const oAt = r.pos;
    const rel = await r.u64(`${name}.offset`);
    if (rel % BigInt(alignment) !== 0n) throw formatError(path, `${name}.offset`, oAt, `data offset ${rel} is not a multiple of the alignment ${alignment}`);
    raw.push({ name, type, dims, rel, at: oAt });
  }

  const dataOffset = Math.ceil(r.pos / alignment) * alignment;
  const tensors: GGUFTensorInfo[] = [];
  for (const t of raw) {
    const dt = dtypeByGgmlId(t.type)!;
    const bytes = tensorBytes(dt.name, t.dims);
    if (typeof bytes === 'string') throw formatError(path, t.name, t.at, `bad shape [${t.dims.join(', ')}] for ${dt.name}: ${bytes}`);
    const abs = BigInt(dataOffset) + t.rel;
    if (abs + BigInt(bytes) > BigInt(size)) {
      throw formatError(path, `${t.name}.offset`, t.at,
        `tensor data [${abs}, ${abs + BigInt(bytes)}) is out of range: the file has ${size} bytes (data section starts at ${dataOffset})`);
    }
    tensors.push({ name: t.name, type: t.type, dtype: dt.name, dims: t.dims, offset: Number(abs), bytes });
  }
  checkOverlap(path, tensors.map((t) => ({ name: t.name, start: t.offset, end: t.offset + t.bytes })));
  return { path, version, metadata, metadataTypes, tensors, alignment, dataOffset, fileSize: size };
}

/** Throw format_error if two [start, end) ranges overlap. */
export function checkOverlap(file: string, ranges: { name: string; start: number; end: number }[]): void {
  const s = [...ranges].sort((a, b) => a.start - b.start || a.end - b.end);
  for (let i = 1; i < s.length; i++) {
    if (s[i].start < s[i - 1].end) {
      throw formatError(file, s[i].name, s[i].start,
        `tensor data [${s[i].start}, ${s[i].end}) overlaps tensor '${s[i - 1].name}' [${s[i - 1].start}, ${s[i - 1].end})`);
    }
  }
}

function hex4(v: number): string {
  return [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24].map((b) => b.toString(16).padStart(2, '0')).join(' ');
}

/** Read one tensor's raw bytes from a GGUF file. */
export async function readGGUFTensor(file: GGUFFile, name: string): Promise<Uint8Array> {
  const t = file.tensors.find((x) => x.name === name);
  if (!t) throw new AetherError('invalid_argument', `${file.path}: no tensor named '${name}'`);
  const fsp = await nodeFs();
  const fh = await fsp.open(file.path, 'r');
  try {
    return await readExact(fh, t.offset, t.bytes, file.path, name, file.fileSize);
  } finally {
    await fh.close();
  }
}

/** Typed metadata getters with errors naming the key. */
export function ggufGet(file: GGUFFile, key: string, kind: 'number' | 'string' | 'boolean' | 'array', required: true): unknown;
export function ggufGet(file: GGUFFile, key: string, kind: 'number' | 'string' | 'boolean' | 'array', required?: false): unknown | undefined;
export function ggufGet(file: GGUFFile, key: string, kind: 'number' | 'string' | 'boolean' | 'array', required = false): unknown {
  if (!file.metadata.has(key)) {
    if (required) throw new AetherError('format_error', `${file.path}: metadata key '${key}' is missing`, { file: file.path, field: key });
    return undefined;
  }
  const v = file.metadata.get(key);
  const ok = kind === 'array' ? Array.isArray(v) : typeof v === kind;
  if (!ok) {
    throw new AetherError('format_error', `${file.path}: metadata key '${key}' has type ${file.metadataTypes.get(key)}, expected ${kind}`, { file: file.path, field: key });
  }
  return v;
}
