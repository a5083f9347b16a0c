/**
 * Byte sources for the streaming loader, in Node and in browsers:
 * a URL (http(s) via fetch; file: via node:fs in Node, fetch elsewhere), a Blob / File, a Node file path,
 * a WHATWG ReadableStream or a Node readable stream. Node modules are imported dynamically, so this file
 * bundles for browsers.
 */
import { AetherError } from '../errors.js';

export type SourceInput = string | URL | Blob | ReadableStream<Uint8Array> | NodeJS.ReadableStream;

export interface Source {
  /** file name / URL used in messages */
  name: string;
  /** total bytes, when known (file size, Blob size, Content-Length) */
  size?: number;
  stream: AsyncIterable<Uint8Array>;
  /** stop reading and release the underlying file / connection (idempotent) */
  close(): Promise<void>;
}

export interface OpenSourceOptions {
  signal?: AbortSignal;
  /** Node file read chunk size (default 4 MiB) */
  highWaterMark?: number;
  /** extra fetch() options for URLs */
  fetchInit?: RequestInit;
  /** name for messages (default: derived from the source) */
  name?: string;
  /** size, if the caller knows it and the source does not report it */
  size?: number;
}

export const DEFAULT_HIGH_WATER_MARK = 4 << 20;

const isNode = (): boolean => typeof process !== 'undefined' && typeof process.versions?.node === 'string';

function isWebStream(x: unknown): x is ReadableStream<Uint8Array> {
  return typeof x === 'object' && x !== null && typeof (x as ReadableStream).getReader === 'function';
}

function isNodeStream(x: unknown): x is NodeJS.ReadableStream {
  return typeof x === 'object' && x !== null && typeof (x as NodeJS.ReadableStream).pipe === 'function' && typeof (x as NodeJS.ReadableStream).on === 'function';
}

function isBlob(x: unknown): x is Blob {
  return typeof Blob !== 'undefined' && x instanceof Blob;
}

/** WHATWG ReadableStream -> AsyncIterable with cancel on early exit (browsers without async iteration too). */
export function webStreamIterable(rs: ReadableStream<Uint8Array>): { iterable: AsyncIterable<Uint8Array>; cancel: () => Promise<void> } {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let done = false;
  const cancel = async () => {
    if (done) return;
    done = true;
    try {
      if (reader) await reader.cancel();
      else await rs.cancel();
    } catch { /* already errored / closed */ }
  };
  const iterable: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]() {
      reader = rs.getReader();
      const r = reader;
      return {
        async next() {
          if (done) return { done: true, value: undefined };
          const x = await r.read();
          if (x.done) { done = true; r.releaseLock(); return { done: true, value: undefined }; }
          return { done: false, value: x.value };
        },
        async return() {
          await cancel();
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { iterable, cancel };
}

function looksLikeUrl(s: string): boolean {
  return /^(https?|file|blob|data):/i.test(s);
}

async function openNodePath(path: string, opts: OpenSourceOptions): Promise<Source> {
  const fs = await import('node:fs');
  let size: number;
  try {
    const st = await fs.promises.stat(path);
    if (st.isDirectory()) throw new AetherError('load_error', `${path}: is a directory, expected a .rknot file`, { file: path });
    size = st.size;
  } catch (e) {
    if (e instanceof AetherError) throw e;
    throw new AetherError('load_error', `${path}: cannot open: ${(e as Error).message}`, { file: path });
  }
  const s = fs.createReadStream(path, { highWaterMark: opts.highWaterMark ?? DEFAULT_HIGH_WATER_MARK });
  return {
    name: opts.name ?? path,
    size,
    stream: s as AsyncIterable<Uint8Array>,
    close: async () => { s.destroy(); },
  };
}

async function openUrl(url: URL, opts: OpenSourceOptions): Promise<Source> {
  if (url.protocol === 'file:' && isNode()) {
    const { fileURLToPath } = await import('node:url');
    return openNodePath(fileURLToPath(url), { ...opts, name: opts.name ?? url.href });
  }
  if (typeof fetch !== 'function') throw new AetherError('unsupported', `${url.href}: fetch() is not available`);
  let res: Response;
  try {
    res = await fetch(url, { ...opts.fetchInit, signal: opts.signal });
  } catch (e) {
    if (opts.signal?.aborted) throw new AetherError('aborted', `${url.href}: load aborted`, { file: url.href });
    throw new AetherError('load_error', `${url.href}: fetch failed: ${(e as Error).message}`, { file: url.href });
  }
  if (!res.ok) throw new AetherError('load_error', `${url.href}: HTTP ${res.status} ${res.statusText}`, { file: url.href, status: res.status });
  if (!res.body) throw new AetherError('load_error', `${url.href}: the response has no body`, { file: url.href });
  const len = res.headers.get('content-length');
  const enc = res.headers.get('content-encoding');
  const size = len !== null && (!enc || enc === 'identity') && /^\d+$/.test(len) ? Number(len) : opts.size;
  const { iterable, cancel } = webStreamIterable(res.body);
  return { name: opts.name ?? url.href, size, stream: iterable, close: cancel };
}

/** Open any supported source for streaming. */
export async function openSource(src: SourceInput, opts: OpenSourceOptions = {}): Promise<Source> {
  if (typeof src === 'string') {
    if (looksLikeUrl(src)) return openUrl(new URL(src), opts);
    if (isNode()) return openNodePath(src, opts);
    const base = typeof location !== 'undefined' ? location.href : undefined;
    return openUrl(new URL(src, base), opts);
  }
  if (src instanceof URL) return openUrl(src, opts);
  if (isBlob(src)) {
    const { iterable, cancel } = webStreamIterable(src.stream() as ReadableStream<Uint8Array>);
    const name = opts.name ?? ((src as File).name || 'blob');
    return { name, size: src.size, stream: iterable, close: cancel };
  }
  if (isWebStream(src)) {
    const { iterable, cancel } = webStreamIterable(src);
    return { name: opts.name ?? 'stream', size: opts.size, stream: iterable, close: cancel };
  }
  if (isNodeStream(src)) {
    const s = src as NodeJS.ReadableStream & { destroy?: () => void; path?: string | Buffer };
    const name = opts.name ?? (typeof s.path === 'string' ? s.path : 'stream');
    return {
      name,
      size: opts.size,
      stream: s as unknown as AsyncIterable<Uint8Array>,
      close: async () => { s.destroy?.(); },
    };
  }
  throw new AetherError('invalid_argument', `openSource: unsupported source ${Object.prototype.toString.call(src)} (expected a URL, path, Blob, ReadableStream or Node stream)`);
}
