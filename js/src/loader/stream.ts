/**
 * Streaming .rknot loader (and, by the magic of the first bytes, GGUF: loader/gguf.ts): reads the header and JSON metadata from a stream (chunks may split anywhere),
 * validates the metadata, asks the caller for the destination (`plan(meta)` -> a Uint8Array view of wasm
 * linear memory, 64-byte aligned, data-section size) and copies every incoming chunk straight into it:
 * the file is never held in a JS buffer. While streaming it verifies each tensor's CRC-32 (`verify`,
 * default true) as soon as its last byte arrives, and the f16 block scales of quantised tensors
 * and the values of f32 / f16 tensors (NaN/Inf -> format_error; `checkScales`, default true) as blocks complete.
 *
 * Node file paths take a faster route by default (`direct`): positional reads straight into `dest`
 * (no intermediate chunk buffers, no copy), up to `readAhead` bytes of reads in flight while each arrived
 * chunk is checksummed.
 *
 * Abort -> AetherError 'aborted' (name 'AbortError'); the source / file is closed. A stream that ends early
 * -> format_error naming the source and the byte reached vs expected.
 */
import { openForRead } from '../formats/fileio.js';
import { AetherError } from '../errors.js';
import { crc32 } from '../formats/checksum.js';
import { DTYPES } from '../formats/dtypes.js';
import {
  checkBlockScales, checkFiniteValues, checkTensorChecksum, parseRknotHeader, parseRknotJson, RKNOT_ALIGNMENT, RKNOT_HEADER_SIZE,
  validateRknotMetadata, type RknotHeader, type RknotMetadata, type RknotTensor,
} from '../formats/rknot-read.js';
import { openSource, type OpenSourceOptions, type Source, type SourceInput } from './source.js';
import { isGGUFMagic, loadGGUFPath, loadGGUFSource } from './gguf.js';
import { abortError, makeDest, type LoadPlan } from './plan.js';

function concatBytes(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

export type { LoadPlan } from './plan.js';

export interface LoadProgress {
  type: 'progress';
  /** bytes of the file consumed so far */
  loaded: number;
  /** file size (from the source, else from the header once it has arrived; 0 before that) */
  total: number;
}

export interface LoadRknotOptions {
  plan: (meta: RknotMetadata, header: RknotHeader) => LoadPlan | Promise<LoadPlan>;
  onProgress?: (e: LoadProgress) => void;
  signal?: AbortSignal;
  /** verify tensor checksums while streaming (default true) */
  verify?: boolean;
  /** check quantised blocks' f16 scales for NaN/Inf while streaming (default true) */
  checkScales?: boolean;
  /** Node file paths: read positionally straight into dest instead of through a stream (default true) */
  direct?: boolean;
  /** read size for the direct path (default 4 MiB) */
  directChunk?: number;
  /** direct path: bytes of reads kept in flight ahead of the checks (default 64 MiB; at least 2 reads) */
  readAhead?: number;
  /**
   * direct path: read into small reused buffers (then default chunk 1 MiB, readAhead 4 MiB) and copy each into dest
   * (default false: read straight into dest). Measured: docs/PERFORMANCE.md "Load".
   */
  directStaged?: boolean;
  /** options for openSource (name, highWaterMark, fetchInit, size) */
  source?: OpenSourceOptions;
}

export interface LoadRknotResult {
  name: string;
  header: RknotHeader;
  meta: RknotMetadata;
  /** the data section (dest.subarray(0, dataSize)): tensor t at dest.byteOffset + t.offset */
  dest: Uint8Array;
  /** bytes read from the source */
  bytes: number;
  seconds: number;
}

function isSource(x: unknown): x is Source {
  return typeof x === 'object' && x !== null && 'stream' in x && 'close' in x && typeof (x as Source).close === 'function' && !('getReader' in x);
}


/** Per-tensor CRC and block-scale checks over the data section as its bytes arrive in order. */
class DataVerifier {
  private tensors: RknotTensor[];
  private crcs: number[];
  private scaleDone: number[];
  private ti = 0;
  constructor(meta: RknotMetadata, private header: RknotHeader, private dest: Uint8Array, private name: string,
    private verify: boolean, private checkScales: boolean) {
    this.tensors = [...meta.tensors].sort((a, b) => a.offset - b.offset);
    this.crcs = new Array(this.tensors.length).fill(0);
    this.scaleDone = new Array(this.tensors.length).fill(0);
  }
  /** data-section bytes [p, p + bytes.length) have arrived (and are in dest) */
  update(p: number, bytes: Uint8Array): void {
    const q = p + bytes.length;
    const ts = this.tensors;
    while (this.ti < ts.length && ts[this.ti].offset < q) {
      const i = this.ti;
      const t = ts[i];
      const tEnd = t.offset + t.bytes;
      const s = Math.max(p, t.offset);
      const e = Math.min(q, tEnd);
      if (e > s) {
        if (this.verify) this.crcs[i] = crc32(bytes.subarray(s - p, e - p), this.crcs[i]);
        const dt = DTYPES[t.dtype];
        if (this.checkScales && dt.scaleOffsets) {
          const upto = Math.floor((e - t.offset) / dt.typeSize);
          if (upto > this.scaleDone[i]) {
            checkBlockScales(t, this.dest.subarray(t.offset, tEnd), this.name, this.header.dataOffset, this.scaleDone[i], upto);
            this.scaleDone[i] = upto;
          }
        } else if (this.checkScales && (t.dtype === 'f32' || t.dtype === 'f16')) {
          // NaN / Inf weights (the checksum only says the bytes are the ones written)
          const upto = Math.floor((e - t.offset) / dt.typeSize);
          if (upto > this.scaleDone[i]) {
            checkFiniteValues(t, this.dest.subarray(t.offset, tEnd), this.name, this.header.dataOffset, this.scaleDone[i], upto);
            this.scaleDone[i] = upto;
          }
        }
      }
      if (tEnd <= q) {
        if (this.verify) checkTensorChecksum(t, this.crcs[i], this.name);
        this.ti++;
      } else break;
    }
  }
  /** name of the tensor being filled (for truncation messages) */
  current(): string | undefined {
    return this.tensors[this.ti]?.name;
  }
}


function truncated(name: string, consumed: number, expected: number | undefined, where: string): AetherError {
  return new AetherError('format_error',
    `${name}: truncated: the stream ended at byte ${consumed}, expected ${expected ?? `at least ${RKNOT_HEADER_SIZE}`} bytes (${where})`,
    { file: name, offset: consumed, expected });
}

const isNode = (): boolean => typeof process !== 'undefined' && typeof process.versions?.node === 'string';

/** Load a .rknot from any source into caller-provided memory; resolves to the validated metadata. */
export async function loadRknotStream(src: SourceInput | Source, opts: LoadRknotOptions): Promise<RknotMetadata> {
  return (await loadRknotStreamDetailed(src, opts)).meta;
}

/** As loadRknotStream, resolving to the metadata plus header, dest, byte count and time. */
export async function loadRknotStreamDetailed(src: SourceInput | Source, opts: LoadRknotOptions): Promise<LoadRknotResult> {
  const signal = opts.signal;
  if (signal?.aborted) throw abortError(typeof src === 'string' ? src : 'source', signal);
  if (typeof src === 'string' && opts.direct !== false && isNode() && !/^(https?|file|blob|data):/i.test(src)) {
    return loadDirect(src, opts);
  }
  const t0 = performance.now();
  const source = isSource(src) ? src : await openSource(src, { ...opts.source, signal });
  const name = source.name;
  const verify = opts.verify !== false;
  const checkScales = opts.checkScales !== false;
  const total = source.size;
  const iter = source.stream[Symbol.asyncIterator]();

  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    if (!signal) return;
    onAbort = () => { reject(abortError(name, signal)); void source.close(); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => {}); // observed through the race below

  let consumed = 0;
  let lastProgress = 0;
  let header: RknotHeader | undefined;
  const progress = (force = false) => {
    if (opts.onProgress && (force || consumed - lastProgress >= (1 << 20))) {
      lastProgress = consumed;
      opts.onProgress({ type: 'progress', loaded: consumed, total: total ?? (header ? header.dataOffset + header.dataSize : 0) });
    }
  };

  let dest: Uint8Array | undefined;
  let verifier: DataVerifier | undefined;
  // a source that fails (network reset, file error, a stream's error()) -> load_error naming the source, the byte
  // reached and the stage, instead of the source's own error type
  const next = async () => {
    try {
      return await (signal ? Promise.race([iter.next(), aborted]) : iter.next());
    } catch (e) {
      if (e instanceof AetherError) throw e;
      const stage = !header ? 'header' : !dest ? 'JSON metadata' : `data section, tensor '${verifier?.current() ?? '?'}'`;
      throw new AetherError('load_error', `${name}: reading failed at byte ${consumed} (in the ${stage}): ${(e as Error)?.message ?? String(e)}`,
        { file: name, offset: consumed, stage, cause: String((e as Error)?.message ?? e) });
    }
  };
  let finished = false;
  try {
    // a GGUF (its magic in the first bytes): the GGUF loader takes the stream from here (loader/gguf.ts)
    const first: Uint8Array[] = [];
    let firstBytes = 0;
    while (firstBytes < 4) {
      const r = await next();
      if (r.done) break;
      const c = r.value instanceof Uint8Array ? r.value : new Uint8Array(r.value as ArrayBuffer);
      first.push(c); firstBytes += c.length;
    }
    const peek = first.length === 1 ? first[0] : concatBytes(first);
    if (isGGUFMagic(peek)) {
      const res = await loadGGUFSource(source, iter, first, opts);
      finished = true;
      return res;
    }
    const head = new Uint8Array(RKNOT_HEADER_SIZE);
    let headFill = 0;
    let meta: RknotMetadata | undefined;
    let jsonBuf: Uint8Array | undefined;
    let jsonFill = 0;
    let dataPos = 0;

    const startData = async () => {
      meta = validateRknotMetadata(parseRknotJson(jsonBuf!.subarray(0, header!.jsonLength), name), total, name, header);
      if (signal?.aborted) throw abortError(name, signal);
      dest = await makeDest(opts.plan, meta, header!, name);
      verifier = new DataVerifier(meta, header!, dest, name, verify, checkScales);
      jsonBuf = undefined;
      verifier.update(0, new Uint8Array(0));
    };

    for (;;) {
      const r = first.length ? { done: false as const, value: first.shift()! } : await next();
      if (signal?.aborted) throw abortError(name, signal);
      if (r.done) break;
      const chunk = r.value instanceof Uint8Array ? r.value : new Uint8Array(r.value as ArrayBuffer);
      let c = 0;
      while (c < chunk.length) {
        if (!header) {
          const n = Math.min(RKNOT_HEADER_SIZE - headFill, chunk.length - c);
          head.set(chunk.subarray(c, c + n), headFill);
          headFill += n; c += n; consumed += n;
          if (headFill === RKNOT_HEADER_SIZE) {
            header = parseRknotHeader(head, name, total);
            jsonBuf = new Uint8Array(header.dataOffset - RKNOT_HEADER_SIZE);
          }
        } else if (!dest) {
          const n = Math.min(jsonBuf!.length - jsonFill, chunk.length - c);
          jsonBuf!.set(chunk.subarray(c, c + n), jsonFill);
          jsonFill += n; c += n; consumed += n;
          if (jsonFill === jsonBuf!.length) await startData();
        } else {
          const n = Math.min(header.dataSize - dataPos, chunk.length - c);
          if (n === 0) {
            throw new AetherError('format_error', `${name}: unexpected data after the end of the data section at byte ${consumed} (expected ${header.dataOffset + header.dataSize} bytes)`, { file: name, offset: consumed });
          }
          const piece = chunk.subarray(c, c + n);
          dest.set(piece, dataPos);
          verifier!.update(dataPos, piece);
          dataPos += n; c += n; consumed += n;
        }
      }
      progress();
    }
    const expected = header ? header.dataOffset + header.dataSize : undefined;
    if (!header) throw truncated(name, consumed, expected, 'in the header');
    if (!dest) throw truncated(name, consumed, expected, 'in the JSON metadata');
    if (dataPos < header.dataSize) throw truncated(name, consumed, expected, `in the data section, tensor '${verifier!.current() ?? '?'}'`);
    progress(true);
    finished = true;
    return { name, header, meta: meta!, dest, bytes: consumed, seconds: (performance.now() - t0) / 1000 };
  } finally {
    if (signal && onAbort) signal.removeEventListener('abort', onAbort);
    if (!finished) {
      try { await iter.return?.(); } catch { /* ignore */ }
    }
    await source.close();
  }
}

const DIRECT_CHUNK = 4 << 20;
const DIRECT_READ_AHEAD = 64 << 20;
const STAGED_CHUNK = 1 << 20;
const STAGED_READ_AHEAD = 4 << 20;

/** Node file path: positional reads straight into dest, up to readAhead bytes ahead of the checks. */
async function loadDirect(path: string, opts: LoadRknotOptions): Promise<LoadRknotResult> {
  const t0 = performance.now();
  const name = opts.source?.name ?? path;
  const signal = opts.signal;
  const fh = await openForRead(path, name);
  let fhClosed = false;
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw new AetherError('load_error', `${name}: is a directory, expected a .rknot file`, { file: name });
    const size = st.size;
    let consumed = 0;
    const readInto = async (buf: Uint8Array, off: number, len: number, pos: number): Promise<number> => {
      let done = 0;
      while (done < len) {
        const { bytesRead } = await fh!.read(buf, off + done, len - done, pos + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return done;
    };
    const head = new Uint8Array(RKNOT_HEADER_SIZE);
    consumed = await readInto(head, 0, RKNOT_HEADER_SIZE, 0);
    if (isGGUFMagic(head.subarray(0, consumed))) {
      await fh.close();
      fhClosed = true;
      return loadGGUFPath(path, opts);
    }
    if (consumed < RKNOT_HEADER_SIZE) throw truncated(name, consumed, undefined, 'in the header');
    const header = parseRknotHeader(head, name);
    const expected = header.dataOffset + header.dataSize;
    const jsonBuf = new Uint8Array(header.jsonLength);
    const jn = await readInto(jsonBuf, 0, header.jsonLength, RKNOT_HEADER_SIZE);
    if (jn < header.jsonLength) throw truncated(name, RKNOT_HEADER_SIZE + jn, expected, 'in the JSON metadata');
    consumed = header.dataOffset;
    if (size < expected) {
      // a short file fails before plan(): say where the file ends
      validateRknotMetadata(parseRknotJson(jsonBuf, name), undefined, name, header);
      throw truncated(name, size, expected, 'in the data section');
    }
    const meta = validateRknotMetadata(parseRknotJson(jsonBuf, name), size, name, header);
    if (signal?.aborted) throw abortError(name, signal);
    const dest = await makeDest(opts.plan, meta, header, name);
    const verifier = new DataVerifier(meta, header, dest, name, opts.verify !== false, opts.checkScales !== false);
    verifier.update(0, new Uint8Array(0));
    // staged (option): reads into a ring of small reused buffers, each copied into dest and checked while in cache
    const staged = opts.directStaged ?? false;
    const CH = Math.max(64 << 10, opts.directChunk ?? (staged ? STAGED_CHUNK : DIRECT_CHUNK));
    // reads in flight: up to readAhead bytes ahead of the checks (at least 2 chunks), so the thread pool keeps reading
    // while this thread is busy (checks, or the caller's work overlapped with the stream, e.g. building the tokenizer)
    const depth = Math.max(2, Math.ceil((opts.readAhead ?? (staged ? STAGED_READ_AHEAD : DIRECT_READ_AHEAD)) / CH));
    let pos = 0;
    let issued = 0;
    let lastProgress = 0;
    const stageBufs: Uint8Array[] = [];
    const queue: { p: number; want: number; read: Promise<number>; buf?: Uint8Array }[] = [];
    const issue = () => {
      while (queue.length < depth && issued < header.dataSize) {
        const p = issued, want = Math.min(CH, header.dataSize - p);
        let buf: Uint8Array | undefined;
        if (staged) buf = stageBufs.pop() ?? new Uint8Array(CH);
        const read = buf ? readInto(buf, 0, want, header.dataOffset + p) : readInto(dest, p, want, header.dataOffset + p);
        read.catch(() => { /* observed in order below, or dropped after a failure */ });
        queue.push({ p, want, read, buf });
        issued += want;
      }
    };
    try {
      issue();
      while (queue.length) {
        const { p, want, read, buf } = queue.shift()!;
        const n = await read;
        if (signal?.aborted) throw abortError(name, signal);
        if (n < want) throw truncated(name, header.dataOffset + p + n, expected, `in the data section, tensor '${verifier.current() ?? '?'}'`);
        pos = p + n;
        if (buf) { dest.set(buf.subarray(0, n), p); stageBufs.push(buf); }
        issue(); // the next reads run on the thread pool while this chunk is checked
        verifier.update(p, dest.subarray(p, p + n));
        consumed = header.dataOffset + pos;
        if (opts.onProgress && (consumed - lastProgress >= (1 << 20) || pos === header.dataSize)) {
          lastProgress = consumed;
          opts.onProgress({ type: 'progress', loaded: consumed, total: size });
        }
      }
    } finally {
      // never close the file under reads still in flight (a failed check or an abort leaves some)
      if (queue.length) await Promise.allSettled(queue.map((q) => q.read));
    }
    if (header.dataSize === 0) opts.onProgress?.({ type: 'progress', loaded: consumed, total: size });
    return { name, header, meta, dest, bytes: consumed, seconds: (performance.now() - t0) / 1000 };
  } finally {
    if (!fhClosed) await fh.close();
  }
}
