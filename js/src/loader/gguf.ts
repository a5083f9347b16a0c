/**
 * GGUF loader: a GGUF file (llama.cpp's format, as published for every model users run) loaded straight into wasm
 * memory, in Node and in browsers, without a converted copy. The header, metadata and tensor table are parsed by
 * formats/gguf.ts (the converter's reader) from the source's first bytes; the plan is the converter's
 * (formats/convert.ts planGGUFFile, quant 'keep'), so the engine gets the same tensor table and the same data bytes as
 * from `aether convert` (tests/gguf-load.test.mjs compares them byte for byte): each target tensor is a row range of a
 * source tensor (Phi-3's fused gate_up is two), copied as its bytes arrive; 1-D tensors stored in another dtype than
 * f32 are converted when their last byte arrives. Quantised blocks' scales and f32 / f16 values are checked as each
 * tensor completes (NaN / Inf -> format_error naming the tensor and the file offset); GGUF has no checksums, so the
 * `verify` option has nothing to check here.
 *
 * Sources: a Node file path is read positionally, each tensor's bytes straight into `dest` (no intermediate buffer);
 * every other source (URL, Blob / File, ReadableStream) streams once: its first bytes are kept until the header is
 * parsed (a header is a few MB at most: the tokenizer's vocabulary), then every chunk is copied to where its bytes go.
 */
import { AetherError } from '../errors.js';
import { DTYPES } from '../formats/dtypes.js';
import { openForRead, PosReader, type FileHandle } from '../formats/fileio.js';
import { parseGGUF, type GGUFFile } from '../formats/gguf.js';
import { convertElements, ConvertScratch, sourceBytes, ValueError } from '../formats/quantize.js';
import {
  checkBlockScales, checkFiniteValues, configFeatures, RKNOT_VERSION, validateRknotMetadata,
  type RknotHeader, type RknotMetadata, type RknotTensor,
} from '../formats/rknot-read.js';
import { layoutTensors } from '../formats/rknot-write.js';
import type { PlannedTensor } from '../formats/convert.js';
import { abortError, makeDest } from './plan.js';
import type { Source } from './source.js';
import type { LoadRknotOptions, LoadRknotResult } from './stream.js';

/** What `metadata.source.converter` says of a model loaded from a GGUF by this loader. */
export const GGUF_LOADER = 'aether-gguf-load';

/** One target tensor's bytes in the GGUF: [start, end) of the file, to `dest` at `destOffset`. */
interface Job {
  start: number;
  end: number;
  destOffset: number;
  tensor: RknotTensor;
  plan: PlannedTensor;
  /** same dtype: bytes copied; otherwise gathered here and converted when complete */
  gather?: Uint8Array;
  filled: number;
}

/** The metadata (tensor table laid out as the converter's writer lays it out), the synthetic header and the jobs. */
async function planLoad(g: GGUFFile, name: string): Promise<{ meta: RknotMetadata; header: RknotHeader; jobs: Job[] }> {
  const { planGGUFFile, CONVERTER_VERSION } = await import('../formats/convert.js');
  const plan = planGGUFFile(g, 'keep');
  const { tensors, dataSize } = layoutTensors(plan.tensors.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape })));
  const raw = {
    format: { version: RKNOT_VERSION, required_features: configFeatures(plan.config), optional_features: [] },
    config: plan.config,
    tokenizer: plan.tokenizer,
    tensors,
    kv_cache: { n_ctx: plan.config.n_ctx, overflow: 'error' },
    source: {
      converter: `${GGUF_LOADER} (${CONVERTER_VERSION})`, input: name.replace(/[?#].*$/, '').replace(/^.*[\\/]/, ''), input_format: 'gguf',
      files: [{ name: name.replace(/^.*[\\/]/, ''), size: g.fileSize }], quant: 'keep', ...(plan.name ? { name: plan.name } : {}),
    },
  };
  const header: RknotHeader = { version: RKNOT_VERSION, flags: 0, jsonLength: 0, dataSize, dataOffset: 0 };
  const meta = validateRknotMetadata(raw, undefined, name, header);
  const jobs: Job[] = plan.tensors.map((p, i) => {
    if (p.data) throw new AetherError('load_error', `${name}: tensor '${p.name}' is computed, which a GGUF plan never asks for`);
    const start = p.src.offset, end = start + p.src.rows * sourceBytes(p.src.dtype, p.src.ne0);
    const same = p.src.dtype === p.dtype && !p.addOne;
    if (same && end - start !== meta.tensors[i].bytes) throw new AetherError('load_error', `${name}: tensor '${p.name}': ${end - start} source bytes for ${meta.tensors[i].bytes}`);
    return { start, end, destOffset: meta.tensors[i].offset, tensor: meta.tensors[i], plan: p, filled: 0, ...(same ? {} : { gather: new Uint8Array(0) }) };
  });
  jobs.sort((a, b) => a.start - b.start);
  return { meta, header, jobs };
}

/** Places arriving file bytes: copies, conversions when a gathered tensor completes, checks as each tensor completes. */
class Placer {
  private next = 0;      // first job not complete (jobs sorted by start; their ranges never overlap)
  private scratch = new ConvertScratch();
  constructor(private jobs: Job[], private dest: Uint8Array, private name: string) {}

  /** file bytes [pos, pos + bytes.length) */
  update(pos: number, bytes: Uint8Array): void {
    const end = pos + bytes.length;
    for (let i = this.next; i < this.jobs.length && this.jobs[i].start < end; i++) {
      const j = this.jobs[i];
      const s = Math.max(pos, j.start), e = Math.min(end, j.end);
      if (e <= s) continue;
      const piece = bytes.subarray(s - pos, e - pos);
      if (j.gather) {
        if (j.gather.length === 0) j.gather = new Uint8Array(j.end - j.start);
        j.gather.set(piece, s - j.start);
      } else this.dest.set(piece, j.destOffset + (s - j.start));
      j.filled += e - s;
      if (j.filled === j.end - j.start) this.complete(j);
    }
    while (this.next < this.jobs.length && this.jobs[this.next].filled === this.jobs[this.next].end - this.jobs[this.next].start) this.next++;
  }

  /** a job whose bytes were read straight into dest (the Node path) */
  completeDirect(j: Job): void {
    j.filled = j.end - j.start;
    this.complete(j);
  }

  private complete(j: Job): void {
    const t = j.tensor, p = j.plan;
    if (j.gather) {
      const n = p.src.rows * p.src.ne0;
      let out: Uint8Array;
      try {
        out = convertElements(p.src.dtype, p.dtype, j.gather, n, this.scratch);
      } catch (e) {
        if (e instanceof ValueError) throw new AetherError('format_error', `${this.name}: tensor '${p.src.name}' element ${e.index}: ${e.what}: ${e.value}`, { file: this.name, field: p.src.name, element: e.index });
        throw e;
      }
      this.dest.set(out.subarray(0, t.bytes), j.destOffset);
      j.gather = undefined;
    }
    // the checks name the GGUF's byte: the tensor as if at the source's offset (a converted tensor: its first byte)
    const bytes = this.dest.subarray(j.destOffset, j.destOffset + t.bytes);
    const at: RknotTensor = { ...t, name: p.src.name, offset: j.start };
    const dt = DTYPES[t.dtype];
    if (dt.scaleOffsets) checkBlockScales(at, bytes, this.name, 0);
    else if (t.dtype === 'f32' || t.dtype === 'f16') checkFiniteValues(at, bytes, this.name, 0, 0, Math.floor(t.bytes / dt.typeSize));
  }

  /** the tensor being filled (for truncation messages) */
  current(): Job | undefined { return this.jobs[this.next]; }
  done(): boolean { return this.next >= this.jobs.length; }
}

function truncatedAt(name: string, consumed: number, j: Job | undefined): AetherError {
  return new AetherError('format_error', `${name}: truncated: the stream ended at byte ${consumed}` +
    (j ? `, expected at least ${j.end} bytes (tensor '${j.plan.src.name}' spans [${j.start}, ${j.end}))` : ''), { file: name, offset: consumed, field: j?.plan.src.name });
}



/** Node file path: the header through the converter's reader, then each tensor read positionally into dest. */
export async function loadGGUFPath(path: string, opts: LoadRknotOptions): Promise<LoadRknotResult> {
  const t0 = performance.now();
  const name = opts.source?.name ?? path;
  const signal = opts.signal;
  const fh = await openForRead(path, name);
  try {
    const size = (await fh.stat()).size;
    const g = await parseGGUF(new PosReader(fh, size, name), name, size);
    if (signal?.aborted) throw abortError(name, signal);
    const { meta, header, jobs } = await planLoad(g, name);
    const dest = await makeDest(opts.plan, meta, header, name);
    const placer = new Placer(jobs, dest, name);
    const CH = Math.max(64 << 10, opts.directChunk ?? (4 << 20));
    const depth = Math.max(2, Math.ceil((opts.readAhead ?? (64 << 20)) / CH));
    // reads in file order, up to `depth` in flight; a gathered (converted) tensor is read whole when its turn comes
    type Read = { job: Job; last: boolean; end: number; p: Promise<void> };
    const queue: Read[] = [];
    const readInto = async (buf: Uint8Array, pos: number): Promise<void> => {
      let done = 0;
      while (done < buf.length) {
        const { bytesRead } = await fh.read(buf, done, buf.length - done, pos + done);
        if (bytesRead === 0) throw truncatedAt(name, pos + done, jobs.find((j) => j.start <= pos && pos < j.end));
        done += bytesRead;
      }
    };
    let ji = 0, jpos = jobs[0]?.start ?? 0;
    let loaded = g.dataOffset, lastProgress = 0;
    const issue = () => {
      while (queue.length < depth && ji < jobs.length) {
        const j = jobs[ji];
        let r: Read;
        if (j.gather) {
          j.gather = new Uint8Array(j.end - j.start);
          r = { job: j, last: true, end: j.end, p: readInto(j.gather, j.start) };
          jpos = j.end;
        } else {
          const n = Math.min(CH, j.end - jpos);
          const off = j.destOffset + (jpos - j.start);
          r = { job: j, last: jpos + n === j.end, end: jpos + n, p: readInto(dest.subarray(off, off + n), jpos) };
          jpos += n;
        }
        r.p.catch(() => { /* observed in order below, or settled in the finally after a failure */ });
        queue.push(r);
        if (r.last) { ji++; jpos = jobs[ji]?.start ?? 0; }
      }
    };
    try {
      issue();
      while (queue.length) {
        const r = queue.shift()!;
        await r.p;
        if (signal?.aborted) throw abortError(name, signal);
        issue();
        if (r.last) {
          if (r.job.gather) { const b = r.job.gather; r.job.gather = new Uint8Array(0); placer.update(r.job.start, b); }
          else placer.completeDirect(r.job);
        }
        loaded = Math.max(loaded, r.end);
        if (opts.onProgress && (loaded - lastProgress >= (1 << 20) || queue.length === 0)) {
          lastProgress = loaded;
          opts.onProgress({ type: 'progress', loaded, total: size });
        }
      }
    } finally {
      if (queue.length) await Promise.allSettled(queue.map((q) => q.p));
    }
    return { name, header, meta, dest, bytes: size, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await fh.close();
  }
}

/**
 * The first bytes of a stream, kept (in arrival chunks) while the header is parsed; serves positional reads as a
 * FileHandle (formats/fileio.ts PosReader), pulling chunks as far as a read needs.
 */
class StreamPrefix {
  chunks: Uint8Array[] = [];
  buffered = 0;
  ended = false;
  constructor(private pull: () => Promise<Uint8Array | undefined>) {}
  async ensure(end: number): Promise<void> {
    while (this.buffered < end && !this.ended) {
      const c = await this.pull();
      if (!c) { this.ended = true; break; }
      if (c.length) { this.chunks.push(c); this.buffered += c.length; }
    }
  }
  handle(): FileHandle {
    const h = {
      read: async (buf: Uint8Array, off: number, len: number, pos: number) => {
        await this.ensure(pos + len);
        let n = 0, base = 0;
        for (const c of this.chunks) {
          const cEnd = base + c.length;
          if (cEnd > pos + n && base < pos + len) {
            const s = pos + n - base, e = Math.min(c.length, pos + len - base);
            buf.set(c.subarray(s, e), off + n);
            n += e - s;
          }
          base = cEnd;
          if (pos + n >= pos + len) break;
        }
        return { bytesRead: n, buffer: buf };
      },
      stat: async () => ({ size: Number.MAX_SAFE_INTEGER, isFile: () => true, isDirectory: () => false }),
      close: async () => { /* the source is closed by the loader */ },
    };
    return h as unknown as FileHandle;
  }
}

/** Any other source: one pass over the stream `iter` of `source` (its first chunks, already read by the caller, in `first`). */
export async function loadGGUFSource(source: Source, iter: AsyncIterator<Uint8Array>, first: Uint8Array[], opts: LoadRknotOptions): Promise<LoadRknotResult> {
  const t0 = performance.now();
  const name = source.name;
  const signal = opts.signal;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    if (!signal) return;
    onAbort = () => { reject(abortError(name, signal)); void source.close(); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => {});
  let consumed = 0, lastProgress = 0, stage = 'header';
  let placer: Placer | undefined;
  const pending = [...first];
  const pull = async (): Promise<Uint8Array | undefined> => {
    const c = pending.shift();
    if (c) { consumed += c.length; return c; }
    let r: IteratorResult<Uint8Array>;
    try {
      r = await (signal ? Promise.race([iter.next(), aborted]) : iter.next());
    } catch (e) {
      if (e instanceof AetherError) throw e;
      const where = stage === 'header' ? 'the GGUF header' : `the tensor data, tensor '${placer?.current()?.plan.src.name ?? '?'}'`;
      throw new AetherError('load_error', `${name}: reading failed at byte ${consumed} (in ${where}): ${(e as Error)?.message ?? String(e)}`,
        { file: name, offset: consumed, stage, cause: String((e as Error)?.message ?? e) });
    }
    if (signal?.aborted) throw abortError(name, signal);
    if (r.done) return undefined;
    const v = r.value instanceof Uint8Array ? r.value : new Uint8Array(r.value as ArrayBuffer);
    consumed += v.length;
    return v;
  };
  let finished = false;
  try {
    const prefix = new StreamPrefix(pull);
    const size = source.size;
    // a known size: the reader's bounds checks and read-ahead window; unknown: exact reads, truncation seen at the end
    const g = await parseGGUF(new PosReader(prefix.handle(), size ?? Number.MAX_SAFE_INTEGER, name, size === undefined ? 0 : 1 << 20), name, size ?? Number.MAX_SAFE_INTEGER);
    if (size === undefined) g.fileSize = 0;
    if (signal?.aborted) throw abortError(name, signal);
    const { meta, header, jobs } = await planLoad(g, name);
    const dest = await makeDest(opts.plan, meta, header, name);
    placer = new Placer(jobs, dest, name);
    stage = 'data';
    const total = size ?? (jobs.length ? Math.max(...jobs.map((j) => j.end)) : g.dataOffset);
    let pos = 0;
    for (const c of prefix.chunks) { placer.update(pos, c); pos += c.length; }
    prefix.chunks = [];
    while (!placer.done()) {
      const c = await pull();
      if (!c) throw truncatedAt(name, pos, placer.current());
      placer.update(pos, c);
      pos += c.length;
      if (opts.onProgress && pos - lastProgress >= (1 << 20)) { lastProgress = pos; opts.onProgress({ type: 'progress', loaded: pos, total }); }
    }
    opts.onProgress?.({ type: 'progress', loaded: pos, total });
    finished = true;
    return { name, header, meta, dest, bytes: consumed, seconds: (performance.now() - t0) / 1000 };
  } catch (e) {
    // the header parser's "unexpected end" on a stream of unknown size is a truncation of the stream
    if (e instanceof AetherError && e.code === 'format_error' && stage === 'header' && source.size === undefined && /unexpected end of file/.test(e.message)) {
      throw new AetherError('format_error', `${name}: truncated: the stream ended at byte ${consumed}, inside the GGUF header (${e.message.replace(/^[^:]*: /, '')})`, { ...e.details, file: name });
    }
    throw e;
  } finally {
    if (signal && onAbort) signal.removeEventListener('abort', onAbort);
    if (!finished) { try { await iter.return?.(); } catch { /* ignore */ } }
    await source.close();
  }
}

/** "GGUF" at the start of these bytes. */
export function isGGUFMagic(b: Uint8Array): boolean {
  return b.length >= 4 && b[0] === 0x47 && b[1] === 0x47 && b[2] === 0x55 && b[3] === 0x46;
}
