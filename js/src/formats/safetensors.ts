/**
 * safetensors reader: single files and sharded checkpoints (model.safetensors.index.json).
 * Layout: u64 little-endian header length N, N bytes of JSON header
 * { name: { dtype, shape, data_offsets: [begin, end] }, "__metadata__": {...} }, then the data
 * section (offsets relative to byte 8 + N). Checks: header length cap and range, JSON parse, dtype,
 * shape, byte length == elements x dtype size, ranges inside the file, no overlaps.
 */
import { AetherError } from '../errors.js';
import { shapeElements } from './dtypes.js';
import { checkOverlap } from './gguf.js';
import { formatError, nodeFs, readExact, openForRead } from './fileio.js';

export type SafetensorsDType = 'F32' | 'F16' | 'BF16';
const SUPPORTED: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };
const KNOWN_OTHER = ['F64', 'I64', 'I32', 'I16', 'I8', 'U8', 'U16', 'U32', 'U64', 'BOOL', 'F8_E4M3', 'F8_E5M2'];

export interface SafetensorsTensor {
  name: string;
  dtype: SafetensorsDType;
  /** PyTorch order: shape[0] = rows (outermost) */
  shape: number[];
  /** the file that holds the tensor */
  file: string;
  /** absolute byte offset in that file */
  offset: number;
  bytes: number;
}

export interface SafetensorsFile {
  path: string;
  fileSize: number;
  headerLength: number;
  dataOffset: number;
  metadata: Record<string, string>;
  tensors: SafetensorsTensor[];
}

export const SAFETENSORS_MAX_HEADER = 256 << 20;

export async function readSafetensors(path: string): Promise<SafetensorsFile> {
  const fh = await openForRead(path);
  try {
    const size = (await fh.stat()).size;
    const lenBytes = await readExact(fh, 0, 8, path, 'header length', size);
    const n = new DataView(lenBytes.buffer).getBigUint64(0, true);
    if (n > BigInt(SAFETENSORS_MAX_HEADER)) throw formatError(path, 'header length', 0, `${n} exceeds the limit ${SAFETENSORS_MAX_HEADER}`);
    const hlen = Number(n);
    if (8 + hlen > size) throw formatError(path, 'header length', 0, `header of ${hlen} bytes does not fit in the ${size}-byte file: truncated`);
    const hbytes = await readExact(fh, 8, hlen, path, 'header', size);
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(hbytes));
    } catch (e) {
      throw formatError(path, 'header', 8, `JSON header does not parse: ${(e as Error).message}`);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header)) throw formatError(path, 'header', 8, 'JSON header is not an object');
    const dataOffset = 8 + hlen;
    const dataSize = size - dataOffset;
    const tensors: SafetensorsTensor[] = [];
    let metadata: Record<string, string> = {};
    for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') {
        if (typeof v === 'object' && v !== null) metadata = v as Record<string, string>;
        continue;
      }
      const info = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof info !== 'object' || info === null) throw formatError(path, name, 8, 'tensor entry is not an object');
      if (typeof info.dtype !== 'string') throw formatError(path, `${name}.dtype`, 8, 'missing dtype');
      if (!(info.dtype in SUPPORTED)) {
        const known = KNOWN_OTHER.includes(info.dtype);
        throw new AetherError(known ? 'unsupported' : 'format_error',
          `${path}: ${name}.dtype: ${known ? 'dtype' : 'unknown dtype'} '${info.dtype}' is not supported (expected F32, F16 or BF16)`, { file: path, field: `${name}.dtype` });
      }
      if (!Array.isArray(info.shape) || !info.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
        throw formatError(path, `${name}.shape`, 8, `expected an array of non-negative integers, got ${JSON.stringify(info.shape)}`);
      }
      const shape = info.shape as number[];
      const els = shape.length === 0 ? 1 : shapeElements(shape);
      if (typeof els === 'string') throw formatError(path, `${name}.shape`, 8, els);
      const bytes = els * SUPPORTED[info.dtype];
      if (!Number.isSafeInteger(bytes)) throw formatError(path, `${name}.shape`, 8, 'byte size overflows 2^53');
      const off = info.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((x) => Number.isSafeInteger(x) && x >= 0) || off[1] < off[0]) {
        throw formatError(path, `${name}.data_offsets`, 8, `expected [begin, end] with 0 <= begin <= end, got ${JSON.stringify(off)}`);
      }
      if (off[1] - off[0] !== bytes) {
        throw formatError(path, `${name}.data_offsets`, dataOffset + off[0], `range holds ${off[1] - off[0]} bytes but ${info.dtype} [${shape.join(', ')}] needs ${bytes}`);
      }
      if (off[1] > dataSize) {
        throw formatError(path, `${name}.data_offsets`, dataOffset + off[0], `tensor data [${dataOffset + off[0]}, ${dataOffset + off[1]}) is out of range: the file has ${size} bytes`);
      }
      tensors.push({ name, dtype: info.dtype as SafetensorsDType, shape, file: path, offset: dataOffset + off[0], bytes });
    }
    const ranges = tensors.filter((t) => t.bytes > 0).map((t) => ({ name: t.name, start: t.offset, end: t.offset + t.bytes }));
    checkOverlap(path, ranges);
    // The format requires the data section to be covered exactly, without holes (the safetensors library refuses
    // anything else): a header length off by one shifts every tensor by a byte, which only this check catches.
    ranges.sort((a, b) => a.start - b.start);
    let at = dataOffset;
    for (const r of ranges) {
      if (r.start !== at) throw formatError(path, `${r.name}.data_offsets`, r.start, `tensor data starts at byte ${r.start}, expected ${at}: the data section has a hole (is the header length ${hlen} right?)`);
      at = r.end;
    }
    if (at !== size) throw formatError(path, 'header length', 0, `the tensors cover bytes [${dataOffset}, ${at}) but the file has ${size} bytes: ${size - at} bytes are not part of any tensor (is the header length ${hlen} right?)`);
    if (hlen > 0 && hbytes[0] !== 0x7b) throw formatError(path, 'header', 8, `JSON header starts with byte 0x${hbytes[0].toString(16)}, expected '{'`);
    return { path, fileSize: size, headerLength: hlen, dataOffset, metadata, tensors };
  } finally {
    await fh.close();
  }
}

export interface SafetensorsModel {
  /** the files read, in order */
  files: SafetensorsFile[];
  tensors: Map<string, SafetensorsTensor>;
}

/**
 * Read a checkpoint folder (or a single .safetensors file): model.safetensors, or the shards listed in
 * model.safetensors.index.json (weight_map), checking every tensor is where the index says.
 */
export async function readSafetensorsModel(dirOrFile: string): Promise<SafetensorsModel> {
  const fsp = await nodeFs();
  const pathMod = await import('node:path');
  const st = await fsp.stat(dirOrFile).catch(() => undefined);
  if (!st) throw new AetherError('load_error', `${dirOrFile}: no such file or directory`);
  let fileNames: string[];
  let weightMap: Record<string, string> | undefined;
  const dir = st.isDirectory() ? dirOrFile : pathMod.dirname(dirOrFile);
  if (!st.isDirectory()) {
    fileNames = [dirOrFile];
  } else {
    const index = pathMod.join(dirOrFile, 'model.safetensors.index.json');
    const single = pathMod.join(dirOrFile, 'model.safetensors');
    if (await fsp.stat(index).catch(() => undefined)) {
      let j: { weight_map?: Record<string, string> };
      try {
        j = JSON.parse(await fsp.readFile(index, 'utf8'));
      } catch (e) {
        throw formatError(index, 'index', undefined, `JSON does not parse: ${(e as Error).message}`);
      }
      if (typeof j.weight_map !== 'object' || j.weight_map === null) throw formatError(index, 'weight_map', undefined, 'missing or not an object');
      weightMap = j.weight_map;
      const shards = [...new Set(Object.values(weightMap))];
      for (const s of shards) {
        if (typeof s !== 'string' || s.includes('/') || s.includes('\\') || s.startsWith('.')) throw formatError(index, 'weight_map', undefined, `bad shard file name ${JSON.stringify(s)}`);
      }
      fileNames = shards.map((s) => pathMod.join(dirOrFile, s));
    } else if (await fsp.stat(single).catch(() => undefined)) {
      fileNames = [single];
    } else {
      const all = (await fsp.readdir(dirOrFile)).filter((f) => f.endsWith('.safetensors')).sort();
      if (all.length === 0) throw new AetherError('load_error', `${dirOrFile}: no model.safetensors, model.safetensors.index.json or *.safetensors file`);
      fileNames = all.map((f) => pathMod.join(dirOrFile, f));
    }
  }
  const files: SafetensorsFile[] = [];
  const tensors = new Map<string, SafetensorsTensor>();
  for (const f of fileNames) {
    const sf = await readSafetensors(f);
    files.push(sf);
    for (const t of sf.tensors) {
      if (tensors.has(t.name)) throw formatError(f, t.name, t.offset, `tensor also present in ${tensors.get(t.name)!.file}`);
      if (weightMap && weightMap[t.name] !== undefined && pathMod.join(dir, weightMap[t.name]) !== f) {
        throw formatError(f, t.name, t.offset, `index says the tensor is in ${weightMap[t.name]}`);
      }
      tensors.set(t.name, t);
    }
  }
  if (weightMap) {
    for (const name of Object.keys(weightMap)) {
      if (!tensors.has(name)) throw formatError(pathMod.join(dir, 'model.safetensors.index.json'), name, undefined, `tensor listed in weight_map is missing from ${weightMap[name]}`);
    }
  }
  return { files, tensors };
}
